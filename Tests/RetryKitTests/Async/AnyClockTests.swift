import RetryKit
import RetryKitTesting
import Testing

// MARK: - A clock whose duration is not Swift.Duration

/// A duration counted in whole ticks: a `DurationProtocol` type of its own, unknown to RetryKit.
struct Ticks: DurationProtocol, Hashable, CustomStringConvertible {
    var count: Int

    init(_ count: Int) {
        self.count = count
    }

    static var zero: Ticks { Ticks(0) }
    static func + (lhs: Ticks, rhs: Ticks) -> Ticks { Ticks(lhs.count &+ rhs.count) }
    static func - (lhs: Ticks, rhs: Ticks) -> Ticks { Ticks(lhs.count &- rhs.count) }
    static func < (lhs: Ticks, rhs: Ticks) -> Bool { lhs.count < rhs.count }
    static func / (lhs: Ticks, rhs: Int) -> Ticks { Ticks(rhs == 0 ? 0 : lhs.count / rhs) }
    static func * (lhs: Ticks, rhs: Int) -> Ticks { Ticks(lhs.count &* rhs) }
    static func / (lhs: Ticks, rhs: Ticks) -> Double { Double(lhs.count) / Double(rhs.count) }

    var description: String { "\(count) ticks" }
}

/// A test clock measuring in ``Ticks``: its sleeps return at once, move its time forward and are recorded.
///
/// It is deliberately not one of RetryKit's known clocks, so the async `retry` runs its sleeps the way it runs any
/// unknown clock's (in a task of their own, raced against cancellation).
struct TickClock: Clock {
    struct Instant: InstantProtocol, Hashable {
        var ticks: Int
        func advanced(by duration: Ticks) -> Instant { Instant(ticks: ticks &+ duration.count) }
        func duration(to other: Instant) -> Ticks { Ticks(other.ticks &- ticks) }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.ticks < rhs.ticks }
    }

    private let time = Recorder<Ticks>()

    /// Every sleep, in order, as the duration from `now` to its deadline.
    var sleeps: [Ticks] { time.values }

    var now: Instant { Instant(ticks: time.values.reduce(0) { $0 + $1.count }) }
    var minimumResolution: Ticks { Ticks(1) }

    func sleep(until deadline: Instant, tolerance: Ticks?) async throws {
        try Task.checkCancellation()
        time.append(now.duration(to: deadline))
    }
}

/// A clock measuring in ``Ticks`` whose sleeps only end when cancelled: says when a sleep has begun.
struct StuckTickClock: Clock {
    typealias Instant = TickClock.Instant

    let sleeping: AsyncSignal

    var now: Instant { Instant(ticks: 0) }
    var minimumResolution: Ticks { Ticks(1) }

    func sleep(until deadline: Instant, tolerance: Ticks?) async throws {
        sleeping.fire()
        try await Task.sleep(for: .seconds(3_600))  // ends at once when RetryKit cancels this sleep
    }
}

// MARK: - Code written for the async retry library, generic over any clock

struct Flaky: Error, Equatable {
    let attempt: Int
}

/// A helper as one writes it against the async retry library: generic over `C: Clock`, nothing more, with every
/// parameter of the documented signature spelled out and every strategy it offers for any clock.
func retryLinear<C: Clock>(
    clock: C, maxAttempts: Int, step: C.Duration, cap: C.Duration, floor: C.Duration,
    operation: () async throws -> Int
) async throws -> Int {
    try await retry(
        maxAttempts: maxAttempts, tolerance: nil, clock: clock, isolation: #isolation,
        operation: { try await operation() },
        strategy: { (error: any Error) -> RetryStrategy<C> in
            if error is CancellationError { return .stop }
            return .backoff(.linear(a: step, b: step).max(cap).min(floor))
        })
}

/// The library's other strategies for any clock, as values: each is its `duration` function.
func seedStrategies<C: Clock>(_ d: C.Duration) -> [BackoffStrategy<C>] {
    [
        .none, .constant(d), .linear(a: d, b: d), BackoffStrategy<C>.constant(d).min(d), .constant(d).max(d),
        BackoffStrategy(duration: { _ in d }),
    ]
}

/// The library's strategies for `Swift.Duration` clocks, spelled as documented, generic over such a clock.
func seedDurationStrategies<C: Clock>(_ d: C.Duration) -> [BackoffStrategy<C>] where C.Duration == Duration {
    [
        .exponential(a: d, b: 2), BackoffStrategy<C>.constant(d).jitter(),
        .linear(a: d, b: .zero).jitter(using: SystemRandomNumberGenerator()),
    ]
}

/// A typed-throws operation and strategy, generic over any clock, as in the documented signature.
func retryTyped<C: Clock>(clock: C, operation: () async throws(Flaky) -> Int) async throws -> Int {
    try await retry(clock: clock) { () async throws(Flaky) -> Int in
        try await operation()
    } strategy: { (error: Flaky) in
        error.attempt < 2 ? .backoff(.none) : .stop
    }
}

/// A helper generic over a clock that measures in `Swift.Duration`: `exponential` and `jitter` are available, and a
/// strategy written for `ContinuousClock` (a policy's, say) converts to `C` in constant time.
func retryExponential<C: Clock>(
    clock: C, shared: BackoffStrategy<ContinuousClock>, operation: @escaping @Sendable () async throws -> Int
) async throws -> Int where C.Duration == Duration {
    let seedSpelling: BackoffStrategy<C> = .exponential(a: .milliseconds(100), b: 2).max(.seconds(1))
        .jitter(using: SeededRandomNumberGenerator(seed: 1))
    _ = seedSpelling.duration(0)
    let converted = BackoffStrategy<C>(shared)
    return try await retry(maxAttempts: 4, clock: clock) {
        try await operation()
    } strategy: { _ in
        .backoff(converted)
    }
}

// MARK: - Tests

@Suite("Any clock: the async retry library's API for any C: Clock", .timeLimit(.minutes(3)))
struct AnyClockTests {
    @Test("A clock with its own duration type: attempts and waits follow the strategy, in that type")
    func foreignDurationWaits() async throws {
        let clock = TickClock()
        let attempts = Recorder<Int>()
        let value = try await retryLinear(
            clock: clock, maxAttempts: 5, step: Ticks(2), cap: Ticks(5), floor: Ticks(3)
        ) {
            attempts.append(attempts.values.count + 1)
            if attempts.values.count < 5 { throw Flaky(attempt: attempts.values.count) }
            return 42
        }
        #expect(value == 42)
        #expect(attempts.values == [1, 2, 3, 4, 5])
        // f(x) = 2x + 2, capped at 5, at least 3: x = 0…3 → 3, 4, 5, 5.
        #expect(clock.sleeps == [Ticks(3), Ticks(4), Ticks(5), Ticks(5)])
        #expect(clock.now == TickClock.Instant(ticks: 17))
    }

    @Test("A clock with its own duration type: the last error is rethrown when attempts run out, without a last wait")
    func foreignDurationExhausts() async throws {
        let clock = TickClock()
        let attempts = Recorder<Int>()
        let error = await #expect(throws: Flaky.self) {
            try await retryLinear(clock: clock, maxAttempts: 3, step: Ticks(1), cap: Ticks(100), floor: .zero) {
                attempts.append(attempts.values.count + 1)
                throw Flaky(attempt: attempts.values.count)
            }
        }
        #expect(error == Flaky(attempt: 3))
        #expect(clock.sleeps == [Ticks(1), Ticks(2)])  // f(x) = x + 1 for x = 0, 1
    }

    @Test(
        "A clock with its own duration type: retryAfter waits exactly, zero and negative waits do not sleep, stop stops"
    )
    func foreignDurationRetryAfterAndStop() async throws {
        let clock = TickClock()
        let attempts = Recorder<Int>()
        let answers: [RetryStrategy<TickClock>] = [
            .retryAfter(Ticks(7)), .backoff(.constant(.zero)), .backoff(.constant(Ticks(-4))), .retryAfter(Ticks(-1)),
            .stop,
        ]
        let error = await #expect(throws: Flaky.self) {
            try await retry(maxAttempts: 10, clock: clock) {
                attempts.append(attempts.values.count + 1)
                throw Flaky(attempt: attempts.values.count)
            } strategy: { (error: any Error) in
                answers[((error as? Flaky)?.attempt ?? 1) - 1]
            }
        }
        #expect(error == Flaky(attempt: 5))
        #expect(attempts.values == [1, 2, 3, 4, 5])
        #expect(clock.sleeps == [Ticks(7)])
    }

    @Test("A clock with its own duration type: the strategies of the library, as duration functions")
    func foreignDurationStrategies() {
        let strategies: [BackoffStrategy<TickClock>] = seedStrategies(Ticks(3))
        let durations = strategies.map { strategy in (0..<3).map { strategy.duration($0) } }
        #expect(
            durations == [
                [.zero, .zero, .zero], [Ticks(3), Ticks(3), Ticks(3)], [Ticks(3), Ticks(6), Ticks(9)],
                [Ticks(3), Ticks(3), Ticks(3)], [Ticks(3), Ticks(3), Ticks(3)], [Ticks(3), Ticks(3), Ticks(3)],
            ])
        let onSwiftDuration: [BackoffStrategy<SuspendingClock>] = seedDurationStrategies(.seconds(1))
        #expect(onSwiftDuration[0].duration(3) == .seconds(8))
        #expect(onSwiftDuration[1].duration(0) < .seconds(1) && onSwiftDuration[2].duration(2) < .seconds(2))
        let plain: (Int) -> Ticks = BackoffStrategy<TickClock>.linear(a: Ticks(1), b: .zero).duration
        #expect(plain(4) == Ticks(4))
        // A cap wins over a minimum, whatever the order, as for Swift.Duration strategies.
        let capped = BackoffStrategy<TickClock>.constant(Ticks(9)).max(Ticks(5))
        #expect(capped.min(Ticks(7)).duration(0) == Ticks(5))
        #expect(capped.min(Ticks(7)).max(Ticks(6)).duration(0) == Ticks(5))
        #expect(BackoffStrategy<TickClock>.constant(Ticks(1)).min(Ticks(7)).max(Ticks(4)).duration(0) == Ticks(4))
    }

    @Test("A clock with its own duration type: a task cancelled before the call runs no attempt")
    func foreignDurationCancelledBeforeTheCall() async throws {
        let attempts = Recorder<Int>()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await retryLinear(
                clock: TickClock(), maxAttempts: 3, step: Ticks(1), cap: Ticks(1), floor: .zero
            ) {
                attempts.append(1)
                return 1
            }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(attempts.values.isEmpty)
    }

    @Test("A clock with its own duration type: cancelling the task during a wait ends it at once")
    func foreignDurationCancelledDuringAWait() async throws {
        let sleeping = AsyncSignal()
        let attempts = Recorder<Int>()
        let task = Task<Int, any Error> {
            try await retry(maxAttempts: 3, clock: StuckTickClock(sleeping: sleeping)) { () async throws -> Int in
                attempts.append(1)
                throw Flaky(attempt: 1)
            } strategy: { _ in
                .backoff(.constant(Ticks(10)))
            }
        }
        await sleeping.wait()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(attempts.values == [1])
    }

    @Test("Typed throws, generic over any clock: the strategy receives the operation's own error type")
    func typedThrowsOnAnyClock() async throws {
        let attempts = Recorder<Int>()
        let value = try await retryTyped(clock: TickClock()) { () throws(Flaky) -> Int in
            attempts.append(1)
            if attempts.values.count < 2 { throw Flaky(attempt: attempts.values.count) }
            return 7
        }
        #expect(value == 7)
        let stopped = await #expect(throws: Flaky.self) {
            try await retryTyped(clock: SuspendingClock()) { () throws(Flaky) -> Int in throw Flaky(attempt: 2) }
        }
        #expect(stopped == Flaky(attempt: 2))
    }

    @Test(
        "One Swift.Duration strategy value serves every clock, through code generic over C where C.Duration == Duration"
    )
    func oneStrategyEveryClock() async throws {
        let shared = BackoffStrategy<ContinuousClock>.exponential(a: .seconds(1), b: 2).max(.seconds(3))
        let clock = InstantClock()
        let attempts = Recorder<Int>()
        let value = try await retryExponential(clock: clock, shared: shared) {
            attempts.append(1)
            if attempts.values.count < 4 { throw Flaky(attempt: attempts.values.count) }
            return 1
        }
        #expect(value == 1)
        #expect(clock.now == .zero.advanced(by: .seconds(1 + 2 + 3)))
        // The same value converts to every clock, and the curve (with its exact cap) is shared.
        let suspending = BackoffStrategy<SuspendingClock>(shared)
        let virtual = BackoffStrategy<VirtualClock>(BackoffStrategy<SuspendingClock>(shared))
        for x in [0, 1, 2, 10, 10_000] {
            #expect(suspending.delay(forRetry: x) == shared.delay(forRetry: x))
            #expect(virtual.delay(forRetry: x) == shared.delay(forRetry: x))
            #expect(shared.duration(x) == shared.delay(forRetry: x))
        }
        // A policy's answer converts the same way.
        let policy = RetryPlan.constantDelay(.seconds(2))
        guard case .backoff(let backoff) = RetryStrategy<SuspendingClock>(policy.decision(for: Flaky(attempt: 1)))
        else {
            Issue.record("a constant-delay policy retries")
            return
        }
        #expect(backoff.delay(forRetry: 0) == .seconds(2))
    }

    @Test("BackoffStrategy(duration:) is a custom strategy for a Swift.Duration clock: clamped, and capped exactly")
    func durationInitializerOnSwiftDuration() {
        let strategy = BackoffStrategy<ContinuousClock>(duration: { .seconds($0) - .seconds(1) }).max(.seconds(2))
        #expect((0..<5).map { strategy.delay(forRetry: $0) } == [.zero, .zero, .seconds(1), .seconds(2), .seconds(2)])
        #expect(strategy.duration(3) == .seconds(2))
        let huge = BackoffStrategy<SuspendingClock>(duration: { _ in .seconds(Int64.max) })
        #expect(huge.delay(forRetry: 0) == BackoffStrategy<SuspendingClock>.saturationLimit)
    }

    /// Compiling this is the test: with a `C.Duration` payload stored inline in `RetryStrategy` or `BackoffStrategy`,
    /// Swift 6.3.1's SILGen crashed on a strategy closure passed to an entry point generic over
    /// `C where C.Duration == Duration`.
    @Test("A strategy closure passed to the Swift.Duration-only entry points compiles and runs")
    func strategyClosuresForSwiftDurationEntryPoints() async throws {
        let backoff = BackoffStrategy<InstantClock>.constant(.seconds(1))
        let bridged = try await withRetry(maxAttempts: 2, clock: InstantClock()) {
            (attempt: RetryAttempt, done: AttemptCompletion<Int>) in
            done(attempt.number < 2 ? .failure(Flaky(attempt: attempt.number)) : .success(attempt.number))
        } strategy: { _ in
            .backoff(backoff)
        }
        let clock = InstantClock()
        let events = Recorder<String>()
        let observed = try await retry(maxAttempts: 2, clock: clock) { attempt in
            if attempt.number < 2 { throw Flaky(attempt: attempt.number) }
            return attempt.number
        } strategy: { _ in
            .retryAfter(.seconds(2))
        } observer: { event in
            if case .attemptFailed(_, _, let next) = event { events.append("\(next)") }
        }
        #expect(bridged == 2 && observed == 2)
        #expect(events.values.count == 1)
        #expect(clock.now == .zero.advanced(by: .seconds(2)))
    }
}

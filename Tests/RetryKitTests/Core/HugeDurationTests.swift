import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// Durations far beyond what a clock instant or a `DispatchTime` can hold: every style clamps them to
/// `BackoffStrategy.saturationLimit` in the state machine instead of trapping ("Not enough bits to represent the passed
/// value" on today's main for the async styles).
private let hugeDurations: [Duration] = [
    .seconds(Int64.max), .nanoseconds(Int64.max), .seconds(Int64.max) + .seconds(Int64.max),
]

private let limit = BackoffStrategy<ContinuousClock>.saturationLimit

/// An operation that succeeds after sleeping one second on `clock`: long enough for a test to see the timeout timer
/// that races it.
private func succeedAfterOneSecond(on clock: VirtualClock) -> @Sendable (RetryAttempt) async throws -> Int {
    { attempt in
        try await clock.sleep(for: .seconds(1))
        return attempt.number
    }
}

/// Waits until `task` sleeps on `clock` beside the operation's one-second sleep, checks that its timeout sleeper is
/// at the saturation limit, then lets the operation finish and returns the task's value.
private func expectTimeoutClamped(
    _ task: Task<Int, any Error>, on clock: VirtualClock, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> Int {
    let start = clock.now.offset
    await clock.waitForSleepers(2)
    #expect(
        clock.pendingDeadlines.map(\.offset).sorted() == [start + .seconds(1), start + limit],
        sourceLocation: sourceLocation)
    await clock.advance(by: .seconds(1))
    return try await task.value
}

@Suite("Core: huge durations are clamped, never trap", .timeLimit(.minutes(3)))
struct HugeDurationTests {
    @Test("async retry: huge timeouts run on a real clock", arguments: hugeDurations)
    func asyncRetryRealClock(_ huge: Duration) async throws {
        let value = try await retry(totalTimeout: huge, attemptTimeout: huge) { attempt in attempt.number }
        #expect(value == 1)
    }

    @Test("async retry: a huge timeout waits until the saturation limit", arguments: hugeDurations)
    func asyncRetryTestClock(_ huge: Duration) async throws {
        let clock = VirtualClock()
        let total = Task {
            try await retry(totalTimeout: huge, clock: clock, operation: succeedAfterOneSecond(on: clock))
        }
        #expect(try await expectTimeoutClamped(total, on: clock) == 1)
        let perAttempt = Task {
            try await retry(attemptTimeout: huge, clock: clock, operation: succeedAfterOneSecond(on: clock))
        }
        #expect(try await expectTimeoutClamped(perAttempt, on: clock) == 1)
    }

    @Test("withRetry: huge timeouts run on a real clock and wait until the saturation limit", arguments: hugeDurations)
    func withRetryHuge(_ huge: Duration) async throws {
        let value = try await withRetry(totalTimeout: huge, attemptTimeout: huge, clock: ContinuousClock()) {
            (attempt, done: AttemptCompletion<Int>) in done(.success(attempt.number))
        }
        #expect(value == 1)
        let clock = VirtualClock()
        let task = Task {
            try await withRetry(totalTimeout: huge, clock: clock) { (attempt, done: AttemptCompletion<Int>) in
                Task {
                    try await clock.sleep(for: .seconds(1))
                    done(.success(attempt.number))
                }
            }
        }
        #expect(try await expectTimeoutClamped(task, on: clock) == 1)
    }

    @Test(
        "RetryPlan from async code: huge timeouts run and wait until the saturation limit", arguments: hugeDurations)
    func policyHuge(_ huge: Duration) async throws {
        let policy = RetryPlan.noDelay.giveUpAfter(totalTimeout: huge).attemptTimeout(huge)
        #expect(try await policy.execute { attempt in attempt.number } == 1)
        let clock = VirtualClock()
        let total = RetryPlan.noDelay.giveUpAfter(totalTimeout: huge)
        let task = Task { try await total.execute(clock: clock, operation: succeedAfterOneSecond(on: clock)) }
        #expect(try await expectTimeoutClamped(task, on: clock) == 1)
    }

    @Test("repeating(withDelay:) a huge delay pauses until the saturation limit", arguments: hugeDurations)
    func repeatingHuge(_ huge: Duration) async throws {
        let poller = RetryPlan.noDelay.repeating(withDelay: huge)
        #expect(poller.delay == limit)
        // On a real clock: the second `next()` sleeps (it trapped before); cancelling ends the sequence.
        let firstValue = AsyncSignal()
        let task = Task {
            var iterator = poller.values { attempt in attempt.number }.makeAsyncIterator()
            let first = try await iterator.next()
            firstValue.fire()
            let second = try await iterator.next()
            return (first, second)
        }
        await firstValue.wait()
        task.cancel()
        let (first, second) = try await task.value
        #expect(first == 1)
        #expect(second == nil)
        // On a test clock: the pause is the saturation limit.
        let clock = VirtualClock()
        let virtual = Task {
            var iterator = poller.values(clock: clock) { attempt in attempt.number }.makeAsyncIterator()
            _ = try await iterator.next()
            return try await iterator.next()
        }
        await clock.waitForSleepers(1)
        #expect(clock.nextDeadline == .zero.advanced(by: limit))
        virtual.cancel()
        #expect(try await virtual.value == nil)
    }

    @Test("a strategy answering a huge delay waits the saturation limit in every style", arguments: hugeDurations)
    func hugeStrategyDelay(_ huge: Duration) async throws {
        let strategies: [(String, @Sendable (any Error) -> RetryStrategy<VirtualClock>)] = [
            ("retryAfter", { _ in .retryAfter(huge) }),
            ("constant", { _ in .backoff(.constant(huge)) }),
            ("custom", { _ in .backoff(.custom { _ in huge }) }),
        ]
        for (name, strategy) in strategies {
            let clock = VirtualClock()
            let events = AsyncLog<Duration>()
            let task = Task {
                try await retry(
                    maxAttempts: 2, clock: clock, operation: { _ in throw AsyncTestError(id: 1) }, strategy: strategy,
                    observer: { (event: RetryEvent<Int>) in
                        if case .attemptFailed(_, _, .retry(let delay)) = event { events.append(delay) }
                    })
            }
            await clock.waitForSleepers(1)
            #expect(clock.nextDeadline == .zero.advanced(by: limit), "\(name)")
            #expect(events.values == [limit], "\(name)")
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            // The seed-compatible overload, on a real clock: it waits (it does not trap) until cancelled.
            let seed = Task {
                try await retry(maxAttempts: 2, clock: ContinuousClock()) { () async throws(AsyncTestError) -> Int in
                    throw AsyncTestError(id: 1)
                } strategy: { _ in
                    strategy(AsyncTestError(id: 1)).retagged(for: ContinuousClock.self)
                }
            }
            try await Task.sleep(for: .milliseconds(10))
            seed.cancel()
            await #expect(throws: CancellationError.self) { try await seed.value }
        }
    }

    @Test("callback retry on a VirtualScheduler: a huge timeout arms its timer at the saturation limit")
    func callbackHuge() {
        for huge in hugeDurations {
            for (total, attempt) in [(huge, nil), (nil, huge), (huge, huge)] as [(Duration?, Duration?)] {
                let scheduler = VirtualScheduler()
                let results = AsyncLog<Result<Int, any Error>>()
                let kept = CBKeeper<Int>()  // never calls back
                let handle = retry(
                    totalTimeout: total, attemptTimeout: attempt, on: DispatchQueue(label: "huge"),
                    scheduler: scheduler, operation: { (_, done: AttemptCompletion<Int>) in kept.keep(done) },
                    completion: { result, _ in results.append(result) })
                scheduler.advance()
                #expect(scheduler.nextDeadline == limit)
                handle.cancel()
                scheduler.advance()
                #expect(results.values.count == 1)
            }
        }
    }
}

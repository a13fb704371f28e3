import RetryKit
import RetryKitTesting
import Testing

/// An actor whose isolated state the operation and the strategy mutate without `await`: compiles only if `retry`
/// runs them in the caller's isolation.
private actor IsolatedCounter {
    var attempts = 0
    var strategyCalls = 0

    func load() async throws -> Int {
        try await retry(maxAttempts: 4, clock: InstantClock()) { () throws(AsyncTestError) -> Int in
            preconditionIsolated()
            attempts += 1
            if attempts < 3 { throw AsyncTestError(id: attempts) }
            return attempts * 10
        } strategy: { _ in
            preconditionIsolated()
            strategyCalls += 1
            return .backoff(.constant(.seconds(1)))
        }
    }
}

/// A non-`Sendable` value: `retry` hands it back through `sending`.
private final class NonSendableBox {
    var value: Int

    init(_ value: Int) {
        self.value = value
    }
}

@Suite("Async retry (seed-compatible API)", .timeLimit(.minutes(3)))
struct AsyncRetryTests {
    @Test("Success on the first attempt runs the operation once and never asks the strategy")
    func firstTrySuccess() async throws {
        let calls = AsyncCounter()
        let strategyCalls = AsyncCounter()
        let value = try await retry(clock: InstantClock()) { () throws(AsyncTestError) -> Int in
            calls.increment()
            return 42
        } strategy: { _ in
            strategyCalls.increment()
            return .stop
        }
        #expect(value == 42)
        #expect(calls.value == 1)
        #expect(strategyCalls.value == 0)
    }

    @Test("Exhaustion rethrows the last attempt's own typed error; the strategy is asked only between attempts")
    func exhaustionRethrowsTheLastError() async throws {
        let calls = AsyncCounter()
        let seen = AsyncLog<Int>()
        let error = await #expect(throws: AsyncTestError.self) {
            try await retry(maxAttempts: 4, clock: InstantClock()) { () throws(AsyncTestError) -> Int in
                throw AsyncTestError(id: calls.increment())
            } strategy: { (error: AsyncTestError) in
                seen.append(error.id)
                return .backoff(.none)
            }
        }
        #expect(error == AsyncTestError(id: 4))
        #expect(calls.value == 4)
        #expect(seen.values == [1, 2, 3])
    }

    @Test("`.stop` rethrows the failed attempt's own error after one attempt")
    func stopRethrowsTheOperationsError() async throws {
        let calls = AsyncCounter()
        let error = await #expect(throws: AsyncTestError.self) {
            try await retry(maxAttempts: 5, clock: InstantClock()) { () throws(AsyncTestError) -> Int in
                throw AsyncTestError(id: calls.increment())
            } strategy: { _ in
                .stop
            }
        }
        #expect(error == AsyncTestError(id: 1))
        #expect(calls.value == 1)
    }

    @Test("The strategy can decide per error: retry one kind, stop on another")
    func strategyDecidesPerError() async throws {
        let calls = AsyncCounter()
        let error = await #expect(throws: AsyncTestError.self) {
            try await retry(maxAttempts: 10, clock: InstantClock()) { () throws(AsyncTestError) -> Int in
                throw AsyncTestError(id: calls.increment())
            } strategy: { error in
                error.id < 3 ? .backoff(.none) : .stop
            }
        }
        #expect(error == AsyncTestError(id: 3))
        #expect(calls.value == 3)
    }

    @Test("`.none` never touches the clock: no sleep and no read of `now`")
    func noneDoesNotTouchTheClock() async throws {
        let clock = AsyncRecordingClock()
        let calls = AsyncCounter()
        let value = try await retry(maxAttempts: 3, clock: clock) {
            if calls.increment() < 3 { throw AsyncTestError(id: calls.value) }
            return "third"
        }
        #expect(value == "third")
        #expect(calls.value == 3)
        #expect(clock.sleeps.isEmpty)
        #expect(clock.nowReads == 0)
    }

    @Test("A zero `.retryAfter` and a zero constant do not sleep either")
    func zeroDelaysDoNotSleep() async throws {
        let clock = AsyncRecordingClock()
        let calls = AsyncCounter()
        _ = try await retry(maxAttempts: 3, clock: clock) {
            if calls.increment() < 3 { throw AsyncTestError(id: calls.value) }
            return 0
        } strategy: { error in
            (error as? AsyncTestError)?.id == 1 ? .retryAfter(.zero) : .backoff(.constant(.seconds(-1)))
        }
        #expect(calls.value == 3)
        #expect(clock.sleeps.isEmpty)
    }

    @Test("Waits go through the clock with the strategy's delays")
    func waitsUseTheClock() async throws {
        let clock = AsyncRecordingClock()
        let calls = AsyncCounter()
        _ = await #expect(throws: AsyncTestError.self) {
            try await retry(maxAttempts: 4, clock: clock) {
                throw AsyncTestError(id: calls.increment())
            } strategy: { _ in
                .backoff(.linear(a: .seconds(1), b: .milliseconds(500)))
            }
        }
        #expect(clock.sleeps == [.milliseconds(500), .milliseconds(1500), .milliseconds(2500)])
    }

    @Test("A task cancelled before the call runs no attempt and throws CancellationError")
    func cancelledBeforeTheCall() async throws {
        let calls = AsyncCounter()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await retry(clock: InstantClock()) {
                calls.increment()
                return 1
            }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(calls.value == 0)
    }

    @Test("Cancellation is checked before every attempt, also with `.none`")
    func cancellationBetweenImmediateAttempts() async throws {
        let calls = AsyncCounter()
        let strategyCalls = AsyncCounter()
        let task = Task {
            try await retry(maxAttempts: 10, clock: InstantClock()) {
                if calls.increment() == 2 { withUnsafeCurrentTask { $0?.cancel() } }
                throw AsyncTestError(id: calls.value)
            } strategy: { _ in
                strategyCalls.increment()
                return .backoff(.none)
            }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(calls.value == 2)
        #expect(strategyCalls.value == 1)  // not asked about the failure that came with the cancellation
    }

    @Test("An attempt that succeeds although the task was cancelled returns its value")
    func successDespiteCancellation() async throws {
        let task = Task {
            try await retry(clock: InstantClock()) {
                withUnsafeCurrentTask { $0?.cancel() }
                return 7
            }
        }
        #expect(try await task.value == 7)
    }

    @Test("Cancellation during a virtual wait ends it at once with CancellationError")
    func cancellationDuringAWait() async throws {
        let clock = VirtualClock()
        let calls = AsyncCounter()
        let task = Task {
            try await retry(maxAttempts: 3, clock: clock) {
                throw AsyncTestError(id: calls.increment())
            } strategy: { _ in
                .backoff(.constant(.seconds(60)))
            }
        }
        await clock.waitForSleepers()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(calls.value == 1)
        #expect(clock.sleeperCount == 0)
        #expect(clock.now == .zero)
    }

    @Test("Cancellation during an attempt that throws does not consult the strategy")
    func cancellationDuringAnAttempt() async throws {
        let clock = VirtualClock()
        let strategyCalls = AsyncCounter()
        let task = Task {
            try await retry(maxAttempts: 3, clock: clock) {
                try await clock.sleep(for: .seconds(100))  // the attempt's own work, cancelled with the task
                return 1
            } strategy: { _ in
                strategyCalls.increment()
                return .backoff(.none)
            }
        }
        await clock.waitForSleepers()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(strategyCalls.value == 0)
    }

    @Test(
        "maxAttempts below 1 throws RetryError.invalidConfiguration without running the operation",
        arguments: [0, -1, Int.min])
    func invalidMaxAttempts(maxAttempts: Int) async throws {
        let calls = AsyncCounter()
        let error = await #expect(throws: RetryError.self) {
            try await retry(maxAttempts: maxAttempts, clock: InstantClock()) {
                calls.increment()
                return 1
            }
        }
        guard case .invalidConfiguration = error?.reason else {
            Issue.record("expected invalidConfiguration, got \(String(describing: error))")
            return
        }
        #expect(error?.attempts == 0)
        #expect(calls.value == 0)
    }

    @Test("Huge attempt counts with exponential backoff do not trap on Linux")
    func exponentialWithManyAttempts() async throws {
        let strategy = BackoffStrategy<InstantClock>.exponential(a: .nanoseconds(1), b: 2).max(.milliseconds(1))
        let clock = InstantClock()
        let calls = AsyncCounter()
        let error = await #expect(throws: AsyncTestError.self) {
            try await retry(maxAttempts: 100, clock: clock) {
                throw AsyncTestError(id: calls.increment())
            } strategy: { _ in
                .backoff(strategy)
            }
        }
        #expect(error == AsyncTestError(id: 100))
        let expected = asyncCoreDelays(strategy, count: 99).reduce(.zero, +)
        #expect(clock.now == .zero.advanced(by: expected))
        #expect(expected > .milliseconds(70) && expected < .milliseconds(99))
    }

    @Test("`exponential(a: 1 s, b: 2).max(60 s)` keeps its cap far past retry 68")
    func cappedExponentialPastTheOverflowPoint() async throws {
        let clock = AsyncRecordingClock()
        let calls = AsyncCounter()
        _ = await #expect(throws: AsyncTestError.self) {
            try await retry(maxAttempts: 200, clock: clock) {
                throw AsyncTestError(id: calls.increment())
            } strategy: { _ in
                .backoff(.exponential(a: .seconds(1), b: 2).max(.seconds(60)))
            }
        }
        let sleeps = clock.sleeps
        #expect(sleeps.count == 199)
        #expect(sleeps.prefix(3) == [.seconds(1), .seconds(2), .seconds(4)])
        #expect(sleeps.dropFirst(6).allSatisfy { $0 == .seconds(60) })
    }

    @Test("Delays on a VirtualClock equal the core's for seeded jittered strategies", arguments: [1, 2])
    func seededJitterMatchesTheCore(kind: Int) async throws {
        func make() -> BackoffStrategy<VirtualClock> {
            kind == 1
                ? .exponential(a: .milliseconds(100), b: 2).max(.seconds(5)).jitter(
                    using: SeededRandomNumberGenerator(seed: 2024))
                : .decorrelatedJitter(
                    base: .milliseconds(50), cap: .seconds(2), using: SeededRandomNumberGenerator(seed: 7))
        }
        let strategy = make()
        let expected = asyncCoreDelays(make(), count: 5)
        let clock = VirtualClock()
        let calls = AsyncCounter()
        let task = Task {
            try await retry(maxAttempts: 6, clock: clock) {
                throw AsyncTestError(id: calls.increment())
            } strategy: { _ in
                .backoff(strategy)
            }
        }
        var observed: [Duration] = []
        for _ in expected {
            await clock.waitForSleepers()
            let deadline = try #require(clock.nextDeadline)
            observed.append(clock.now.duration(to: deadline))
            await clock.advance(to: deadline)
        }
        await #expect(throws: AsyncTestError.self) { try await task.value }
        #expect(observed == expected)
        #expect(Set(expected).count == expected.count)  // really jittered
        #expect(calls.value == 6)
    }

    @Test("`.retryAfter` waits exactly the given delay")
    func retryAfterWaitsExactly() async throws {
        let clock = AsyncRecordingClock()
        let calls = AsyncCounter()
        let value = try await retry(maxAttempts: 3, clock: clock) {
            if calls.increment() == 1 { throw AsyncTestError(id: 1) }
            return "ok"
        } strategy: { _ in
            .retryAfter(.milliseconds(1234))
        }
        #expect(value == "ok")
        #expect(clock.sleeps == [.milliseconds(1234)])
    }

    @Test("A clock that fails to sleep ends the retrier with its error; a cancelled sleep with CancellationError")
    func clockErrors() async throws {
        struct ClockBroke: Error {}
        let failing = AsyncRecordingClock(sleepError: ClockBroke())
        await #expect(throws: ClockBroke.self) {
            try await retry(clock: failing) {
                throw AsyncTestError(id: 1)
            } strategy: { _ in
                .backoff(.constant(.seconds(1)))
            }
        }
        let cancelling = AsyncRecordingClock(sleepError: CancellationError())
        await #expect(throws: CancellationError.self) {
            try await retry(clock: cancelling) {
                throw AsyncTestError(id: 1)
            } strategy: { _ in
                .backoff(.constant(.seconds(1)))
            }
        }
    }

    @Test("Operation and strategy run in the caller's actor isolation")
    func inheritsIsolation() async throws {
        let counter = IsolatedCounter()
        #expect(try await counter.load() == 30)
        #expect(await counter.attempts == 3)
        #expect(await counter.strategyCalls == 2)
    }

    @Test("A non-Sendable result is returned through `sending`")
    func nonSendableResult() async throws {
        let box = try await retry(clock: InstantClock()) { NonSendableBox(5) }
        box.value += 1
        #expect(box.value == 6)
    }

    @Test("Jitter works without macOS 15 and `.none.jitter()` is zero")
    func jitterWithoutPlatformRequirements() async throws {
        let clock = AsyncRecordingClock()
        let calls = AsyncCounter()
        _ = try await retry(maxAttempts: 3, clock: clock) {
            if calls.increment() < 3 { throw AsyncTestError(id: calls.value) }
            return 1
        } strategy: { _ in
            .backoff(.none.jitter())
        }
        #expect(clock.sleeps.isEmpty)
    }
}

/// The basic `retry` answers the machine's `start` itself when the configuration is valid and the task not cancelled
/// (attempt 1, no timer), without building a machine: this pins that this is what the machine says.
@Suite("Basic async retry: the first step is the machine's", .timeLimit(.minutes(3)))
struct BasicRetryFirstStepTests {
    @Test(
        "A valid configuration without timeouts starts with attempt 1 and no timer", arguments: [1, 2, 3, 10, Int.max])
    func validConfigurationStartsWithAttemptOne(maxAttempts: Int) {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: maxAttempts, budget: RetryBudget()))
        guard case .run(let attempt, let timeout) = machine.start(at: .zero) else {
            Issue.record("expected the first attempt")
            return
        }
        #expect(attempt.number == 1)
        #expect(attempt.maxAttempts == maxAttempts)
        #expect(attempt.elapsed == .zero)
        #expect(timeout == nil)
    }

    @Test("An invalid maxAttempts runs no attempt", arguments: [0, -1, Int.min])
    func invalidConfigurationRunsNothing(maxAttempts: Int) async {
        let calls = AsyncCounter()
        await #expect(throws: RetryError.self) {
            try await retry(maxAttempts: maxAttempts, clock: InstantClock()) { () async throws -> Int in
                calls.increment()
                return 1
            }
        }
        #expect(calls.value == 0)
    }
}

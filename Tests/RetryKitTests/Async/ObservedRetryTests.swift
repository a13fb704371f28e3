import RetryKit
import RetryKitTesting
import Testing

/// An actor whose isolated state the strategy and the observer mutate without `await`.
private actor ObservingOwner {
    var events: [String] = []
    var strategyCalls = 0

    func load(clock: InstantClock) async throws -> Int {
        let calls = AsyncCounter()
        return try await retry(maxAttempts: 3, clock: clock) { _ in
            if calls.increment() < 2 { throw AsyncTestError(id: calls.value) }
            return 9
        } strategy: { _ in
            preconditionIsolated()
            strategyCalls += 1
            return .backoff(.none)
        } observer: { event in
            preconditionIsolated()
            events.append(asyncEventLine(event))
        }
    }
}

@Suite("Async retry with limits and events", .timeLimit(.minutes(3)))
struct ObservedRetryTests {
    @Test("Events for success after two failures, with the attempt passed to the operation")
    func eventsForSuccessAfterFailures() async throws {
        let clock = VirtualClock()
        let events = AsyncLog<String>()
        let attempts = AsyncLog<RetryAttempt>()
        let task = Task {
            try await retry(maxAttempts: 4, clock: clock) { attempt in
                attempts.append(attempt)
                if attempt.number < 3 { throw AsyncTestError(id: attempt.number) }
                return "v\(attempt.number)"
            } strategy: { _ in
                .backoff(.constant(.seconds(1)))
            } observer: { event in
                events.append(asyncEventLine(event))
            }
        }
        #expect(try await clock.run(until: task) == "v3")
        #expect(attempts.values.map(\.number) == [1, 2, 3])
        #expect(attempts.values.map(\.elapsed) == [.zero, .seconds(1), .seconds(2)])
        #expect(attempts.values.allSatisfy { $0.maxAttempts == 4 })
        #expect(
            events.values == [
                "started 1/4 at 0.0 seconds",
                "failed 1 with AsyncTestError(1) next retry(after: 1.0 seconds)",
                "started 2/4 at 1.0 seconds",
                "failed 2 with AsyncTestError(2) next retry(after: 1.0 seconds)",
                "started 3/4 at 2.0 seconds",
                "succeeded 3 with v3",
                "finished succeeded after 3 at 2.0 seconds with nil",
            ])
    }

    @Test("Events for exhaustion and for `.stop` end with giveUp and finished")
    func eventsForGivingUp() async throws {
        let exhausted = AsyncLog<String>()
        await #expect(throws: AsyncTestError.self) {
            try await retry(maxAttempts: 2, clock: InstantClock()) { attempt -> Int in
                throw AsyncTestError(id: attempt.number)
            } observer: {
                exhausted.append(asyncEventLine($0))
            }
        }
        #expect(
            exhausted.values == [
                "started 1/2 at 0.0 seconds",
                "failed 1 with AsyncTestError(1) next retry(after: 0.0 seconds)",
                "started 2/2 at 0.0 seconds",
                "failed 2 with AsyncTestError(2) next giveUp(exhausted)",
                "finished exhausted after 2 at 0.0 seconds with AsyncTestError(2)",
            ])

        let stopped = AsyncLog<String>()
        let error = await #expect(throws: AsyncTestError.self) {
            try await retry(maxAttempts: 5, clock: InstantClock()) { attempt -> Int in
                throw AsyncTestError(id: attempt.number)
            } strategy: { _ in
                .stop
            } observer: {
                stopped.append(asyncEventLine($0))
            }
        }
        #expect(error == AsyncTestError(id: 1))
        #expect(stopped.values.last == "finished stopped after 1 at 0.0 seconds with AsyncTestError(1)")
        #expect(stopped.values.count == 3)
    }

    @Test("A wait that would cross the total timeout gives up at once with deadlineExceeded")
    func totalTimeoutBeforeAWait() async throws {
        let clock = VirtualClock()
        let events = AsyncLog<String>()
        let firstFailure = AsyncSignal()
        let task = Task {
            try await retry(maxAttempts: 10, totalTimeout: .seconds(5), clock: clock) { attempt -> Int in
                throw AsyncTestError(id: attempt.number)
            } strategy: { _ in
                .backoff(.constant(.seconds(3)))
            } observer: { event in
                events.append(asyncEventLine(event))
                if case .attemptFailed = event { firstFailure.fire() }
            }
        }
        // Each attempt races a deadline timer on the clock; once `attemptFailed` is out, that timer is gone and the
        // only sleeper is the backoff wait.
        await firstFailure.wait()
        await clock.waitForSleepers()
        #expect(clock.nextDeadline == .zero.advanced(by: .seconds(3)))
        await clock.advance(by: .seconds(3))
        let error = await #expect(throws: RetryError.self) { try await task.value }
        #expect(error?.reason == .deadlineExceeded)
        #expect(error?.attempts == 2)
        #expect(error?.lastError as? AsyncTestError == AsyncTestError(id: 2))
        #expect(clock.now == .zero.advanced(by: .seconds(3)))  // gave up at 3 s without sleeping to 6 s
        #expect(
            events.values.suffix(2).first?.hasSuffix("next giveUp(deadlineExceeded)") == true
        )
    }

    @Test("An attempt that outlives the total timeout is cancelled and the retrier gives up")
    func totalTimeoutDuringAnAttempt() async throws {
        let clock = VirtualClock()
        let operationCancelled = AsyncCounter()
        let task = Task {
            try await retry(maxAttempts: 3, totalTimeout: .seconds(5), clock: clock) { _ -> Int in
                do {
                    try await clock.sleep(for: .seconds(100))
                } catch {
                    operationCancelled.increment()
                    throw error
                }
                return 1
            }
        }
        await clock.waitForSleepers(2)  // the operation and the deadline timer
        await clock.advance(by: .seconds(5))
        let error = await #expect(throws: RetryError.self) { try await task.value }
        #expect(error?.reason == .deadlineExceeded)
        #expect(error?.attempts == 1)
        #expect(operationCancelled.value == 1)
        #expect(clock.sleeperCount == 0)
    }

    @Test("A per-attempt timeout fails the attempt with attemptTimedOut and the retrier goes on")
    func attemptTimeoutRetries() async throws {
        let clock = VirtualClock()
        let events = AsyncLog<String>()
        let seen = AsyncLog<String>()
        let task = Task {
            try await retry(maxAttempts: 3, attemptTimeout: .seconds(1), clock: clock) { attempt in
                if attempt.number == 1 { try await clock.sleep(for: .seconds(100)) }
                return attempt.number
            } strategy: { error in
                seen.append("\(error)")
                return .backoff(.none)
            } observer: {
                events.append(asyncEventLine($0))
            }
        }
        await clock.waitForSleepers(2)
        await clock.advance(by: .seconds(1))
        #expect(try await task.value == 2)
        #expect(seen.values == ["RetryError(attempt timed out after 1 attempt in 1.0 seconds)"])
        #expect(
            events.values == [
                "started 1/3 at 0.0 seconds",
                "failed 1 with RetryError(attempt timed out after 1 attempt in 1.0 seconds) next retry(after: 0.0 seconds)",
                "started 2/3 at 1.0 seconds",
                "succeeded 2 with 2",
                "finished succeeded after 2 at 1.0 seconds with nil",
            ])
    }

    @Test("Invalid limits throw invalidConfiguration without running an attempt")
    func invalidLimits() async throws {
        let calls = AsyncCounter()
        for (total, perAttempt) in [(Duration?.some(.seconds(-1)), Duration?.none), (nil, .zero), (nil, .seconds(-2))] {
            let events = AsyncLog<String>()
            let error = await #expect(throws: RetryError.self) {
                try await retry(totalTimeout: total, attemptTimeout: perAttempt, clock: InstantClock()) { _ in
                    calls.increment()
                } observer: {
                    events.append(asyncEventLine($0))
                }
            }
            guard case .invalidConfiguration = error?.reason else {
                Issue.record("expected invalidConfiguration, got \(String(describing: error))")
                continue
            }
            #expect(events.values.count == 1)
        }
        #expect(calls.value == 0)
    }

    @Test("A task cancelled before the call runs no attempt and reports only `finished`")
    func cancelledBeforeTheCall() async throws {
        let calls = AsyncCounter()
        let events = AsyncLog<String>()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await retry(clock: InstantClock()) { _ in
                calls.increment()
            } observer: {
                events.append(asyncEventLine($0))
            }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(calls.value == 0)
        #expect(events.values == ["finished cancelled after 0 at 0.0 seconds with CancellationError()"])
    }

    @Test("Cancellation during a wait goes straight to `finished` with CancellationError")
    func cancellationDuringAWait() async throws {
        let clock = VirtualClock()
        let events = AsyncLog<String>()
        let task = Task {
            try await retry(clock: clock) { attempt -> Int in
                throw AsyncTestError(id: attempt.number)
            } strategy: { _ in
                .backoff(.constant(.seconds(10)))
            } observer: {
                events.append(asyncEventLine($0))
            }
        }
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(4))
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(events.values.last == "finished cancelled after 1 at 4.0 seconds with CancellationError()")
        #expect(events.values.count == 3)
    }

    @Test("Strategy and observer run in the caller's actor isolation")
    func inheritsIsolation() async throws {
        let owner = ObservingOwner()
        #expect(try await owner.load(clock: InstantClock()) == 9)
        #expect(await owner.strategyCalls == 1)
        #expect(await owner.events.count == 5)
    }

    @Test("Delays equal the core's for a seeded jittered exponential strategy, also with limits")
    func seededJitterWithLimits() async throws {
        func make() -> BackoffStrategy<VirtualClock> {
            .exponential(a: .milliseconds(200), b: 3).jitter(using: SeededRandomNumberGenerator(seed: 99))
        }
        let strategy = make()
        let expected = asyncCoreDelays(make(), count: 3)
        let clock = VirtualClock()
        // Each attempt also has a timer sleeping on the clock; it is gone once `attemptFailed` is emitted, so the
        // next sleeper after that event is the backoff wait.
        let failed = expected.map { _ in AsyncSignal() }
        let task = Task {
            try await retry(maxAttempts: 4, totalTimeout: .seconds(3600), attemptTimeout: .seconds(30), clock: clock) {
                attempt -> Int in
                throw AsyncTestError(id: attempt.number)
            } strategy: { _ in
                .backoff(strategy)
            } observer: { event in
                if case .attemptFailed(let attempt, _, .retry) = event { failed[attempt.number - 1].fire() }
            }
        }
        var observed: [Duration] = []
        for signal in failed {
            await signal.wait()
            await clock.waitForSleepers()
            #expect(clock.sleeperCount == 1)
            let deadline = try #require(clock.nextDeadline)
            observed.append(clock.now.duration(to: deadline))
            await clock.advance(to: deadline)
        }
        await #expect(throws: AsyncTestError.self) { try await task.value }
        #expect(observed == expected)
    }
}

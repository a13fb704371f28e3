import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// A legacy completion-handler API: answers later on a background queue.
private func legacyLoad(_ id: Int, fail: Bool, completion: @escaping @Sendable (Result<String, any Error>) -> Void) {
    DispatchQueue.global().async {
        completion(fail ? .failure(AsyncTestError(id: id)) : .success("item \(id)"))
    }
}

/// The same in the `(Value?, Error?)` style.
private func legacyFetch(_ id: Int, completion: @escaping @Sendable (String?, (any Error)?) -> Void) {
    DispatchQueue.global().async {
        id < 3 ? completion(nil, AsyncTestError(id: id)) : completion("fetched \(id)", nil)
    }
}

/// Busy work of about `units` × 400 additions, to shift a racing thread by a little.
private func asyncSpin(_ units: Int) {
    var sum = 0
    for step in 0..<units * 400 { sum &+= step }
    if sum == -1 { print(sum) }  // keeps the loop from being optimized away
}

/// An actor whose isolated state the operation mutates synchronously: compiles only if `withRetry` calls the
/// operation in the caller's isolation.
private actor BridgeOwner {
    var started: [Int] = []

    func load() async throws -> String {
        try await withRetry(maxAttempts: 3, clock: InstantClock()) { attempt, done in
            preconditionIsolated()
            started.append(attempt.number)
            legacyLoad(attempt.number, fail: attempt.number < 2) { done($0) }
        }
    }
}

@Suite("withRetry: a completion-handler operation retried from async code", .timeLimit(.minutes(3)))
struct WithRetryTests {
    @Test("Success after two failures, with events identical in shape to the async API's")
    func successAfterFailures() async throws {
        let events = AsyncLog<String>()
        let value = try await withRetry(maxAttempts: 5, clock: InstantClock()) { attempt, done in
            legacyLoad(attempt.number, fail: attempt.number < 3) { done($0) }
        } strategy: { _ in
            .backoff(.exponential(a: .seconds(1), b: 2))
        } observer: {
            events.append(asyncEventLine($0))
        }
        #expect(value == "item 3")
        #expect(
            events.values == [
                "started 1/5 at 0.0 seconds",
                "failed 1 with AsyncTestError(1) next retry(after: 1.0 seconds)",
                "started 2/5 at 1.0 seconds",
                "failed 2 with AsyncTestError(2) next retry(after: 2.0 seconds)",
                "started 3/5 at 3.0 seconds",
                "succeeded 3 with item 3",
                "finished succeeded after 3 at 3.0 seconds with nil",
            ])
    }

    @Test("The (Value?, Error?) completion style, and a completion with neither is missingResult")
    func optionalPairStyle() async throws {
        let value = try await withRetry(maxAttempts: 3, clock: InstantClock()) { attempt, done in
            legacyFetch(attempt.number) { value, error in done(value, error) }
        }
        #expect(value == "fetched 3")

        let error = await #expect(throws: RetryError.self) {
            try await withRetry(maxAttempts: 2, clock: InstantClock()) { (_, done: AttemptCompletion<Int>) in
                done(nil, nil)
            }
        }
        #expect(error?.reason == .missingResult)
    }

    @Test("A completion called synchronously inside the operation is delivered")
    func synchronousCompletion() async throws {
        let value = try await withRetry(clock: InstantClock()) { attempt, done in
            done(attempt.number == 1 ? .failure(AsyncTestError(id: 1)) : .success(attempt.number))
        }
        #expect(value == 2)
    }

    @Test("Exhaustion rethrows the operation's own last error; `.stop` the failed attempt's")
    func givingUpRethrowsOwnErrors() async throws {
        let exhausted = await #expect(throws: AsyncTestError.self) {
            try await withRetry(maxAttempts: 3, clock: InstantClock()) { attempt, done in
                legacyLoad(attempt.number, fail: true) { done($0) }
            }
        }
        #expect(exhausted == AsyncTestError(id: 3))
        let stopped = await #expect(throws: AsyncTestError.self) {
            try await withRetry(maxAttempts: 3, clock: InstantClock()) { attempt, done in
                legacyLoad(attempt.number, fail: true) { done($0) }
            } strategy: { _ in
                .stop
            }
        }
        #expect(stopped == AsyncTestError(id: 1))
    }

    @Test("maxAttempts 0 throws invalidConfiguration without calling the operation")
    func invalidMaxAttempts() async throws {
        let calls = AsyncCounter()
        let error = await #expect(throws: RetryError.self) {
            try await withRetry(maxAttempts: 0, clock: InstantClock()) { (_, done: AttemptCompletion<Int>) in
                calls.increment()
                done(.success(1))
            }
        }
        guard case .invalidConfiguration = error?.reason else {
            Issue.record("expected invalidConfiguration, got \(String(describing: error))")
            return
        }
        #expect(calls.value == 0)
    }

    @Test("A task cancelled before the call runs no attempt")
    func cancelledBeforeTheCall() async throws {
        let calls = AsyncCounter()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await withRetry(clock: InstantClock()) { (_, done: AttemptCompletion<Int>) in
                calls.increment()
                done(.success(1))
            }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(calls.value == 0)
    }

    @Test("Task cancellation during an attempt runs the cancel hook once and throws CancellationError at once")
    func cancelHookOnTaskCancel() async throws {
        let started = AsyncSignal()
        let hooks = AsyncCounter()
        let pending = Locked<AttemptCompletion<Int>?>(nil)
        let events = AsyncLog<String>()
        let task = Task {
            try await withRetry(clock: InstantClock()) { (_, done: AttemptCompletion<Int>) in
                done.onCancel { hooks.increment() }
                pending.withLock { $0 = done }  // never completes on its own
                started.fire()
            } observer: {
                events.append(asyncEventLine($0))
            }
        }
        await started.wait()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(hooks.value == 1)
        let done = try #require(pending.withLock { $0 })
        #expect(done.isCancelled)
        done(.success(5))  // a late result is ignored
        #expect(hooks.value == 1)
        #expect(
            events.values == [
                "started 1/3 at 0.0 seconds", "finished cancelled after 1 at 0.0 seconds with CancellationError()",
            ])
    }

    @Test("A cancel hook registered after cancellation runs at once")
    func hookAfterCancellation() async throws {
        let hooks = AsyncCounter()
        let task = Task {
            try await withRetry(clock: InstantClock()) { (_, done: AttemptCompletion<Int>) in
                withUnsafeCurrentTask { $0?.cancel() }  // cancelled while the attempt starts
                done.onCancel { hooks.increment() }
            }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(hooks.value == 1)
    }

    @Test("Cancellation during a virtual wait ends it at once")
    func cancellationDuringAWait() async throws {
        let clock = VirtualClock()
        let calls = AsyncCounter()
        let task = Task {
            try await withRetry(clock: clock) { (attempt, done: AttemptCompletion<Int>) in
                calls.increment()
                done(.failure(AsyncTestError(id: attempt.number)))
            } strategy: { _ in
                .backoff(.constant(.seconds(30)))
            }
        }
        await clock.waitForSleepers()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(calls.value == 1)
        #expect(clock.sleeperCount == 0)
    }

    @Test("Cancellation racing completion: exactly one outcome, consistent with the cancel hook (2,000 runs)")
    func cancellationRacesCompletion() async throws {
        let iterations = 2_000
        let results = AsyncLog<String>()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<iterations {
                group.addTask {
                    let hooks = AsyncCounter()
                    let finishedEvents = AsyncCounter()
                    let handle = Locked<Task<Int, any Error>?>(nil)
                    let task = Task {
                        try await withRetry(maxAttempts: 2, clock: InstantClock()) {
                            (_, done: AttemptCompletion<Int>) in
                            done.onCancel { hooks.increment() }
                            // The completion and the cancel start together on two threads, each after a different
                            // amount of busy work, so that either may win.
                            DispatchQueue.global().async {
                                asyncSpin(index % 40)
                                done(.success(index))
                            }
                            DispatchQueue.global().async {
                                asyncSpin(index % 3)
                                handle.withLock { $0 }?.cancel()
                            }
                        } observer: { event in
                            if case .finished = event { finishedEvents.increment() }
                        }
                    }
                    handle.withLock { $0 = task }
                    let outcome: String
                    switch await task.result {
                    case .success(let value):
                        outcome =
                            value == index && hooks.value == 0 ? "value" : "bad value \(value) hooks \(hooks.value)"
                    case .failure(let error):
                        outcome = error is CancellationError && hooks.value <= 1 ? "cancelled" : "bad \(error)"
                    }
                    results.append(finishedEvents.value == 1 ? outcome : "finished \(finishedEvents.value) times")
                }
            }
        }
        let outcomes = results.values
        #expect(outcomes.count == iterations)
        #expect(outcomes.allSatisfy { $0 == "value" || $0 == "cancelled" }, "\(Set(outcomes))")
    }

    @Test("A per-attempt timeout abandons the attempt (its cancel hook runs) and retries")
    func attemptTimeout() async throws {
        let clock = VirtualClock()
        let hooks = AsyncCounter()
        let events = AsyncLog<String>()
        let pending = Locked<[AttemptCompletion<String>]>([])  // the work in flight keeps its completion
        let task = Task {
            try await withRetry(maxAttempts: 3, attemptTimeout: .seconds(2), clock: clock) {
                (attempt, done: AttemptCompletion<String>) in
                if attempt.number == 1 {
                    pending.withLock { $0.append(done) }
                    done.onCancel { hooks.increment() }  // never completes
                } else {
                    legacyLoad(attempt.number, fail: false) { done($0) }
                }
            } observer: {
                events.append(asyncEventLine($0))
            }
        }
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(2))
        #expect(try await task.value == "item 2")
        #expect(hooks.value == 1)
        #expect(
            events.values == [
                "started 1/3 at 0.0 seconds",
                "failed 1 with RetryError(attempt timed out after 1 attempt in 2.0 seconds) next retry(after: 0.0 seconds)",
                "started 2/3 at 2.0 seconds",
                "succeeded 2 with item 2",
                "finished succeeded after 2 at 2.0 seconds with nil",
            ])
    }

    @Test("The total timeout: a wait that would cross it gives up with deadlineExceeded")
    func totalTimeout() async throws {
        let clock = VirtualClock()
        let task = Task {
            try await withRetry(maxAttempts: 10, totalTimeout: .seconds(5), clock: clock) {
                (attempt, done: AttemptCompletion<Int>) in
                done(.failure(AsyncTestError(id: attempt.number)))
            } strategy: { _ in
                .backoff(.constant(.seconds(3)))
            }
        }
        // The attempts complete synchronously, so no deadline timer is armed and `run(until:)` only meets the waits.
        let error = await #expect(throws: RetryError.self) { try await clock.run(until: task) }
        #expect(error?.reason == .deadlineExceeded)
        #expect(error?.lastError as? AsyncTestError == AsyncTestError(id: 2))
        #expect(clock.now == .zero.advanced(by: .seconds(3)))
    }

    @Test("Without an observer (the overload that builds no events), the same outcomes as with one")
    func withoutObserver() async throws {
        // Attempt 1 fails and calls `done` twice, attempt 2 releases `done` uncalled, attempt 3 succeeds.
        @Sendable func operation(_ attempt: RetryAttempt, _ done: AttemptCompletion<Int>) {
            switch attempt.number {
            case 1:
                done(.failure(AsyncTestError(id: 1)))
                done(.failure(AsyncTestError(id: 9)))
            case 2: break
            default: done(.success(attempt.number))
            }
        }
        // On a `ContinuousClock` (no delays here): the overload without `observer` is the one that builds no events.
        let plain = try await withRetry(maxAttempts: 3, operation: operation)
        let observed = try await withRetry(maxAttempts: 3, operation: operation, observer: { _ in })
        #expect(plain == 3)
        #expect(observed == 3)
        // Given up on attempt 2: its released completion is the error, with or without an observer.
        let released = await #expect(throws: RetryError.self) {
            try await withRetry(maxAttempts: 2, operation: operation)
        }
        let releasedObserved = await #expect(throws: RetryError.self) {
            try await withRetry(maxAttempts: 2, operation: operation, observer: { _ in })
        }
        #expect(released?.reason == .completionReleased)
        #expect(releasedObserved?.reason == .completionReleased)
    }

    @Test("A duplicate completion is reported to the observer and changes nothing else")
    func duplicateCompletion() async throws {
        let events = AsyncLog<String>()
        let value = try await withRetry(clock: InstantClock()) { (attempt, done: AttemptCompletion<Int>) in
            done(.success(attempt.number))
            done(.success(99))
        } observer: {
            events.append(asyncEventLine($0))
        }
        #expect(value == 1)
        #expect(
            events.values == [
                "started 1/3 at 0.0 seconds",
                "succeeded 1 with 1",
                "duplicate 1",
                "finished succeeded after 1 at 0.0 seconds with nil",
            ])
    }

    @Test("A duplicate of a failed attempt's completion is reported before the next attempt starts")
    func duplicateCompletionOfAFailedAttempt() async throws {
        let events = AsyncLog<String>()
        let value = try await withRetry(clock: InstantClock()) { (attempt, done: AttemptCompletion<Int>) in
            if attempt.number == 1 {
                done(.failure(AsyncTestError(id: 1)))
                done(.failure(AsyncTestError(id: 2)))
            } else {
                done(.success(attempt.number))
            }
        } observer: {
            events.append(asyncEventLine($0))
        }
        #expect(value == 2)
        #expect(events.values.count == 6)
        #expect(events.values.prefix(1) == ["started 1/3 at 0.0 seconds"])
        #expect(events.values.dropFirst(1).first?.hasPrefix("failed 1 with") == true)
        #expect(
            Array(events.values.dropFirst(2)) == [
                "duplicate 1",
                "started 2/3 at 0.0 seconds",
                "succeeded 2 with 2",
                "finished succeeded after 2 at 0.0 seconds with nil",
            ])
    }

    @Test("A duplicate completion of an attempt that was waited for is reported before `finished`")
    @MainActor
    func duplicateCompletionAfterAWait() async throws {
        let events = AsyncLog<String>()
        let pending = Locked<AttemptCompletion<Int>?>(nil)
        let task = Task { @MainActor in
            try await withRetry(clock: InstantClock()) { (_, done: AttemptCompletion<Int>) in
                pending.withLock { $0 = done }
            } observer: {
                events.append(asyncEventLine($0))
            }
        }
        while pending.withLock({ $0 }) == nil {
            await Task.yield()
        }
        // Both calls on the main actor, where the call waits: it resumes only after both.
        let done = pending.withLock { $0.take() }
        done?(.success(7))
        done?(.success(8))
        #expect(try await task.value == 7)
        #expect(
            events.values == [
                "started 1/3 at 0.0 seconds",
                "succeeded 1 with 7",
                "duplicate 1",
                "finished succeeded after 1 at 0.0 seconds with nil",
            ])
    }

    @Test("The operation runs in the caller's actor isolation")
    func inheritsIsolation() async throws {
        let owner = BridgeOwner()
        #expect(try await owner.load() == "item 2")
        #expect(await owner.started == [1, 2])
    }

    @Test("The bridge and the async API emit identical events for one seeded jittered scenario")
    func parityWithTheAsyncAPI() async throws {
        func strategy() -> BackoffStrategy<InstantClock> {
            .exponential(a: .milliseconds(100), b: 2).max(.seconds(10)).jitter(
                using: SeededRandomNumberGenerator(seed: 31))
        }
        let viaAsync = AsyncLog<String>()
        let asyncStrategy = strategy()
        let asyncValue = try await retry(maxAttempts: 4, clock: InstantClock()) { attempt in
            if attempt.number < 3 { throw AsyncTestError(id: attempt.number) }
            return attempt.number
        } strategy: { _ in
            .backoff(asyncStrategy)
        } observer: {
            viaAsync.append(asyncEventLine($0))
        }

        let viaBridge = AsyncLog<String>()
        let bridgeStrategy = strategy()
        let bridgeValue = try await withRetry(maxAttempts: 4, clock: InstantClock()) {
            (attempt, done: AttemptCompletion<Int>) in
            done(attempt.number < 3 ? .failure(AsyncTestError(id: attempt.number)) : .success(attempt.number))
        } strategy: { _ in
            .backoff(bridgeStrategy)
        } observer: {
            viaBridge.append(asyncEventLine($0))
        }

        #expect(asyncValue == bridgeValue)
        #expect(viaAsync.values == viaBridge.values)
        #expect(viaAsync.values.count == 7)
    }
}

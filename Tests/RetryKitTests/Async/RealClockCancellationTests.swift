import RetryKit
import Testing

/// Real-clock tests: task cancellation during a 60 s backoff on `ContinuousClock` must end the retrier within
/// milliseconds. The bound asserted is 30 s, far above the few milliseconds expected (a 2-core machine at load 20+
/// under the thread sanitizer took over 1 s; one stalled by two sanitizer runs and a build beside each other held
/// threads for 12 s), and still half the backoff: a retrier that ignored the cancellation and slept on would take
/// 60 s. How fast the cancel really is, `Benchmarks/` measures.
@Suite("Cancellation during a real 60 s backoff", .timeLimit(.minutes(3)))
struct RealClockCancellationTests {
    private static let backoff = Duration.seconds(60)
    private static let bound = Duration.seconds(30)

    /// Waits until the first attempt has failed (or started), gives the retrier a moment to start its wait, cancels the
    /// task, and checks that the task ends with `CancellationError` within ``bound`` of the cancel.
    private func expectPromptCancellation<T: Sendable>(
        after firstAttempt: AsyncSignal, of task: Task<T, any Error>, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        await firstAttempt.wait()
        try await Task.sleep(for: .milliseconds(20))  // the retrier is now in its 60 s wait (or about to be)
        let clock = ContinuousClock()
        let start = clock.now
        task.cancel()
        let result = await task.result
        let elapsed = start.duration(to: clock.now)
        #expect(result.cbError is CancellationError, sourceLocation: sourceLocation)
        #expect(elapsed < Self.bound, "took \(elapsed)", sourceLocation: sourceLocation)
    }

    @Test("The seed-compatible async API")
    func asyncAPI() async throws {
        let failed = AsyncSignal()
        let calls = AsyncCounter()
        let task = Task {
            try await retry(maxAttempts: 3) { () async throws -> Int in
                calls.increment()
                failed.fire()
                throw AsyncTestError(id: 1)
            } strategy: { _ in
                .backoff(.constant(Self.backoff))
            }
        }
        try await expectPromptCancellation(after: failed, of: task)
        #expect(calls.value == 1)
    }

    @Test("The async API with limits and an observer")
    func observedAPI() async throws {
        let failed = AsyncSignal()
        let events = AsyncLog<String>()
        let task = Task {
            try await retry(maxAttempts: 3, totalTimeout: .seconds(60)) { attempt -> Int in
                failed.fire()
                throw AsyncTestError(id: attempt.number)
            } strategy: { _ in
                .backoff(.constant(Self.backoff))
            } observer: {
                events.append(asyncEventLine($0))
            }
        }
        try await expectPromptCancellation(after: failed, of: task)
        #expect(events.values.last?.hasPrefix("finished cancelled after 1") == true)
    }

    @Test("The withRetry bridge")
    func bridge() async throws {
        let failed = AsyncSignal()
        let calls = AsyncCounter()
        let task = Task {
            try await withRetry(maxAttempts: 3) { (attempt, done: AttemptCompletion<Int>) in
                calls.increment()
                done(.failure(AsyncTestError(id: attempt.number)))
                failed.fire()
            } strategy: { _ in
                .backoff(.constant(Self.backoff))
            }
        }
        try await expectPromptCancellation(after: failed, of: task)
        #expect(calls.value == 1)
    }

    @Test("The withRetry bridge, cancelled while an attempt is in flight")
    func bridgeDuringAnAttempt() async throws {
        let started = AsyncSignal()
        let hooks = AsyncCounter()
        let pending = Locked<[AttemptCompletion<Int>]>([])  // the work in flight keeps its completion
        let task = Task {
            try await withRetry(maxAttempts: 3, attemptTimeout: Self.backoff) { (_, done: AttemptCompletion<Int>) in
                pending.withLock { $0.append(done) }
                done.onCancel { hooks.increment() }
                started.fire()
            }
        }
        try await expectPromptCancellation(after: started, of: task)
        #expect(hooks.value == 1)
    }
}

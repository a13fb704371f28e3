import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// Held by a cancel hook; when the hook is released, checks that no RetryKit lock is held: its `deinit` asks
/// `done.isCancelled` (which takes the retrier's lock) from another thread and waits up to 5 s for the answer. Under a
/// RetryKit lock the answer cannot come until the `deinit` returns, so it records `false` instead of deadlocking.
private final class LockProbe<Value: Sendable>: Sendable {
    private let done: AttemptCompletion<Value>
    private let answers: Locked<[Bool]>

    init(_ done: AttemptCompletion<Value>, _ answers: Locked<[Bool]>) {
        self.done = done
        self.answers = answers
    }

    deinit {
        let answered = DispatchSemaphore(value: 0)
        let done = self.done
        DispatchQueue.global().async {
            _ = done.isCancelled
            answered.signal()
        }
        let free = answered.wait(timeout: .now() + 60) == .success
        answers.withLock { $0.append(free) }
    }
}

@Suite("A cancel hook that can no longer run is released outside RetryKit's locks", .timeLimit(.minutes(3)))
struct CancelHookReleaseTests {
    private let queue = DispatchQueue(label: "cancel-hook-release-tests")

    /// Registers a hook holding a probe, optionally replaces it by another, then completes the attempt.
    private static func operation(
        _ answers: Locked<[Bool]>, replacing: Bool
    ) -> @Sendable (RetryAttempt, AttemptCompletion<Int>) -> Void {
        { _, done in
            done.onCancel { [probe = LockProbe(done, answers)] in _ = probe }
            if replacing { done.onCancel { [probe = LockProbe(done, answers)] in _ = probe } }
            done(.success(1))
        }
    }

    @Test(
        "callback retrier: completing the attempt, or replacing its hook",
        arguments: [(false, false), (false, true), (true, false), (true, true)])
    func callbackRetrier(timed: Bool, replacing: Bool) {
        let scheduler = VirtualScheduler()
        let answers = Locked<[Bool]>([])
        let results = Locked<[Int]>([])
        retry(
            attemptTimeout: timed ? .seconds(10) : nil, on: queue, scheduler: scheduler,
            operation: Self.operation(answers, replacing: replacing),
            completion: { result, _ in results.withLock { $0.append((try? result.get()) ?? -1) } })
        scheduler.run()
        #expect(results.withLock { $0 } == [1])
        #expect(answers.withLock { $0 } == Array(repeating: true, count: replacing ? 2 : 1))
    }

    @Test(
        "withRetry: completing the attempt, or replacing its hook",
        arguments: [(false, false), (false, true), (true, false), (true, true)])
    func bridge(timed: Bool, replacing: Bool) async throws {
        let answers = Locked<[Bool]>([])
        let operation = Self.operation(answers, replacing: replacing)
        let value = try await withRetry(attemptTimeout: timed ? .seconds(10) : nil, clock: VirtualClock()) {
            (attempt, done: AttemptCompletion<Int>) in operation(attempt, done)
        }
        #expect(value == 1)
        #expect(answers.withLock { $0 } == Array(repeating: true, count: replacing ? 2 : 1))
    }
}

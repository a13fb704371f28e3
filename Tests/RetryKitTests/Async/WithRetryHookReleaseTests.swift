import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// Held by a cancel hook; when the hook is released, checks that the bridge's lock is not held: its `deinit` asks
/// `isCancelled` of a completion of the same `withRetry` call (which takes the bridge's lock) from another thread and
/// waits up to 5 s for the answer. Under the lock the answer cannot come until the `deinit` returns, so it records
/// `false` instead of deadlocking.
private final class BridgeLockProbe: Sendable {
    private let done: AttemptCompletion<Int>
    private let answers: Locked<[Bool]>

    init(_ done: AttemptCompletion<Int>, _ answers: Locked<[Bool]>) {
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
        let free = answered.wait(timeout: .now() + 5) == .success
        answers.withLock { $0.append(free) }
    }
}

/// Issue 24, latent bug 2: an attempt whose completion is released uncalled keeps its cancel hook (a cancellation
/// that arrives as its operation returns still runs it); the next attempt's start lets go of it, and must do so
/// after unlocking, since the hook may hold objects whose `deinit` calls into the same call's bridge.
@Suite("withRetry: a hook left by a released attempt is let go outside the bridge's lock", .timeLimit(.minutes(1)))
struct WithRetryHookReleaseTests {
    /// Attempt 1 fails and its completion is kept; attempt 2 registers a hook holding a probe over attempt 1's
    /// completion, then lets go of its own uncalled (it fails with `completionReleased`); attempt 3 succeeds.
    private static func operation(_ answers: Locked<[Bool]>) -> @Sendable (RetryAttempt, AttemptCompletion<Int>) -> Void
    {
        let first = Locked<AttemptCompletion<Int>?>(nil)
        return { attempt, done in
            switch attempt.number {
            case 1:
                first.withLock { $0 = done }
                done(.failure(AsyncTestError(id: 1)))
            case 2:
                guard let earlier = first.withLock({ $0.take() }) else { return }
                done.onCancel { [probe = BridgeLockProbe(earlier, answers)] in _ = probe }
            default:
                done(.success(attempt.number))
            }
        }
    }

    @Test(
        "The hook's probe gets its answer (observed or not, with or without attempt timeout)",
        arguments: [(false, false), (false, true), (true, false), (true, true)])
    func hookOfAReleasedAttempt(observed: Bool, timed: Bool) async throws {
        let answers = Locked<[Bool]>([])
        let events = Locked<[String]>([])
        let operation = Self.operation(answers)
        let timeout: Duration? = timed ? .seconds(30) : nil
        let value: Int
        if observed {
            value = try await withRetry(maxAttempts: 3, attemptTimeout: timeout, operation: operation) { event in
                if case .attemptFailed(let attempt, let error, _) = event {
                    events.withLock { $0.append("\(attempt.number) \(error)") }
                }
            }
            #expect(events.withLock { $0 }.count == 2)
        } else {
            value = try await withRetry(maxAttempts: 3, attemptTimeout: timeout, operation: operation)
        }
        #expect(value == 3)
        #expect(answers.withLock { $0 } == [true])
    }
}

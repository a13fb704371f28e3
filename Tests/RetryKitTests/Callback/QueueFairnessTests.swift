import Dispatch
import RetryKit
import RetryKitTesting
import Testing

extension CallbackRunnerTests {
    /// A retrier never holds its queue (issue 27, point 3): every attempt, also after a zero delay, starts in a block of
    /// its own, so work enqueued between two attempts runs before the next one.
    @Suite("Callback queue fairness")
    struct QueueFairnessTests {
        /// Runs `start` on a suspended serial queue (so that it can keep the handle before the first attempt), resumes
        /// the queue and returns the completion's result and summary.
        private func run(
            _ queue: DispatchQueue,
            _ start:
                @escaping @Sendable (
                    Locked<RetryHandle<Int>?>, @escaping @Sendable (Result<Int, any Error>, RetrySummary) -> Void
                )
                -> RetryHandle<Int>
        ) async -> (Result<Int, any Error>, RetrySummary) {
            let handle = Locked<RetryHandle<Int>?>(nil)
            return await withCheckedContinuation { continuation in
                queue.suspend()
                let started = start(handle) { result, summary in continuation.resume(returning: (result, summary)) }
                handle.withLock { $0 = started }
                queue.resume()
            }
        }

        @Test func aBlockEnqueuedBetweenAttemptsRunsBeforeTheNextAttempt() async {
            let queue = DispatchQueue(label: "fairness-between")
            let log = Locked<[String]>([])
            let (result, summary) = await run(queue) { _, completion in
                retry(
                    maxAttempts: 3, on: queue,
                    operation: { attempt, done in
                        log.withLock { $0.append("attempt \(attempt.number)") }
                        if attempt.number == 1 { queue.async { log.withLock { $0.append("enqueued before failing") } } }
                        done(.failure(CBError(code: attempt.number)))  // fails at once, before returning
                        if attempt.number == 2 { queue.async { log.withLock { $0.append("enqueued after failing") } } }
                    }, completion: completion)
            }
            #expect(summary.attempts == 3)
            #expect((try? result.get()) == nil)
            #expect(
                log.withLock { $0 } == [
                    "attempt 1", "enqueued before failing", "attempt 2", "enqueued after failing", "attempt 3",
                ])
        }

        @Test func aCancelEnqueuedBetweenAttemptsEndsTheRetrierBeforeTheNextAttempt() async {
            let queue = DispatchQueue(label: "fairness-cancel")
            let calls = CBCounter()
            let (result, summary) = await run(queue) { handle, completion in
                retry(
                    maxAttempts: 100_000, on: queue,
                    operation: { attempt, done in
                        calls.increment()
                        queue.async { handle.withLock { $0 }?.cancel() }
                        done(.failure(CBError(code: attempt.number)))
                    }, completion: completion)
            }
            #expect(calls.count == 1, "the cancel enqueued by attempt 1 runs before attempt 2")
            #expect(summary.reason == .cancelled)
            #expect(summary.attempts == 1)
            #expect(throws: CancellationError.self) { try result.get() }
        }

        @Test func aRetrierOfImmediateFailuresLeavesTheQueueToOtherWork() async {
            // 100,000 attempts that fail at once, with the default (zero-delay) strategy: a block enqueued right after
            // the start runs after the first attempt, not after the last.
            let queue = DispatchQueue(label: "fairness-responsive")
            let seenAt = Locked<Int?>(nil)
            let calls = CBCounter()
            let (_, summary) = await run(queue) { handle, completion in
                let started = retry(
                    maxAttempts: 100_000, on: queue,
                    operation: { (_, done: AttemptCompletion<Int>) in
                        calls.increment()
                        done(.failure(CBError(code: 0)))
                    }, completion: completion)
                queue.async {
                    seenAt.withLock { $0 = calls.count }
                    handle.withLock { $0 }?.cancel()
                }
                return started
            }
            #expect(seenAt.withLock { $0 } == 1, "the block ran between attempts 1 and 2")
            #expect(summary.reason == .cancelled)
            #expect(calls.count == 1)
        }

        @Test @MainActor func theMainQueueStaysResponsive() async {
            // The same on `.main`, from the main actor: an app would freeze if the retrier held the main queue.
            let calls = CBCounter()
            var seenAt: Int?
            let summary: RetrySummary = await withCheckedContinuation { continuation in
                let handle = retry(
                    maxAttempts: 100_000, on: .main,
                    operation: { (_, done: AttemptCompletion<Int>) in
                        calls.increment()
                        done(.failure(CBError(code: 0)))
                    }, completion: { _, summary in continuation.resume(returning: summary) })
                DispatchQueue.main.async {
                    seenAt = calls.count
                    handle.cancel()
                }
            }
            #expect(seenAt == 1, "the main queue ran other work between attempts 1 and 2")
            #expect(summary.reason == .cancelled)
        }
    }
}

import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// The latent defects a review of the old callback runner found (issue 24), each where a trick met an edge. Each test
/// failed (or hung, which the time limit turns into a failure) on the runner they were found in.
@Suite("Runner review defects", .timeLimit(.minutes(1)))
struct RunnerReviewDefectTests {
    /// A value whose `deinit` calls back into the retrier's handle.
    final class Reentrant: Sendable {
        let onDeinit: @Sendable () -> Void
        init(_ onDeinit: @escaping @Sendable () -> Void) { self.onDeinit = onDeinit }
        deinit { onDeinit() }
    }

    /// Defect 1: a result given before the operation returned, whose attempt then became stale (a cancel from the
    /// operation), was released under the runner's lock; a `deinit` of the user's value that touched the handle
    /// deadlocked (Linux) or aborted (Darwin). Now every value of the user's is released after unlocking.
    @Test func aStaleEarlyValueIsReleasedOutsideTheLock() async {
        let queue = DispatchQueue(label: "defect-1")
        let handle = Locked<RetryHandle<Reentrant>?>(nil)
        let deinits = CBCounter()
        let outcome: (Bool, RetrySummary) = await withCheckedContinuation { continuation in
            queue.suspend()
            let started = retry(
                maxAttempts: 3, on: queue,
                operation: { (_, done: AttemptCompletion<Reentrant>) in
                    done(
                        .success(
                            Reentrant {
                                deinits.increment()
                                handle.withLock { $0 }?.cancel()  // takes the runner's lock
                            }))
                    handle.withLock { $0 }?.cancel()  // the early result is now stale
                },
                completion: { result, summary in
                    continuation.resume(returning: ((try? result.get()) == nil, summary))
                })
            handle.withLock { $0 = started }
            queue.resume()
        }
        #expect(outcome.0, "cancelled: no value")
        #expect(outcome.1.reason == .cancelled)
        #expect(await cbWait { deinits.count == 1 }, "the stale value was released")
    }

    /// The same with an error whose `deinit` cancels, for an attempt that failed before its operation returned and was
    /// then abandoned by the observer's cancel.
    @Test func aStaleEarlyErrorIsReleasedOutsideTheLock() async {
        struct ReentrantError: Error { let box: Reentrant }
        let queue = DispatchQueue(label: "defect-1-error")
        let handle = Locked<RetryHandle<Int>?>(nil)
        let deinits = CBCounter()
        let summary: RetrySummary = await withCheckedContinuation { continuation in
            queue.suspend()
            let started = retry(
                maxAttempts: 3, on: queue,
                operation: { (_, done: AttemptCompletion<Int>) in
                    done(
                        .failure(
                            ReentrantError(
                                box: Reentrant {
                                    deinits.increment()
                                    _ = handle.withLock { $0 }?.isFinished
                                    handle.withLock { $0 }?.cancel()
                                })))
                    handle.withLock { $0 }?.cancel()
                },
                completion: { _, summary in continuation.resume(returning: summary) })
            handle.withLock { $0 = started }
            queue.resume()
        }
        #expect(summary.reason == .cancelled)
        #expect(await cbWait { deinits.count == 1 })
    }

    /// Defect 3: without an observer, timer or trials, the runner skipped its "is this attempt still current" check and
    /// called the operation of an attempt that a `cancel()` had already ended (593–759 of 3,000 retriers in the
    /// reproduction). Now the check runs before every call, atomically with marking the operation as called: an
    /// operation entered after `cancel()` returned is one whose attempt had started (under the lock) before the cancel
    /// took effect, and it finds its completion cancelled (its hook runs at once); no attempt starts after `cancel()`
    /// returned. (Its `attemptStarted` event may still be emitted then, before `finished`.)
    @Test func noAttemptStartsAfterCancelReturned() async {
        let count = 3_000
        let queues = (0..<4).map { DispatchQueue(label: "defect-3-\($0)") }
        let canceller = DispatchQueue(label: "defect-3-cancel", attributes: .concurrent)
        let lateLive = CBCounter()  // entered after cancel() returned with a live attempt: the defect
        let lateAbandoned = CBCounter()  // entered after cancel() returned, its attempt already abandoned: allowed
        let completions = CBCounter()
        for index in 0..<count {
            let queue = queues[index % queues.count]
            let cancelReturned = Locked(false)
            let handle = retry(
                maxAttempts: 1_000_000, on: queue,
                operation: { (_, done: AttemptCompletion<Int>) in
                    if cancelReturned.withLock({ $0 }) {
                        if done.isCancelled { lateAbandoned.increment() } else { lateLive.increment() }
                    }
                    done(.failure(CBError(code: 0)))
                },
                completion: { _, _ in completions.increment() })
            let delay = (index * 7919) % 200
            canceller.asyncAfter(deadline: .now() + .microseconds(delay)) {
                handle.cancel()
                cancelReturned.withLock { $0 = true }
            }
        }
        #expect(await cbWait { completions.count == count })
        #expect(lateLive.count == 0, "no live attempt's operation was entered after cancel() returned")
        #expect(completions.count == count)
    }

    /// Defect 5: a pending timer was overwritten in places that relied on every earlier transition having taken it
    /// out. Now the runner keeps at most one timer and never replaces a pending one (an assertion in debug builds):
    /// this drives waits and attempt timeouts through every transition on virtual time and checks, with a scheduler
    /// that counts its pending timers, that at most one is ever pending and none is left at the end.
    @Test func noPendingTimerIsOverwritten() {
        let scheduler = CountingScheduler()
        let queue = DispatchQueue(label: "defect-5")
        let recorder = CBRecorder<Int>()
        let kept = CBKeeper<Int>()
        retry(
            maxAttempts: 6, attemptTimeout: .seconds(2), on: queue, scheduler: scheduler,
            operation: { attempt, done in
                switch attempt.number {
                case 1: kept.keep(done)  // times out
                case 2: done(.failure(CBError(code: 2)))  // fails at once: a backoff timer follows its timeout's
                case 3: scheduler.base.execute(on: queue) { done(.failure(CBError(code: 3))) }  // fails later
                case 4: kept.keep(done)  // times out again
                default: done(.success(attempt.number))
                }
            }, strategy: { _ in .backoff(.constant(.seconds(1))) }, observer: recorder.observer,
            completion: recorder.completion)
        scheduler.base.run()
        #expect(recorder.onlyResult?.cbValue == 5)
        #expect(scheduler.maxPending == 1, "one timer at a time")
        #expect(scheduler.pending == 0, "every timer fired or was cancelled")
    }

    /// Counts timers from scheduling until they fire or are cancelled.
    final class CountingScheduler: RetryScheduler {
        final class Token: RetryCancellable {
            let base: VirtualScheduler.Token
            let owner: CountingScheduler
            let done = Locked(false)
            init(base: VirtualScheduler.Token, owner: CountingScheduler) {
                self.base = base
                self.owner = owner
            }
            func cancel() {
                base.cancel()
                owner.end(self)
            }
        }

        let base = VirtualScheduler()
        private let counts = Locked((pending: 0, max: 0))
        var pending: Int { counts.withLock { $0.pending } }
        var maxPending: Int { counts.withLock { $0.max } }
        var now: Duration { base.now }

        func execute(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) {
            base.execute(on: queue, work)
        }

        func schedule(after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) -> Token {
            let box = Locked<Token?>(nil)
            let token = Token(
                base: base.schedule(after: delay, on: queue) {
                    if let token = box.withLock({ $0 }) { self.end(token) }
                    work()
                }, owner: self)
            box.withLock { $0 = token }
            counts.withLock {
                $0.pending += 1
                $0.max = Swift.max($0.max, $0.pending)
            }
            return token
        }

        func end(_ token: Token) {
            let first = token.done.withLock { done in
                defer { done = true }
                return !done
            }
            if first { counts.withLock { $0.pending -= 1 } }
        }
    }
}

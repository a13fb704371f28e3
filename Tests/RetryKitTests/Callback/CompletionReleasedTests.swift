import Dispatch
import Foundation
import RetryKit
import RetryKitTesting
import Testing

extension CallbackRunnerTests {
    /// An attempt whose every `done` is released without being called fails with
    /// `RetryError.Reason.completionReleased` through the normal path: never a success, never a hang (issue 14.1).
    @Suite("A completion released uncalled fails its attempt")
    struct CompletionReleasedTests {
        let queue = DispatchQueue(label: "completion-released-tests")

        /// The error text every released attempt `n` at time zero carries.
        static func released(_ attempts: Int) -> String {
            "RetryError(the operation released its completion handler without calling it after \(attempts) "
                + "attempt\(attempts == 1 ? "" : "s") in 0.0 seconds)"
        }

        @Test func anOperationThatDropsDoneFailsEachAttemptAndGivesUp() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let calls = CBCounter()
            retry(
                maxAttempts: 3, on: queue, scheduler: scheduler,
                operation: { (_, _: AttemptCompletion<Int>) in calls.increment() },  // forgets `done`
                observer: recorder.observer, completion: recorder.completion)
            scheduler.run()
            #expect(calls.count == 3)
            let error = recorder.onlyResult?.cbError as? RetryError
            #expect(error?.reason == .completionReleased)
            #expect(error?.attempts == 3)
            #expect(recorder.onlySummary == RetrySummary(reason: .exhausted, attempts: 3, elapsed: .zero))
            #expect(
                recorder.events == [
                    "start 1", "fail 1 \(Self.released(1)) retry 0.0 seconds",
                    "start 2", "fail 2 \(Self.released(2)) retry 0.0 seconds",
                    "start 3", "fail 3 \(Self.released(3)) giveUp exhausted",
                    "finished exhausted 3 \(Self.released(3))",
                ])
            #expect(scheduler.pendingCount == 0, "nothing left waiting")
        }

        @Test func withoutAnObserverTheRetrierStillFinishesWithTheError() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            retry(
                maxAttempts: 2, on: queue, scheduler: scheduler,
                operation: { (_, _: AttemptCompletion<Int>) in }, completion: recorder.completion)
            scheduler.run()
            #expect(cbIsRetryError(recorder.onlyResult?.cbError, .completionReleased))
            #expect(recorder.onlySummary?.reason == .exhausted)
            #expect(recorder.onlySummary?.attempts == 2)
        }

        @Test func theStrategyDecidesAsForAnyFailure() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let seen = Locked<[RetryError.Reason?]>([])
            retry(
                maxAttempts: 5, on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    if attempt.number == 3 { done(.success(3)) }  // attempts 1 and 2 drop `done`
                },
                strategy: { error in
                    seen.withLock { $0.append((error as? RetryError)?.reason) }
                    return .backoff(.constant(.seconds(1)))
                }, observer: recorder.observer, completion: recorder.completion)
            scheduler.run()
            #expect(seen.withLock { $0 } == [.completionReleased, .completionReleased])
            #expect(recorder.onlyResult?.cbValue == 3)
            #expect(recorder.onlySummary == RetrySummary(reason: .succeeded, attempts: 3, elapsed: .seconds(2)))

            let stopped = CBRecorder<Int>()
            retry(
                maxAttempts: 5, on: queue, scheduler: scheduler, operation: { (_, _: AttemptCompletion<Int>) in },
                strategy: { error in cbIsRetryError(error, .completionReleased) ? .stop : .backoff(.none) },
                completion: stopped.completion)
            scheduler.run()
            #expect(cbIsRetryError(stopped.onlyResult?.cbError, .completionReleased))
            #expect(stopped.onlySummary == RetrySummary(reason: .stopped, attempts: 1, elapsed: .zero))
        }

        @Test func droppedAfterReturningOnAnotherQueue() async {
            let recorder = CBRecorder<Int>(checking: queue)
            let other = DispatchQueue(label: "completion-released-other")
            retry(
                maxAttempts: 2, on: queue,
                operation: { (_, done: AttemptCompletion<Int>) in
                    other.asyncAfter(deadline: .now() + .milliseconds(5)) { withExtendedLifetime(done) {} }
                }, observer: recorder.observer, completion: recorder.completion)
            #expect(await cbWait { recorder.completionCount == 1 })
            let error = recorder.onlyResult?.cbError as? RetryError
            #expect(error?.reason == .completionReleased)
            #expect(error?.attempts == 2)
            #expect(recorder.onlySummary?.reason == .exhausted)
            #expect(recorder.events.count == 5)  // start, fail, start, fail, finished, and nothing else
            #expect(recorder.events.first == "start 1")
            #expect(recorder.events.last?.hasPrefix("finished exhausted 2 RetryError(the operation released") == true)
            #expect(recorder.offQueue.isEmpty)
            try? await Task.sleep(for: .milliseconds(20))
            #expect(recorder.completionCount == 1, "exactly once")
        }

        @Test func withAnAttemptTimeoutTheReleaseFailsTheAttemptAtOnce() {
            let scheduler = CBRecordingScheduler(VirtualScheduler())
            let recorder = CBRecorder<Int>()
            let hooks = CBCounter()
            retry(
                maxAttempts: 2, attemptTimeout: .seconds(10), on: queue, scheduler: scheduler,
                operation: { (_, done: AttemptCompletion<Int>) in
                    done.onCancel { hooks.increment() }  // released with `done`: the attempt is not cancelled
                }, observer: recorder.observer, completion: recorder.completion)
            scheduler.base.run()
            #expect(cbIsRetryError(recorder.onlyResult?.cbError, .completionReleased))
            #expect(recorder.onlySummary == RetrySummary(reason: .exhausted, attempts: 2, elapsed: .zero))
            #expect(hooks.count == 0)
            #expect(scheduler.liveTokens == 0, "both attempt timers were cancelled and released")
        }

        @Test func aTimedOutAttemptIsNotReportedAgainWhenItsCompletionIsReleased() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let first = Locked<AttemptCompletion<Int>?>(nil)
            let hooks = CBCounter()
            retry(
                maxAttempts: 2, attemptTimeout: .seconds(1), on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    done.onCancel { hooks.increment() }
                    if attempt.number == 1 { first.withLock { $0 = done } } else { done(.success(2)) }
                }, observer: recorder.observer, completion: recorder.completion)
            scheduler.run()
            first.withLock { $0 = nil }  // released after it timed out
            scheduler.run()
            #expect(recorder.onlyResult?.cbValue == 2)
            #expect(hooks.count == 1, "attempt 1 timed out and was cancelled")
            #expect(recorder.events.contains { $0.contains("attempt timed out") })
            #expect(!recorder.events.contains { $0.contains("released") })
        }

        @Test func aCancelledAttemptIsNotReportedWhenItsCompletionIsReleasedLater() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let kept = Locked<AttemptCompletion<Int>?>(nil)
            let handle = retry(
                on: queue, scheduler: scheduler,
                operation: { (_, done: AttemptCompletion<Int>) in kept.withLock { $0 = done } },
                observer: recorder.observer, completion: recorder.completion)
            scheduler.run()
            #expect(recorder.completionCount == 0, "kept: the attempt is still in flight")
            handle.cancel()
            scheduler.run()
            kept.withLock { $0 = nil }  // released after the cancel
            scheduler.run()
            #expect(recorder.onlyResult?.cbError is CancellationError)
            #expect(recorder.events == ["start 1", "finished cancelled 1 CancellationError()"])
        }

        @Test func aCompletionCalledThenReleasedIsNotReported() async {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            retry(
                on: queue, scheduler: scheduler,
                operation: { (_, done: AttemptCompletion<Int>) in
                    let copy = done
                    DispatchQueue.global().async { copy(.success(1)) }
                }, observer: recorder.observer, completion: recorder.completion)
            // Polls without blocking a thread of the cooperative pool: the completion comes from a global queue.
            #expect(await cbPump(scheduler, jumpingTimers: true) { recorder.completionCount > 0 })
            #expect(recorder.onlyResult?.cbValue == 1)
            #expect(recorder.events == ["start 1", "ok 1 1", "finished succeeded 1"])
        }

        @Test func theErrorSaysWhatHappened() {
            let error = RetryError(.completionReleased, attempts: 2, elapsed: .seconds(1))
            #expect(
                RetryError.Reason.completionReleased.explanation
                    == "the operation released its completion handler without calling it")
            #expect(RetryError.Reason.completionReleased.description == "completionReleased")
            #expect(
                error.description
                    == "RetryError(the operation released its completion handler without calling it after 2 attempts "
                    + "in 1.0 seconds)")
            #expect(
                error.errorDescription?.hasPrefix("The operation released its completion handler without calling it.")
                    == true)
            #expect(RetryError.Reason.completionReleased != .missingResult)
        }
    }
}

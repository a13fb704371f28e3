import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// `withRetry` around an operation that releases `done` without calling it: the attempt fails with
/// `RetryError.Reason.completionReleased` (the strategy decides), never a hang (issue 14.1).
@Suite("withRetry: a completion released uncalled fails its attempt", .timeLimit(.minutes(3)))
struct WithRetryCompletionReleasedTests {
    @Test func droppedAtOnceFailsEveryAttemptAndGivesUp() async {
        let calls = Locked(0)
        let events = Locked<[String]>([])
        do {
            let _: Int = try await withRetry(
                maxAttempts: 3, clock: InstantClock(),
                operation: { _, _ in calls.withLock { $0 += 1 } },  // forgets `done`
                observer: { event in
                    if case .attemptFailed(let attempt, let error, _) = event {
                        events.withLock {
                            $0.append("\(attempt.number) \((error as? RetryError)?.reason.description ?? "?")")
                        }
                    }
                })
            Issue.record("a dropped completion must not succeed")
        } catch let error as RetryError {
            #expect(error.reason == .completionReleased)
            #expect(error.attempts == 3)
        } catch {
            Issue.record("unexpected error \(error)")
        }
        #expect(calls.withLock { $0 } == 3)
        #expect(
            events.withLock { $0 } == ["1 completionReleased", "2 completionReleased", "3 completionReleased"])
    }

    @Test func droppedLaterOnAnotherQueueFailsTheAttemptAndTheNextOneSucceeds() async throws {
        let queue = DispatchQueue(label: "with-retry-released")
        let value: Int = try await withRetry(
            maxAttempts: 3, clock: InstantClock(),
            operation: { attempt, done in
                if attempt.number == 1 {
                    queue.async { withExtendedLifetime(done) {} }  // keeps `done` a while, then drops it uncalled
                } else {
                    queue.async { done(.success(attempt.number)) }
                }
            })
        #expect(value == 2)
    }

    @Test func aCalledCompletionIsNotReportedWhenReleased() async throws {
        let value: Int = try await withRetry(
            maxAttempts: 1, clock: InstantClock(), operation: { _, done in done(.success(7)) })
        #expect(value == 7)
    }

    @Test func anAttemptThatTimedOutIsNotReportedAgainWhenItsCompletionIsReleased() async {
        let clock = VirtualClock()
        let kept = Locked<AttemptCompletion<Int>?>(nil)
        let task = Task {
            try await withRetry(
                maxAttempts: 1, attemptTimeout: .seconds(1), clock: clock,
                operation: { _, done in kept.withLock { $0 = done } })
        }
        await clock.waitForSleepers(1)  // the attempt's timer
        await clock.advance(by: .seconds(1))
        let result = await task.result
        #expect((result.failureError as? RetryError)?.reason == .attemptTimedOut)
        kept.withLock { $0 = nil }  // released after the timeout: nothing more happens
    }
}

extension Result {
    fileprivate var failureError: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

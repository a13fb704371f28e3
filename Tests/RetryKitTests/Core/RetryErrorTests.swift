import Dispatch
import Foundation
import RetryKit
import RetryKitTesting
import Testing

/// An error with a description of its own, as a user's error might have.
private struct Offline: LocalizedError {
    var errorDescription: String? { "The network is offline" }
}

/// Records one completion-handler retrier's events and result.
private final class Outcome<Value: Sendable>: Sendable {
    private let state = Locked((events: [RetryEvent<Value>](), results: [(Result<Value, any Error>, RetrySummary)]()))

    var events: [RetryEvent<Value>] { state.withLock { $0.events } }
    var results: [(Result<Value, any Error>, RetrySummary)] { state.withLock { $0.results } }
    var error: (any Error)? {
        guard results.count == 1, case .failure(let error) = results[0].0 else { return nil }
        return error
    }
    var summary: RetrySummary? { results.count == 1 ? results[0].1 : nil }

    var observer: @Sendable (RetryEvent<Value>) -> Void { { event in self.state.withLock { $0.events.append(event) } } }
    var completion: @Sendable (Result<Value, any Error>, RetrySummary) -> Void {
        { result, summary in self.state.withLock { $0.results.append((result, summary)) } }
    }

    /// The reason of the last `attemptFailed(…, next: .giveUp(reason))` event.
    var giveUpReason: RetryError.Reason? {
        for case .attemptFailed(_, _, .giveUp(let reason)) in events.reversed() { return reason }
        return nil
    }
}

@Suite("RetryError and the reasons events and errors share", .timeLimit(.minutes(3)))
struct RetryErrorTests {
    let queue = DispatchQueue(label: "retry-error-tests")

    static let notAuthorized = RetryStopReason("notAuthorized", explanation: "the server refused the credentials")

    // MARK: - One enum

    @Test("Summaries and errors share one reason type, RetryError.Reason")
    func oneEnum() {
        let fromError: RetryError.Reason = RetryError(.budgetExhausted).reason
        let summary = RetrySummary(reason: fromError, attempts: 2, elapsed: .seconds(1))
        #expect(summary.reason == RetryError.Reason.budgetExhausted)
    }

    @Test("Every reason has its own explanation for people and prints as its case name")
    func explanationsAndNames() {
        let all: [RetryError.Reason] = [
            .succeeded, .exhausted, .stopped, .stopped(Self.notAuthorized), .deadlineExceeded, .cancelled,
            .invalidConfiguration("maxAttempts must be at least 1 (got 0)"), .budgetExhausted, .conditionEnded,
            .attemptTimedOut, .missingResult,
        ]
        #expect(Set(all.map(\.explanation)).count == all.count)
        #expect(all.allSatisfy { !$0.explanation.isEmpty && $0.explanation.first?.isLowercase == true })
        #expect(
            all.map(\.description) == [
                "succeeded", "exhausted", "stopped", "stopped(notAuthorized)", "deadlineExceeded", "cancelled",
                "invalidConfiguration", "budgetExhausted", "conditionEnded", "attemptTimedOut", "missingResult",
            ])
        #expect(RetryError.Reason.stopped(Self.notAuthorized).explanation == "the server refused the credentials")
        #expect(
            RetryError.Reason.invalidConfiguration("x < 1").explanation == "the retry configuration is invalid: x < 1")
        #expect(RetryError.Reason.stopped.explanation == "the retry strategy chose to stop")
    }

    @Test("Equality: stop reasons by name, any invalid configuration equals any other; hashing agrees")
    func equality() {
        let detailed = RetryStopReason("notAuthorized", explanation: "status 401 is not retryable")
        #expect(RetryError.Reason.stopped(detailed) == .stopped(Self.notAuthorized))
        #expect(RetryError.Reason.stopped(Self.notAuthorized) != .stopped)
        #expect(RetryError.Reason.stopped(.unspecified) == .stopped)
        #expect(RetryError.Reason.invalidConfiguration("a") == .invalidConfiguration)
        #expect(RetryError.Reason.invalidConfiguration("a") != .deadlineExceeded)
        let set: Set<RetryError.Reason> = [.invalidConfiguration("a"), .invalidConfiguration("b"), .stopped(detailed)]
        #expect(set.count == 2)
        #expect(set.contains(.stopped(Self.notAuthorized)))
        #expect(set.contains(.invalidConfiguration))
    }

    // MARK: - Stop reasons through a runner

    @Test("stop(because:) reaches the summary, the giveUp event and the finished event; plain .stop is unspecified")
    func stopReasonThroughTheRunner() {
        let scheduler = VirtualScheduler()
        let because = Outcome<Int>()
        retry(
            maxAttempts: 5, on: queue, scheduler: scheduler,
            operation: { attempt, done in done(.failure(TestError(attempt.number))) },
            strategy: { error in (error as? TestError)?.id == 2 ? .stop(because: Self.notAuthorized) : .backoff(.none)
            },
            observer: because.observer, completion: because.completion)
        scheduler.run()
        #expect(because.summary?.reason == .stopped(Self.notAuthorized))
        #expect(because.summary?.attempts == 2)
        #expect(because.giveUpReason == .stopped(Self.notAuthorized))
        #expect(because.error as? TestError == TestError(2), "a stop still finishes with the attempt's own error")
        guard case .finished(let summary, _) = because.events.last, case .stopped(let stop) = summary.reason else {
            Issue.record("no finished event with a stop reason: \(because.events)")
            return
        }
        #expect(stop.explanation == "the server refused the credentials")

        let plain = Outcome<Int>()
        retry(
            maxAttempts: 5, on: queue, scheduler: scheduler,
            operation: { attempt, done in done(.failure(TestError(attempt.number))) }, strategy: { _ in .stop },
            observer: plain.observer, completion: plain.completion)
        scheduler.run()
        #expect(plain.summary?.reason == .stopped)
        #expect(plain.summary.map { "\($0.reason)" } == "stopped")
        #expect(because.summary.map { "\($0.reason)" } == "stopped(notAuthorized)")
    }

    @Test("`case .stop` matches every stop, and resolving keeps the reason")
    func stopPatterns() {
        let strategies: [RetryStrategy<ContinuousClock>] = [.stop, .stop(because: Self.notAuthorized)]
        for strategy in strategies {
            guard case .stop = strategy else {
                Issue.record("\(strategy) does not match .stop")
                continue
            }
        }
        let context = RetryDecisionContext(retryIndex: 0, previousDelay: nil)
        #expect(
            context.resolve(RetryStrategy<ContinuousClock>.stop(because: Self.notAuthorized))
                == .stop(Self.notAuthorized))
        #expect(context.resolve(RetryStrategy<ContinuousClock>.stop) == .stop(.unspecified))
    }

    // MARK: - 13.6: errors that lie

    @Test("done(nil, nil) on every attempt: the error says how many attempts ran, and when (issue 13.6)")
    func missingResultCountsTheAttempts() {
        let scheduler = VirtualScheduler()
        let outcome = Outcome<Int>()
        retry(
            maxAttempts: 3, on: queue, scheduler: scheduler,
            operation: { _, done in done(nil, nil) }, strategy: { _ in .backoff(.constant(.seconds(1))) },
            observer: outcome.observer, completion: outcome.completion)
        scheduler.run()
        let error = outcome.error as? RetryError
        #expect(error?.reason == .missingResult)
        #expect(error?.attempts == 3)
        #expect(error?.elapsed == .seconds(2))
        #expect(outcome.summary?.reason == .exhausted)
        #expect(outcome.summary?.attempts == 3)
        #expect(
            error?.description
                == "RetryError(the operation completed with neither a value nor an error after 3 attempts in 2.0 seconds)"
        )
        // Every attempt's error is stamped with its own number.
        let numbers = outcome.events.compactMap { event -> Int? in
            guard case .attemptFailed(let attempt, let error as RetryError, _) = event else { return nil }
            return error.attempts == attempt.number ? attempt.number : nil
        }
        #expect(numbers == [1, 2, 3])
    }

    // MARK: - 13.7: errors that say nothing

    @Test("localizedDescription says the reason, the attempts, the time and the last error (issue 13.7)")
    func localizedDescriptions() {
        let deadline = RetryError(.deadlineExceeded, lastError: Offline(), attempts: 3, elapsed: .milliseconds(2500))
        #expect(
            deadline.localizedDescription
                == "The total timeout expired. 3 attempts ran in 2.5 seconds. Last error: The network is offline.")
        #expect(deadline.errorDescription == deadline.localizedDescription)
        #expect(deadline.failureReason == "The total timeout expired.")
        #expect(
            deadline.description
                == "RetryError(retry deadline exceeded after 3 attempts in 2.5 seconds; last error: Offline())")

        let cases: [(RetryError, String)] = [
            (
                RetryError(.invalidConfiguration("maxAttempts must be at least 1 (got 0)")),
                "The retry configuration is invalid: maxAttempts must be at least 1 (got 0). No attempt ran."
            ),
            (
                RetryError(.budgetExhausted, lastError: TestError(2), attempts: 2, elapsed: .seconds(1)),
                "The shared retry budget refused another retry. 2 attempts ran in 1.0 seconds. Last error: TestError(2)."
            ),
            (
                RetryError(.conditionEnded, lastError: TestError(1), attempts: 1),
                "The retry condition ended while it was false. 1 attempt ran. Last error: TestError(1)."
            ),
            (
                RetryError(.attemptTimedOut, attempts: 2, elapsed: .seconds(4)),
                "An attempt did not complete within the per-attempt timeout. 2 attempts ran in 4.0 seconds."
            ),
            (
                RetryError(.missingResult, attempts: 1, elapsed: .zero),
                "The operation completed with neither a value nor an error. 1 attempt ran in 0.0 seconds."
            ),
            (
                RetryError(.stopped(Self.notAuthorized), lastError: TestError(1), attempts: 1),
                "The server refused the credentials. 1 attempt ran. Last error: TestError(1)."
            ),
        ]
        for (error, expected) in cases {
            #expect(error.localizedDescription == expected)
            #expect((error as any Error).localizedDescription == expected)
        }
    }

    @Test("A real deadline give-up: its localizedDescription, through the async runner")
    func deadlineThroughTheAsyncRunner() async {
        let clock = VirtualClock()
        let task = Task {
            try await retry(maxAttempts: 10, totalTimeout: .seconds(5), clock: clock) { attempt -> Int in
                throw TestError(attempt.number)
            } strategy: { _ in
                .backoff(.constant(.seconds(3)))
            }
        }
        // Time moves only to a backoff's end, never to the 5 s deadline that each attempt races: waking that one while
        // an attempt is about to fail at once would let virtual time outrun it (`run(until:)` cannot tell).
        let driver = Task {
            while !Task.isCancelled {
                await clock.waitForSleepers(1)
                if clock.nextDeadline == VirtualClock.Instant(offset: .seconds(5)) {
                    try? await Task.sleep(for: .microseconds(100))
                    continue
                }
                await clock.wakeNext()
            }
        }
        defer { driver.cancel() }
        do {
            _ = try await task.value
            Issue.record("expected a deadline error")
        } catch {
            #expect(
                error.localizedDescription
                    == "The total timeout expired. 2 attempts ran in 3.0 seconds. Last error: TestError(2).")
        }
    }
}

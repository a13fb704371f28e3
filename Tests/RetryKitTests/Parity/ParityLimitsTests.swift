import RetryKit
import RetryKitTesting
import Testing

/// Issue 12.6, "parity extended": budgets and both timeouts together, run through every style that takes them
/// (callback `retry`, `retryTask`, `handle.value`, `withRetry`, async `retry`, `RetryPolicy.execute` and
/// `executeTask` from callback code, `RetryPolicy.execute` from async code, and for budgets without timeouts the
/// seed-compatible async `retry`), compared as ``ParityTests`` compares them: the same events with the same attempts
/// (numbers, elapsed times), the same waits, the same result, and here also the same tokens left in the budget.
@Suite("Parity of all retry styles: budgets and both timeouts", .timeLimit(.minutes(1)))
struct ParityLimitsTests {
    private let everyStyle = ParityStyle.allCases
    private let timedStyles = ParityStyle.allCases.filter { $0 != .seedAsync }

    private func attempt(_ number: Int, of maxAttempts: Int, at elapsed: Duration) -> RetryAttempt {
        RetryAttempt(number: number, maxAttempts: maxAttempts, elapsed: elapsed)
    }

    // MARK: - Budgets

    @Test("A shared budget that refuses the second retry: budgetExhausted with the last error, the same events")
    func budgetRefusesTheSecondRetry() async {
        var scenario = ParityScenario(maxAttempts: 5, steps: [])
        // 15 tokens, 5 a retry; another retrier sharing the budget has paid for 2 retries: 5 tokens left, one retry.
        scenario.budget = ParityBudget(capacity: 15, retryCost: 5, timeoutRetryCost: 10, retriesByOthers: 2)
        let d = scenario.coreDelays(1)
        let a1 = attempt(1, of: 5, at: .zero)
        let a2 = attempt(2, of: 5, at: d[0])
        let refused = "RetryError(retry budget exhausted after 2 attempts in \(d[0]); last error: TestError(2))"
        let expected = ParityRun(
            log: [
                .started(a1), .failed(a1, error: "TestError(1)", next: .retry(after: d[0])),
                .started(a2), .failed(a2, error: "TestError(2)", next: .giveUp(.budgetExhausted)),
                .finished(RetrySummary(reason: .budgetExhausted, attempts: 2, elapsed: d[0]), error: refused),
                .result("error \(refused)"),
            ],
            waits: [d[0]], tokens: 0)
        await expectParity(
            scenario, expected: expected, styles: everyStyle,
            knownIssues: [
                .seedAsync:
                    "the seed-style retry(maxAttempts:budget:clock:) feeds its state machine a constant now (.zero), so "
                    + "its budgetExhausted RetryError reports the attempts 'in 0.0 seconds' instead of the time they "
                    + "took (elapsed, description and localizedDescription)"
            ])
    }

    @Test("A success refunds the cost of the retry that led to it; a first-try success refunds successRefund")
    func successRefunds() async {
        var scenario = ParityScenario(maxAttempts: 4, steps: [.fail, .fail, .succeed])
        // 30 tokens, 2 retries of another retrier (20 left), 2 of ours (10 left), the success refunds 5: 15.
        scenario.budget = ParityBudget(capacity: 30, retryCost: 5, timeoutRetryCost: 10, retriesByOthers: 2)
        let d = scenario.coreDelays(2)
        let a1 = attempt(1, of: 4, at: .zero)
        let a2 = attempt(2, of: 4, at: d[0])
        let a3 = attempt(3, of: 4, at: d[0] + d[1])
        let expected = ParityRun(
            log: [
                .started(a1), .failed(a1, error: "TestError(1)", next: .retry(after: d[0])),
                .started(a2), .failed(a2, error: "TestError(2)", next: .retry(after: d[1])),
                .started(a3), .succeeded(a3, value: "v3"),
                .finished(RetrySummary(reason: .succeeded, attempts: 3, elapsed: d[0] + d[1]), error: nil),
                .result("value v3"),
            ],
            waits: d, tokens: 15)
        await expectParity(scenario, expected: expected, styles: everyStyle)

        var firstTry = ParityScenario(maxAttempts: 4, steps: [.succeed])
        firstTry.budget = ParityBudget(
            capacity: 30, retryCost: 5, timeoutRetryCost: 10, successRefund: 3, retriesByOthers: 2)
        let a = attempt(1, of: 4, at: .zero)
        let expectedFirstTry = ParityRun(
            log: [
                .started(a), .succeeded(a, value: "v1"),
                .finished(RetrySummary(reason: .succeeded, attempts: 1, elapsed: .zero), error: nil),
                .result("value v1"),
            ],
            waits: [], tokens: 23)
        await expectParity(firstTry, expected: expectedFirstTry, styles: everyStyle)
    }

    @Test("A retry after a timed-out attempt costs timeoutRetryCost; the success refunds what its retry cost")
    func timeoutsAreChargedTimeoutRetryCost() async {
        var scenario = ParityScenario(maxAttempts: 4, attemptTimeout: .seconds(2), steps: [.hang, .fail, .succeed])
        // 100 tokens: 20 for the retry after the timeout, 5 for the one after the failure, 5 back for the success.
        scenario.budget = ParityBudget(capacity: 100, retryCost: 5, timeoutRetryCost: 20)
        let d = scenario.coreDelays(2)
        let a1 = attempt(1, of: 4, at: .zero)
        let a2 = attempt(2, of: 4, at: .seconds(2) + d[0])
        let a3 = attempt(3, of: 4, at: .seconds(2) + d[0] + d[1])
        let expected = ParityRun(
            log: [
                .started(a1),
                .failed(
                    a1, error: "RetryError(attempt timed out after 1 attempt in 2.0 seconds)", next: .retry(after: d[0])
                ),
                .started(a2), .failed(a2, error: "TestError(2)", next: .retry(after: d[1])),
                .started(a3), .succeeded(a3, value: "v3"),
                .finished(
                    RetrySummary(reason: .succeeded, attempts: 3, elapsed: .seconds(2) + d[0] + d[1]), error: nil),
                .result("value v3"),
            ],
            waits: [.seconds(2), d[0], d[1]], tokens: 80)
        await expectParity(scenario, expected: expected, styles: timedStyles)
    }

    @Test("A budget that pays for a plain retry but not for one after a timeout refuses after the timeout")
    func aTimeoutRetryIsRefusedWhereAPlainOneIsNot() async {
        var scenario = ParityScenario(maxAttempts: 4, attemptTimeout: .seconds(2), steps: [.hang, .succeed])
        scenario.budget = ParityBudget(capacity: 15, retryCost: 5, timeoutRetryCost: 20)
        let a1 = attempt(1, of: 4, at: .zero)
        let timedOut = "RetryError(attempt timed out after 1 attempt in 2.0 seconds)"
        let refused =
            "RetryError(retry budget exhausted after 1 attempt in 2.0 seconds; last error: \(timedOut))"
        let expected = ParityRun(
            log: [
                .started(a1), .failed(a1, error: timedOut, next: .giveUp(.budgetExhausted)),
                .finished(RetrySummary(reason: .budgetExhausted, attempts: 1, elapsed: .seconds(2)), error: refused),
                .result("error \(refused)"),
            ],
            waits: [.seconds(2)], tokens: 15)
        await expectParity(scenario, expected: expected, styles: timedStyles)
    }

    // MARK: - Both timeouts

    @Test("An attempt timeout shorter than the remaining total timeout: the attempt's timer fires, the run goes on")
    func attemptTimeoutWithinTheTotalTimeout() async {
        let scenario = ParityScenario(
            maxAttempts: 4, totalTimeout: .seconds(60), attemptTimeout: .seconds(2), steps: [.hang, .hang, .succeed])
        let d = scenario.coreDelays(2)
        let a1 = attempt(1, of: 4, at: .zero)
        let a2 = attempt(2, of: 4, at: .seconds(2) + d[0])
        let a3 = attempt(3, of: 4, at: .seconds(4) + d[0] + d[1])
        let expected = ParityRun(
            log: [
                .started(a1),
                .failed(
                    a1, error: "RetryError(attempt timed out after 1 attempt in 2.0 seconds)", next: .retry(after: d[0])
                ),
                .started(a2),
                .failed(
                    a2, error: "RetryError(attempt timed out after 2 attempts in \(.seconds(4) + d[0]))",
                    next: .retry(after: d[1])),
                .started(a3), .succeeded(a3, value: "v3"),
                .finished(
                    RetrySummary(reason: .succeeded, attempts: 3, elapsed: .seconds(4) + d[0] + d[1]), error: nil),
                .result("value v3"),
            ],
            waits: [.seconds(2), d[0], .seconds(2), d[1]])
        await expectParity(scenario, expected: expected, styles: timedStyles)
    }

    @Test("A total timeout that cuts an attempt's timeout short: deadlineExceeded when the total timeout expires")
    func totalTimeoutCutsAnAttemptTimeoutShort() async {
        var scenario = ParityScenario(maxAttempts: 5, attemptTimeout: .seconds(5), steps: [.fail, .hang])
        let d = scenario.coreDelays(1)
        scenario.totalTimeout = d[0] + .seconds(3)  // attempt 2 would time out at d0 + 5 s
        let a1 = attempt(1, of: 5, at: .zero)
        let a2 = attempt(2, of: 5, at: d[0])
        let end = d[0] + .seconds(3)
        let deadline = "RetryError(retry deadline exceeded after 2 attempts in \(end); last error: TestError(1))"
        let expected = ParityRun(
            log: [
                .started(a1), .failed(a1, error: "TestError(1)", next: .retry(after: d[0])),
                .started(a2),
                .failed(
                    a2, error: "RetryError(attempt timed out after 2 attempts in \(end))",
                    next: .giveUp(.deadlineExceeded)),
                .finished(RetrySummary(reason: .deadlineExceeded, attempts: 2, elapsed: end), error: deadline),
                .result("error \(deadline)"),
            ],
            waits: [d[0], .seconds(3)])
        await expectParity(scenario, expected: expected, styles: timedStyles)
    }

    @Test("With both timeouts, a retry wait that would cross the total deadline gives up at once")
    func aWaitThatWouldCrossTheDeadline() async {
        var scenario = ParityScenario(maxAttempts: 10, attemptTimeout: .seconds(2), steps: [.hang, .fail])
        let d = scenario.coreDelays(2)
        scenario.totalTimeout = .seconds(2) + d[0] + d[1] / 2  // the second wait would end after it
        let a1 = attempt(1, of: 10, at: .zero)
        let a2 = attempt(2, of: 10, at: .seconds(2) + d[0])
        let end = .seconds(2) + d[0]
        let deadline = "RetryError(retry deadline exceeded after 2 attempts in \(end); last error: TestError(2))"
        let expected = ParityRun(
            log: [
                .started(a1),
                .failed(
                    a1, error: "RetryError(attempt timed out after 1 attempt in 2.0 seconds)", next: .retry(after: d[0])
                ),
                .started(a2), .failed(a2, error: "TestError(2)", next: .giveUp(.deadlineExceeded)),
                .finished(RetrySummary(reason: .deadlineExceeded, attempts: 2, elapsed: end), error: deadline),
                .result("error \(deadline)"),
            ],
            waits: [.seconds(2), d[0]])
        await expectParity(scenario, expected: expected, styles: timedStyles)
    }
}

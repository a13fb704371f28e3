import RetryKit
import RetryKitTesting
import Testing

/// Issue 12.6, "parity extended": budgets and both timeouts together, run through every style that takes them
/// (callback `retry`, `retryTask`, `handle.value`, `withRetry`, async `retry`, `RetryPlan.execute` and
/// `executeTask` from callback code, `RetryPlan.execute` from async code, and for budgets without timeouts the
/// seed-compatible async `retry`), compared as ``ParityTests`` compares them: the same events with the same attempts
/// (numbers, elapsed times), the same waits, the same result, and here also the same tokens left in the budget.
@Suite("Parity of all retry styles: budgets and both timeouts", .timeLimit(.minutes(1)))
struct ParityLimitsTests {
    // MARK: - Budgets

    @Test("A shared budget that refuses the second retry: budgetExhausted with the last error, the same events")
    func budgetRefusesTheSecondRetry() async {
        var scenario = ParityScenario(maxAttempts: 5, steps: [])
        // 15 tokens, 5 a retry; another retrier sharing the budget has paid for 2 retries: 5 tokens left, one retry.
        scenario.budget = ParityBudget(capacity: 15, retryCost: 5, timeoutRetryCost: 10, retriesByOthers: 2)
        let d = scenario.coreDelays(1)
        let a2 = attempt(2, of: 5, at: d[0])
        let refused = "RetryError(retry budget exhausted after 2 attempts in \(d[0]); last error: TestError(2))"
        let expected = ParityRun(
            log: .failedAndRetried(d, of: 5) + [
                .started(a2), .failed(a2, error: "TestError(2)", next: .giveUp(.budgetExhausted)),
            ] + .endFailed(.budgetExhausted, attempts: 2, elapsed: d[0], error: refused),
            waits: [d[0]], tokens: 0)
        await expectParity(scenario, expected: expected, styles: ParityStyle.allCases)
    }

    @Test("A success refunds the cost of the retry that led to it; a first-try success refunds successRefund")
    func successRefunds() async {
        var scenario = ParityScenario(maxAttempts: 4, steps: [.fail, .fail, .succeed])
        // 30 tokens, 2 retries of another retrier (20 left), 2 of ours (10 left), the success refunds 5: 15.
        scenario.budget = ParityBudget(capacity: 30, retryCost: 5, timeoutRetryCost: 10, retriesByOthers: 2)
        let d = scenario.coreDelays(2)
        let a3 = attempt(3, of: 4, at: d[0] + d[1])
        let expected = ParityRun(
            log: .failedAndRetried(d, of: 4) + .succeeding(a3),
            waits: d, tokens: 15)
        await expectParity(scenario, expected: expected, styles: ParityStyle.allCases)

        var firstTry = ParityScenario(maxAttempts: 4, steps: [.succeed])
        firstTry.budget = ParityBudget(
            capacity: 30, retryCost: 5, timeoutRetryCost: 10, successRefund: 3, retriesByOthers: 2)
        let a = attempt(1, of: 4, at: .zero)
        let expectedFirstTry = ParityRun(
            log: .succeeding(a),
            waits: [], tokens: 23)
        await expectParity(firstTry, expected: expectedFirstTry, styles: ParityStyle.allCases)
    }

    @Test("A retry after a timed-out attempt costs timeoutRetryCost; the success refunds what its retry cost")
    func timeoutsAreChargedTimeoutRetryCost() async {
        var scenario = ParityScenario(maxAttempts: 4, attemptTimeout: .seconds(2), steps: [.hang, .fail, .succeed])
        // 100 tokens: 20 for the retry after the timeout, 5 for the one after the failure, 5 back for the success.
        scenario.budget = ParityBudget(capacity: 100, retryCost: 5, timeoutRetryCost: 20)
        let d = scenario.coreDelays(2)
        let a2 = attempt(2, of: 4, at: .seconds(2) + d[0])
        let a3 = attempt(3, of: 4, at: .seconds(2) + d[0] + d[1])
        let expected = ParityRun(
            log: .timedOutAndRetried(after: .seconds(2), of: 4, retryAfter: d[0]) + [
                .started(a2), .failed(a2, error: "TestError(2)", next: .retry(after: d[1])),
            ] + .succeeding(a3),
            waits: [.seconds(2), d[0], d[1]], tokens: 80)
        await expectParity(scenario, expected: expected, styles: ParityStyle.timed)
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
            ] + .endFailed(.budgetExhausted, attempts: 1, elapsed: .seconds(2), error: refused),
            waits: [.seconds(2)], tokens: 15)
        await expectParity(scenario, expected: expected, styles: ParityStyle.timed)
    }

    // MARK: - Both timeouts

    @Test("An attempt timeout shorter than the remaining total timeout: the attempt's timer fires, the run goes on")
    func attemptTimeoutWithinTheTotalTimeout() async {
        let scenario = ParityScenario(
            maxAttempts: 4, totalTimeout: .seconds(60), attemptTimeout: .seconds(2), steps: [.hang, .hang, .succeed])
        let d = scenario.coreDelays(2)
        let a2 = attempt(2, of: 4, at: .seconds(2) + d[0])
        let a3 = attempt(3, of: 4, at: .seconds(4) + d[0] + d[1])
        let expected = ParityRun(
            log: .timedOutAndRetried(after: .seconds(2), of: 4, retryAfter: d[0]) + [
                .started(a2),
                .failed(
                    a2, error: "RetryError(attempt timed out after 2 attempts in \(.seconds(4) + d[0]))",
                    next: .retry(after: d[1])),
            ] + .succeeding(a3),
            waits: [.seconds(2), d[0], .seconds(2), d[1]])
        await expectParity(scenario, expected: expected, styles: ParityStyle.timed)
    }

    @Test("A total timeout that cuts an attempt's timeout short: deadlineExceeded when the total timeout expires")
    func totalTimeoutCutsAnAttemptTimeoutShort() async {
        var scenario = ParityScenario(maxAttempts: 5, attemptTimeout: .seconds(5), steps: [.fail, .hang])
        let d = scenario.coreDelays(1)
        scenario.totalTimeout = d[0] + .seconds(3)  // attempt 2 would time out at d0 + 5 s
        let a2 = attempt(2, of: 5, at: d[0])
        let end = d[0] + .seconds(3)
        let deadline = "RetryError(retry deadline exceeded after 2 attempts in \(end); last error: TestError(1))"
        let expected = ParityRun(
            log: .failedAndRetried(d, of: 5) + [
                .started(a2),
                .failed(
                    a2, error: "RetryError(attempt timed out after 2 attempts in \(end))",
                    next: .giveUp(.deadlineExceeded)),
            ] + .endFailed(.deadlineExceeded, attempts: 2, elapsed: end, error: deadline),
            waits: [d[0], .seconds(3)])
        await expectParity(scenario, expected: expected, styles: ParityStyle.timed)
    }

    @Test("With both timeouts, a retry wait that would cross the total deadline gives up at once")
    func aWaitThatWouldCrossTheDeadline() async {
        var scenario = ParityScenario(maxAttempts: 10, attemptTimeout: .seconds(2), steps: [.hang, .fail])
        let d = scenario.coreDelays(2)
        scenario.totalTimeout = .seconds(2) + d[0] + d[1] / 2  // the second wait would end after it
        let a2 = attempt(2, of: 10, at: .seconds(2) + d[0])
        let end = .seconds(2) + d[0]
        let deadline = "RetryError(retry deadline exceeded after 2 attempts in \(end); last error: TestError(2))"
        let expected = ParityRun(
            log: .timedOutAndRetried(after: .seconds(2), of: 10, retryAfter: d[0]) + [
                .started(a2), .failed(a2, error: "TestError(2)", next: .giveUp(.deadlineExceeded)),
            ] + .endFailed(.deadlineExceeded, attempts: 2, elapsed: end, error: deadline),
            waits: [.seconds(2), d[0]])
        await expectParity(scenario, expected: expected, styles: ParityStyle.timed)
    }
}

/// More limits, and the budget's accounting where a run ends without retrying: every style, the same tokens left.
extension ParityLimitsTests {
    @Test("A value delivered after the attempt timed out is ignored: the timeout is the attempt's failure")
    func lateValueAfterAnAttemptTimeout() async {
        let scenario = ParityScenario(
            maxAttempts: 2, attemptTimeout: .seconds(2), steps: [.hangThenLateValue, .fail])
        let d = scenario.coreDelays(1)
        let a2 = attempt(2, of: 2, at: .seconds(2) + d[0])
        let expected = ParityRun(
            log: .timedOutAndRetried(after: .seconds(2), of: 2, retryAfter: d[0]) + [
                .started(a2), .failed(a2, error: "TestError(2)", next: .giveUp(.exhausted)),
            ] + .endFailed(.exhausted, attempts: 2, elapsed: .seconds(2) + d[0], error: "TestError(2)"),
            waits: [.seconds(2), d[0]])
        await expectParity(scenario, expected: expected, styles: ParityStyle.timed)
    }

    @Test("`.stop` pays for no retry; a cancelled wait keeps what its retry paid")
    func budgetWithStopAndCancel() async {
        var stop = ParityScenario(maxAttempts: 5, steps: [], stopOn: 2)
        stop.budget = ParityBudget(capacity: 50, retryCost: 5, timeoutRetryCost: 10)
        let d = stop.coreDelays(2)
        let a2 = attempt(2, of: 5, at: d[0])
        let expectedStop = ParityRun(
            log: .failedAndRetried([d[0]], of: 5) + [
                .started(a2), .failed(a2, error: "TestError(2)", next: .giveUp(.stopped)),
            ] + .endFailed(.stopped, attempts: 2, elapsed: d[0], error: "TestError(2)"),
            waits: [d[0]], tokens: 45)
        await expectParity(stop, expected: expectedStop, styles: ParityStyle.allCases)

        var cancel = ParityScenario(maxAttempts: 5, steps: [], cancel: .duringWait(2))
        cancel.budget = ParityBudget(capacity: 50, retryCost: 5, timeoutRetryCost: 10)
        let expectedCancel = ParityRun(
            log: .failedAndRetried(d, of: 5)
                + .endFailed(.cancelled, attempts: 2, elapsed: d[0] + d[1] / 2, error: "CancellationError()"),
            waits: d, tokens: 40)
        await expectParity(cancel, expected: expectedCancel, styles: ParityStyle.allCases)
    }

    @Test("A retry that the total deadline forbids is not paid for; immediate retries pay like any other")
    func budgetWithDeadlineAndImmediateRetries() async {
        var deadline = ParityScenario(maxAttempts: 10, steps: [])
        let d = deadline.coreDelays(2)
        deadline.totalTimeout = d[0] + d[1] / 2
        deadline.budget = ParityBudget(capacity: 50, retryCost: 5, timeoutRetryCost: 10)
        let a2 = attempt(2, of: 10, at: d[0])
        let exceeded = "RetryError(retry deadline exceeded after 2 attempts in \(d[0]); last error: TestError(2))"
        let expectedDeadline = ParityRun(
            log: .failedAndRetried([d[0]], of: 10) + [
                .started(a2), .failed(a2, error: "TestError(2)", next: .giveUp(.deadlineExceeded)),
            ] + .endFailed(.deadlineExceeded, attempts: 2, elapsed: d[0], error: exceeded),
            waits: [d[0]], tokens: 45)
        await expectParity(deadline, expected: expectedDeadline, styles: ParityStyle.timed)

        var immediate = ParityScenario(maxAttempts: 4, steps: [.fail, .fail, .succeed])
        immediate.immediateRetries = true
        immediate.budget = ParityBudget(capacity: 12, retryCost: 5, timeoutRetryCost: 10, retriesByOthers: 0)
        let i3 = attempt(3, of: 4, at: .zero)
        let expectedImmediate = ParityRun(
            log: .failedAndRetried([.zero, .zero], of: 4) + .succeeding(i3),
            waits: [], tokens: 7)
        await expectParity(immediate, expected: expectedImmediate, styles: ParityStyle.allCases)

        var single = ParityScenario(maxAttempts: 1, steps: [.fail])
        single.budget = ParityBudget(capacity: 12, retryCost: 5, timeoutRetryCost: 10, retriesByOthers: 1)
        let s1 = attempt(1, of: 1, at: .zero)
        let expectedSingle = ParityRun(
            log: [
                .started(s1), .failed(s1, error: "TestError(1)", next: .giveUp(.exhausted)),
            ] + .endFailed(.exhausted, attempts: 1, elapsed: .zero, error: "TestError(1)"),
            waits: [], tokens: 7)
        await expectParity(single, expected: expectedSingle, styles: ParityStyle.allCases)
    }
}

/// Issue 12, "bad input": a timeout of any size behaves the same in every style, rejected or clamped in one place.
extension ParityLimitsTests {
    @Test(
        "A zero attempt timeout or a negative total timeout: invalidConfiguration, no attempt, in every style",
        arguments: [
            (Duration?.none, Duration?.some(.zero), "the per-attempt timeout must be positive (got 0.0 seconds)"),
            (
                Duration?.some(.nanoseconds(-1)), Duration?.none,
                "the total timeout must not be negative (got -1e-09 seconds)"
            ),
        ])
    func invalidTimeouts(total: Duration?, attempt: Duration?, problem: String) async {
        await expectInvalidConfiguration(
            ParityScenario(maxAttempts: 3, totalTimeout: total, attemptTimeout: attempt, steps: [.succeed]),
            problem: problem, styles: ParityStyle.timed)
    }

    @Test("Timeouts of .seconds(Int64.max): clamped to the saturation limit alike in every style")
    func hugeTimeouts() async {
        let limit = BackoffStrategy<ContinuousClock>.saturationLimit
        let timedOut = "RetryError(attempt timed out after 1 attempt in \(limit))"
        let scenario = ParityScenario(maxAttempts: 3, attemptTimeout: .seconds(Int64.max), steps: [.hang, .succeed])
        let d = scenario.coreDelays(1)
        let a1 = attempt(1, of: 3, at: .zero)
        let a2 = attempt(2, of: 3, at: limit + d[0])
        let expected = ParityRun(
            log: [
                .started(a1), .failed(a1, error: timedOut, next: .retry(after: d[0])),
            ] + .succeeding(a2),
            waits: [limit, d[0]])
        await expectParity(scenario, expected: expected, styles: ParityStyle.timed)

        // Both clamped to the same bound: the attempt's timeout is the total deadline, and the run ends there.
        var both = scenario
        both.totalTimeout = .nanoseconds(Int64.max)
        let exceeded = "RetryError(retry deadline exceeded after 1 attempt in \(limit); last error: \(timedOut))"
        let expectedBoth = ParityRun(
            log: [
                .started(a1), .failed(a1, error: timedOut, next: .giveUp(.deadlineExceeded)),
            ] + .endFailed(.deadlineExceeded, attempts: 1, elapsed: limit, error: exceeded),
            waits: [limit])
        await expectParity(both, expected: expectedBoth, styles: ParityStyle.timed)
    }
}

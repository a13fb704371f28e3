import RetryKit
import Testing

extension RetryStateMachine.Action {
    var withdrawal: (budget: RetryBudget, afterTimeout: Bool)? {
        if case .withdraw(let budget, let afterTimeout) = self { return (budget, afterTimeout) }
        return nil
    }
}

/// The machine asks for a budget's withdrawal as an action and waits for the answer; it never touches the budget.
@Suite("RetryStateMachine budget accounting")
struct RetryStateMachineBudgetTests {
    private static let backoff = RetryStrategy<ContinuousClock>.backoff(.constant(.milliseconds(100)))

    /// A machine whose attempt 1 failed with `TestError(1)` at 10 ms, and that has just decided to retry: its action.
    private func decidedRetry(
        _ configuration: RetryConfiguration, strategy: RetryStrategy<ContinuousClock> = backoff
    ) -> (RetryStateMachine, RetryStateMachine.Action) {
        var machine = RetryStateMachine(configuration)
        _ = machine.start(at: .zero)
        let consult = machine.attemptFailed(1, error: TestError(1), at: .milliseconds(10)).consultation
        #expect(consult != nil)
        let action = machine.decide(consult?.context.resolve(strategy) ?? .stop, at: .milliseconds(10))
        return (machine, action)
    }

    @Test func withoutABudgetTheDecisionRetriesAtOnce() {
        let (_, action) = decidedRetry(RetryConfiguration(maxAttempts: 3))
        #expect(action.retryDelay == .milliseconds(100))
        #expect(action.withdrawal == nil)
    }

    @Test func withABudgetTheDecisionAsksForAWithdrawalAndTouchesNothing() {
        let budget = RetryBudget(capacity: 20, retryCost: 5)
        let (machine, action) = decidedRetry(RetryConfiguration(maxAttempts: 3, budget: budget))
        let withdrawal = action.withdrawal
        #expect(withdrawal?.budget === budget)
        #expect(withdrawal?.afterTimeout == false)
        #expect(budget.availableTokens == 20)
        #expect(!machine.isFinished)
        #expect(machine.currentAttempt == nil)
    }

    @Test func aTimedOutAttemptOrAFailureCountedAsATimeoutAsksForTheTimeoutCost() {
        let budget = RetryBudget(capacity: 20, retryCost: 5)
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 3, attemptTimeout: .seconds(1), budget: budget))
        _ = machine.start(at: .zero)
        let consult = machine.attemptTimedOut(1, at: .seconds(1)).consultation
        let action = machine.decide(consult?.context.resolve(Self.backoff) ?? .stop, at: .seconds(1))
        #expect(action.withdrawal?.afterTimeout == true)

        let counted = RetryConfiguration(
            maxAttempts: 3, budget: budget, isTimeout: { ($0 as? TestError)?.id == 1 })
        #expect(decidedRetry(counted).1.withdrawal?.afterTimeout == true)
    }

    @Test func noWithdrawalIsAskedForARetryThatDoesNotHappen() {
        let budget = RetryBudget(capacity: 20, retryCost: 5)
        let (stopped, stop) = decidedRetry(RetryConfiguration(maxAttempts: 3, budget: budget), strategy: .stop)
        #expect(stop.isFinish)
        #expect(stopped.budgetRefund == nil)
        let late = RetryConfiguration(maxAttempts: 3, totalTimeout: .milliseconds(50), budget: budget)
        let (deadline, action) = decidedRetry(late)
        #expect(action.isFinish)
        #expect(deadline.termination?.summary.reason == .deadlineExceeded)
        #expect(budget.availableTokens == 20)
    }

    @Test func aRefusalFinishesWithBudgetExhaustedTheLastErrorAndTheFailedAttempt() throws {
        let budget = RetryBudget(capacity: 20, retryCost: 5)
        var (machine, _) = decidedRetry(RetryConfiguration(maxAttempts: 3, budget: budget))
        #expect(machine.budgetAnswered(nil, at: .milliseconds(10)).isFinish)
        let termination = try #require(machine.termination)
        #expect(termination.summary.reason == .budgetExhausted)
        #expect(termination.summary.attempts == 1)
        #expect(termination.summary.elapsed == .milliseconds(10))
        let error = try #require(termination.error as? RetryError)
        #expect(error.reason == .budgetExhausted)
        #expect(error.lastError as? TestError == TestError(1))
        #expect(error.attempts == 1)
        #expect(error.elapsed == .milliseconds(10))
        #expect(termination.failedAttempt?.attempt.number == 1)
        #expect(termination.failedAttempt?.error as? TestError == TestError(1))
        #expect(
            termination.events(value: Int?.none).map(describe) == [
                "failed 1 TestError(1) give up budgetExhausted",
                "finished budgetExhausted after 1 at 0.01 seconds RetryError(budgetExhausted, last: TestError(1))",
            ])
        #expect(machine.budgetRefund == nil)
    }

    @Test func aPaidRetryGoesAheadAndItsSuccessRefundsWhatItCost() throws {
        let budget = RetryBudget(capacity: 20, retryCost: 5)
        var (machine, _) = decidedRetry(RetryConfiguration(maxAttempts: 3, budget: budget))
        guard case .retry(let delay, let failed, let error) = machine.budgetAnswered(7, at: .milliseconds(10)) else {
            Issue.record("a paid retry does not go ahead")
            return
        }
        #expect(delay == .milliseconds(100))
        #expect(failed.number == 1)
        #expect(error as? TestError == TestError(1))
        #expect(machine.budgetRefund == nil)  // not finished
        let run = try #require(machine.waitElapsed(at: .milliseconds(110)).runAttempt)
        #expect(run.attempt.number == 2)
        #expect(machine.attemptSucceeded(2, at: .milliseconds(120)).isFinish)
        let refund = try #require(machine.budgetRefund)
        #expect(refund.budget === budget)
        #expect(refund.tokens == 7)  // what the budget said it took
        #expect(budget.availableTokens == 20)
    }

    @Test func aFirstTrySuccessRefundsTheSuccessRefundAndNoBudgetNothing() {
        let budget = RetryBudget(capacity: 20, retryCost: 5, successRefund: 2)
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 3, budget: budget))
        _ = machine.start(at: .zero)
        _ = machine.attemptSucceeded(1, at: .zero)
        #expect(machine.budgetRefund?.tokens == 2)
        var plain = RetryStateMachine(RetryConfiguration(maxAttempts: 3))
        _ = plain.start(at: .zero)
        _ = plain.attemptSucceeded(1, at: .zero)
        #expect(plain.budgetRefund == nil)
    }

    @Test func aHintPaidForKeepsTheBackoffChainsPreviousDelay() {
        let budget = RetryBudget(capacity: 20, retryCost: 5)
        var (machine, _) = decidedRetry(
            RetryConfiguration(maxAttempts: 3, budget: budget), strategy: .retryAfter(.seconds(3)))
        #expect(machine.budgetAnswered(5, at: .milliseconds(10)).retryDelay == .seconds(3))
        _ = machine.waitElapsed(at: .seconds(3))
        let consult = machine.attemptFailed(2, error: TestError(2), at: .seconds(4)).consultation
        #expect(consult?.context.retryIndex == 1)
        #expect(consult?.context.previousDelay == nil)
    }

    @Test func aCancelWhileTheWithdrawalIsPendingFinishesAndTheLateAnswerIsIgnored() {
        let budget = RetryBudget(capacity: 20, retryCost: 5)
        var (machine, _) = decidedRetry(RetryConfiguration(maxAttempts: 3, budget: budget))
        #expect(machine.cancel(at: .milliseconds(11)).isFinish)
        #expect(machine.termination?.summary.reason == .cancelled)
        #expect(machine.termination?.summary.attempts == 1)
        #expect(machine.termination?.error is CancellationError)
        #expect(machine.budgetAnswered(5, at: .milliseconds(12)).isNone)
        #expect(machine.budgetAnswered(nil, at: .milliseconds(12)).isNone)
        #expect(machine.termination?.summary.reason == .cancelled)
        #expect(machine.budgetRefund == nil)
    }

    @Test func answersTheMachineIsNotWaitingForAreIgnored() {
        let budget = RetryBudget(capacity: 20, retryCost: 5)
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 3, budget: budget))
        #expect(machine.budgetAnswered(5, at: .zero).isNone)  // idle
        _ = machine.start(at: .zero)
        #expect(machine.budgetAnswered(5, at: .zero).isNone)  // attempting
        #expect(machine.currentAttempt == 1)
        let consult = machine.attemptFailed(1, error: TestError(1), at: .zero).consultation
        #expect(machine.budgetAnswered(5, at: .zero).isNone)  // deciding
        let action = machine.decide(consult?.context.resolve(Self.backoff) ?? .stop, at: .zero)
        #expect(action.withdrawal != nil)
        #expect(machine.decide(.retry(after: .zero), at: .zero).isNone)  // a second decision while paying
        #expect(machine.budgetAnswered(5, at: .zero).retryDelay == .milliseconds(100))
        #expect(machine.budgetAnswered(nil, at: .zero).isNone)  // waiting: a second answer does not refuse
        #expect(machine.waitElapsed(at: .milliseconds(100)).runAttempt?.attempt.number == 2)
        #expect(machine.attemptSucceeded(2, at: .milliseconds(100)).isFinish)
        #expect(machine.budgetAnswered(5, at: .milliseconds(100)).isNone)  // finished
        #expect(machine.budgetRefund?.tokens == 5)
    }
}

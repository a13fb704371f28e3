import Dispatch
import Testing

@testable import RetryKit

@Suite("RetryBudget accounting")
struct RetryBudgetTests {
    @Test func startsFullAndChargesEachRetry() {
        let budget = RetryBudget(capacity: 20, retryCost: 5)
        #expect(budget.availableTokens == 20)
        #expect(budget.withdraw(afterTimeout: false) == 5)
        #expect(budget.availableTokens == 15)
    }

    @Test func refusesOnceTheBucketCannotPay() {
        let budget = RetryBudget(capacity: 12, retryCost: 5)
        #expect(budget.withdraw(afterTimeout: false) == 5)
        #expect(budget.withdraw(afterTimeout: false) == 5)
        #expect(budget.withdraw(afterTimeout: false) == nil)
        #expect(budget.availableTokens == 2)
    }

    @Test func timeoutsCostMore() {
        let budget = RetryBudget(capacity: 30, retryCost: 5, timeoutRetryCost: 10)
        #expect(budget.withdraw(afterTimeout: true) == 10)
        #expect(budget.availableTokens == 20)
    }

    @Test func minBalanceRefusesEarly() {
        let budget = RetryBudget(capacity: 10, retryCost: 1, minBalance: 5)
        var granted = 0
        while budget.withdraw(afterTimeout: false) != nil { granted += 1 }
        #expect(granted == 5)
        #expect(budget.availableTokens == 5)
    }

    @Test func successRefundsThePaidCostOrTheFirstTryRefundNeverBeyondCapacity() {
        let budget = RetryBudget(capacity: 10, retryCost: 4, successRefund: 1)
        let paid = budget.withdraw(afterTimeout: false)
        #expect(budget.availableTokens == 6)
        budget.deposit(refundOf: paid)
        #expect(budget.availableTokens == 10)
        budget.deposit(refundOf: nil)
        #expect(budget.availableTokens == 10)
        _ = budget.withdraw(afterTimeout: false)
        budget.deposit(refundOf: nil)
        #expect(budget.availableTokens == 7)
    }

    @Test(arguments: [(-5, -1, -1, -1, -3), (0, 5, 5, 1, 0), (Int.max, Int.max, Int.max, Int.max, Int.max)])
    func extremeParametersAreValid(capacity: Int, cost: Int, timeoutCost: Int, refund: Int, minimum: Int) {
        let budget = RetryBudget(
            capacity: capacity, retryCost: cost, timeoutRetryCost: timeoutCost, successRefund: refund,
            minBalance: minimum)
        #expect(budget.capacity >= 0 && budget.retryCost >= 0 && budget.minBalance <= budget.capacity)
        for _ in 0..<3 {
            let paid = budget.withdraw(afterTimeout: false)
            budget.deposit(refundOf: paid)
            budget.deposit(refundOf: nil)
        }
        #expect(budget.availableTokens >= 0 && budget.availableTokens <= budget.capacity)
    }

    @Test func concurrentWithdrawalsNeverExceedTheBound() {
        let budget = RetryBudget(capacity: 500, retryCost: 5)
        let granted = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 1_000) { _ in
            if budget.withdraw(afterTimeout: false) != nil { granted.withLock { $0 += 1 } }
        }
        #expect(granted.withLock { $0 } == 100)
        #expect(budget.availableTokens == 0)
    }
}

@Suite("RetryBudget in the state machine")
struct RetryBudgetStateMachineTests {
    struct Boom: Error {}

    /// Drives one retrier whose every attempt fails, with zero delays, until it finishes.
    private func runFailing(_ budget: RetryBudget, maxAttempts: Int = 4) -> (RetryTermination?, retries: Int) {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: maxAttempts, budget: budget))
        var action = machine.start(at: .zero)
        var retries = 0
        while true {
            switch action {
            case .run(let attempt, _):
                action = machine.attemptFailed(attempt.number, error: Boom(), at: .zero)
            case .consultStrategy(let context, _):
                action = machine.decide(context.resolve(RetryStrategy<ContinuousClock>.backoff(.none)), at: .zero)
            case .withdraw(let budget, let afterTimeout):
                action = machine.budgetAnswered(budget.withdraw(afterTimeout: afterTimeout), at: .zero)
            case .retry:
                retries += 1
                action = machine.waitElapsed(at: .zero)
            case .finish:
                return (machine.termination, retries)
            case .none, .awaitCondition, .interrupt, .repeatAfter, .recover, .acquire:
                Issue.record("not an action of a plain retrier: \(action)")
                return (nil, retries)
            }
        }
    }

    @Test func aRefusedRetryFinishesWithBudgetExhaustedAndTheLastError() {
        let budget = RetryBudget(capacity: 5, retryCost: 5)
        let (first, firstRetries) = runFailing(budget)
        #expect(firstRetries == 1)
        #expect(first?.summary.reason == .budgetExhausted)
        let error = first?.error as? RetryError
        #expect(error?.reason == .budgetExhausted)
        #expect(error?.lastError is Boom)
        #expect(error?.attempts == 2)
        let (second, secondRetries) = runFailing(budget)
        #expect(secondRetries == 0)
        #expect(second?.summary.attempts == 1)
    }

    @Test func successRefundsTheRetryThatLedToIt() {
        let budget = RetryBudget(capacity: 20, retryCost: 5)
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 3, budget: budget))
        guard case .run = machine.start(at: .zero) else { Issue.record("no first attempt"); return }
        guard case .consultStrategy(let context, _) = machine.attemptFailed(1, error: Boom(), at: .zero) else {
            Issue.record("strategy not consulted")
            return
        }
        let decided = machine.decide(context.resolve(RetryStrategy<ContinuousClock>.backoff(.none)), at: .zero)
        guard case .withdraw(let asked, afterTimeout: false) = decided else {
            Issue.record("no withdrawal asked for: \(decided)")
            return
        }
        #expect(asked === budget)
        #expect(budget.availableTokens == 20)  // the machine does not touch the budget
        #expect(machine.budgetAnswered(budget.withdraw(afterTimeout: false), at: .zero).retryDelay == .zero)
        #expect(budget.availableTokens == 15)
        _ = machine.waitElapsed(at: .zero)
        #expect(machine.attemptSucceeded(2, at: .zero).isFinish)
        #expect(budget.availableTokens == 15)
        let refund = machine.budgetRefund
        #expect(refund?.budget === budget)
        #expect(refund?.tokens == 5)
        if let refund { refund.budget.deposit(refund.tokens) }
        #expect(budget.availableTokens == 20)
    }

    @Test func anOutageOfAThousandCallersIssuesNoMoreRetriesThanTheBoundThenRecovers() {
        let budget = RetryBudget()  // 500 tokens, 5 per retry: at most 100 retries with no success
        let bound = (budget.capacity - budget.minBalance) / budget.retryCost
        let retries = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 1_000) { _ in
            let (termination, count) = runFailing(budget)
            #expect(termination?.error != nil)
            retries.withLock { $0 += count }
        }
        #expect(retries.withLock { $0 } == bound)
        // The dependency recovers: first attempts are never refused, and successes refill the bucket.
        for _ in 0..<budget.capacity {
            var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 3, budget: budget))
            guard case .run(let attempt, _) = machine.start(at: .zero) else { continue }
            guard case .finish = machine.attemptSucceeded(attempt.number, at: .zero), let done = machine.termination
            else {
                continue
            }
            #expect(done.summary.reason == .succeeded)
            // The runner deposits what the machine says the success refunds.
            if let refund = machine.budgetRefund { refund.budget.deposit(refund.tokens) }
        }
        #expect(budget.availableTokens == budget.capacity)
    }
}

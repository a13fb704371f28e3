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

    @Test func minimumBalanceRefusesEarly() {
        let budget = RetryBudget(capacity: 10, retryCost: 1, minimumBalance: 5)
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
            minimumBalance: minimum)
        #expect(budget.capacity >= 0 && budget.retryCost >= 0 && budget.minimumBalance <= budget.capacity)
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

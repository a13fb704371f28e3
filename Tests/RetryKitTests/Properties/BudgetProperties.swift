import Dispatch
import PropertyTesting
import RetryKit
import RetryKitTesting
import Testing

/// The parameters of a `RetryBudget`: edges of `Int` and small values.
struct BudgetCase: CustomStringConvertible, Sendable {
    var capacity: Int
    var retryCost: Int
    var timeoutRetryCost: Int
    var successRefund: Int
    var minBalance: Int

    static func generate(_ random: inout PropertyRandom) -> BudgetCase {
        BudgetCase(
            capacity: random.int(mostlyIn: 0...60), retryCost: random.int(mostlyIn: 0...12),
            timeoutRetryCost: random.int(mostlyIn: 0...12), successRefund: random.int(mostlyIn: 0...5),
            minBalance: random.int(mostlyIn: 0...30))
    }

    func make() -> RetryBudget {
        RetryBudget(
            capacity: capacity, retryCost: retryCost, timeoutRetryCost: timeoutRetryCost, successRefund: successRefund,
            minBalance: minBalance)
    }

    /// The documented bound on retries with no successes: `(capacity − minBalance) / retryCost`, with the
    /// parameters as the budget normalizes them; `nil` (no bound) for a zero retry cost.
    var bound: Int? {
        let capacity = Swift.max(self.capacity, 0)
        let retryCost = Swift.max(self.retryCost, 0)
        let minBalance = Swift.min(Swift.max(self.minBalance, 0), capacity)
        return retryCost == 0 ? nil : (capacity - minBalance) / retryCost
    }

    var description: String {
        "RetryBudget(capacity: \(capacity), retryCost: \(retryCost), timeoutRetryCost: \(timeoutRetryCost), "
            + "successRefund: \(successRefund), minBalance: \(minBalance))"
    }
}

/// A budget shared by several retriers whose attempts all fail (or time out).
struct SharedBudgetCase: CustomStringConvertible, Sendable {
    var budget: BudgetCase
    var retriers: Int
    var maxAttempts: Int
    var timeouts: Bool

    var description: String {
        "\(budget), \(retriers) retriers × maxAttempts \(maxAttempts)\(timeouts ? ", every attempt times out" : "")"
    }
}

@Suite("Properties: retry budget", .timeLimit(.minutes(3)))
struct BudgetProperties {
    @Test("with no successes, retriers sharing a budget retry at most (capacity − minBalance) / retryCost times")
    func boundWithFailures() {
        checkProperty("budget bound, failures") { random in
            SharedBudgetCase(
                budget: BudgetCase.generate(&random), retriers: Int.random(in: 1...5, using: &random),
                maxAttempts: Int.random(in: 1...25, using: &random), timeouts: false)
        } property: { testCase in
            boundProblems(testCase)
        }
    }

    @Test("the bound holds for retriers run from async code on a VirtualClock")
    func boundAsync() async {
        await checkProperty("budget bound, async") { random in
            SharedBudgetCase(
                budget: BudgetCase.generate(&random), retriers: Int.random(in: 1...5, using: &random),
                maxAttempts: Int.random(in: 1...25, using: &random), timeouts: random.oneIn(2))
        } property: { testCase in
            await asyncBoundProblems(testCase)
        }
    }

    @Test("the bound holds when every attempt times out, whatever timeoutRetryCost is")
    func boundWithTimeouts() {
        checkProperty("budget bound, timeouts") { random in
            SharedBudgetCase(
                budget: BudgetCase.generate(&random), retriers: Int.random(in: 1...5, using: &random),
                maxAttempts: Int.random(in: 1...25, using: &random), timeouts: true)
        } property: { testCase in
            boundProblems(testCase)
        }
    }

    @Test("the bound holds when attempts time out and timeoutRetryCost < retryCost (issue 13.4)")
    func boundWithCheaperTimeouts() {
        checkProperty("budget bound, cheaper timeouts") { random in
            var budget = BudgetCase.generate(&random)
            budget.retryCost = Int.random(in: 2...12, using: &random)
            budget.timeoutRetryCost = Int.random(in: 0..<budget.retryCost, using: &random)
            return SharedBudgetCase(
                budget: budget, retriers: Int.random(in: 1...5, using: &random),
                maxAttempts: Int.random(in: 1...25, using: &random), timeouts: true)
        } property: { testCase in
            boundProblems(testCase)
        }
    }
}

/// Runs the retriers of `testCase` on one `VirtualScheduler` through policies sharing one budget; returns the problems.
private func boundProblems(_ testCase: SharedBudgetCase) -> [String] {
    let budget = testCase.budget.make()
    let scheduler = VirtualScheduler()
    let queue = DispatchQueue(label: "budget")
    let retries = AsyncCounter()
    let completions = AsyncCounter()
    var policy = RetryPlan.noDelay.giveUpAfter(maxAttempts: testCase.maxAttempts).budget(budget)
    if testCase.timeouts { policy = policy.attemptTimeout(.seconds(1)) }
    for _ in 0..<testCase.retriers {
        policy.execute(
            on: queue, scheduler: scheduler,
            operation: { (attempt, done: AttemptCompletion<Int>) in
                if !testCase.timeouts { done(.failure(ScriptedFailure(attempt: attempt.number))) }
            },
            observer: { event in
                if case .attemptFailed(_, _, .retry) = event { retries.increment() }
            },
            completion: { _, _ in completions.increment() })
    }
    scheduler.run()
    var found: [String] = []
    if completions.value != testCase.retriers { found.append("\(completions.value) completions") }
    if let bound = testCase.budget.bound, retries.value > bound {
        found.append("\(retries.value) retries, above the bound \(bound)")
    }
    if budget.availableTokens < 0 { found.append("\(budget.availableTokens) tokens left") }
    return found
}

/// Runs the retriers of `testCase` one after the other from async code on a `VirtualClock`, sharing one budget.
private func asyncBoundProblems(_ testCase: SharedBudgetCase) async -> [String] {
    let budget = testCase.budget.make()
    let clock = VirtualClock()
    let retries = AsyncCounter()
    var policy = RetryPlan.noDelay.giveUpAfter(maxAttempts: testCase.maxAttempts).budget(budget)
    if testCase.timeouts { policy = policy.attemptTimeout(.seconds(1)) }
    var found: [String] = []
    for _ in 0..<testCase.retriers {
        let task = Task { [policy] in
            try await policy.execute(
                clock: clock,
                operation: { (attempt: RetryAttempt) -> Int in
                    if testCase.timeouts { try await clock.sleep(for: .seconds(10)) }
                    throw ScriptedFailure(attempt: attempt.number)
                },
                observer: { event in
                    if case .attemptFailed(_, _, .retry) = event { retries.increment() }
                })
        }
        if (try? await clock.run(until: task)) != nil { found.append("a retrier succeeded") }
    }
    if let bound = testCase.budget.bound, retries.value > bound {
        found.append("\(retries.value) retries, above the bound \(bound)")
    }
    return found
}

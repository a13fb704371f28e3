import Dispatch
import RetryKitTesting
import Testing

@testable import RetryKit

/// The error of a dependency that is down.
private struct Outage: Error {}

/// A simulated dependency shared by every caller: down until `healthy` is set; counts every call.
private final class Dependency: Sendable {
    private let state = Locked((healthy: false, calls: 0))

    var healthy: Bool {
        get { state.withLock { $0.healthy } }
        set { state.withLock { $0.healthy = newValue } }
    }

    var calls: Int { state.withLock { $0.calls } }

    func call() -> Result<Int, any Error> {
        state.withLock { s in
            s.calls += 1
            return s.healthy ? .success(s.calls) : .failure(Outage())
        }
    }
}

/// How one caller's run ended.
private struct Outcome: Sendable {
    let succeeded: Bool
    let reason: RetryError.Reason
    /// Whether a failure carried the dependency's error: the error itself, or as a `RetryError`'s last error.
    let carriesOutage: Bool
    let attempts: Int

    init(_ result: Result<Int, any Error>, _ summary: RetrySummary) {
        switch result {
        case .success:
            succeeded = true
            carriesOutage = false
        case .failure(let error):
            succeeded = false
            carriesOutage = error is Outage || (error as? RetryError)?.lastError is Outage
        }
        reason = summary.reason
        attempts = summary.attempts
    }
}

/// Checks a run of `callers` callers against an always-failing dependency and returns the retries they issued.
private func checkOutage(_ outcomes: [Outcome], calls: Int, callers: Int, budget: RetryBudget) -> Int {
    let bound = (budget.capacity - budget.minBalance) / budget.retryCost
    let retries = calls - callers
    #expect(outcomes.count == callers)
    #expect(retries <= bound, "the budget's documented bound holds")
    // Every token was spent: had any stayed, no caller would have been refused, and every caller would have run out
    // of attempts, which needs far more retries than the budget holds.
    #expect(retries == bound)
    #expect(budget.availableTokens - budget.minBalance < budget.retryCost)
    #expect(outcomes.allSatisfy { !$0.succeeded && $0.carriesOutage })
    #expect(outcomes.allSatisfy { $0.reason == .budgetExhausted || $0.reason == .exhausted })
    let refused = outcomes.filter { $0.reason == .budgetExhausted }
    #expect(refused.count >= callers - bound / 4, "at most bound / 4 callers can have had all 4 retries")
    #expect(outcomes.map(\.attempts).reduce(0, +) == calls)
    return retries
}

@Suite("RetryBudget in a simulated outage, through the real runners", .timeLimit(.minutes(3)))
struct BudgetOutageTests {
    static let callers = 1_000

    @Test("1,000 concurrent completion-handler callers, then recovery")
    func callbackOutageAndRecovery() async {
        let budget = RetryBudget()  // 500 tokens, 5 per retry: at most 100 retries
        let policy = RetryPlan.noDelay.giveUpAfter(maxAttempts: 5).budget(budget)
        let dependency = Dependency()
        let queue = DispatchQueue(label: "outage", attributes: .concurrent)

        func runAll() async -> [Outcome] {
            let outcomes = Locked<[Outcome]>([])
            for _ in 0..<Self.callers {
                policy.execute(
                    on: queue, operation: { _, done in done(dependency.call()) },
                    completion: { result, summary in outcomes.withLock { $0.append(Outcome(result, summary)) } })
            }
            #expect(await cbWait(timeout: .seconds(120)) { outcomes.withLock { $0.count } == Self.callers })
            return outcomes.withLock { $0 }
        }

        let outage = await runAll()
        _ = checkOutage(outage, calls: dependency.calls, callers: Self.callers, budget: budget)

        dependency.healthy = true
        let before = dependency.calls
        let recovered = await runAll()
        #expect(recovered.allSatisfy { $0.succeeded && $0.attempts == 1 })
        #expect(dependency.calls - before == Self.callers)
        #expect(budget.availableTokens == budget.capacity, "first-try successes refill the bucket")

        // Retries are granted again: a caller whose first attempt fails retries.
        let flaky = CBCounter()
        let handle = policy.execute(
            on: queue,
            operation: { (_: RetryAttempt, done: AttemptCompletion<Int>) in
                flaky.increment() == 1 ? done(.failure(Outage())) : done(.success(2))
            }, completion: { _, _ in })
        #expect(await cbWait { handle.isFinished })
        #expect(flaky.count == 2)
    }

    @Test("1,000 completion-handler callers with backoff on virtual time")
    func callbackOutageOnVirtualTime() {
        let budget = RetryBudget(capacity: 300, retryCost: 5, minBalance: 50)  // at most 50 retries
        let policy = RetryPlan.exponentialBackoff(initialDelay: .milliseconds(100), using: PolicyTestRNG(seed: 9))
            .giveUpAfter(maxAttempts: 5).budget(budget)
        let scheduler = VirtualScheduler()
        let dependency = Dependency()
        let outcomes = Locked<[Outcome]>([])
        for _ in 0..<Self.callers {
            policy.execute(
                on: DispatchQueue(label: "caller"), scheduler: scheduler,
                operation: { _, done in done(dependency.call()) },
                completion: { result, summary in outcomes.withLock { $0.append(Outcome(result, summary)) } })
        }
        scheduler.run()
        let retries = checkOutage(
            outcomes.withLock { $0 }, calls: dependency.calls, callers: Self.callers, budget: budget)
        #expect(retries == 50)
        #expect(budget.availableTokens == 50, "the minimum balance is kept")
    }

    @Test("1,000 concurrent async callers, then recovery")
    func asyncOutageAndRecovery() async throws {
        let budget = RetryBudget()
        let policy = RetryPlan.exponentialBackoff().giveUpAfter(maxAttempts: 5).budget(budget)
        let dependency = Dependency()

        func runAll() async -> [Outcome] {
            await withTaskGroup(of: Outcome.self) { group in
                for _ in 0..<Self.callers {
                    group.addTask {
                        let summary = Locked<RetrySummary?>(nil)
                        let result: Result<Int, any Error>
                        do {
                            result = .success(
                                try await policy.execute(clock: InstantClock()) { _ in
                                    try dependency.call().get()
                                } observer: {
                                    if case .finished(let finished, _) = $0 { summary.withLock { $0 = finished } }
                                })
                        } catch {
                            result = .failure(error)
                        }
                        let finished =
                            summary.withLock { $0 } ?? RetrySummary(reason: .cancelled, attempts: -1, elapsed: .zero)
                        return Outcome(result, finished)
                    }
                }
                var outcomes: [Outcome] = []
                for await outcome in group { outcomes.append(outcome) }
                return outcomes
            }
        }

        let outage = await runAll()
        _ = checkOutage(outage, calls: dependency.calls, callers: Self.callers, budget: budget)

        dependency.healthy = true
        let recovered = await runAll()
        #expect(recovered.allSatisfy { $0.succeeded && $0.attempts == 1 })
        #expect(budget.availableTokens == budget.capacity)
    }
}

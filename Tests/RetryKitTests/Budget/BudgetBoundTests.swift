import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// Settings at and around the edges, including `timeoutRetryCost < retryCost`, zeros, negatives and `Int.max`.
private let capacities = [-1, 0, 1, 7, 100, 500, Int.max]
private let costs = [-3, 0, 1, 2, 5, 10, Int.max]
private let balances = [-1, 0, 1, 50, Int.max]

@Suite("RetryBudget: the bound holds for every setting (issue 13.4)")
struct BudgetBoundTests {
    @Test("Without successes, granted retries never exceed maxRetriesWithoutSuccess, whatever times out")
    func boundHoldsForEverySetting() {
        var generator = SeededRandomNumberGenerator(seed: 13)
        var checked = 0
        for capacity in capacities {
            for retryCost in costs {
                for timeoutRetryCost in costs {
                    for minBalance in balances {
                        let budget = RetryBudget(
                            capacity: capacity, retryCost: retryCost, timeoutRetryCost: timeoutRetryCost,
                            minBalance: minBalance)
                        // Every retry after a timeout, none, or a seeded mix.
                        for pattern in 0..<3 {
                            let fresh = RetryBudget(
                                capacity: capacity, retryCost: retryCost, timeoutRetryCost: timeoutRetryCost,
                                minBalance: minBalance)
                            var granted = 0
                            while granted <= 2_000 {
                                let afterTimeout = pattern == 0 || (pattern == 2 && generator.next() % 2 == 0)
                                guard fresh.withdraw(afterTimeout: afterTimeout) != nil else { break }
                                granted += 1
                            }
                            let setting =
                                "capacity \(capacity), retryCost \(retryCost), timeoutRetryCost \(timeoutRetryCost), "
                                + "minBalance \(minBalance), pattern \(pattern)"
                            if let bound = budget.maxRetriesWithoutSuccess {
                                #expect(granted <= bound, "\(setting): \(granted) retries, bound \(bound)")
                                if bound <= 2_000 && pattern == 1 {
                                    #expect(granted == bound, "\(setting): the bound is reached exactly")
                                }
                            } else {
                                #expect(budget.retryCost == 0, "\(setting): only a zero retryCost is unbounded")
                                if pattern == 1 {
                                    #expect(granted > 2_000, "\(setting): free retries are never refused")
                                }
                            }
                            #expect(fresh.availableTokens >= fresh.minBalance)
                            checked += 1
                        }
                    }
                }
            }
        }
        #expect(checked == capacities.count * costs.count * costs.count * balances.count * 3)
    }

    @Test("A timeoutRetryCost below retryCost counts as retryCost; above, it stays")
    func cheapTimeoutsCountAsRetries() {
        let cheap = RetryBudget(capacity: 500, retryCost: 5, timeoutRetryCost: 1)
        #expect(cheap.timeoutRetryCost == 5)
        #expect(cheap.maxRetriesWithoutSuccess == 100)
        #expect(cheap.withdraw(afterTimeout: true) == 5)
        #expect(RetryBudget(retryCost: 5, timeoutRetryCost: 10).timeoutRetryCost == 10)
        #expect(RetryBudget(retryCost: 0, timeoutRetryCost: -4).timeoutRetryCost == 0)
        #expect(RetryBudget(retryCost: 0).maxRetriesWithoutSuccess == nil)
        #expect(RetryBudget().maxRetriesWithoutSuccess == 100)
        #expect(RetryBudget(capacity: 10, retryCost: 3, minBalance: 2).maxRetriesWithoutSuccess == 2)
    }

    @Test("Retriers whose attempts all time out stay within the bound when timeouts are set cheaper than retries")
    func timedOutAttemptsThroughTheRunner() {
        let budget = RetryBudget(capacity: 50, retryCost: 5, timeoutRetryCost: 1)
        let scheduler = VirtualScheduler()
        let queue = DispatchQueue(label: "budget-bound")
        let retries = Locked(0)
        let reasons = Locked<[RetryError.Reason]>([])
        let kept = CBKeeper<Int>()
        for _ in 0..<20 {
            startCallbackRetrier(
                configuration: RetryConfiguration(maxAttempts: 10, attemptTimeout: .seconds(1), budget: budget),
                on: queue, scheduler: scheduler,
                operation: { (_, done: AttemptCompletion<Int>) in kept.keep(done) },  // never completes
                strategy: { _ in .backoff(.none) },
                observer: { event in
                    if case .attemptFailed(_, _, .retry) = event { retries.withLock { $0 += 1 } }
                },
                completion: { _, summary in reasons.withLock { $0.append(summary.reason) } })
        }
        scheduler.run()
        #expect(retries.withLock { $0 } == 10, "(50 − 0) / 5 retries, not 50 at one token each")
        #expect(reasons.withLock { $0.count } == 20)
        #expect(reasons.withLock { $0.allSatisfy { $0 == .budgetExhausted } })
    }
}

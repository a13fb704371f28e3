import Dispatch
import RetryKitTesting
import Testing

@testable import RetryKit

/// A budget that allows two retries while nothing succeeds: 10 tokens, 5 per retry.
private func twoRetryBudget() -> RetryBudget {
    RetryBudget(capacity: 10, retryCost: 5, successRefund: 1)
}

/// An operation's script: fails attempts before `succeedOn`, records the budget's tokens at each attempt.
private final class Script: Sendable {
    let budget: RetryBudget
    let succeedOn: Int
    private let seen = Locked<[Int]>([])

    init(_ budget: RetryBudget, succeedOn: Int) {
        self.budget = budget
        self.succeedOn = succeedOn
    }

    /// The tokens available when each attempt started.
    var tokens: [Int] { seen.withLock { $0 } }

    func attempt(_ attempt: RetryAttempt) -> Result<Int, any Error> {
        seen.withLock { $0.append(budget.availableTokens) }
        return attempt.number >= succeedOn ? .success(attempt.number) : .failure(CBError(code: attempt.number))
    }
}

/// Every free entry point takes `budget:` and charges it through the same core accounting as policies: each retry
/// withdraws from it, a refusal ends the run with `.budgetExhausted`, a success refunds what its retry cost.
@Suite("Budgets on the free entry points", .timeLimit(.minutes(3)))
struct BudgetEntryPointTests {
    let queue = DispatchQueue(label: "budget-entry-point-tests")

    /// Runs a callback entry point on virtual time and returns its result.
    private func settle(_ start: (VirtualScheduler, @escaping @Sendable (Result<Int, any Error>) -> Void) -> Void)
        -> Result<Int, any Error>?
    {
        let scheduler = VirtualScheduler()
        let result = Locked<Result<Int, any Error>?>(nil)
        start(scheduler) { outcome in result.withLock { $0 = outcome } }
        scheduler.run()
        return result.withLock { $0 }
    }

    private func expectRefused(_ result: Result<Int, any Error>?, _ script: Script) {
        guard case .failure(let error as RetryError) = result else {
            Issue.record("expected a RetryError, got \(String(describing: result))")
            return
        }
        #expect(error.reason == .budgetExhausted)
        #expect(error.lastError as? CBError == CBError(code: 3))
        #expect(script.tokens == [10, 5, 0], "each retry paid 5 tokens")
        #expect(script.budget.availableTokens == 0)
    }

    private func expectRefunded(_ result: Result<Int, any Error>?, _ script: Script) {
        #expect(result.flatMap { try? $0.get() } == 2)
        #expect(script.tokens == [10, 5], "the retry paid 5 tokens")
        #expect(script.budget.availableTokens == 10, "the success refunded them")
    }

    /// Checks the budget's accounting for `script`: refunded when it succeeds on the second attempt, refused otherwise.
    private func expectAccounting(_ result: Result<Int, any Error>?, _ script: Script) {
        if script.succeedOn == 2 { expectRefunded(result, script) } else { expectRefused(result, script) }
    }

    /// Runs an async entry point with a script that succeeds on the second attempt and one that would succeed on the
    /// tenth, each on a `VirtualClock` and on the default clock (`onClock` false), and checks the accounting.
    private func expectAsyncAccounting(_ run: (_ script: Script, _ onClock: Bool) async throws -> Int) async {
        for succeedOn in [2, 10] {
            for onClock in [true, false] {
                let script = Script(twoRetryBudget(), succeedOn: succeedOn)
                let result: Result<Int, any Error>
                do {
                    result = .success(try await run(script, onClock))
                } catch {
                    result = .failure(error)
                }
                expectAccounting(result, script)
            }
        }
    }

    @Test func callbackDoneOperationWithSummary() {
        for succeedOn in [2, 10] {
            let script = Script(twoRetryBudget(), succeedOn: succeedOn)
            let result = settle { scheduler, finish in
                retry(maxAttempts: 10, budget: script.budget, on: queue, scheduler: scheduler) { attempt, done in
                    done(script.attempt(attempt))
                } completion: { result, summary in
                    finish(result)
                    #expect(summary.reason == (succeedOn == 2 ? .succeeded : .budgetExhausted))
                }
            }
            expectAccounting(result, script)
        }
    }

    @Test func callbackDoneOperationPlain() {
        for succeedOn in [2, 10] {
            let script = Script(twoRetryBudget(), succeedOn: succeedOn)
            let result = settle { scheduler, finish in
                retry(maxAttempts: 10, budget: script.budget, on: queue, scheduler: scheduler) { attempt, done in
                    done(script.attempt(attempt))
                } completion: { (result: Result<Int, any Error>, _) in
                    finish(result)
                }
            }
            expectAccounting(result, script)
        }
    }

    @Test func callbackAsyncOperation() async {
        for succeedOn in [2, 10] {
            for summarized in [true, false] {
                let script = Script(twoRetryBudget(), succeedOn: succeedOn)
                let result: Result<Int, any Error> = await withCheckedContinuation { continuation in
                    let operation: @Sendable (RetryAttempt) async throws -> Int = { attempt in
                        try script.attempt(attempt).get()
                    }
                    if summarized {
                        retryTask(maxAttempts: 10, budget: script.budget, on: queue, operation: operation) {
                            result, _ in
                            continuation.resume(returning: result)
                        }
                    } else {
                        retryTask(maxAttempts: 10, budget: script.budget, on: queue, operation: operation) {
                            (result: Result<Int, any Error>, _) in continuation.resume(returning: result)
                        }
                    }
                }
                expectAccounting(result, script)
            }
        }
    }

    @Test func asyncObservedRetry() async {
        await expectAsyncAccounting { script, onClock in
            if onClock {
                return try await retry(maxAttempts: 10, budget: script.budget, clock: VirtualClock()) { attempt in
                    try script.attempt(attempt).get()
                }
            }
            return try await retry(maxAttempts: 10, budget: script.budget) { attempt in
                try script.attempt(attempt).get()
            }
        }
    }

    @Test func asyncBasicRetry() async {
        await expectAsyncAccounting { script, onClock in
            let calls = Locked(0)
            let operation: @Sendable () async throws -> Int = {
                let number = calls.withLock { n in
                    n += 1
                    return n
                }
                return try script.attempt(RetryAttempt(number: number, maxAttempts: 10, elapsed: .zero)).get()
            }
            if onClock {
                return try await retry(maxAttempts: 10, budget: script.budget, clock: VirtualClock()) {
                    try await operation()
                }
            }
            return try await retry(maxAttempts: 10, budget: script.budget) { try await operation() }
        }
    }

    @Test func aFirstTrySuccessRefundsTheBasicRetrysBudgetToo() async throws {
        let budget = RetryBudget(capacity: 10, retryCost: 5, successRefund: 1)
        #expect(try await retry(maxAttempts: 10, budget: budget) { 1 } == 1)
        #expect(budget.availableTokens == 10, "already full")
        _ = try? await retry(maxAttempts: 2, budget: budget) { () throws(CBError) -> Int in throw CBError(code: 1) }
        #expect(budget.availableTokens == 5)
        #expect(try await retry(budget: budget) { 1 } == 1)
        #expect(budget.availableTokens == 6, "a first-try success refunds successRefund")
    }

    @Test func withRetryBridge() async {
        await expectAsyncAccounting { script, onClock in
            if onClock {
                return try await withRetry(maxAttempts: 10, budget: script.budget, clock: VirtualClock()) {
                    attempt, done in done(script.attempt(attempt))
                }
            }
            return try await withRetry(maxAttempts: 10, budget: script.budget) { attempt, done in
                done(script.attempt(attempt))
            }
        }
    }

    /// Adding `budget:` keeps the overload and the closure shape: the same call compiles with and without it, and
    /// both pick the observed async overload (the one whose closure takes the attempt).
    @Test func addingABudgetKeepsTheOverload() async throws {
        let budget = RetryBudget()
        let without = try await retry(maxAttempts: 2) { attempt in attempt.number }
        let with = try await retry(maxAttempts: 2, budget: budget) { attempt in attempt.number }
        #expect(without == with)
        let basicWithout = try await retry(maxAttempts: 2) { () async throws -> Int in 3 }
        let basicWith = try await retry(maxAttempts: 2, budget: budget) { () async throws -> Int in 3 }
        #expect(basicWithout == basicWith)
        let bridged = try await withRetry(maxAttempts: 2, budget: budget) { _, done in done(.success(1)) }
        let handle = retry(maxAttempts: 2, budget: budget, on: queue) { _, done in
            done(.success(1))
        } completion: {
            (_: Result<Int, any Error>, _) in
        }
        #expect(try await handle.value == bridged)
    }
}

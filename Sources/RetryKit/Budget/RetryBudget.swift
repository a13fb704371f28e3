/// A token bucket shared by many retriers that limits how many retries they issue together.
///
/// When a dependency fails for everyone, independent retriers multiply the load on it by their attempt count. A
/// shared budget caps that: every retry spends tokens, every success puts some back, and when the bucket cannot pay for
/// a retry the retrier gives up at once with ``RetryError/Reason-swift.enum/budgetExhausted``, carrying the operation's
/// last error. First attempts are never refused: the budget limits retries, not traffic.
///
/// The accounting follows the retry quota of the AWS SDKs, with gRPC's throttling idea of refusing before the bucket
/// is empty available through `minBalance`:
///
/// - the bucket starts full, at `capacity` tokens;
/// - a retry costs `retryCost` tokens (`timeoutRetryCost` when the failed attempt timed out, never less than
///   `retryCost`) and is refused if paying would leave fewer than `minBalance` tokens;
/// - a success refunds the cost of the retry that led to it, or `successRefund` tokens for a first-try success, never
///   beyond `capacity`.
///
/// **Bound.** With no successes at all, the retriers sharing a budget issue at most
/// `(capacity − minBalance) / retryCost` retries in total (rounded down): 100 with the defaults, however many
/// retriers share it and however many of their attempts time out (``maxRetriesWithoutSuccess``). The bound holds
/// for every setting: a `timeoutRetryCost` below `retryCost` counts as `retryCost`, because a retry after a timeout
/// loads the dependency at least as much as any other. Only a zero `retryCost` leaves retries unbounded, as it says.
/// Once operations succeed again, the bucket refills by at least `successRefund` per success.
///
/// `RetryBudget` is a class: share one instance between the retriers, policies and HTTP clients that call the same
/// dependency. It is thread-safe.
public final class RetryBudget: Sendable {
    /// The tokens the bucket holds when full.
    package let capacity: Int
    /// The tokens a retry costs.
    package let retryCost: Int
    /// The tokens a retry after a timed-out attempt costs: never less than ``retryCost``.
    package let timeoutRetryCost: Int
    /// The tokens a first-try success refunds.
    package let successRefund: Int
    /// A retry is refused if paying for it would leave fewer tokens than this.
    package let minBalance: Int

    private let tokens: Locked<Int>

    /// Creates a full budget.
    ///
    /// Negative values count as zero, `minBalance` is capped at `capacity`, and a `timeoutRetryCost` below
    /// `retryCost` counts as `retryCost` (so that timeouts cannot break the bound), so any combination is valid: a
    /// zero `capacity` refuses every retry; a zero `retryCost` (with a zero `timeoutRetryCost`) never refuses one.
    ///
    /// - Parameters:
    ///   - capacity: The tokens the bucket holds when full. `500` by default (as in the AWS SDKs).
    ///   - retryCost: The tokens a retry costs. `5` by default.
    ///   - timeoutRetryCost: The tokens a retry after a timed-out attempt costs; values below `retryCost` count as
    ///     `retryCost`. `10` by default.
    ///   - successRefund: The tokens a first-try success refunds. `1` by default.
    ///   - minBalance: Refuse retries that would leave fewer tokens than this. `0` by default.
    public init(
        capacity: Int = 500,
        retryCost: Int = 5,
        timeoutRetryCost: Int = 10,
        successRefund: Int = 1,
        minBalance: Int = 0
    ) {
        self.capacity = Swift.max(capacity, 0)
        self.retryCost = Swift.max(retryCost, 0)
        self.timeoutRetryCost = Swift.max(timeoutRetryCost, self.retryCost)
        self.successRefund = Swift.max(successRefund, 0)
        self.minBalance = Swift.min(Swift.max(minBalance, 0), self.capacity)
        self.tokens = Locked(self.capacity)
    }

    /// The most retries the retriers sharing this budget issue in total while no operation succeeds, starting from a
    /// full bucket: `(capacity − minBalance) / retryCost`, rounded down; `nil` (unbounded) when `retryCost` is 0.
    ///
    /// Retries after timed-out attempts count too: they cost at least `retryCost`.
    public var maxRetriesWithoutSuccess: Int? {
        retryCost == 0 ? nil : (capacity - minBalance) / retryCost  // minBalance ≤ capacity: no overflow
    }

    /// The tokens in the bucket now.
    public var availableTokens: Int { tokens.withLock { $0 } }

    /// Pays for one retry if the bucket allows it.
    ///
    /// - Parameter afterTimeout: Whether the failed attempt timed out (costs ``timeoutRetryCost``).
    /// - Returns: The tokens paid, or `nil` if the retry is refused.
    @usableFromInline
    package func withdraw(afterTimeout: Bool) -> Int? {
        let cost = afterTimeout ? timeoutRetryCost : retryCost
        return tokens.withLock { balance in
            // balance ≥ minBalance ≥ 0 and cost ≥ 0: the subtraction cannot overflow.
            guard balance - cost >= minBalance else { return nil }
            balance -= cost
            return cost
        }
    }

    /// Records a success: refunds `paid` tokens (what the retry that led to the success cost), or
    /// ``successRefund`` for a first-try success.
    package func deposit(refundOf paid: Int?) {
        deposit(paid ?? successRefund)
    }

    /// Puts `refund` tokens back, up to the capacity: what ``RetryStateMachine/budgetRefund`` says a success gives
    /// back.
    @usableFromInline
    package func deposit(_ refund: Int) {
        tokens.withLock { balance in
            balance = refund >= capacity - balance ? capacity : balance + refund
        }
    }
}

extension RetryStateMachine {
    /// For runners: ``decide(_:at:)``, with the withdrawal it may ask for (``Action/withdraw(from:afterTimeout:)``)
    /// carried out at once and answered at the same `now` (``budgetAnswered(_:at:)``). The withdrawal is the budget's
    /// own thread-safe code and runs no user code, so a runner may do it wherever it feeds the decision, even under its
    /// lock. Without a budget this is `decide` and one comparison.
    @inlinable @inline(__always)
    package mutating func decidePaying(_ decision: RetryDecision, at now: Duration) -> Action {
        let action = decide(decision, at: now)
        guard case .withdraw(let budget, let afterTimeout) = action else { return action }
        return budgetAnswered(budget.withdraw(afterTimeout: afterTimeout), at: now)
    }

    /// For runners: ``attemptSucceeded(_:at:)``, with the refund of a success that finished the retrier (or paused a
    /// repeating run) deposited into the budget (``budgetRefund``). Without a budget this is `attemptSucceeded` and
    /// one comparison.
    @inlinable @inline(__always)
    package mutating func attemptSucceededRefunding(_ number: Int, at now: Duration) -> Action {
        let action = attemptSucceeded(number, at: now)
        // The budget is checked inline first: without one, a success costs no call.
        if configuration.budget != nil, let refund = budgetRefund {
            switch action {
            case .finish, .repeatAfter: refund.budget.deposit(refund.tokens)
            case .run, .consultStrategy, .withdraw, .retry, .recover, .acquire, .awaitCondition, .interrupt, .none:
                break
            }
        }
        return action
    }
}

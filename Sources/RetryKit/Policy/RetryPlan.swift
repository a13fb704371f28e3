/// A reusable retry configuration: how long to wait between attempts, when to give up, and when attempts may run.
///
/// A policy is a "cold retrier": a plain value that runs nothing by itself. Build it once from a leading-dot factory
/// and chainable modifiers, then run any number of jobs with it, independently, in either style:
///
/// ```swift
/// let policy = RetryPlan.exponentialBackoff()           // 0.5 s · 2ˣ, capped at 60 s, full jitter
///     .onlyWhen(signedIn)                               // attempts run only while the condition holds
///     .giveUpAfter(maxAttempts: 10)
///     .giveUpAfter(totalTimeout: .seconds(30))
///     .giveUpOnErrors { $0 is AuthError }
///     .budget(sharedBudget)                             // one RetryBudget for every caller of this service
///
/// let user = try await policy.execute { attempt in try await api.user(id) }     // async
/// let handle = policy.execute(on: .main) { attempt, done in                       // completion handler
///     legacyLoad(id) { value, error in done(value, error) }
/// } completion: { result in show(result) }
///
/// for try await feed in policy.repeating(withDelay: .seconds(30)).values({ _ in try await api.feed() }) {
///     render(feed)                                                                 // polling
/// }
/// ```
///
/// Every run uses the one RetryKit engine: the limits and the budget become the runner's configuration, the give-up
/// predicates become ``RetryStrategy/stop`` answers of its strategy, and every delay comes from a
/// ``BackoffStrategy``. A policy whose values are invalid (`giveUpAfter(maxAttempts: 0)`, a negative timeout) does not
/// trap: every run finishes at once with ``RetryError`` (``RetryError/Reason-swift.enum/invalidConfiguration(_:)``)
/// through the usual completion or `throw`, without running an attempt.
///
/// Without ``giveUpAfter(maxAttempts:)`` or ``giveUpAfter(totalTimeout:)`` a policy retries until an attempt succeeds, a
/// predicate gives up, the budget refuses, or the run is cancelled.
///
/// The type is named `RetryPlan`, not `RetryPolicy`, so that a file importing RetryKit beside Alamofire (whose
/// `RetryPolicy` is a request interceptor) can name both without qualifying them.
public struct RetryPlan: Sendable {
    /// Limits and budget, handed to the runners as they are; the core validates them.
    package var configuration: RetryConfiguration
    /// The strategy for a failure that the give-up predicates let through.
    let base: @Sendable (any Error) -> RetryStrategy<ContinuousClock>
    /// Errors to give up on at once; any match stops.
    let giveUpPredicates: [@Sendable (any Error) -> Bool]
    /// The condition attempts wait for, if any (several chained ``onlyWhen(_:)`` conditions
    /// combined into one).
    package let condition: RetryCondition?

    init(
        base: @escaping @Sendable (any Error) -> RetryStrategy<ContinuousClock>,
        configuration: RetryConfiguration = RetryConfiguration(maxAttempts: .max),
        giveUpPredicates: [@Sendable (any Error) -> Bool] = [],
        condition: RetryCondition? = nil
    ) {
        self.base = base
        self.configuration = configuration
        self.giveUpPredicates = giveUpPredicates
        self.condition = condition
    }

    // MARK: - Factories

    /// Exponential backoff with full jitter by default: the recommended policy for calling a backend.
    ///
    /// The delay before retry `x` (0-based) is `d(x) = min(initialDelay · multiplierˣ, maxDelay)`, randomized as
    /// `jitter` says: with the defaults, a delay drawn from `[0, 0.5 s)`, `[0, 1 s)`, `[0, 2 s)`, … up to `[0, 60 s)`.
    /// Growth saturates instead of overflowing, so a policy that retries for days never traps.
    ///
    /// - Parameters:
    ///   - initialDelay: `d(0)`. Negative counts as zero. 0.5 s by default.
    ///   - multiplier: The growth factor. NaN or negative counts as 1. 2 by default.
    ///   - maxDelay: The cap, applied before any jitter. 60 s by default.
    ///   - jitter: How delays are randomized. ``RetryJitter/full`` by default.
    ///   - generator: The source of randomness; pass a seeded generator for reproducible delays. It is shared by every
    ///     run of the policy and advances once per draw.
    public static func exponentialBackoff<G: RandomNumberGenerator>(
        initialDelay: Duration = .milliseconds(500),
        multiplier: Double = 2,
        maxDelay: Duration = .seconds(60),
        jitter: RetryJitter = .full,
        using generator: G = SystemRandomNumberGenerator()
    ) -> RetryPlan {
        let capped = BackoffStrategy<ContinuousClock>.exponential(a: initialDelay, b: multiplier).max(maxDelay)
        return backoff(jitter.applied(to: capped, first: initialDelay, cap: maxDelay, using: generator))
    }

    /// The same delay before every retry.
    ///
    /// - Parameter delay: The delay. Negative counts as zero.
    public static func constantDelay(_ delay: Duration) -> RetryPlan {
        backoff(.constant(delay))
    }

    /// Retries at once, without waiting.
    public static var noDelay: RetryPlan { backoff(.none) }

    /// A policy that waits as `strategy` says before every retry: any curve, cap and jitter of ``BackoffStrategy``,
    /// including ``BackoffStrategy/custom(_:)``.
    ///
    /// The clock parameter of the strategy is only a tag: the policy runs on any clock and on any scheduler.
    public static func backoff(_ strategy: BackoffStrategy<ContinuousClock>) -> RetryPlan {
        RetryPlan(base: { _ in .backoff(strategy) })
    }

    /// A homemade policy: `decide` answers every failure that has attempts left with a ``RetryStrategy``.
    ///
    /// ```swift
    /// let policy = RetryPlan.strategy { error in
    ///     if let hint = (error as? Throttled)?.retryAfter { return .retryAfter(hint) }
    ///     return .backoff(.exponential(a: .milliseconds(200), b: 2).max(.seconds(10)).jitter())
    /// }
    /// ```
    ///
    /// The modifiers apply to it like to any policy. `decide` runs on the run's queue (callback style) or in the
    /// run's isolation (async style), never while RetryKit holds a lock. Keep it free of state: every run of the
    /// policy calls the same closure.
    public static func strategy(
        _ decide: @escaping @Sendable (any Error) -> RetryStrategy<ContinuousClock>
    ) -> RetryPlan {
        RetryPlan(base: decide)
    }

    // MARK: - Modifiers

    /// Gives up once `maxAttempts` attempts (including the first) have failed.
    ///
    /// Applied twice, the smaller limit wins. A limit below 1 makes every run finish at once with ``RetryError``
    /// (invalid configuration). With ``onlyWhen(_:)`` and when repeating, the limit applies to each
    /// trial: it starts afresh whenever the condition turns true again or after a success.
    public func giveUpAfter(maxAttempts: Int) -> RetryPlan {
        var copy = self
        copy.configuration.maxAttempts = Swift.min(configuration.maxAttempts, maxAttempts)
        return copy
    }

    /// Gives up once `totalTimeout` has passed since the run (or the current trial) started: a wait that would end after
    /// it is not started, and an attempt still running then is abandoned. The run finishes with ``RetryError``
    /// (``RetryError/Reason-swift.enum/deadlineExceeded``), keeping the last error.
    ///
    /// Applied twice, the shorter timeout wins. A negative timeout makes every run finish at once with ``RetryError``
    /// (invalid configuration).
    /// Longer than ``BackoffStrategy/saturationLimit`` (about 31.7 years) counts as that limit.
    public func giveUpAfter(totalTimeout: Duration) -> RetryPlan {
        var copy = self
        copy.configuration.totalTimeout =
            configuration.totalTimeout.map { Swift.min($0, totalTimeout) } ?? totalTimeout
        return copy
    }

    /// Gives up at once, with the attempt's own error, when `predicate` returns `true` for it.
    ///
    /// Chainable: the run gives up when any of the predicates matches. Predicates run where the strategy runs (the
    /// run's queue or isolation) and see every failure that still has attempts left, including
    /// ``RetryError/Reason-swift.enum/attemptTimedOut`` errors.
    public func giveUpOnErrors(_ predicate: @escaping @Sendable (any Error) -> Bool) -> RetryPlan {
        RetryPlan(
            base: base, configuration: configuration, giveUpPredicates: giveUpPredicates + [predicate],
            condition: condition)
    }

    /// Fails an attempt that has not completed within `timeout` with ``RetryError``
    /// (``RetryError/Reason-swift.enum/attemptTimedOut``) and cancels it; the policy then decides as for any failure.
    ///
    /// Applied twice, the shorter timeout wins. Zero or negative makes every run finish at once with ``RetryError``
    /// (invalid configuration).
    /// Longer than ``BackoffStrategy/saturationLimit`` (about 31.7 years) counts as that limit.
    public func attemptTimeout(_ timeout: Duration) -> RetryPlan {
        var copy = self
        copy.configuration.attemptTimeout = configuration.attemptTimeout.map { Swift.min($0, timeout) } ?? timeout
        return copy
    }

    /// Makes every retry of every run pay into `budget`, shared with everything else that uses it.
    ///
    /// When the budget refuses a retry, the run finishes with ``RetryError``
    /// (``RetryError/Reason-swift.enum/budgetExhausted``) carrying the last error. Replaces an earlier budget.
    public func budget(_ budget: RetryBudget) -> RetryPlan {
        var copy = self
        copy.configuration.budget = budget
        return copy
    }

    /// Runs attempts only while `condition` is `true`.
    ///
    /// - While the condition is `false` (or has no value yet) a run waits, burning no attempt.
    /// - When it turns `true`, the policy starts afresh: a new trial, with attempt numbers, `maxAttempts` and the
    ///   total timeout counted from there.
    /// - When it turns `false` during a wait or an attempt, that trial is abandoned: the timer is cancelled, the
    ///   attempt is cancelled (its cancel hook runs, or its task is cancelled) and its result ignored. Observers see
    ///   the interrupted attempt fail, like in SwiftRetrier: `attemptFailed(attempt, error: CancellationError(),
    ///   next: .giveUp(.cancelled))` (unless the attempt still delivers its own result first).
    /// - When the condition ends while `false` (or without ever having a value), the run finishes with
    ///   ``RetryError`` (``RetryError/Reason-swift.enum/conditionEnded``), carrying the last error of any attempt.
    ///   A condition that ends while `true` stays `true`.
    ///
    /// Chainable, like SwiftRetrier: with several conditions, attempts run only while all of them are `true`, and the
    /// run finishes with ``RetryError/Reason-swift.enum/conditionEnded`` as soon as any of them ends while not
    /// `true`.
    public func onlyWhen(_ condition: RetryCondition) -> RetryPlan {
        let combined = self.condition.map { RetryCondition.all([$0, condition]) } ?? condition
        return RetryPlan(
            base: base, configuration: configuration, giveUpPredicates: giveUpPredicates, condition: combined)
    }

    /// A policy that polls: after each success it waits `delay`, then runs the job again, retrying failures with this
    /// policy, which starts afresh after each success.
    ///
    /// - Parameter delay: The wait after each success, measured from the success. Negative counts as zero, longer
    ///   than ``BackoffStrategy/saturationLimit`` (about 31.7 years) as that limit.
    public func repeating(withDelay delay: Duration) -> RepeatingRetryPlan {
        RepeatingRetryPlan(policy: self, delay: DelayMath.clamp(delay))
    }

    // MARK: - Inspection

    /// The most attempts per run (or per trial), including the first; `Int.max` unless limited.
    package var maxAttempts: Int { configuration.maxAttempts }
    /// The time a run (or trial) may take, if limited.
    package var totalTimeout: Duration? { configuration.totalTimeout }
    /// The time one attempt may take, if limited.
    package var attemptTimeout: Duration? { configuration.attemptTimeout }
    /// The budget retries pay into, if any.
    package var budget: RetryBudget? { configuration.budget }

    /// What the policy answers for `error` after a failed attempt that has attempts left: ``RetryStrategy/stop`` if a
    /// give-up predicate matches, otherwise the policy's strategy.
    public func decision(for error: any Error) -> RetryStrategy<ContinuousClock> {
        for predicate in giveUpPredicates where predicate(error) { return .stop }
        return base(error)
    }

    /// The strategy closure handed to the runners, for a clock of type `C`.
    func strategy<C: Clock>(on clock: C.Type) -> @Sendable (any Error) -> RetryStrategy<C>
    where C.Duration == Duration {
        let policy = self
        return { error in policy.decision(for: error).retagged() }
    }

    /// The condition to wait for, unless the configuration is invalid: then runs go straight to the core, which fails
    /// them at once.
    var effectiveCondition: RetryCondition? {
        configuration.problem == nil ? condition : nil
    }
}

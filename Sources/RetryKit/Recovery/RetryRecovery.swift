/// How often a ``RetryRecovery`` may refresh: at most ``maximumRefreshes`` refreshes starting within any
/// ``interval``.
///
/// A credential that the server rejects again right after every refresh (a clock that is off, a revoked account, a
/// server that rejects every token) would otherwise refresh in a loop. When a retrier needs a refresh that the window
/// does not allow, it gives up with ``RetryError`` ``RetryError/Reason-swift.enum/recoveryLimitExceeded``; the window
/// allows the next refresh once the oldest one counted is `interval` old. The defaults are Alamofire's
/// (`AuthenticationInterceptor.RefreshWindow`): 5 refreshes in 30 seconds.
public struct RecoveryWindow: Sendable, Hashable {
    /// The span refreshes are counted over. Negative counts as zero (no refresh is ever refused).
    public let interval: Duration
    /// The most refreshes that may start within ``interval``. Negative counts as zero (every refresh is refused).
    public let maximumRefreshes: Int

    /// A window of `maximumRefreshes` refreshes per `interval`.
    ///
    /// - Parameters:
    ///   - interval: The span refreshes are counted over. 30 seconds by default; negative counts as zero.
    ///   - maximumRefreshes: The most refreshes that may start within `interval`. 5 by default; negative counts as
    ///     zero.
    public init(interval: Duration = .seconds(30), maximumRefreshes: Int = 5) {
        self.interval = Swift.max(interval, .zero)
        self.maximumRefreshes = Swift.max(maximumRefreshes, 0)
    }

    /// Whether a refresh may start at `now`, after the refreshes that started at `starts` (oldest first).
    func allows(after starts: [Duration], at now: Duration) -> Bool {
        let recent = starts.lazy.filter { now - $0 < self.interval }.count
        return recent < maximumRefreshes
    }

    /// `starts` with a refresh started at `now`, keeping only the last ``maximumRefreshes`` (all ``allows(after:at:)``
    /// needs).
    func recording(_ now: Duration, after starts: [Duration]) -> [Duration] {
        Array((starts + [now]).suffix(maximumRefreshes))
    }
}

/// A recovery shared by many retriers: a credential (a token, a session, a connection) that one refresh renews for
/// every retrier that found it expired.
///
/// Attach it to a plan with ``RetryPlan/recovering(with:)``; every attempt of such a run receives the current
/// credential, and a failure the recovery recognises (`when`: an expired token, HTTP 401) is answered by the recovery
/// instead of a backoff:
///
/// ```swift
/// let session = RetryRecovery<Token>(
///     credential: storedToken,
///     when: { ($0 as? APIError)?.status == 401 },
///     refresh: { old, completion in auth.refresh(old) { result in completion(result) } })
///
/// let plan = RetryPlan.exponentialBackoff().giveUpAfter(maxAttempts: 4).recovering(with: session)
/// plan.execute(on: .main) { token, attempt, done in
///     api.load(id, token: token) { value, error in done(value, error) }
/// } completion: { result, summary in show(result) }
///
/// let items = try await plan.execute { token, attempt in try await api.items(token: token) }
/// ```
///
/// What it guarantees, whichever style and thread its retriers use:
///
/// - **One refresh for everyone.** While a refresh runs, every retrier that needs a credential waits for it: those whose
///   attempt failed with the old credential, and those about to start an attempt (they do not send the stale one).
///   When it succeeds they all retry at once with the new credential; when it fails, they all give up with
///   ``RetryError`` ``RetryError/Reason-swift.enum/recoveryFailed``, whose ``RetryError/lastError`` is the refresh's
///   error. The next failure after that may start a new refresh.
/// - **Generations.** Each attempt knows which credential it ran with. A failure with a credential that another
///   retrier's refresh has already replaced retries at once with the current one, without a refresh.
/// - **Refresh before use.** A credential for which `requiresRefresh` is `true` (an expiry known in advance) is
///   refreshed once, before the attempts that would use it.
/// - **Limits.** The ``RecoveryWindow`` bounds the refreshes; the run's `maxAttempts` counts every attempt (a retry
///   after a refresh too); its total timeout bounds the wait for a refresh (a refresh that hangs ends the waiting
///   run with ``RetryError/Reason-swift.enum/deadlineExceeded``); a cancelled run stops waiting at once. A refresh
///   nobody waits for any more goes on: its credential becomes the current one. A retry after a recovery waits no
///   backoff delay and does not pay the plan's ``RetryBudget`` (the budget limits retries of a failing dependency; the
///   window limits refreshes).
/// - **Reporting.** The failure is reported as ``RetryEvent/attemptFailed(_:error:next:)`` with
///   ``RetryNextStep/recover``; the summary counts the recoveries (``RetrySummary/recoveries``) and the time spent
///   waiting for the recovery (``RetrySummary/recoveryWait``).
///
/// The refresh runs on the thread of the retrier that needed it (for a completion-handler run, in a block on its
/// queue), never under a RetryKit lock; its completion may be called from any thread, once (later calls are ignored;
/// releasing it uncalled fails the refresh with ``RetryError/Reason-swift.enum/completionReleased``). The predicates
/// run on the thread of the retrier that asks, without a lock. `RetryRecovery` is a class: share one instance between
/// every run that uses the same credential.
public final class RetryRecovery<Credential: Sendable>: Sendable {
    /// The engine, the credential's type erased: what runs see.
    package let core: RecoveryCore

    /// A recovery whose refresh calls a completion handler.
    ///
    /// - Parameters:
    ///   - credential: The credential to start with; `nil` to refresh before the first attempt.
    ///   - window: How often it may refresh. ``RecoveryWindow/init(interval:maximumRefreshes:)`` (5 in 30 s) by
    ///     default.
    ///   - recognises: Whether an attempt's error means the credential failed (an authentication failure), to be
    ///     answered by a refresh. Other errors go to the plan's strategy.
    ///   - requiresRefresh: Whether a credential must be refreshed before it is used (an expiry known in advance).
    ///     `nil` (the default): never.
    ///   - refresh: Makes a new credential from the current one (`nil` if there is none) and calls its completion once,
    ///     from any thread, with the credential or an error.
    public init(
        credential: Credential? = nil,
        window: RecoveryWindow = RecoveryWindow(),
        when recognises: @escaping @Sendable (any Error) -> Bool,
        requiresRefresh: (@Sendable (Credential) -> Bool)? = nil,
        refresh:
            @escaping @Sendable (
                _ current: Credential?, _ completion: @escaping @Sendable (Result<Credential, any Error>) -> Void
            ) -> Void
    ) {
        self.core = Self.core(
            credential: credential, window: window, recognises: recognises, requiresRefresh: requiresRefresh,
            refresh: refresh, now: Self.uptime())
    }

    /// A recovery whose refresh is an `async` function; the refresh runs in a new `Task`.
    ///
    /// - Parameters:
    ///   - credential: The credential to start with; `nil` to refresh before the first attempt.
    ///   - window: How often it may refresh. ``RecoveryWindow/init(interval:maximumRefreshes:)`` (5 in 30 s) by
    ///     default.
    ///   - recognises: Whether an attempt's error means the credential failed (an authentication failure), to be
    ///     answered by a refresh. Other errors go to the plan's strategy.
    ///   - requiresRefresh: Whether a credential must be refreshed before it is used (an expiry known in advance).
    ///     `nil` (the default): never.
    ///   - refresh: Makes a new credential from the current one (`nil` if there is none), or throws.
    public convenience init(
        credential: Credential? = nil,
        window: RecoveryWindow = RecoveryWindow(),
        when recognises: @escaping @Sendable (any Error) -> Bool,
        requiresRefresh: (@Sendable (Credential) -> Bool)? = nil,
        refresh: @escaping @Sendable (_ current: Credential?) async throws -> Credential
    ) {
        self.init(
            credential: credential, window: window, when: recognises, requiresRefresh: requiresRefresh,
            refresh: { current, completion in
                Task {
                    do {
                        completion(.success(try await refresh(current)))
                    } catch {
                        completion(.failure(error))
                    }
                }
            })
    }

    /// A recovery whose window measures time with `now` (time since any fixed origin), for tests on virtual time.
    package init(
        credential: Credential?, window: RecoveryWindow, when recognises: @escaping @Sendable (any Error) -> Bool,
        requiresRefresh: (@Sendable (Credential) -> Bool)? = nil,
        refresh:
            @escaping @Sendable (
                _ current: Credential?, _ completion: @escaping @Sendable (Result<Credential, any Error>) -> Void
            ) -> Void,
        now: @escaping @Sendable () -> Duration
    ) {
        self.core = Self.core(
            credential: credential, window: window, recognises: recognises, requiresRefresh: requiresRefresh,
            refresh: refresh, now: now)
    }

    /// The current credential: the one the next attempt receives, unless it needs a refresh first.
    public var credential: Credential? {
        core.current.credential as? Credential
    }

    /// How many refreshes have started since the recovery was created.
    public var refreshes: Int {
        Int(clamping: core.refreshesStarted)
    }

    /// How often the recovery may refresh.
    public var window: RecoveryWindow { core.window }

    /// The erased engine for the typed closures.
    private static func core(
        credential: Credential?, window: RecoveryWindow, recognises: @escaping @Sendable (any Error) -> Bool,
        requiresRefresh: (@Sendable (Credential) -> Bool)?,
        refresh: @escaping @Sendable (Credential?, @escaping @Sendable (Result<Credential, any Error>) -> Void) -> Void,
        now: @escaping @Sendable () -> Duration
    ) -> RecoveryCore {
        var erasedCheck: (@Sendable (any Sendable) -> Bool)?
        if let requiresRefresh {
            erasedCheck = { erased in
                guard let credential = erased as? Credential else { return true }  // not reached: only ours are stored
                return requiresRefresh(credential)
            }
        }
        return RecoveryCore(
            credential: credential, window: window, recognises: recognises, requiresRefresh: erasedCheck,
            refresh: { erased, done in
                refresh(erased as? Credential) { result in done(result.map { $0 as any Sendable }) }
            },
            now: now)
    }

    /// Time since the first call, on the clock `ContinuousClock` reads.
    private static func uptime() -> @Sendable () -> Duration {
        let origin = ContinuousTime.nanoseconds()
        return { ContinuousTime.since(origin) }
    }
}

// The values the state machine takes and gives: its configuration, what a strategy decides with, a decision, how a
// retrier ends. `RetryStateMachine.swift` has the machine.

/// The limits of one retrier: how many attempts, how long in total, how long per attempt.
@usableFromInline
package struct RetryConfiguration: Sendable {
    /// The most attempts, including the first. Must be at least 1.
    package var maxAttempts: Int
    /// The total time across attempts and waits, measured from the start; `nil` for none. Must not be negative.
    package var totalTimeout: Duration?
    /// The time one attempt may take before it counts as failed; `nil` for none. Must be positive.
    package var attemptTimeout: Duration?
    /// A budget shared with other retriers that must pay for every retry; `nil` for none.
    @usableFromInline
    package var budget: RetryBudget?
    /// Whether a failure is a timeout of the operation's own (a transport's timeout, say), charged to the budget like
    /// RetryKit's attempt timeout; `nil` when only RetryKit's attempt timeout counts.
    package var isTimeout: (@Sendable (any Error) -> Bool)?
    /// A recovery shared with other retriers (``RetryRecovery``): every attempt runs with the credential it gives, and a
    /// failure it recognises waits for it (a refresh) instead of backing off. `nil` for none.
    package var recovery: RecoveryCore?
    /// What is wrong with where a completion-handler retrier was started from (``callbackPlacement(queue:isolation:)``),
    /// if anything: the retrier then finishes with ``RetryError/Reason-swift.enum/invalidConfiguration(_:)``, like any
    /// other invalid configuration. `nil` for every async retrier.
    package var placementProblem: String?

    @usableFromInline
    package init(
        maxAttempts: Int, totalTimeout: Duration? = nil, attemptTimeout: Duration? = nil, budget: RetryBudget? = nil,
        isTimeout: (@Sendable (any Error) -> Bool)? = nil
    ) {
        self.maxAttempts = maxAttempts
        self.totalTimeout = totalTimeout
        self.attemptTimeout = attemptTimeout
        self.budget = budget
        self.isTimeout = isTimeout
    }

    /// This configuration with both timeouts bounded by ``BackoffStrategy/saturationLimit`` (10⁹ s, about 31.7 years):
    /// a longer timeout, up to `.seconds(Int64.max)` and beyond, counts as that limit.
    ///
    /// The one place where a user's timeouts are clamped, for every style: ``RetryStateMachine`` applies it to the
    /// configuration it is created with, so that every deadline a runner computes from it (`clock.now` plus a timeout,
    /// a `DispatchTime`, a virtual instant) stays far from overflow, and nothing converts a duration that does not
    /// fit. Values that ``problem`` rejects (a negative total timeout, a per-attempt timeout that is not positive)
    /// stay as they are and are still rejected.
    package var bounded: RetryConfiguration {
        var copy = self
        copy.totalTimeout = totalTimeout.map(DelayMath.bounded)
        copy.attemptTimeout = attemptTimeout.map(DelayMath.bounded)
        return copy
    }

    /// A description of what is wrong, or `nil` if the configuration can run.
    package var problem: String? {
        if let placementProblem { return placementProblem }
        if !Self.accepts(maxAttempts: maxAttempts) { return "maxAttempts must be at least 1 (got \(maxAttempts))" }
        if let t = totalTimeout, t < .zero { return "the total timeout must not be negative (got \(t))" }
        if let t = attemptTimeout, t <= .zero { return "the per-attempt timeout must be positive (got \(t))" }
        return nil
    }

    /// Whether ``problem`` accepts `maxAttempts`: all it checks in a configuration without timeouts.
    @inlinable
    package static func accepts(maxAttempts: Int) -> Bool { maxAttempts >= 1 }
}

/// The state a failed attempt leaves for the strategy: the only input a strategy's delay needs.
@usableFromInline
package struct RetryDecisionContext: Sendable {
    /// The 0-based retry index: 0 for the wait before the second attempt.
    @usableFromInline
    package let retryIndex: Int
    /// The last delay a backoff computed for this retrier, if any: a ``RetryStrategy/retryAfter(_:)`` wait in between
    /// does not replace it.
    @usableFromInline
    package let previousDelay: Duration?

    /// Creates a context; the state machine creates these for runners, tests and test support may too.
    package init(retryIndex: Int, previousDelay: Duration?) {
        self.retryIndex = retryIndex
        self.previousDelay = previousDelay
    }

    /// Resolves the strategy's answer into a decision: stop, or retry after a delay.
    ///
    /// This is the one place where a delay is computed from a strategy. It may run user code (a custom backoff
    /// closure, a caller's random generator), so runners call it without holding a lock.
    @usableFromInline
    package func resolve<C>(_ strategy: RetryStrategy<C>) -> RetryDecision where C.Duration == Duration {
        strategy.resolved(in: self).decision  // never a wait on the clock of its own for a `Swift.Duration` clock
    }

    /// The decision about `error` for a retrier with `recovery`: ``RetryDecision/recover`` when the recovery
    /// recognises the failure (``RecoveryCore/recognises(_:)``), otherwise the strategy's answer, resolved. Both are user
    /// code: runners call this without holding a lock.
    package func decision<C>(
        for error: any Error, recovery: RecoveryCore?, strategy: (any Error) -> RetryStrategy<C>
    ) -> RetryDecision where C.Duration == Duration {
        if let recovery, recovery.recognises(error) { return .recover }
        return resolve(strategy(error))
    }
}

/// A resolved strategy answer.
@usableFromInline
package enum RetryDecision: Sendable, Hashable {
    case stop(RetryStopReason)
    /// The configuration's recovery recognises the failure: wait for it, then retry at once with its credential.
    case recover
    /// Retry after a delay the backoff computed; the next decorrelated delay grows from it.
    case retry(after: Duration)
    /// Retry after a delay a hint gave (``RetryStrategy/retryAfter(_:)``); the backoff chain's previous delay stays.
    case retryAfterHint(Duration)

    /// A stop for ``RetryStopReason/unspecified``.
    package static var stop: Self { .stop(.unspecified) }
}

/// How a retrier ends: everything a runner needs to emit the last events and call its completion.
@usableFromInline
package struct RetryTermination: Sendable {
    /// The summary for events and completions.
    @usableFromInline
    package let summary: RetrySummary
    /// The error the retrier finishes with; `nil` on success.
    @usableFromInline
    package let error: (any Error)?
    /// The attempt that just failed and made the retrier give up, with its error: runners emit
    /// `attemptFailed(…, next: .giveUp(reason))` for it before `finished`.
    @usableFromInline
    package let failedAttempt: (attempt: RetryAttempt, error: any Error)?
    /// The attempt that succeeded: runners emit `attemptSucceeded` for it before `finished`.
    @usableFromInline
    package let succeededAttempt: RetryAttempt?

    /// A termination; the state machine creates these, runners may replace one (for example with a clock's error).
    @usableFromInline
    package init(
        summary: RetrySummary, error: (any Error)?, failedAttempt: (attempt: RetryAttempt, error: any Error)?,
        succeededAttempt: RetryAttempt?
    ) {
        self.summary = summary
        self.error = error
        self.failedAttempt = failedAttempt
        self.succeededAttempt = succeededAttempt
    }
}

extension RetryTermination {
    /// The events a runner emits when the retrier finishes, in order: the last attempt's result (if this termination
    /// follows one), then `finished`. Every runner uses this so that all styles emit identical events.
    ///
    /// - Parameter value: The successful attempt's value; `nil` unless the retrier succeeded.
    @inlinable
    package func events<Value: Sendable>(value: Value?) -> [RetryEvent<Value>] {
        var events: [RetryEvent<Value>] = []
        forEachEvent(value: value) { events.append($0) }
        return events
    }

    /// Passes ``events(value:)`` to `body` one by one, in order, without building an array.
    @inlinable
    package func forEachEvent<Value: Sendable>(value: Value?, _ body: (RetryEvent<Value>) -> Void) {
        if let (attempt, error) = failedAttempt {
            body(.attemptFailed(attempt, error: error, next: .giveUp(summary.reason)))
        }
        if let attempt = succeededAttempt, let value {
            body(.attemptSucceeded(attempt, value))
        }
        body(.finished(summary, error: error))
    }

    /// The result a completion receives: the value on success, otherwise ``error``.
    @inlinable
    package func result<Value>(value: Value?) -> Result<Value, any Error> {
        if let value, error == nil { return .success(value) }
        return .failure(error ?? RetryError(.invalidConfiguration("internal: finished without a value or an error")))
    }
}

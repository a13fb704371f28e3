/// What to do after a failed attempt: back off and retry, retry after an exact delay, or stop.
///
/// A strategy closure returns one of these for each failure that still has attempts left:
///
/// ```swift
/// strategy: { error in
///     error is AuthError ? .stop : .backoff(.exponential(a: .milliseconds(100), b: 2).jitter())
/// }
/// ```
///
/// `C` is the clock of the `retry` call, as in the async retry library RetryKit is source-compatible with: any `Clock`
/// works with the async `retry`. For clocks that measure in `Swift.Duration` (the ones the other entry points and
/// policies take), the clock is only a tag: ``init(_:)`` converts an answer to another such clock in constant time.
public enum RetryStrategy<C: Clock>: Sendable {
    /// Wait for the delay the backoff strategy computes for this retry, then retry.
    case backoff(BackoffStrategy<C>)
    /// Wait exactly `delay`, then retry: for server hints such as `Retry-After`.
    ///
    /// No jitter is applied. For a `Swift.Duration` clock, negative delays count as zero and the delay saturates at
    /// ``BackoffStrategy/saturationLimit``; if the wait would end after the retrier's total deadline, the retrier gives
    /// up at once instead of sleeping pointlessly. For another duration type, a zero or negative delay does not
    /// suspend.
    // `indirect`: with the payload inline, Swift 6.3.1's SILGen crashes on a closure returning `RetryStrategy<C>`
    // passed to a function generic over `C where C.Duration == Duration` (a hint is rare: the box costs nothing else).
    indirect case retryAfter(C.Duration)
    /// Do not retry, for this reason: the retrier finishes with the error of the attempt that just failed, and its
    /// summary reason is ``RetryError/Reason-swift.enum/stopped(_:)`` with `reason`.
    ///
    /// `case .stop:` in a `switch` matches every stop, whatever its reason.
    case stop(because: RetryStopReason)

    /// Do not retry: the retrier finishes with the error of the attempt that just failed.
    ///
    /// The same as ``stop(because:)`` with ``RetryStopReason/unspecified``; say why with ``stop(because:)`` so that
    /// the summary and the events can tell.
    public static var stop: Self { .stop(because: .unspecified) }
}

extension RetryStrategy where C.Duration == Duration {
    /// The same answer for clock `C`, from an answer written for another clock with `Swift.Duration`, in constant
    /// time (see ``BackoffStrategy/init(_:)``).
    ///
    /// ```swift
    /// let onSuspending = RetryStrategy<SuspendingClock>(policy.decision(for: error))
    /// ```
    ///
    /// - Parameter other: An answer for any clock whose duration is `Swift.Duration`.
    public init<Other: Clock>(_ other: RetryStrategy<Other>) where Other.Duration == Duration {
        switch other {
        case .backoff(let backoff): self = .backoff(BackoffStrategy(backoff))
        case .retryAfter(let delay): self = .retryAfter(delay)
        case .stop(let reason): self = .stop(because: reason)
        }
    }

    /// The same answer for another clock type (see ``init(_:)``); kept for the package's own call sites.
    package func retagged<D: Clock>(for clock: D.Type = D.self) -> RetryStrategy<D> where D.Duration == Duration {
        RetryStrategy<D>(self)
    }
}

extension RetryStrategy {
    /// Resolves this answer for the retry `context` describes: the one place where a strategy becomes a delay.
    ///
    /// For a `Swift.Duration` clock, the decision carries the delay (computed by the strategy's saturating curve) and
    /// `clockWait` is `nil`. For another duration type, the state machine is told to retry with no delay of its own
    /// (it still counts attempts, pays the budget and decides), and `clockWait` is what the runner sleeps on the clock
    /// before the next attempt (`nil` when it is zero or negative).
    ///
    /// It may run user code (a custom backoff closure, a caller's random generator), so runners call it without
    /// holding a lock.
    ///
    /// Inlinable, so that it is specialized for the caller's clock: the checks on the clock's duration type are then
    /// constants, and the default `.backoff(.none)` costs no call at all.
    @inlinable
    func resolved(in context: RetryDecisionContext) -> (decision: RetryDecision, clockWait: C.Duration?) {
        switch self {
        case .stop(let reason):
            return (.stop(reason), nil)
        case .retryAfter(let delay):
            if let delay = delay as? Duration { return (.retryAfterHint(BackoffCurve.clamped(delay)), nil) }
            return (.retryAfterHint(.zero), delay > .zero ? delay : nil)
        case .backoff(let backoff):
            switch backoff.storage {
            case .curve(.none, _):
                return (.retry(after: DelayMath.zero), nil)  // `Duration.zero` would be a call
            case .curve(let curve, let cap):
                let delay = curve.delay(forRetry: context.retryIndex, previous: context.previousDelay, cap: cap)
                return (.retry(after: delay), nil)
            case .closure(let body, _):
                let wait = body(context.retryIndex)
                return (.retry(after: .zero), wait > .zero ? wait : nil)
            }
        }
    }
}

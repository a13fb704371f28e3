/// What to do after a failed attempt: back off and retry, retry after an exact delay, or stop.
///
/// A strategy closure returns one of these for each failure that still has attempts left:
///
/// ```swift
/// strategy: { error in
///     error is AuthError ? .stop : .backoff(.exponential(a: .milliseconds(100), b: 2).jitter())
/// }
/// ```
public enum RetryStrategy<C: Clock>: Sendable where C.Duration == Duration {
    /// Wait for the delay the backoff strategy computes for this retry, then retry.
    case backoff(BackoffStrategy<C>)
    /// Wait exactly `delay`, then retry: for server hints such as `Retry-After`.
    ///
    /// No jitter is applied. Negative delays count as zero and the delay saturates at
    /// ``BackoffStrategy/saturationLimit``. If the wait would end after the retrier's total deadline, the retrier gives
    /// up at once instead of sleeping pointlessly.
    case retryAfter(Duration)
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

extension RetryStrategy {
    /// The same answer for another clock type (see ``BackoffStrategy``'s `retagged`).
    package func retagged<D: Clock>(for clock: D.Type = D.self) -> RetryStrategy<D> where D.Duration == Duration {
        switch self {
        case .backoff(let backoff): return .backoff(backoff.retagged())
        case .retryAfter(let delay): return .retryAfter(delay)
        case .stop(let reason): return .stop(because: reason)
        }
    }
}

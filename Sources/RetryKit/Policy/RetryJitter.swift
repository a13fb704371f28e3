/// How a policy randomizes its backoff delays: the one choice ``RetryPlan`` and RetryKitHTTP's `HTTPRetryPolicy`
/// share.
///
/// Each case is described with `d(x)`, the policy's delay before retry `x` (0-based) after its cap: for
/// ``RetryPlan/exponentialBackoff(initialDelay:multiplier:maxDelay:jitter:using:)``,
/// `d(x) = min(initialDelay · multiplierˣ, maxDelay)`; for `HTTPRetryPolicy`, `min(scale · baseˣ, maxDelay)`.
/// Every case keeps the delay within the cap: the range is capped before the draw, so delays at the cap stay spread
/// below it instead of piling up at exactly the cap.
public enum RetryJitter: Sendable, Hashable {
    /// No randomness: exactly `d(x)`. Clients that failed together retry together.
    case none
    /// Full jitter, the default of both policies: a delay drawn uniformly from `[0, d(x))`. See
    /// ``BackoffStrategy/jitter(using:)``.
    case full
    /// Equal jitter: `d(x)/2 + U[0, d(x)/2)`, keeping at least half of the delay. See
    /// ``BackoffStrategy/equalJitter(using:)``.
    case equal
    /// Proportional jitter: `d(x) · U[1 − p, 1 + p)` (`p` clamped to `[0, 1]`; NaN counts as 0), below the cap. See
    /// ``BackoffStrategy/proportionalJitter(_:using:)``.
    case proportional(Double)
    /// Decorrelated jitter: `U[first, min(cap, 3 · previous))`, starting from the first delay `d(0)`; the growth
    /// factor is not used. See ``BackoffStrategy/decorrelatedJitter(base:cap:using:)``.
    case decorrelated
}

extension RetryJitter {
    /// `curve` (already capped at `cap`, if any) randomized as this case says; `first` and `cap` bound decorrelated
    /// jitter, which replaces the curve.
    package func applied<C: Clock, G: RandomNumberGenerator>(
        to curve: BackoffStrategy<C>, first: Duration, cap: Duration?, using generator: G
    ) -> BackoffStrategy<C> where C.Duration == Duration {
        switch self {
        case .none: return curve
        case .full: return curve.jitter(using: generator)
        case .equal: return curve.equalJitter(using: generator)
        case .proportional(let p): return curve.proportionalJitter(p, using: generator)
        case .decorrelated:
            return .decorrelatedJitter(
                base: first, cap: cap ?? BackoffStrategy<C>.saturationLimit, using: generator)
        }
    }
}

extension HTTPRetryPolicy {
    /// How the policy spreads the retries of clients that got the same `Retry-After` hint, so that they do not all
    /// come back in the same millisecond.
    ///
    /// Every wait stays within `[hint, max(hint, cap)]`: never before the time the server asked for, never past the
    /// cap (``HTTPRetryPolicy/maxRetryAfter``). The spread is applied when the retrier asks the policy's strategy
    /// (``HTTPRetryPolicy/strategy(method:url:requestHeader:classify:now:)``, and so in URLSession's methods and
    /// ``HTTPRetryPolicy/run(method:url:requestHeader:statusCode:responseHeader:classify:isolation:observer:operation:)``)
    /// to every `RetryStrategy.retryAfter` its decisions give; ``HTTPRetryPolicy/decision(for:)`` itself returns the
    /// hint unchanged.
    public enum RetryAfterSpread: Sendable, Hashable {
        /// Exactly the hint: every client told `Retry-After: 5` comes back at the same moment.
        case none
        /// The hint plus a uniform extra wait in `[0, p·hint]` (`p` clamped to `[0, 1]`; NaN counts as 0): a hint of
        /// 5 s with `p = 0.1` spreads the retries over 5–5.5 s. A zero hint stays zero.
        case proportional(Double)
        /// The hint plus a uniform extra wait in `[0, d]` (a negative `d` counts as zero): spreads even a zero hint.
        case upTo(Duration)

        /// The wait for a `hint`, spread with `generator`: in `[hint, max(hint, cap)]`.
        ///
        /// - Parameters:
        ///   - hint: The server's hint (negative counts as zero).
        ///   - cap: The longest wait; a hint beyond it is kept as it is, never shortened.
        ///   - generator: The source of randomness.
        public func delay<G: RandomNumberGenerator>(
            after hint: Duration, cap: Duration, using generator: inout G
        ) -> Duration {
            let room: Duration
            switch self {
            case .none: room = .zero
            case .proportional(let p): room = DelayMath.share(p, of: hint)
            case .upTo(let extra): room = extra
            }
            return DelayMath.spread(hint, by: room, cap: cap, using: &generator)
        }
    }

    /// The default spread after a `Retry-After` hint: ``RetryAfterSpread/proportional(_:)`` with `0.1`, a
    /// retry up to 10% later than asked (5–5.5 s for `Retry-After: 5`), within ``maxRetryAfter``.
    ///
    /// In the jitter simulation (`Benchmarks/results/retry-after-spread.md`), 1,000 clients sharing one 5 s hint reach
    /// the server at a peak of 147 retries in one millisecond without a spread, and of 7.3 with this default.
    public static let defaultRetryAfterSpread: RetryAfterSpread = .proportional(0.1)
}

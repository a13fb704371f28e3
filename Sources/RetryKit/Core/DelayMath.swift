/// Saturating conversions between `Duration` and seconds as `Double`, used by the backoff core only.
///
/// Every value leaving this file lies in `[0, limit]`: NaN becomes 0, negative values become 0, and positive
/// infinity or anything above the limit becomes the limit. Nothing here can trap.
enum DelayMath {
    /// The largest delay the core ever produces, in seconds (10⁹ s, about 31.7 years).
    ///
    /// Chosen so that any delay added to a `DispatchTime` (nanoseconds in a `UInt64`) or to a clock instant stays far
    /// from overflow.
    static let limitSeconds: Double = 1_000_000_000

    /// `d` in seconds, clamped to `[0, limitSeconds]`.
    ///
    /// Clamps before reading `components`, which traps for durations beyond `Int64` seconds (for example
    /// `.seconds(Int64.max) + .seconds(1)`).
    static func seconds(_ d: Duration) -> Double {
        if d <= .zero { return 0 }
        if d >= .seconds(Int64(limitSeconds)) { return limitSeconds }
        let parts = d.components
        return clamp(Double(parts.seconds) + Double(parts.attoseconds) * 1e-18)
    }

    /// `s` clamped to `[0, limitSeconds]`; NaN counts as 0.
    static func clamp(_ s: Double) -> Double {
        guard s > 0 else { return 0 }  // also catches NaN
        return s < limitSeconds ? s : limitSeconds
    }

    /// A duration of `s` seconds (clamped), rounded to the nearest nanosecond.
    static func duration(_ s: Double) -> Duration {
        let clamped = clamp(s)
        let whole = clamped.rounded(.down)
        var nanos = ((clamped - whole) * 1e9).rounded()
        var secs = Int64(whole)  // whole ≤ 1e9: cannot trap
        if nanos >= 1e9 {
            secs += 1
            nanos = 0
        }
        return .seconds(secs) + .nanoseconds(Int64(nanos))
    }

    /// `d` clamped to `[0, limit]` and rounded down to a whole number of nanoseconds.
    static func wholeNanoseconds(_ d: Duration) -> Duration {
        let parts = clamp(d).components  // in range after clamping: cannot trap
        return Duration(
            secondsComponent: parts.seconds, attosecondsComponent: parts.attoseconds / 1_000_000_000 * 1_000_000_000)
    }

    /// The bound every duration RetryKit waits for lies in: ``limitSeconds`` as a `Duration`.
    static let limit = Duration.seconds(Int64(limitSeconds))

    /// `d` clamped to `[0, limit]` without a detour through `Double` when it is already in range.
    static func clamp(_ d: Duration) -> Duration {
        if d <= .zero { return .zero }
        return d < limit ? d : limit
    }

    /// `d` with its upper end clamped to `limit`; negative values stay as they are (so that a configuration check can
    /// still reject them).
    static func bounded(_ d: Duration) -> Duration {
        d < limit ? d : limit
    }
}

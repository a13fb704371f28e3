/// Saturating conversions between `Duration` and seconds as `Double`, used by the backoff core only.
///
/// Every value leaving this file lies in `[0, limit]`: NaN becomes 0, negative values become 0, and positive
/// infinity or anything above the limit becomes the limit. Nothing here can trap.
@usableFromInline
package enum DelayMath {
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

    /// The bound every duration RetryKit waits for lies in: ``limitSeconds`` as a `Duration` (a constant once
    /// inlined: no lazily initialized global to check on every use).
    @inlinable
    package static var limit: Duration { .seconds(1_000_000_000 as Int64) }

    /// `d` clamped to `[0, limit]` without a detour through `Double` when it is already in range.
    @inlinable
    package static func clamp(_ d: Duration) -> Duration {
        if !isPositive(d) { return zero }
        return isLess(d, than: limit) ? d : limit
    }

    /// `d` with its upper end clamped to `limit`; negative values stay as they are (so that a configuration check can
    /// still reject them).
    @inlinable
    package static func bounded(_ d: Duration) -> Duration {
        isLess(d, than: limit) ? d : limit
    }
}

// MARK: - Comparisons without a call

/// The hot paths of the runners (several per attempt) ask whether a delay is zero, positive or in range.
/// `Duration.zero`, `==` and `<` are calls into the standard library (they are not inlinable); these read the two
/// halves of the 128-bit count of attoseconds that `Duration` (a frozen struct) exposes, and give the same answers.
extension DelayMath {
    /// `Duration.zero`, built in place.
    @inlinable
    package static var zero: Duration { Duration(_high: 0, low: 0) }

    /// Whether `d == .zero`.
    @inlinable
    package static func isZero(_ d: Duration) -> Bool {
        d._high == 0 && d._low == 0
    }

    /// Whether `d > .zero`.
    @inlinable
    package static func isPositive(_ d: Duration) -> Bool {
        d._high > 0 || (d._high == 0 && d._low != 0)
    }

    /// Whether `a < b`.
    @inlinable
    package static func isLess(_ a: Duration, than b: Duration) -> Bool {
        a._high < b._high || (a._high == b._high && a._low < b._low)
    }
}

// MARK: - Spreading a server's hint

extension DelayMath {
    /// The largest random extra ``spread(_:by:cap:using:)`` draws, in nanoseconds (9·10¹⁸ ns, about 285 years): below
    /// `Int64.max`, so that the draw converts to a `Duration` without trapping.
    static let maxSpreadNanoseconds: UInt64 = 9_000_000_000_000_000_000

    /// `p` clamped to `[0, 1]`; NaN counts as 0.
    package static func unitFraction(_ p: Double) -> Double {
        p > 0 ? Swift.min(p, 1) : 0  // NaN fails `p > 0`
    }

    /// The largest random extra as a `Duration`.
    static let maxSpread = Duration.nanoseconds(Int64(maxSpreadNanoseconds))

    /// The share `p` (clamped to `[0, 1]`, NaN counts as 0) of `d` (negative counts as zero): the room of a
    /// proportional spread.
    ///
    /// Saturates at ``maxSpread``, a room that ``spread(_:by:cap:using:)`` treats as any larger one; so the product
    /// (computed through `Double`, which can round up) never comes near the bounds of `Duration`.
    package static func share(_ p: Double, of d: Duration) -> Duration {
        let fraction = unitFraction(p)
        guard d > .zero, fraction > 0 else { return .zero }
        guard d / .nanoseconds(1) * fraction < Double(maxSpreadNanoseconds) else { return maxSpread }
        return d * fraction
    }

    /// `hint` spread later by a random extra drawn from `generator`: `hint + U[0, e]` to the nanosecond, where
    /// `e = min(room, max(hint, cap) − hint)`, so the wait lies in `[hint, max(hint, cap)]`.
    ///
    /// A negative `hint` or `room` counts as zero; a hint beyond `cap` is kept as it is, never shortened. Without room
    /// (`e = 0`) the generator is not called. The extra is a whole number of nanoseconds, drawn as an integer so that no
    /// `Double` rounding can step outside the bounds, and at most ``maxSpreadNanoseconds``: a larger room saturates
    /// there instead of trapping. RetryKitHTTP's `Retry-After` spread.
    ///
    /// - Parameters:
    ///   - hint: The wait asked for.
    ///   - room: The most the wait may be lengthened.
    ///   - cap: The longest wait the spread may reach.
    ///   - generator: The source of randomness; called only if there is room.
    package static func spread<G: RandomNumberGenerator>(
        _ hint: Duration, by room: Duration, cap: Duration, using generator: inout G
    ) -> Duration {
        let hint = Swift.max(hint, .zero)
        let extra = Swift.min(room, Swift.max(hint, cap) - hint)  // `max(hint, cap) − hint ≥ 0`: cannot overflow
        guard extra > .zero else { return hint }
        // Whole nanoseconds, rounded down in integers (a `Double` would round some values up, past the cap); the
        // bound first, since `components` traps beyond `Int64` seconds.
        let parts = Swift.min(extra, maxSpread).components
        let step = UInt64(parts.seconds) * 1_000_000_000 + UInt64(parts.attoseconds / 1_000_000_000)
        return hint + .nanoseconds(Int64(UInt64.random(in: 0...step, using: &generator)))
    }
}

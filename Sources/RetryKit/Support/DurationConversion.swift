import Dispatch

/// Conversions of a `Duration` to the integer counts that Dispatch takes, which saturate instead of trapping and hold
/// on a 32-bit `Int`.
///
/// Apple Watch hardware from Series 4 on runs arm64_32, where `Int` has 32 bits: a count of nanoseconds in an `Int`
/// ends at 2,147,483,647 ns, about 2.147 s, so `Int(seconds) * 1_000_000_000` traps for any longer delay there (and
/// `DispatchTimeInterval.nanoseconds(_:)` takes an `Int`). Every count here is computed in `UInt64` and converted to
/// the target type at the end, saturating. The helpers are generic over the target type so that tests can run them
/// with `Int32` on a 64-bit machine (watchOS simulators are 64-bit too, so they would not catch an overflow).
package enum DurationConversion {
    /// Durations from this one on have more nanoseconds than a `UInt64` holds (about 584 years).
    static let nanosecondsLimit = Duration.seconds(Int64(UInt64.max / 1_000_000_000))

    /// `d` in whole nanoseconds, rounded up (a timer armed with it never fires early), saturating: zero for a
    /// negative `d`, `T.max` for a count beyond `T.max`. Counts beyond `UInt64.max` (about 584 years) saturate there
    /// too, for a `T` wider than 64 bits.
    package static func nanosecondsRoundingUp<T: FixedWidthInteger>(_ d: Duration, as _: T.Type = T.self) -> T {
        guard d > .zero else { return 0 }
        // Compared before reading `components`, which traps beyond `Int64` seconds.
        guard d < nanosecondsLimit else { return T(clamping: UInt64.max) }
        let (seconds, attoseconds) = d.components  // 0 ≤ seconds < 1.85·10¹⁰, 0 ≤ attoseconds < 10¹⁸
        let (whole, rest) = attoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
        // < (UInt64.max / 10⁹) · 10⁹ + 10⁹ − 1 + 1 ≤ UInt64.max: cannot overflow.
        let nanoseconds = UInt64(seconds) * 1_000_000_000 + UInt64(whole) + (rest > 0 ? 1 : 0)
        return T(clamping: nanoseconds)
    }

    /// `d` in whole seconds and the nanoseconds left over, rounded up to the nanosecond, each as a `T`: the form in
    /// which a 32-bit integer holds any delay up to `T.max` seconds (about 68 years for `Int32`), where its count of
    /// nanoseconds ends at 2.147 s.
    ///
    /// Zero for a negative `d`; seconds beyond `T.max` saturate to `(T.max, 0)`. `nanoseconds` is below 10⁹, so
    /// `T` must hold 999,999,999 (32 bits or more); a narrower `T` saturates it instead of trapping.
    package static func secondsAndNanosecondsRoundingUp<T: FixedWidthInteger>(_ d: Duration, as _: T.Type = T.self)
        -> (seconds: T, nanoseconds: T)
    {
        let (seconds, nanoseconds) = nanosecondsRoundingUp(d, as: UInt64.self).quotientAndRemainder(
            dividingBy: 1_000_000_000)
        guard let whole = T(exactly: seconds) else { return (T.max, 0) }
        return (whole, T(clamping: nanoseconds))
    }

    /// Dispatch intervals that add up to `d` rounded up to the nanosecond, each with a count a `T` holds (Dispatch
    /// takes `Int`): one `.nanoseconds` interval when `T` holds the whole count, as a 64-bit `Int` does for every
    /// delay up to 292 years; otherwise `.seconds` and, unless it is zero, `.nanoseconds` for the rest, as a 32-bit
    /// `Int` needs from 2.147 s on.
    ///
    /// Zero for a negative `d`; beyond `T.max` seconds the interval saturates at `.seconds(T.max)`. `T` must not be
    /// wider than `Int`: its counts are handed to Dispatch as `Int`s (clamped, never trapping).
    package static func dispatchIntervals<T: FixedWidthInteger>(_ d: Duration, as _: T.Type = T.self)
        -> (first: DispatchTimeInterval, rest: DispatchTimeInterval?)
    {
        let total = nanosecondsRoundingUp(d, as: UInt64.self)
        if let count = T(exactly: total) {
            return (.nanoseconds(Int(clamping: count)), nil)
        }
        let parts = secondsAndNanosecondsRoundingUp(d, as: T.self)
        let rest: DispatchTimeInterval? = parts.nanoseconds == 0 ? nil : .nanoseconds(Int(clamping: parts.nanoseconds))
        return (.seconds(Int(clamping: parts.seconds)), rest)
    }

    /// `now + d`, with `d` rounded up to the nanosecond and added as ``dispatchIntervals(_:as:)`` of `Int` say.
    /// Dispatch's `+` saturates at `distantFuture` for a deadline it cannot represent.
    package static func wallDeadline(after d: Duration, from now: DispatchWallTime) -> DispatchWallTime {
        let (first, rest) = dispatchIntervals(d, as: Int.self)
        let deadline = now + first
        guard let rest else { return deadline }
        return deadline + rest
    }
}

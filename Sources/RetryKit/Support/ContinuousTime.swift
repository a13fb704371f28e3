#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `ContinuousClock`'s time source, read directly: nanoseconds on the clock that keeps counting while the device
/// sleeps (`CLOCK_MONOTONIC_RAW` on Apple platforms, `CLOCK_BOOTTIME` on Linux, as `ContinuousClock` itself reads).
///
/// The callback runner reads the time several times per attempt; reading the clock directly costs about a third of
/// going through `ContinuousClock.now` and `Instant.duration(to:)`, and the readings agree with `ContinuousClock`'s.
enum ContinuousTime {
    /// The current reading, in nanoseconds since an arbitrary fixed origin.
    @inline(__always)
    static func nanoseconds() -> UInt64 {
        #if canImport(Darwin)
            return clock_gettime_nsec_np(CLOCK_MONOTONIC_RAW)
        #else
            var now = timespec()
            _ = clock_gettime(CLOCK_BOOTTIME, &now)
            // Both fields are non-negative readings of a clock that started at boot: the sum fits.
            return UInt64(truncatingIfNeeded: now.tv_sec) &* 1_000_000_000 &+ UInt64(truncatingIfNeeded: now.tv_nsec)
        #endif
    }

    /// The span from `origin` (an earlier ``nanoseconds()`` reading) to now.
    @inline(__always)
    static func since(_ origin: UInt64) -> Duration {
        // Two readings of the same monotonic clock: the difference is non-negative, and its count of attoseconds (at
        // most 2⁶⁴ · 10⁹ < 2¹²⁶) fits the 128 bits of a `Duration`, built in place (`Duration.nanoseconds(_:)` is a call
        // into the standard library, with 128-bit arithmetic).
        let (high, low) = (nanoseconds() &- origin).multipliedFullWidth(by: 1_000_000_000)
        return Duration(_high: Int64(high), low: low)
    }
}

import Foundation  // pow

/// How long to wait before a retry, as a function of the 0-based retry index `x`.
///
/// `x` is 0 for the wait before the second attempt, 1 before the third, and so on: the first wait uses `f(0)`.
///
/// Build a strategy from one of the base curves and chain modifiers; modifiers apply in the order they are written:
///
/// ```swift
/// let backoff: BackoffStrategy<ContinuousClock> =
///     .exponential(a: .milliseconds(100), b: 2).max(.seconds(5)).jitter()
/// ```
///
/// | strategy | f(x) |
/// | --- | --- |
/// | ``none`` | 0 |
/// | ``constant(_:)`` | c |
/// | ``linear(a:b:)`` | a·x + b |
/// | ``exponential(a:b:)`` | a·bˣ |
/// | ``exponential(scale:base:)`` | scale·baseˣ seconds (Alamofire's formula) |
/// | ``decorrelatedJitter(base:cap:using:)`` | U[base, min(cap, 3·previous)) |
/// | ``custom(_:)`` | your closure |
/// | ``min(_:)`` | max(f(x), m), never above a cap before it |
/// | ``max(_:)`` | min(f(x), M) |
/// | ``jitter(using:)`` | U[0, f(x)) (full jitter) |
/// | ``equalJitter(using:)`` | f(x)/2 + U[0, f(x)/2) |
/// | ``proportionalJitter(_:using:)`` | U[f(x)·(1−p), min(f(x)·(1+p), cap)) |
///
/// ## A cap is a cap
///
/// No delay ever exceeds a ``max(_:)`` in the chain, or a ``decorrelatedJitter(base:cap:using:)``'s `cap`, whatever
/// modifiers follow it, exactly, to the nanosecond: a later ``min(_:)`` above the cap gives the cap, and jitter after
/// a cap draws below it. `.exponential(a: .seconds(1), b: 2).max(.seconds(30)).proportionalJitter(0.2)` waits between
/// 24 s and 30 s once the curve passes 30 s.
///
/// ## Never traps
///
/// Every value is computed in seconds as a `Double` and saturates: parameters and intermediate results are clamped to
/// `[0, ``saturationLimit``]`, so `exponential(a: .seconds(1), b: 2).max(.seconds(60))` is 60 s at x = 10 000.
/// Negative durations count as zero, NaN factors are documented per strategy, and results are rounded to the nearest
/// nanosecond.
///
/// ## Any clock
///
/// `C` is the clock of the ``RetryStrategy`` and `retry` call a strategy is used with, as in the async retry library
/// RetryKit is source-compatible with, and any `Clock` works:
///
/// - When `C.Duration` is `Swift.Duration` (`ContinuousClock`, `SuspendingClock`, RetryKitTesting's `VirtualClock` and
///   `InstantClock`, your own clocks), a strategy is a clock-independent curve: every rule above holds, and the clock
///   parameter is only a tag. ``init(_:)`` converts a strategy to another such clock in constant time, sharing its
///   random source, so one strategy or policy value serves every clock:
///   `BackoffStrategy<SuspendingClock>(policyBackoff)`.
/// - For any other duration type, only ``none``, ``constant(_:)``, ``linear(a:b:)``, ``min(_:)``, ``max(_:)`` and
///   ``init(duration:)`` exist (as in that library): the strategy is its ``duration`` closure, computed with the
///   duration type's own arithmetic (RetryKit cannot saturate a type it does not know; a cap still wins over a
///   minimum), and the async `retry` sleeps on the clock for exactly that value. A zero or negative value does not
///   suspend. The other entry points and policies measure time in `Swift.Duration` and take such clocks only.
public struct BackoffStrategy<C: Clock>: Sendable {
    /// A strategy for a `Swift.Duration` clock is always a curve; any other clock's is always a closure.
    @usableFromInline
    enum Storage: Sendable {
        /// The saturating curve, and the tightest cap of its chain (clamped, rounded down to whole nanoseconds).
        case curve(BackoffCurve, cap: Duration?)
        /// A closure in the clock's own duration type, and the tightest ``max(_:)`` of its chain (the closure already
        /// applies it; a later ``min(_:)`` is held below it).
        // `indirect`: a `C.Duration` payload inline crashes Swift 6.3.1's SILGen on a closure returning a strategy
        // passed to a function generic over `C where C.Duration == Duration` (see `RetryStrategy.retryAfter`).
        indirect case closure(@Sendable (Int) -> C.Duration, cap: C.Duration?)
    }

    @usableFromInline
    let storage: Storage

    @usableFromInline
    init(storage: Storage) {
        self.storage = storage
    }

    /// A curve strategy (only built where `C.Duration` is `Swift.Duration`).
    init(_ curve: BackoffCurve, cap: Duration?) {
        storage = .curve(curve, cap: cap)
    }

    /// Creates a strategy from a closure that returns the delay before retry `attempt` (0-based: 0 for the wait before
    /// the second attempt).
    ///
    /// The spelling of the async retry library. For a `Swift.Duration` clock this is ``custom(_:)``: the result is
    /// clamped to `[0, saturationLimit]`. For another duration type the value is used as it is (a zero or negative
    /// value does not suspend).
    ///
    /// - Parameter duration: The delay for a 0-based retry index. It runs on the runner's queue or task, never while
    ///   RetryKit holds a lock.
    public init(duration: @escaping @Sendable (_ attempt: Int) -> C.Duration) {
        if C.Duration.self == Duration.self {
            // A constant check once specialized; the cast below then always succeeds.
            storage = .curve(.custom({ x in (duration(x) as? Duration) ?? .zero }), cap: nil)
        } else {
            storage = .closure(duration, cap: nil)
        }
    }

    /// The delay before retry `attempt` (0-based), in the clock's duration type: the strategy as a plain function,
    /// as in the async retry library.
    ///
    /// For a `Swift.Duration` clock this is ``delay(forRetry:previous:)`` without a previous delay (a
    /// ``decorrelatedJitter(base:cap:using:)`` then grows from `base`), and jittered strategies draw a new value on
    /// every call.
    public var duration: @Sendable (_ attempt: Int) -> C.Duration {
        switch storage {
        case .closure(let body, _):
            return body
        case .curve(let curve, let cap):
            // Only built for `Swift.Duration` clocks: the cast always succeeds (a no-op once specialized).
            return { x in (curve.delay(forRetry: x, previous: nil, cap: cap) as? C.Duration) ?? .zero }
        }
    }
}

extension BackoffStrategy where C.Duration == Duration {
    /// The same strategy for clock `C`, from a strategy written for another clock with `Swift.Duration`: the same
    /// curve, modifiers and cap, sharing the same random source.
    ///
    /// Constant time (nothing is rebuilt): the clock parameter of a `Swift.Duration` strategy is only a tag. A shared
    /// generator keeps advancing once per draw, whichever copy draws.
    ///
    /// ```swift
    /// let backoff = BackoffStrategy<ContinuousClock>.exponential(a: .milliseconds(100), b: 2).jitter()
    /// let onSuspending = BackoffStrategy<SuspendingClock>(backoff)
    /// ```
    ///
    /// - Parameter other: A strategy for any clock whose duration is `Swift.Duration`.
    public init<Other: Clock>(_ other: BackoffStrategy<Other>) where Other.Duration == Duration {
        let (curve, cap) = Self.parts(of: other)
        self.init(curve, cap: cap)
    }

    /// The curve and cap of `strategy`; a closure (never built for such a clock) counts as a custom curve.
    static func parts<Other: Clock>(of strategy: BackoffStrategy<Other>) -> (curve: BackoffCurve, cap: Duration?)
    where Other.Duration == Duration {
        switch strategy.storage {
        case .curve(let curve, let cap): return (curve, cap)
        case .closure(let body, _): return (.custom(body), nil)
        }
    }

    /// This strategy's curve and cap.
    private var parts: (curve: BackoffCurve, cap: Duration?) { Self.parts(of: self) }

    /// The chain's cap in seconds, or the saturation limit without one.
    private var capSeconds: Double { parts.cap.map(DelayMath.seconds) ?? DelayMath.limitSeconds }

    /// The largest delay any strategy produces: 1 000 000 000 seconds (about 31.7 years).
    ///
    /// Every computation saturates at this value instead of overflowing.
    public static var saturationLimit: Duration { .seconds(Int64(DelayMath.limitSeconds)) }

    /// The delay before retry `x` (0-based: `x = 0` is the wait before the second attempt).
    ///
    /// - Parameters:
    ///   - x: The 0-based retry index. Negative values count as 0.
    ///   - previous: The last delay a backoff computed for this retrier, if any. Only
    ///     ``decorrelatedJitter(base:cap:using:)`` reads it.
    /// - Returns: A delay in `[0, saturationLimit]`, rounded to the nearest nanosecond. Jittered strategies draw from
    ///   their generator once per jitter modifier.
    public func delay(forRetry x: Int, previous: Duration? = nil) -> Duration {
        let (curve, cap) = parts
        return curve.delay(forRetry: x, previous: previous, cap: cap)
    }
}

/// The clock-independent form of a `Swift.Duration` backoff strategy, and the one place where its delays are computed.
@usableFromInline
indirect enum BackoffCurve: Sendable {
    case none
    case constant(Double)
    case linear(a: Double, b: Double)
    case exponential(a: Double, b: Double)
    case decorrelated(base: Double, cap: Double, RandomSource)
    case custom(@Sendable (Int) -> Duration)
    case atLeast(BackoffCurve, Double)
    /// The cap is clamped and rounded down to whole nanoseconds (see ``BackoffStrategy/max(_:)``).
    case atMost(BackoffCurve, Duration)
    case fullJitter(BackoffCurve, RandomSource)
    case equalJitter(BackoffCurve, RandomSource)
    /// The spread, and the tightest cap of the curve below it in seconds (the draw's range is capped before it).
    case proportionalJitter(BackoffCurve, Double, cap: Double, RandomSource)

    /// `delay` clamped to `[0, saturationLimit]`: a ``RetryStrategy/retryAfter(_:)`` wait.
    @usableFromInline
    static func clamped(_ delay: Duration) -> Duration {
        DelayMath.clamp(delay)
    }

    /// The delay before retry `x`: see ``BackoffStrategy/delay(forRetry:previous:)``. `cap` is the chain's tightest
    /// cap.
    @usableFromInline
    func delay(forRetry x: Int, previous: Duration?, cap: Duration?) -> Duration {
        if case .none = self { return .zero }  // the default strategy: no detour through `Double`
        let prev = previous.map(DelayMath.seconds)
        let delay = DelayMath.duration(evaluate(x: Swift.max(x, 0), previous: prev))
        // Every step keeps below the cap in seconds, but the round trip through Double can overshoot it by a rounding
        // step (a nanosecond, or more near the limit where a Double is coarser), so the cap is applied once more,
        // exactly, in whole nanoseconds.
        if let cap { return Swift.min(delay, cap) }
        return delay
    }

    private func evaluate(x: Int, previous: Double?) -> Double {
        switch self {
        case .none:
            return 0
        case .constant(let c):
            return c
        case .linear(let a, let b):
            // a, b ≤ 1e9 and x ≤ Int.max (≈ 9.2e18): the product stays finite.
            return DelayMath.clamp(a * Double(x) + b)
        case .exponential(let a, let b):
            guard a > 0 else { return 0 }
            // b ≥ 0 here; pow may return +inf, which clamps to the limit.
            return DelayMath.clamp(a * pow(b, Double(x)))
        case .decorrelated(let base, let cap, let random):
            guard base > 0 else { return 0 }  // the range never grows from nothing, whatever the previous delay
            let prev = Swift.max(previous ?? base, base)
            let high = Swift.min(cap, 3 * prev)
            let low = Swift.min(base, high)
            return DelayMath.clamp(low + (high - low) * random.unit())
        case .custom(let body):
            return DelayMath.seconds(body(x))
        case .atLeast(let inner, let m):
            return Swift.max(inner.evaluate(x: x, previous: previous), m)
        case .atMost(let inner, let m):
            return Swift.min(inner.evaluate(x: x, previous: previous), DelayMath.seconds(m))
        case .fullJitter(let inner, let random):
            return inner.evaluate(x: x, previous: previous) * random.unit()
        case .equalJitter(let inner, let random):
            let half = inner.evaluate(x: x, previous: previous) / 2
            return half + half * random.unit()
        case .proportionalJitter(let inner, let p, let cap, let random):
            let f = inner.evaluate(x: x, previous: previous)
            // The range [f·(1 − p), f·(1 + p)) is capped before drawing, so that at the cap delays stay spread over
            // [f·(1 − p), cap) instead of piling up at the cap.
            let high = Swift.min(DelayMath.clamp(f * (1 + p)), cap)
            let low = Swift.min(DelayMath.clamp(f * (1 - p)), high)
            return low + (high - low) * random.unit()
        }
    }
}

// MARK: - Base curves

extension BackoffStrategy {
    /// No delay between attempts: f(x) = 0.
    ///
    /// Runners carry out a zero delay without arming a timer or suspending. Available for any clock.
    @inlinable
    public static var none: Self {
        // Inlinable: the check is a constant once specialized, and the default strategy costs no call.
        if C.Duration.self == Duration.self { return Self(storage: .curve(.none, cap: nil)) }
        return Self(storage: .closure({ _ in .zero }, cap: nil))
    }

    /// The same delay before every retry: f(x) = c.
    ///
    /// Available for any clock.
    ///
    /// - Parameter c: The delay. Negative values count as zero.
    public static func constant(_ c: C.Duration) -> Self {
        if let c = c as? Duration { return Self(.constant(DelayMath.seconds(c)), cap: nil) }
        return Self(storage: .closure({ _ in c }, cap: nil))
    }

    /// A delay that grows linearly: f(x) = a·x + b.
    ///
    /// Available for any clock; for a duration type other than `Swift.Duration`, computed with that type's own
    /// arithmetic.
    ///
    /// - Parameters:
    ///   - a: The growth per retry. Negative values count as zero.
    ///   - b: The first delay. Negative values count as zero.
    public static func linear(a: C.Duration, b: C.Duration) -> Self {
        if let a = a as? Duration, let b = b as? Duration {
            return Self(.linear(a: DelayMath.seconds(a), b: DelayMath.seconds(b)), cap: nil)
        }
        return Self(storage: .closure({ x in a * Swift.max(x, 0) + b }, cap: nil))
    }
}

extension BackoffStrategy where C.Duration == Duration {
    /// A delay that grows exponentially: f(x) = a·bˣ.
    ///
    /// Growth saturates at ``saturationLimit`` instead of overflowing, so a cap applied afterwards with ``max(_:)``
    /// always holds, at any x.
    ///
    /// - Parameters:
    ///   - a: The first delay. Negative values count as zero.
    ///   - b: The growth factor. `+infinity` saturates from x = 1; NaN or a negative factor counts as 1 (the delay stays
    ///     `a`); 0 gives `a` at x = 0 and 0 afterwards.
    public static func exponential(a: C.Duration, b: Double) -> Self {
        Self(.exponential(a: DelayMath.seconds(a), b: sanitizedFactor(b)), cap: nil)
    }

    /// Alamofire's exponential backoff: f(x) = scale·baseˣ seconds.
    ///
    /// `.exponential(scale: 0.5, base: 2)` waits 0.5 s, 1 s, 2 s, … like Alamofire's `RetryPolicy` defaults.
    ///
    /// - Parameters:
    ///   - scale: The first delay, in seconds. NaN or negative counts as 0; `+infinity` saturates.
    ///   - base: The growth factor, with the same rules as ``exponential(a:b:)``'s `b`.
    public static func exponential(scale: Double, base: Double) -> Self {
        Self(.exponential(a: DelayMath.clamp(scale), b: sanitizedFactor(base)), cap: nil)
    }

    /// Decorrelated jitter: f(x) = U[base, min(cap, 3·previous)), starting from previous = base.
    ///
    /// The well-known form from the AWS Architecture Blog draws `U[base, 3·previous)` and then caps the result, which
    /// piles delays up at exactly the cap once `3·previous` exceeds it (the reason Polly dropped it). RetryKit caps the
    /// range *before* drawing, so at the cap delays stay spread uniformly over `[base, cap)`.
    ///
    /// `previous` is the last delay a backoff computed for this retrier (see ``delay(forRetry:previous:)``); a
    /// previous delay below `base` counts as `base`. If `cap < base`, every delay is `cap`; if `base` is 0, every delay
    /// is 0, whatever the previous delay (even one another strategy answered before), and nothing is drawn.
    ///
    /// **After a hint.** A ``RetryStrategy/retryAfter(_:)`` wait is the server's delay, not a step of this chain: it
    /// is not fed in as `previous`. The next backoff delay grows from the last delay the backoff itself computed (from
    /// `base` if there was none), so one long `Retry-After` does not inflate the delays that follow it.
    ///
    /// - Parameters:
    ///   - base: The smallest delay. Negative values count as zero.
    ///   - cap: The largest delay. Negative values count as zero.
    ///   - generator: The source of randomness; pass a seeded generator for reproducible delays.
    public static func decorrelatedJitter<T: RandomNumberGenerator>(
        base: C.Duration, cap: C.Duration, using generator: T = SystemRandomNumberGenerator()
    ) -> Self {
        let cap = DelayMath.wholeNanoseconds(cap)
        return Self(
            .decorrelated(base: DelayMath.seconds(base), cap: DelayMath.seconds(cap), RandomSource(generator)), cap: cap
        )
    }

    /// A delay computed by your own closure from the 0-based retry index: f(x) = body(x).
    ///
    /// The result is clamped to `[0, saturationLimit]`. The closure runs on the runner's queue or task, never while
    /// RetryKit holds a lock. ``init(duration:)`` is the same for any clock.
    public static func custom(_ body: @escaping @Sendable (_ retryIndex: Int) -> Duration) -> Self {
        Self(.custom(body), cap: nil)
    }

    private static func sanitizedFactor(_ b: Double) -> Double {
        b >= 0 ? b : 1  // NaN and negative factors count as 1
    }
}

// MARK: - Modifiers

extension BackoffStrategy {
    /// Enforces a minimum delay: max(f(x), m).
    ///
    /// Available for any clock.
    ///
    /// - Parameter m: The minimum. Negative values count as zero. A cap wins over a minimum, whatever the order: if a
    ///   ``max(_:)`` before or after this is below `m`, the delay is that cap.
    public func min(_ m: C.Duration) -> Self {
        switch storage {
        case .curve(let curve, let cap):
            guard let m = m as? Duration else { return self }  // always a `Swift.Duration`: curves are built only then
            // Below the chain's cap, so that the cap holds: max(f(x), min(m, cap)).
            let capSeconds = cap.map(DelayMath.seconds) ?? DelayMath.limitSeconds
            return Self(.atLeast(curve, Swift.min(DelayMath.seconds(m), capSeconds)), cap: cap)
        case .closure(let base, let cap):
            let floor = cap.map { Swift.min(m, $0) } ?? m
            return Self(storage: .closure({ x in Swift.max(base(x), floor) }, cap: cap))
        }
    }

    /// Caps the delay: min(f(x), M).
    ///
    /// The delay never exceeds `M`, exactly, at any x, whatever modifiers follow: a later ``min(_:)`` cannot raise it
    /// above `M`, and jitter after it draws below `M` (see "A cap is a cap" above). Available for any clock.
    ///
    /// - Parameter M: The cap. Negative values count as zero; a cap that is not a whole number of nanoseconds is
    ///   rounded down to one, like every delay.
    public func max(_ M: C.Duration) -> Self {
        switch storage {
        case .curve(let curve, let cap):
            guard let M = M as? Duration else { return self }  // always a `Swift.Duration`: curves are built only then
            let bound = DelayMath.wholeNanoseconds(M)
            return Self(.atMost(curve, bound), cap: Swift.min(cap ?? bound, bound))
        case .closure(let base, let cap):
            return Self(storage: .closure({ x in Swift.min(base(x), M) }, cap: cap.map { Swift.min($0, M) } ?? M))
        }
    }
}

extension BackoffStrategy where C.Duration == Duration {
    /// Full jitter: a delay drawn uniformly from [0, f(x)).
    ///
    /// Unlike the library RetryKit is compatible with, this needs no macOS 15. `.none.jitter()` is 0.
    ///
    /// - Parameter generator: The source of randomness. A value-type generator is copied into the strategy once and
    ///   then advances with every draw it serves, shared by all copies of the strategy. It is never called while
    ///   RetryKit holds a lock, so it may call into RetryKit, even draw from this strategy, and never by two draws at
    ///   once: a draw that overlaps another (nested in the generator, or on another thread) uses
    ///   `SystemRandomNumberGenerator` instead.
    public func jitter<T: RandomNumberGenerator>(using generator: T = SystemRandomNumberGenerator()) -> Self {
        Self(.fullJitter(parts.curve, RandomSource(generator)), cap: parts.cap)
    }

    /// Equal jitter: f(x)/2 + U[0, f(x)/2).
    ///
    /// Keeps at least half of the computed delay while still spreading retries.
    public func equalJitter<T: RandomNumberGenerator>(using generator: T = SystemRandomNumberGenerator()) -> Self {
        Self(.equalJitter(parts.curve, RandomSource(generator)), cap: parts.cap)
    }

    /// Proportional jitter: f(x)·U[1 − p, 1 + p), gRPC's form (p = 0.2 gives 0.8…1.2).
    ///
    /// After a ``max(_:)``, the range is capped before the draw: U[f(x)·(1 − p), min(f(x)·(1 + p), M)), so that the cap
    /// holds and delays at the cap stay spread below it instead of piling up at exactly `M`.
    ///
    /// - Parameters:
    ///   - p: The spread, clamped to `[0, 1]`; NaN counts as 0. `0.2` by default.
    ///   - generator: The source of randomness.
    public func proportionalJitter<T: RandomNumberGenerator>(
        _ p: Double = 0.2, using generator: T = SystemRandomNumberGenerator()
    ) -> Self {
        let spread = DelayMath.unitFraction(p)
        return Self(.proportionalJitter(parts.curve, spread, cap: capSeconds, RandomSource(generator)), cap: parts.cap)
    }

    /// The same strategy for another clock type (see ``init(_:)``); kept for the package's own call sites.
    package func retagged<D: Clock>(for clock: D.Type = D.self) -> BackoffStrategy<D> where D.Duration == Duration {
        BackoffStrategy<D>(self)
    }
}

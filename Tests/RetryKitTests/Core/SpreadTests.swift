import RetryKit
import RetryKitTesting
import Testing

/// A generator that always returns the same word (`UInt64.max`: every draw the largest its range allows), counting its
/// calls.
private struct FixedGenerator: RandomNumberGenerator {
    let word: UInt64
    var calls = 0
    mutating func next() -> UInt64 {
        calls += 1
        return word
    }
}

/// The largest extra the core's spread draws: 9·10¹⁸ ns.
private let maxExtra = Duration.nanoseconds(9_000_000_000_000_000_000)

/// Durations from nothing to far beyond the saturation limit, including some whose nanoseconds a `Double` rounds.
private let durations: [Duration] = [
    .seconds(-1), .zero, .nanoseconds(1), .milliseconds(1) + .nanoseconds(1), .seconds(5), .seconds(60),
    .nanoseconds(18_014_398_509_481_987), BackoffStrategy<ContinuousClock>.saturationLimit, maxExtra,
    .seconds(Int64.max), .seconds(Int64.max) + .seconds(Int64.max),
]

@Suite("Core: the Retry-After spread's formula")
struct SpreadTests {
    @Test("every wait lies in [hint, max(hint, cap)] and lengthens the hint by at most the room, huge inputs included")
    func bounds() {
        var seeded = SeededRandomNumberGenerator(seed: 0x5EED)
        for hint in durations {
            for room in durations {
                for cap in durations {
                    let floor = max(hint, .zero)
                    let ceiling = max(floor, cap)
                    var top = FixedGenerator(word: .max)
                    let waits = [
                        DelayMath.spread(hint, by: room, cap: cap, using: &top),
                        DelayMath.spread(hint, by: room, cap: cap, using: &seeded),
                    ]
                    for wait in waits {
                        #expect(wait >= floor && wait <= ceiling, "hint \(hint) room \(room) cap \(cap): \(wait)")
                        #expect(wait - floor <= max(room, .zero), "hint \(hint) room \(room) cap \(cap): \(wait)")
                        #expect(wait - floor <= maxExtra, "hint \(hint) room \(room) cap \(cap): \(wait)")
                    }
                    let hasRoom = room > .zero && cap > floor
                    #expect((top.calls > 0) == hasRoom, "the generator is called only when there is room")
                }
            }
        }
    }

    @Test("the largest draw reaches the cap to the nanosecond, even where a Double would round past it")
    func reachesTheCapExactly() {
        // 2⁵⁴ + 3 ns: a `Double` rounds it up to 2⁵⁴ + 4, one nanosecond past the cap.
        let cap = Duration.nanoseconds(18_014_398_509_481_987)
        var top = FixedGenerator(word: .max)
        #expect(DelayMath.spread(.zero, by: cap, cap: cap, using: &top) == cap)
        #expect(DelayMath.spread(.seconds(1), by: .seconds(2), cap: .seconds(60), using: &top) == .seconds(3))
    }

    @Test("a room beyond 9·10¹⁸ ns saturates there instead of trapping")
    func saturatesAtHugeInputs() {
        var top = FixedGenerator(word: .max)
        let huge = Duration.seconds(Int64.max) + .seconds(Int64.max)
        let wait = DelayMath.spread(.zero, by: huge, cap: huge, using: &top)
        #expect(wait <= maxExtra)
        #expect(wait > maxExtra - .seconds(1))
        // A hint at the top is kept as it is: no room is left below the cap.
        #expect(DelayMath.spread(huge, by: huge, cap: .seconds(Int64.max), using: &top) == huge)
        #expect(DelayMath.spread(huge, by: huge, cap: huge, using: &top) == huge)
    }

    @Test("the proportional room is p·d with p clamped to [0, 1] (NaN counts as 0) and d below zero counting as zero")
    func share() {
        #expect(DelayMath.share(0.1, of: .seconds(5)) == .milliseconds(500))
        #expect(DelayMath.share(7, of: .seconds(5)) == .seconds(5))
        #expect(DelayMath.share(.infinity, of: .seconds(5)) == .seconds(5))
        #expect(DelayMath.share(-1, of: .seconds(5)) == .zero)
        #expect(DelayMath.share(.nan, of: .seconds(5)) == .zero)
        #expect(DelayMath.share(0.5, of: .seconds(-5)) == .zero)
        #expect(DelayMath.share(0.25, of: .seconds(8)) == .seconds(2))
        // A room beyond the largest extra saturates there (the spread treats it as any larger room), without trapping
        // even next to the largest `Duration`.
        #expect(DelayMath.share(1, of: .seconds(Int64.max)) == maxExtra)
        #expect(DelayMath.share(0.5, of: .seconds(Int64.max) * 18) == maxExtra)
        #expect(DelayMath.share(1e-12, of: .seconds(Int64.max)) < maxExtra)
        #expect(DelayMath.share(1e-12, of: .seconds(Int64.max)) > .seconds(9_223_372))
    }
}

import RetryKit
import RetryKitTesting
import Testing

private typealias Backoff = BackoffStrategy<ContinuousClock>

private let limit = Backoff.saturationLimit

/// Durations at and around every edge the core converts or clamps.
private let extremeDurations: [Duration] = [
    .zero,
    .nanoseconds(1),
    .nanoseconds(-1),
    Duration(secondsComponent: 0, attosecondsComponent: 1),
    Duration(secondsComponent: 0, attosecondsComponent: -1),
    Duration(secondsComponent: 0, attosecondsComponent: 1_600_000_000),  // 1.6 ns
    .milliseconds(100),
    .seconds(1),
    .seconds(60),
    .seconds(-1),
    .seconds(999_999_999) + .nanoseconds(999_999_999),
    .seconds(1_000_000_000),
    .seconds(1_000_000_001),
    Duration(secondsComponent: 123_456_789, attosecondsComponent: 987_654_321_987_654_321),
    .seconds(Int64.max),
    .seconds(Int64.min),
    .seconds(Int64.max) + .seconds(Int64.max),  // beyond Int64 seconds
    .seconds(Int64.min) + .seconds(Int64.min),
]

private let extremeFactors: [Double] = [
    .nan, .infinity, -.infinity, -1, -0.0, 0, .leastNonzeroMagnitude, 0.5, 1, 1.5, 2, 10, .greatestFiniteMagnitude,
]

private let extremeIndices: [Int] = [0, 1, 5, 29, 30, 67, 68, 1_000, 10_000, Int.max, -1, Int.min]

/// Builds random strategies (with a readable description) from a seeded generator.
private struct StrategyFuzzer {
    var random: SeededRandomNumberGenerator

    mutating func pick<T>(_ values: [T]) -> T {
        values[Int.random(in: 0..<values.count, using: &random)]
    }

    mutating func duration() -> Duration {
        switch Int.random(in: 0..<3, using: &random) {
        case 0:
            return pick(extremeDurations)
        case 1:
            return .nanoseconds(Int64.random(in: -1_000_000_000...100_000_000_000, using: &random))
        default:
            return Duration(
                secondsComponent: Int64.random(in: -3_000_000_000...3_000_000_000, using: &random),
                attosecondsComponent: Int64.random(in: 0..<1_000_000_000_000_000_000, using: &random))
        }
    }

    mutating func factor() -> Double {
        Bool.random(using: &random) ? pick(extremeFactors) : Double.random(in: -3...30, using: &random)
    }

    mutating func generator() -> SeededRandomNumberGenerator {
        SeededRandomNumberGenerator(seed: random.next())
    }

    mutating func curve() -> (Backoff, String) {
        switch Int.random(in: 0..<8, using: &random) {
        case 0:
            return (.none, ".none")
        case 1:
            let c = duration()
            return (.constant(c), ".constant(\(c))")
        case 2:
            let (a, b) = (duration(), duration())
            return (.linear(a: a, b: b), ".linear(a: \(a), b: \(b))")
        case 3:
            let (a, b) = (duration(), factor())
            return (.exponential(a: a, b: b), ".exponential(a: \(a), b: \(b))")
        case 4:
            let (scale, base) = (factor(), factor())
            return (.exponential(scale: scale, base: base), ".exponential(scale: \(scale), base: \(base))")
        case 5:
            let (base, cap) = (duration(), duration())
            return (
                .decorrelatedJitter(base: base, cap: cap, using: generator()),
                ".decorrelatedJitter(base: \(base), cap: \(cap))"
            )
        case 6:
            let d = duration()
            return (.custom { _ in d }, ".custom { \(d) }")
        default:
            return (.custom { .seconds($0) + .seconds($0) }, ".custom { 2x s }")
        }
    }

    /// A random strategy, its description, and the cap of its last modifier if that is `.max(M)`.
    mutating func strategy() -> (Backoff, String, cap: Duration?) {
        var (strategy, text) = curve()
        var cap: Duration? = nil
        for _ in 0..<Int.random(in: 0...3, using: &random) {
            cap = nil
            switch Int.random(in: 0..<5, using: &random) {
            case 0:
                let m = duration()
                (strategy, text) = (strategy.min(m), text + ".min(\(m))")
            case 1:
                let m = duration()
                (strategy, text, cap) = (strategy.max(m), text + ".max(\(m))", m)
            case 2:
                (strategy, text) = (strategy.jitter(using: generator()), text + ".jitter()")
            case 3:
                (strategy, text) = (strategy.equalJitter(using: generator()), text + ".equalJitter()")
            default:
                let p = factor()
                (strategy, text) = (
                    strategy.proportionalJitter(p, using: generator()), text + ".proportionalJitter(\(p))"
                )
            }
        }
        return (strategy, text, cap)
    }
}

/// `d` clamped to `[0, saturationLimit]`.
private func clamped(_ d: Duration) -> Duration {
    Swift.min(Swift.max(d, .zero), limit)
}

/// Checks the invariants every delay must satisfy and describes each violation.
private func violations(of strategy: Backoff, _ text: String, cap: Duration?, x: Int, previous: Duration?) -> [String] {
    let delay = strategy.delay(forRetry: x, previous: previous)
    var found: [String] = []
    let at = "\(text) at x = \(x), previous = \(previous.map { "\($0)" } ?? "nil")"
    if delay < .zero { found.append("negative \(delay): \(at)") }
    if delay > limit { found.append("above the saturation limit \(delay): \(at)") }
    if delay >= .zero, delay <= limit, delay.components.attoseconds % 1_000_000_000 != 0 {
        found.append("not a whole number of nanoseconds \(delay): \(at)")
    }
    if let cap, delay > clamped(cap) { found.append("above the cap \(cap) \(delay): \(at)") }
    return found
}

@Suite("Core: never trap")
struct NeverTrapTests {
    @Test("random strategies over extreme parameters are never negative, saturated, and honour a last .max")
    func randomStrategies() {
        var fuzzer = StrategyFuzzer(random: SeededRandomNumberGenerator(seed: 2024))
        var found: [String] = []
        var checked = 0
        for _ in 0..<3_000 {
            let (strategy, text, cap) = fuzzer.strategy()
            var indices = extremeIndices
            indices += (0..<3).map { _ in Int.random(in: Int.min...Int.max, using: &fuzzer.random) }
            for x in indices {
                let previous: Duration? = Bool.random(using: &fuzzer.random) ? nil : fuzzer.duration()
                found += violations(of: strategy, text, cap: cap, x: x, previous: previous)
                checked += 1
            }
        }
        #expect(checked == 3_000 * (extremeIndices.count + 3))
        let count = found.count
        #expect(count == 0, "violations, first: \(found.prefix(5))")
    }

    @Test("every base curve with every extreme parameter stays in range", arguments: extremeDurations)
    func extremeParameters(_ d: Duration) {
        var found: [String] = []
        let strategies: [(Backoff, String)] = [
            (.constant(d), ".constant"),
            (.linear(a: d, b: d), ".linear(a: d, b: d)"),
            (.linear(a: d, b: .zero), ".linear(a: d, b: 0)"),
            (.linear(a: .nanoseconds(1), b: d), ".linear(a: 1 ns, b: d)"),
            (
                .decorrelatedJitter(base: d, cap: d, using: SeededRandomNumberGenerator(seed: 1)),
                ".decorrelatedJitter(d, d)"
            ),
            (
                .decorrelatedJitter(base: d, cap: .seconds(1), using: SeededRandomNumberGenerator(seed: 1)),
                ".decorrelated(d, 1 s)"
            ),
            (
                .decorrelatedJitter(base: .seconds(1), cap: d, using: SeededRandomNumberGenerator(seed: 1)),
                ".decorrelated(1 s, d)"
            ),
            (.custom { _ in d }, ".custom"),
            (.constant(.seconds(5)).min(d), ".constant(5 s).min(d)"),
            (.none.min(d).jitter(using: SeededRandomNumberGenerator(seed: 1)), ".none.min(d).jitter()"),
            (.none.min(d).equalJitter(using: SeededRandomNumberGenerator(seed: 1)), ".none.min(d).equalJitter()"),
            (
                .none.min(d).proportionalJitter(1, using: SeededRandomNumberGenerator(seed: 1)),
                ".none.min(d).proportionalJitter(1)"
            ),
        ]
        for factor in extremeFactors {
            for (strategy, text) in strategies + [(.exponential(a: d, b: factor), ".exponential(a: d, b: \(factor))")] {
                for x in extremeIndices {
                    for previous in [nil, d, .seconds(Int64.max)] {
                        found += violations(of: strategy, text, cap: nil, x: x, previous: previous)
                    }
                }
            }
            let capped = Backoff.exponential(a: .seconds(1), b: factor).max(d)
            for x in extremeIndices {
                found += violations(
                    of: capped, ".exponential(a: 1 s, b: \(factor)).max(d)", cap: d, x: x, previous: nil)
            }
        }
        let count = found.count
        #expect(count == 0, "\(d): violations, first: \(found.prefix(5))")
    }

    @Test(
        "exponential(a: 1 s, b: 2).max(60 s) is exactly 60 s far past overflow",
        arguments: [6, 30, 67, 68, 1_000, 10_000, Int.max])
    func cappedExponential(_ x: Int) {
        let strategy: Backoff = .exponential(a: .seconds(1), b: 2).max(.seconds(60))
        #expect(strategy.delay(forRetry: x) == .seconds(60))
        #expect(strategy.jitter(using: SeededRandomNumberGenerator(seed: 3)).delay(forRetry: x) <= .seconds(60))
    }

    @Test("exponential factors: +inf saturates from x = 1, NaN and negative count as 1, 0 gives a then 0")
    func exponentialFactors() {
        let infinite: Backoff = .exponential(a: .seconds(1), b: .infinity)
        #expect(infinite.delay(forRetry: 0) == .seconds(1))
        for x in [1, 68, Int.max] { #expect(infinite.delay(forRetry: x) == limit) }
        for factor in [Double.nan, -2, -Double.infinity, -0.5] {
            let strategy: Backoff = .exponential(a: .seconds(1), b: factor)
            for x in [0, 1, 68, 10_000, Int.max] { #expect(strategy.delay(forRetry: x) == .seconds(1)) }
        }
        let zero: Backoff = .exponential(a: .seconds(1), b: 0)
        #expect(zero.delay(forRetry: 0) == .seconds(1))
        for x in [1, 68, Int.max] { #expect(zero.delay(forRetry: x) == .zero) }
        let shrinking: Backoff = .exponential(a: .seconds(1), b: 0.5)
        #expect(shrinking.delay(forRetry: Int.max) == .zero)
        // A zero or negative first delay stays 0, even with an infinite factor.
        for a in [Duration.zero, .seconds(-1), .seconds(Int64.min)] {
            let strategy: Backoff = .exponential(a: a, b: .infinity)
            for x in [0, 1, Int.max] { #expect(strategy.delay(forRetry: x) == .zero) }
        }
        // Parameters are clamped before use: a first delay above the limit starts at the limit.
        let huge: Backoff = .exponential(a: .seconds(Int64.max), b: 0.5)
        #expect(huge.delay(forRetry: 0) == limit)
        #expect(huge.delay(forRetry: 1) == .seconds(500_000_000))
    }

    @Test("Alamofire's form: NaN or negative scale is 0, infinite scale saturates, NaN base counts as 1")
    func alamofireExtremes() {
        for scale in [Double.nan, -1, -Double.infinity, 0] {
            #expect(Backoff.exponential(scale: scale, base: 2).delay(forRetry: 3) == .zero)
        }
        #expect(Backoff.exponential(scale: .infinity, base: 2).delay(forRetry: 0) == limit)
        #expect(Backoff.exponential(scale: 0.5, base: .nan).delay(forRetry: 9) == .milliseconds(500))
        #expect(Backoff.exponential(scale: 0.5, base: 2).delay(forRetry: 10_000) == limit)
    }

    @Test("linear: negative parameters count as 0 and growth saturates at any x")
    func linearExtremes() {
        let negativeSlope: Backoff = .linear(a: .seconds(-1), b: .seconds(5))
        for x in [0, 1, Int.max] { #expect(negativeSlope.delay(forRetry: x) == .seconds(5)) }
        #expect(Backoff.linear(a: .nanoseconds(1), b: .zero).delay(forRetry: Int.max) == limit)
        #expect(Backoff.linear(a: .seconds(Int64.max), b: .seconds(Int64.max)).delay(forRetry: 0) == limit)
        #expect(Backoff.linear(a: .zero, b: .seconds(-5)).delay(forRetry: 3) == .zero)
    }

    @Test("Duration extremes: negative counts as 0, beyond the limit saturates, sub-nanosecond rounds")
    func durationExtremes() {
        #expect(Backoff.constant(.seconds(Int64.max)).delay(forRetry: 0) == limit)
        #expect(Backoff.constant(.seconds(Int64.max) + .seconds(Int64.max)).delay(forRetry: 0) == limit)
        #expect(Backoff.constant(.seconds(Int64.min)).delay(forRetry: 0) == .zero)
        #expect(Backoff.constant(.seconds(Int64.min) + .seconds(Int64.min)).delay(forRetry: 0) == .zero)
        #expect(Backoff.constant(Duration(secondsComponent: 0, attosecondsComponent: 1)).delay(forRetry: 0) == .zero)
        #expect(Backoff.custom { _ in .seconds(Int64.max) }.delay(forRetry: 0) == limit)
        #expect(Backoff.custom { _ in .seconds(Int64.min) + .seconds(Int64.min) }.delay(forRetry: 0) == .zero)
        #expect(Backoff.custom { .seconds($0) }.delay(forRetry: Int.max) == limit)
        #expect(Backoff.constant(.seconds(5)).min(.seconds(Int64.max)).delay(forRetry: 0) == limit)
        #expect(Backoff.constant(.seconds(5)).max(.seconds(Int64.min)).delay(forRetry: 0) == .zero)
        #expect(Backoff.constant(.seconds(5)).max(.zero).delay(forRetry: 0) == .zero)
    }

    @Test("an explicit last .max holds exactly, also for caps that are not whole nanoseconds")
    func capHoldsExactly() {
        let caps: [Duration] = [
            Duration(secondsComponent: 0, attosecondsComponent: 1),
            Duration(secondsComponent: 0, attosecondsComponent: 1_600_000_000),
            Duration(secondsComponent: 2, attosecondsComponent: 999_999_999_999_999_999),
            .seconds(999_999_999) + .nanoseconds(999_999_999),
            Duration(secondsComponent: 123_456_789, attosecondsComponent: 987_654_321_987_654_321),
            .seconds(8_388_607) + .nanoseconds(999_999_999),
        ]
        for cap in caps {
            let strategy: Backoff = .constant(.seconds(Int64.max)).max(cap)
            let delay = strategy.delay(forRetry: 0)
            #expect(delay <= cap, "cap \(cap) gave \(delay)")
            #expect(delay > cap - .nanoseconds(1), "cap \(cap) gave \(delay)")
            #expect(delay.components.attoseconds % 1_000_000_000 == 0)
        }
    }

    @Test("jitter of nothing is nothing: .none.jitter(), .equalJitter(), .proportionalJitter() are 0")
    func noneJitter() {
        for x in extremeIndices {
            #expect(Backoff.none.jitter().delay(forRetry: x) == .zero)
            #expect(Backoff.none.equalJitter().delay(forRetry: x) == .zero)
            #expect(Backoff.none.proportionalJitter(.infinity).delay(forRetry: x) == .zero)
        }
    }

    @Test("proportionalJitter(.nan) leaves the delay unchanged")
    func proportionalNaN() {
        let strategy: Backoff = .exponential(a: .milliseconds(100), b: 2).proportionalJitter(.nan)
        for x in 0...5 { #expect(strategy.delay(forRetry: x) == .milliseconds(100 << x)) }
    }

    @Test("decorrelated jitter with cap < base is always cap, whatever previous is")
    func decorrelatedCapBelowBase() {
        let strategy: Backoff = .decorrelatedJitter(base: .seconds(10), cap: .seconds(3))
        for previous in [nil, Duration.zero, .seconds(-1), .seconds(2), .seconds(100), .seconds(Int64.max)] {
            for x in extremeIndices { #expect(strategy.delay(forRetry: x, previous: previous) == .seconds(3)) }
        }
        let negativeCap: Backoff = .decorrelatedJitter(base: .seconds(1), cap: .seconds(-1))
        #expect(negativeCap.delay(forRetry: 0) == .zero)
    }

    @Test("min above max: the cap wins, in either order")
    func minAboveMax() {
        let strategy: Backoff = .exponential(a: .seconds(1), b: 2)
        for x in [0, 3, 68, Int.max] {
            #expect(strategy.min(.seconds(10)).max(.seconds(5)).delay(forRetry: x) == .seconds(5))
            #expect(strategy.max(.seconds(5)).min(.seconds(10)).delay(forRetry: x) == .seconds(5))
        }
    }
}

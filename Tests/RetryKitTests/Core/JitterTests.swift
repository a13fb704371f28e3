import RetryKit
import RetryKitTesting
import Testing

private typealias Backoff = BackoffStrategy<ContinuousClock>

/// Draws `count` delays from `strategy`, cycling x through 0…5, and returns each delay as a fraction of the
/// unjittered `base` delay at the same x.
private func ratios(_ strategy: Backoff, base: Backoff, count: Int = 10_000) -> [Double] {
    (0..<count).map { i in
        let x = i % 6
        return strategy.delay(forRetry: x).inSeconds / base.delay(forRetry: x).inSeconds
    }
}

private func mean(_ values: [Double]) -> Double {
    values.reduce(0, +) / Double(values.count)
}

/// One nanosecond, relative to the smallest delay used below (100 ms): the rounding slack of a bound.
private let slack = 1e-8

@Suite("Core: seeded jitter")
struct JitterTests {
    private let base: Backoff = .exponential(a: .milliseconds(100), b: 2)

    @Test("full jitter stays in [0, f(x)] with mean f/2 over 10,000 samples")
    func fullJitter() {
        let samples = ratios(base.jitter(using: SeededRandomNumberGenerator(seed: 1)), base: base)
        #expect(samples.allSatisfy { $0 >= 0 && $0 <= 1 })
        #expect(abs(mean(samples) - 0.5) <= 0.05 * 0.5)
        // The draws really spread over the range rather than sitting at one value.
        #expect((samples.min() ?? 1) < 0.01)
        #expect((samples.max() ?? 0) > 0.99)
    }

    @Test("equal jitter stays in [f/2, f(x)] with mean 3f/4 over 10,000 samples")
    func equalJitter() {
        let samples = ratios(base.equalJitter(using: SeededRandomNumberGenerator(seed: 2)), base: base)
        #expect(samples.allSatisfy { $0 >= 0.5 - slack && $0 <= 1 })
        #expect(abs(mean(samples) - 0.75) <= 0.05 * 0.75)
        #expect((samples.min() ?? 1) < 0.51)
        #expect((samples.max() ?? 0) > 0.99)
    }

    @Test("proportional jitter p = 0.2 stays in [0.8f, 1.2f] with mean f over 10,000 samples")
    func proportionalJitter() {
        let samples = ratios(base.proportionalJitter(0.2, using: SeededRandomNumberGenerator(seed: 3)), base: base)
        #expect(samples.allSatisfy { $0 >= 0.8 - slack && $0 <= 1.2 + slack })
        #expect(abs(mean(samples) - 1) <= 0.05)
        #expect((samples.min() ?? 1) < 0.81)
        #expect((samples.max() ?? 0) > 1.19)
    }

    @Test("proportional jitter's spread is clamped to [0, 1]")
    func proportionalClamp() {
        let wide = ratios(
            base.proportionalJitter(5, using: SeededRandomNumberGenerator(seed: 4)), base: base, count: 1_000)
        #expect(wide.allSatisfy { $0 >= 0 && $0 <= 2 + slack })
        let infinite = ratios(
            base.proportionalJitter(.infinity, using: SeededRandomNumberGenerator(seed: 4)), base: base)
        #expect(infinite.allSatisfy { $0 >= 0 && $0 <= 2 + slack })
        let negative = ratios(base.proportionalJitter(-0.5, using: SeededRandomNumberGenerator(seed: 4)), base: base)
        #expect(negative.allSatisfy { $0 == 1 })
    }

    @Test("decorrelated jitter at the cap (3·previous ≥ cap) stays in [base, cap] with mean (base + cap)/2")
    func decorrelatedAtCap() {
        let strategy: Backoff = .decorrelatedJitter(
            base: .milliseconds(100), cap: .seconds(1), using: SeededRandomNumberGenerator(seed: 5))
        for previous in [Duration.milliseconds(334), .seconds(1), .seconds(50)] {
            let samples = (0..<10_000).map { strategy.delay(forRetry: $0 % 6, previous: previous).inSeconds }
            #expect(samples.allSatisfy { $0 >= 0.1 - 1e-9 && $0 <= 1 })
            #expect(abs(mean(samples) - 0.55) <= 0.05 * 0.55)
            // Spread uniformly, not piled up at the cap.
            #expect(samples.filter { $0 >= 0.999 }.count < 100)
        }
    }

    @Test("decorrelated jitter starts from previous = base: the first delay is in [base, 3·base]")
    func decorrelatedFirst() {
        let strategy: Backoff = .decorrelatedJitter(
            base: .milliseconds(100), cap: .seconds(10), using: SeededRandomNumberGenerator(seed: 6))
        for previous in [nil, Duration.zero, .milliseconds(10), .seconds(-4)] {
            let samples = (0..<10_000).map { _ in strategy.delay(forRetry: 0, previous: previous).inSeconds }
            #expect(samples.allSatisfy { $0 >= 0.1 - 1e-9 && $0 <= 0.3 + 1e-9 })
            #expect(abs(mean(samples) - 0.2) <= 0.05 * 0.2)
        }
    }

    @Test("a decorrelated sequence fed its own delays stays in [base, min(cap, 3·previous)]")
    func decorrelatedSequence() {
        let strategy: Backoff = .decorrelatedJitter(
            base: .milliseconds(100), cap: .seconds(2), using: SeededRandomNumberGenerator(seed: 7))
        var previous: Duration? = nil
        var reachedNearCap = false
        for x in 0..<10_000 {
            let delay = strategy.delay(forRetry: x, previous: previous)
            let high = Swift.min(2, 3 * (previous ?? .milliseconds(100)).inSeconds)
            #expect(delay.inSeconds >= 0.1 - 1e-9 && delay.inSeconds <= high + 1e-9)
            if delay >= .milliseconds(1900) { reachedNearCap = true }
            previous = delay
        }
        #expect(reachedNearCap)
    }

    @Test("the same seed gives the same sequence, a different seed a different one")
    func reproducible() {
        func draws(_ seed: UInt64) -> [Duration] {
            let strategies: [Backoff] = [
                base.jitter(using: SeededRandomNumberGenerator(seed: seed)),
                base.equalJitter(using: SeededRandomNumberGenerator(seed: seed)),
                base.proportionalJitter(using: SeededRandomNumberGenerator(seed: seed)),
                .decorrelatedJitter(
                    base: .milliseconds(100), cap: .seconds(5), using: SeededRandomNumberGenerator(seed: seed)),
            ]
            return strategies.flatMap { strategy in (0..<50).map { strategy.delay(forRetry: $0 % 6) } }
        }
        #expect(draws(42) == draws(42))
        #expect(draws(42) != draws(43))
    }

    @Test("a value-type generator advances across calls on the same strategy value, shared by its copies")
    func generatorAdvances() {
        let strategy: Backoff = .constant(.seconds(1)).jitter(using: SeededRandomNumberGenerator(seed: 9))
        let first = strategy.delay(forRetry: 0)
        let second = strategy.delay(forRetry: 0)
        #expect(first != second)
        let distinct = Set((0..<100).map { _ in strategy.delay(forRetry: 0) })
        #expect(distinct.count > 95)

        // Copies share one generator: interleaved draws from two copies continue one sequence.
        let reference: Backoff = .constant(.seconds(1)).jitter(using: SeededRandomNumberGenerator(seed: 10))
        let original: Backoff = .constant(.seconds(1)).jitter(using: SeededRandomNumberGenerator(seed: 10))
        let copy = original
        let expected = (0..<6).map { _ in reference.delay(forRetry: 0) }
        let interleaved = (0..<6).map { i in (i.isMultiple(of: 2) ? original : copy).delay(forRetry: 0) }
        #expect(interleaved == expected)
    }

    @Test("the caller's generator is copied into the strategy, not advanced")
    func callerGeneratorUntouched() {
        var generator = SeededRandomNumberGenerator(seed: 11)
        let strategy: Backoff = .constant(.seconds(1)).jitter(using: generator)
        _ = strategy.delay(forRetry: 0)
        var fresh = SeededRandomNumberGenerator(seed: 11)
        #expect(generator.next() == fresh.next())
    }

    @Test("the system generator stays in bounds too")
    func systemGenerator() {
        let strategy: Backoff = base.max(.seconds(1)).jitter()
        for x in 0..<1_000 {
            let delay = strategy.delay(forRetry: x)
            #expect(delay >= .zero && delay <= .seconds(1))
        }
    }
}

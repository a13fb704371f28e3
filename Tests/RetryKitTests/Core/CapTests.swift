import Dispatch
import RetryKit
import RetryKitTesting
import Testing

private typealias Backoff = BackoffStrategy<ContinuousClock>

/// A generator that always returns the same word: `UInt64.max` makes every draw the largest `[0, 1)` allows.
private struct FixedGenerator: RandomNumberGenerator {
    let word: UInt64
    mutating func next() -> UInt64 { word }
}

private let top = FixedGenerator(word: .max)

/// Caps that are awkward for a `Double` in seconds: a few nanoseconds, fractions that are not binary, and values near
/// the saturation limit where a `Double` is coarser than a nanosecond.
private let caps: [Duration] = [
    .nanoseconds(1), .nanoseconds(3), .nanoseconds(7), .seconds(1) + .nanoseconds(1),
    .milliseconds(300) + .nanoseconds(1), .seconds(123_456_789) + .nanoseconds(987_654_321),
    .seconds(999_999_999) + .nanoseconds(999_999_999), Backoff.saturationLimit - .nanoseconds(1),
    Backoff.saturationLimit,
]

/// Curves at, just above and far above each cap.
private func curves(over cap: Duration) -> [(String, Backoff)] {
    [
        ("constant(cap)", .constant(cap)), ("constant(cap + 1 ns)", .constant(cap + .nanoseconds(1))),
        ("constant(cap · 1.5)", .constant(cap * 1.5)),
        ("exponential(a: 1 s, b: 2)", .exponential(a: .seconds(1), b: 2)),
        ("linear(a: cap, b: cap)", .linear(a: cap, b: cap)),
        ("decorrelated(cap, limit)", .decorrelatedJitter(base: cap, cap: Backoff.saturationLimit, using: top)),
    ]
}

/// Modifier chains written after a `max(cap)`.
private func afterCap(_ capped: Backoff, _ cap: Duration) -> [(String, Backoff)] {
    [
        ("", capped), (".min(cap)", capped.min(cap)), (".min(cap + 1 ns)", capped.min(cap + .nanoseconds(1))),
        (".min(2 · cap)", capped.min(cap * 2)), (".min(limit)", capped.min(Backoff.saturationLimit)),
        (".jitter()", capped.jitter(using: top)), (".equalJitter()", capped.equalJitter(using: top)),
        (".proportionalJitter(0.2)", capped.proportionalJitter(0.2, using: top)),
        (".proportionalJitter(1)", capped.proportionalJitter(1, using: top)),
        (".proportionalJitter(1).min(2 · cap)", capped.proportionalJitter(1, using: top).min(cap * 2)),
        (".equalJitter().proportionalJitter(0.5)", capped.equalJitter(using: top).proportionalJitter(0.5, using: top)),
        (".min(2 · cap).jitter().min(limit)", capped.min(cap * 2).jitter(using: top).min(Backoff.saturationLimit)),
    ]
}

@Suite("Core: a cap is a cap (issue 13.2)")
struct CapTests {
    @Test(
        "max(M) followed by min, jitter, equalJitter or proportionalJitter never exceeds M, generator at its maximum",
        arguments: caps)
    func capHolds(cap: Duration) {
        for (curveName, curve) in curves(over: cap) {
            for (chainName, strategy) in afterCap(curve.max(cap), cap) {
                for x in [0, 1, 2, 30, 70, 1_000, Int.max] {
                    let delay = strategy.delay(forRetry: x, previous: cap)
                    #expect(
                        delay <= cap && delay >= .zero,
                        "\(curveName).max(\(cap))\(chainName) at x = \(x): \(delay) exceeds the cap by \(delay - cap)")
                }
            }
        }
    }

    @Test("decorrelatedJitter's own cap holds, whatever follows, with the generator at its maximum", arguments: caps)
    func decorrelatedCapHolds(cap: Duration) {
        let strategy: Backoff = .decorrelatedJitter(base: .nanoseconds(1), cap: cap, using: top)
        for (name, chain) in afterCap(strategy, cap) {
            for previous in [nil, cap, Backoff.saturationLimit] {
                let delay = chain.delay(forRetry: 5, previous: previous)
                #expect(
                    delay <= cap, "decorrelated(cap: \(cap))\(name) after \(String(describing: previous)): \(delay)")
            }
        }
    }

    @Test("A later min above the cap gives the cap; a min below it still lifts short delays")
    func minAfterCap() {
        let strategy: Backoff = .exponential(a: .milliseconds(100), b: 2).max(.seconds(1))
        #expect(strategy.min(.seconds(5)).delay(forRetry: 0) == .seconds(1))
        #expect(strategy.min(.milliseconds(300)).delay(forRetry: 0) == .milliseconds(300))
        #expect(strategy.min(.milliseconds(300)).delay(forRetry: 10) == .seconds(1))
    }

    @Test("Proportional jitter at the cap spreads over [f·(1 − p), cap) instead of piling up at the cap")
    func proportionalJitterAtTheCapStaysSpread() {
        let cap = Duration.seconds(30)
        let strategy: Backoff = .exponential(a: .seconds(1), b: 2).max(cap)
            .proportionalJitter(0.2, using: SeededRandomNumberGenerator(seed: 7))
        let delays = (0..<2_000).map { _ in strategy.delay(forRetry: 20) }
        #expect(delays.allSatisfy { $0 >= .seconds(24) && $0 <= cap })
        #expect(delays.filter { $0 == cap }.count <= 1, "no pile-up at exactly the cap")
        #expect(Set(delays).count > 1_900)
        let mean = delays.reduce(Duration.zero, +) / delays.count
        #expect(mean > .seconds(26.5) && mean < .seconds(27.5), "uniform over [24 s, 30 s): mean 27 s, got \(mean)")
        // Below the cap the spread is the documented f·U[1 − p, 1 + p).
        let low = (0..<2_000).map { _ in strategy.delay(forRetry: 2) }
        #expect(low.allSatisfy { $0 >= .seconds(3.2) && $0 <= .seconds(4.8) })
        #expect(low.contains { $0 > .seconds(4.6) })
    }
}

@Suite("Core: decorrelated jitter after a Retry-After hint (issue 13.3)")
struct DecorrelatedAfterHintTests {
    let queue = DispatchQueue(label: "decorrelated-after-hint")

    /// The waits of a callback retrier whose first failure answers with a 100 s hint and the others with `backoff`.
    private func waits(_ backoff: Backoff, attempts: Int = 6) -> [Duration] {
        let scheduler = VirtualScheduler()
        let waits = Locked<[Duration]>([])
        retry(
            maxAttempts: attempts, on: queue, scheduler: scheduler,
            operation: { attempt, done in done(.failure(TestError(attempt.number))) },
            strategy: { error in (error as? TestError)?.id == 1 ? .retryAfter(.seconds(100)) : .backoff(backoff) },
            observer: { event in
                if case .attemptFailed(_, _, .retry(let delay)) = event { waits.withLock { $0.append(delay) } }
            }, completion: { (_: Result<Int, any Error>, _) in })
        scheduler.run()
        return waits.withLock { $0 }
    }

    @Test("decorrelatedJitter(base: 0) stays at 0 after a hint: the hint is not the chain's previous delay")
    func zeroBaseStaysZero() {
        let delays = waits(.decorrelatedJitter(base: .zero, cap: .seconds(1_000), using: top))
        #expect(delays == [.seconds(100), .zero, .zero, .zero, .zero])
    }

    @Test("After a hint the chain grows from base, then from its own previous delay")
    func chainIgnoresTheHint() {
        // The generator at its maximum makes every draw just below min(cap, 3 · previous).
        let delays = waits(.decorrelatedJitter(base: .seconds(1), cap: .seconds(1_000), using: top))
        #expect(delays.count == 5)
        #expect(delays.first == .seconds(100))
        let backoff = Array(delays.dropFirst())
        // From base: at most 3 s, then 9 s, 27 s, 81 s (never 300 s, which 3 · the hint would give).
        for (delay, bound) in zip(backoff, [3.0, 9.0, 27.0, 81.0]) {
            #expect(delay <= .seconds(bound) && delay > .seconds(bound * 0.999), "\(backoff)")
        }
    }

    @Test("A hint between two backoff delays does not reset the chain either")
    func hintInTheMiddle() {
        let scheduler = VirtualScheduler()
        let waits = Locked<[Duration]>([])
        let backoff: Backoff = .decorrelatedJitter(base: .seconds(1), cap: .seconds(1_000), using: top)
        retry(
            maxAttempts: 5, on: queue, scheduler: scheduler,
            operation: { attempt, done in done(.failure(TestError(attempt.number))) },
            strategy: { error in (error as? TestError)?.id == 2 ? .retryAfter(.milliseconds(10)) : .backoff(backoff) },
            observer: { event in
                if case .attemptFailed(_, _, .retry(let delay)) = event { waits.withLock { $0.append(delay) } }
            }, completion: { (_: Result<Int, any Error>, _) in })
        scheduler.run()
        let delays = waits.withLock { $0 }
        #expect(delays.count == 4)
        #expect(delays[1] == .milliseconds(10))
        // Backoff delays: just below 3 s, (hint), just below 9 s (from 3 s, not from 10 ms), just below 27 s.
        #expect(delays[0] > .seconds(2.99) && delays[0] <= .seconds(3))
        #expect(delays[2] > .seconds(8.99) && delays[2] <= .seconds(9))
        #expect(delays[3] > .seconds(26.9) && delays[3] <= .seconds(27))
    }
}

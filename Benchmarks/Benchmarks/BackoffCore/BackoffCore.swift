// The pure backoff core, through RetryKit's public API: the cost of one `delay(forRetry:previous:)` call.
//
// Each benchmark iteration asks for 1,000 delays (scalingFactor .kilo), cycling the retry index over 0..<16, so the
// reported time and malloc counts are per call. The baseline computes the same capped, jittered delay by hand in the
// same run.
//
// RetryStateMachine (the attempt/decision engine) is `package`-visible only, so it cannot be driven from this separate
// package; its cost ("fail, fail, succeed") is measured through the runners in the runner benchmarks (see README.md,
// "To come").

import Benchmark
import BenchmarkSupport
import RetryKit

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        timeUnits: .nanoseconds,
        scalingFactor: .kilo,
        maxDuration: benchmarkMaxDuration(.seconds(1)),
        maxIterations: benchmarkMaxIterations(100_000)
    )

    /// The retry indices each iteration cycles through (0...15 covers growth and the cap: 10 ms · 2^8 > 2 s).
    let indexMask = 15

    func exponential() -> BackoffStrategy<ContinuousClock> {
        .exponential(a: .milliseconds(10), b: 2).max(.seconds(2))
    }

    Benchmark("delay: exponential.max, no jitter") { benchmark in
        let strategy = exponential()
        for i in benchmark.scaledIterations {
            blackHole(strategy.delay(forRetry: i & indexMask))
        }
    }

    Benchmark("delay: exponential.max.jitter(using:), seeded generator") { benchmark in
        let strategy = exponential().jitter(using: SplitMix64(seed: 42))
        for i in benchmark.scaledIterations {
            blackHole(strategy.delay(forRetry: i & indexMask))
        }
    }

    Benchmark("delay: exponential.max.jitter(using:), seeded, x = 10,000 (saturated)") { benchmark in
        let strategy = exponential().jitter(using: SplitMix64(seed: 42))
        for _ in benchmark.scaledIterations {
            blackHole(strategy.delay(forRetry: identity(10_000)))
        }
    }

    Benchmark("delay: decorrelatedJitter, previous fed back, seeded generator") { benchmark in
        let strategy: BackoffStrategy<ContinuousClock> = .decorrelatedJitter(
            base: .milliseconds(5), cap: .seconds(2), using: SplitMix64(seed: 42))
        var previous: Duration?
        for i in benchmark.scaledIterations {
            let delay = strategy.delay(forRetry: i & indexMask, previous: previous)
            previous = delay
            blackHole(delay)
        }
    }

    Benchmark("delay: exponential.max.jitter(), system generator") { benchmark in
        let strategy = exponential().jitter()
        for i in benchmark.scaledIterations {
            blackHole(strategy.delay(forRetry: i & indexMask))
        }
    }

    // Baselines: the same capped full-jitter delay written by hand for this benchmark (Double milliseconds, one draw,
    // then a Duration), without RetryKit's saturation, strategy composition or locked generator box.
    func handWritten(_ x: Int, _ unit: Double) -> Duration {
        let capped = Swift.min(2_000, 10 * Double(1 << x))
        return .nanoseconds(Int64(capped * unit * 1_000_000))
    }

    Benchmark("baseline: hand-written min(2 s, 10 ms · 2^x) · U[0, 1), seeded generator") { benchmark in
        var generator = SplitMix64(seed: 42)
        for i in benchmark.scaledIterations {
            blackHole(handWritten(i & indexMask, generator.nextUnit()))
        }
    }

    Benchmark("baseline: hand-written min(2 s, 10 ms · 2^x) · U[0, 1), system generator") { benchmark in
        var generator = SystemRandomNumberGenerator()
        for i in benchmark.scaledIterations {
            blackHole(handWritten(i & indexMask, Double(generator.next() >> 11) * 0x1p-53))
        }
    }
}

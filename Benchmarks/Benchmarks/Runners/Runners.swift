// The retry runners against hand-written baselines, in the same process and the same run.
//
// - Callback runner (`retry(…, on: queue, …)`): 1,000 retriers per sample, run one after another (each started from
//   the previous one's completion, on the queue), so the time per iteration is the time per retrier including every
//   queue hop, and one semaphore wait per sample is spread over 1,000 retriers. The baseline is the hand-written
//   recursive `requestWithRetry`: every attempt is dispatched with `queue.async`, the operation calls back, the handler
//   recurses or completes. Both chains are the `Workloads` module's (`runCallbackChain`), which instr-workloads and
//   alloc-check measure too.
// - Async `retry`: 1,000 calls per sample in one task, against calling the operation directly.
// - Bridges: `withRetry` around a completion-handler operation, against a bare `withCheckedThrowingContinuation`
//   around the same operation.
//
// Every operation fails with the same pre-boxed error, in the baselines too, so that no row pays for boxing a new error
// per failure. Names start with the figure they belong to; `bench-report` matches on these names to build the table
// in README.md, so keep them in sync with `Sources/BenchReport/main.swift`.

import Benchmark
import BenchmarkSupport
import Dispatch
import RetryKit
import Workloads

/// The failure every flaky operation reports.
struct Flaky: Error {}

/// Pre-boxed, so that no failure allocates an error box (the same in every row).
let flaky: any Error = Flaky()

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        timeUnits: .nanoseconds,
        warmupIterations: 3,
        scalingFactor: .kilo,
        maxDuration: benchmarkMaxDuration(.seconds(1)),
        maxIterations: benchmarkMaxIterations(10_000)
    )
    callbackBenchmarks()
    asyncBenchmarks()
    bridgeBenchmarks()
}

// MARK: - Callback runner

func callbackBenchmarks() {
    let cases: [(String, CallbackOperation)] = [
        ("fails twice, done before returning", .failTwiceNow),
        ("succeeds at once, done before returning", .succeedNow),
        ("fails twice, done later on the queue", .failTwiceLater),
    ]
    for (label, operation) in cases {
        let configuration = Benchmark.Configuration(
            maxDuration: benchmarkMaxDuration(.seconds(2)), maxIterations: benchmarkMaxIterations(10_000))
        Benchmark("callback: RetryKit, \(label)", configuration: configuration) { benchmark in
            blackHole(runCallbackChain(benchmark.scaledIterations.count, retryKit: true, operation))
        }
        Benchmark("callback: hand-written, \(label)", configuration: configuration) { benchmark in
            blackHole(runCallbackChain(benchmark.scaledIterations.count, retryKit: false, operation))
        }
    }
}

// MARK: - Async retry

/// Counts calls; the operations below fail until the count reaches `succeedAt`.
final class CallCounter {
    var calls = 0
}

/// An async operation that fails until its `succeedAt`-th call. Not inlined, like an operation from another module.
@inline(never)
func asyncOperation(_ counter: CallCounter, succeedAt: Int) async throws -> Int {
    counter.calls += 1
    if counter.calls < succeedAt { throw flaky }
    return counter.calls
}

func asyncBenchmarks() {
    for succeedAt in [1, 3] {
        let label = succeedAt == 1 ? "succeeds at once" : "fails twice, .none"
        Benchmark("async: RetryKit, \(label)") { benchmark in
            for _ in benchmark.scaledIterations {
                let counter = CallCounter()
                blackHole(try await retry { try await asyncOperation(counter, succeedAt: succeedAt) })
            }
        }
        Benchmark("async: direct, \(label)") { benchmark in
            for _ in benchmark.scaledIterations {
                let counter = CallCounter()
                // The operation called directly until it succeeds: no limit, no strategy, no delay.
                while true {
                    do {
                        blackHole(try await asyncOperation(counter, succeedAt: succeedAt))
                        break
                    } catch {
                        continue
                    }
                }
            }
        }
    }
}

// MARK: - Bridges

/// The queue a "later" completion-handler operation calls back on.
let networkQueue = DispatchQueue(label: "bench.network")

/// A completion-handler operation that succeeds, calling back before it returns.
func legacyLoadNow(_ callback: @escaping @Sendable (Result<Int, any Error>) -> Void) {
    callback(.success(1))
}

/// A completion-handler operation that succeeds, calling back later from another queue.
func legacyLoadLater(_ callback: @escaping @Sendable (Result<Int, any Error>) -> Void) {
    networkQueue.async { callback(.success(1)) }
}

func bridgeBenchmarks() {
    let cases: [(String, @Sendable (@escaping @Sendable (Result<Int, any Error>) -> Void) -> Void)] = [
        ("calls back before returning", legacyLoadNow),
        ("calls back later from another queue", legacyLoadLater),
    ]
    for (label, load) in cases {
        // A callback from another thread costs a thread wake-up, which varies a lot between samples: more of them.
        let configuration = Benchmark.Configuration(
            maxDuration: benchmarkMaxDuration(.seconds(label.contains("later") ? 3 : 1)),
            maxIterations: benchmarkMaxIterations(10_000))
        Benchmark("bridge: RetryKit withRetry, \(label)", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(
                    try await withRetry { (_: RetryAttempt, done: AttemptCompletion<Int>) in
                        load { result in done(result) }
                    })
            }
        }
        Benchmark("bridge: bare continuation, \(label)", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(
                    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int, any Error>) in
                        load { result in continuation.resume(with: result) }
                    })
            }
        }
    }
}

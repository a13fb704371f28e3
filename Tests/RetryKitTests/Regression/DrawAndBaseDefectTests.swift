// Regression tests for the two small defects of issue 26: a generator that draws from the strategy it jitters
// livelocked the draw, and `decorrelatedJitter(base: 0)` grew from a previous delay. Each failed before its fix.

import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// Draws from `strategy` (once it is set) whenever the generator is called outside such a draw: a generator that
/// draws from the strategy it jitters, at every draw. Counts those nested draws, and stops making them after `limit`,
/// so that a draw that retries on every conflict (the defect) ends, and fails the test, instead of spinning forever.
private final class NestedDraws: Sendable {
    private struct State {
        var strategy: BackoffStrategy<ContinuousClock>?
        var depth = 0
        var count = 0
    }

    private let state = Locked(State())
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    func set(_ strategy: BackoffStrategy<ContinuousClock>?) {
        state.withLock { $0.strategy = strategy }
    }

    var count: Int { state.withLock { $0.count } }

    /// Called by the generator at each of its draws.
    func drawIfOutermost() {
        let strategy: BackoffStrategy<ContinuousClock>? = state.withLock { state in
            guard state.depth == 0, state.count < limit, let strategy = state.strategy else { return nil }
            state.depth += 1
            state.count += 1
            return strategy
        }
        guard let strategy else { return }
        _ = strategy.delay(forRetry: 3)  // a draw nested inside the generator's own
        state.withLock { $0.depth -= 1 }
    }
}

/// A seeded generator that first draws from its own strategy (through `nested`) every time it is called.
private struct SelfDrawingGenerator: RandomNumberGenerator {
    var inner: SeededRandomNumberGenerator
    let nested: NestedDraws

    mutating func next() -> UInt64 {
        nested.drawIfOutermost()
        return inner.next()
    }
}

@Suite("Issue 26: a generator that draws from its own strategy at every draw", .timeLimit(.minutes(1)))
struct SelfDrawingGeneratorTests {
    @Test("Each draw ends after one call of the generator; the outer draws follow the seeded sequence")
    func everyDrawNests() async {
        let nested = NestedDraws(limit: 1_000)
        let strategy = BackoffStrategy<ContinuousClock>.exponential(a: .seconds(1), b: 2)
            .jitter(using: SelfDrawingGenerator(inner: SeededRandomNumberGenerator(seed: 26), nested: nested))
        nested.set(strategy)
        defer { nested.set(nil) }  // the strategy keeps the generator, which keeps `nested`

        // Off the cooperative pool: a draw that livelocks spins on its own thread, and the time limit fails the test.
        let delays = await offThePool { [strategy.delay(forRetry: 3), strategy.delay(forRetry: 3)] }

        // One nested draw per outer draw (the defect made the outer draw retry, and so nest, until the limit), and the
        // nested draws, which find the generator taken, leave it alone: the outer draws are the first two values of
        // the seeded sequence, each drawn once.
        #expect(nested.count == 2)
        let reference = BackoffStrategy<ContinuousClock>.exponential(a: .seconds(1), b: 2)
            .jitter(using: SeededRandomNumberGenerator(seed: 26))
        #expect(delays == [reference.delay(forRetry: 3), reference.delay(forRetry: 3)])
    }

    @Test("A retrier whose generator draws from its strategy at every draw retries on virtual time and finishes")
    func throughARunner() async {
        let nested = NestedDraws(limit: 1_000)
        let strategy = BackoffStrategy<ContinuousClock>.constant(.seconds(1))
            .jitter(using: SelfDrawingGenerator(inner: SeededRandomNumberGenerator(seed: 7), nested: nested))
        nested.set(strategy)
        defer { nested.set(nil) }
        let summary: RetrySummary? = await offThePool {
            let scheduler = VirtualScheduler()
            let outcome = Locked<RetrySummary?>(nil)
            retry(
                maxAttempts: 4, on: DispatchQueue(label: "self-drawing"), scheduler: scheduler,
                operation: { (attempt, done: AttemptCompletion<Int>) in done(.failure(TestError(attempt.number))) },
                strategy: { _ in .backoff(strategy) },
                completion: { _, summary in outcome.withLock { $0 = summary } })
            scheduler.run()
            return outcome.withLock { $0 }
        }
        #expect(summary?.reason == .exhausted)
        #expect(summary?.attempts == 4)
        #expect(nested.count == 3)
    }
}

@Suite("Issue 26: decorrelatedJitter(base: 0) is 0 whatever the previous delay", .timeLimit(.minutes(3)))
struct DecorrelatedZeroBaseTests {
    @Test("After a previous delay of 5 s the delay is still 0", arguments: [Duration.seconds(5), .milliseconds(1)])
    func zeroAfterAPreviousDelay(previous: Duration) {
        let strategy = BackoffStrategy<ContinuousClock>.decorrelatedJitter(
            base: .zero, cap: .seconds(100), using: SeededRandomNumberGenerator(seed: 1))
        for retry in 0..<5 {
            #expect(strategy.delay(forRetry: retry, previous: previous) == .zero)
        }
    }

    @Test("Through a runner, after a .constant(5 s) answer: the next delays are 0")
    func zeroThroughARunner() {
        let scheduler = VirtualScheduler()
        let waits = Locked<[Duration]>([])
        let zeroBase = BackoffStrategy<ContinuousClock>.decorrelatedJitter(
            base: .zero, cap: .seconds(100), using: SeededRandomNumberGenerator(seed: 1))
        retry(
            maxAttempts: 4, on: DispatchQueue(label: "decorrelated-zero"), scheduler: scheduler,
            operation: { attempt, done in done(.failure(TestError(attempt.number))) },
            strategy: { error in
                (error as? TestError)?.id == 1 ? .backoff(.constant(.seconds(5))) : .backoff(zeroBase)
            },
            observer: { event in
                if case .attemptFailed(_, _, .retry(let delay)) = event { waits.withLock { $0.append(delay) } }
            }, completion: { (_: Result<Int, any Error>, _) in })
        scheduler.run()
        #expect(waits.withLock { $0 } == [.seconds(5), .zero, .zero])
    }

    @Test("Through the async runner, after a .constant(5 s) answer: the next delays are 0")
    func zeroThroughTheAsyncRunner() async throws {
        let clock = AsyncRecordingClock()
        let zeroBase = BackoffStrategy<AsyncRecordingClock>.decorrelatedJitter(
            base: .zero, cap: .seconds(100), using: SeededRandomNumberGenerator(seed: 1))
        await #expect(throws: AsyncTestError.self) {
            try await retry(maxAttempts: 4, clock: clock) { () async throws(AsyncTestError) -> Int in
                throw AsyncTestError(id: 1)
            } strategy: { _ in
                clock.sleeps.isEmpty ? .backoff(.constant(.seconds(5))) : .backoff(zeroBase)
            }
        }
        #expect(clock.sleeps == [.seconds(5)], "zero delays do not sleep")
    }
}

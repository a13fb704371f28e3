// Regression tests for defects 2–5 of issue 12. Each one failed before its fix (a leak, a deadlock, a retention, a
// wait that outlived its task's cancellation); a test that would hang on the defect waits for a bounded real time
// instead, so that it fails rather than blocks.

import Dispatch
import Foundation
import RetryKitTesting
import Testing

@testable import RetryKit

/// A weak reference to any object, settable from any thread.
private final class WeakBox: Sendable {
    private struct Ref {
        weak var object: AnyObject?
    }

    private let ref = Locked(Ref())

    func set(_ object: AnyObject) {
        ref.withLock { $0.object = object }
    }

    var isAlive: Bool { ref.withLock { $0.object != nil } }
}

/// A strong reference to one value, settable and clearable from any thread.
private final class Keeper<Value: Sendable>: Sendable {
    private let value = Locked<Value?>(nil)

    func set(_ newValue: Value?) {
        value.withLock { $0 = newValue }
    }

    var get: Value? { value.withLock { $0 } }
}

/// A clock whose `sleep` ignores the sleeping task's cancellation: it sleeps on a `VirtualClock` from a task of its own
/// and returns only when that clock reaches the deadline. A legitimate `Clock`, if an impolite one.
private struct UncancellableClock: Clock {
    let base: VirtualClock

    var now: VirtualClock.Instant { base.now }
    var minimumResolution: Duration { base.minimumResolution }

    func sleep(until deadline: VirtualClock.Instant, tolerance: Duration?) async throws {
        let base = self.base
        try await Task { try await base.sleep(until: deadline, tolerance: tolerance) }.value
    }
}

@Suite("Engine defects of issue 12", .timeLimit(.minutes(2)))
struct EngineDefectTests {
    // MARK: - Defect 2: withRetry with an attempt timeout leaked its state

    @Test("withRetry with an attempt timeout lets go of its state when it returns")
    func withRetryWithAnAttemptTimeoutDoesNotLeak() async throws {
        let sink = WeakBox()
        let value = try await withRetry(maxAttempts: 2, attemptTimeout: .seconds(60), clock: VirtualClock()) {
            (_, done: AttemptCompletion<Int>) in
            sink.set(done.sink)
            done(.success(1))
        }
        #expect(value == 1)
        #expect(!sink.isAlive)
    }

    @Test("withRetry lets go of an attempt that timed out, once the operation lets go of its completion")
    func aTimedOutAttemptDoesNotLeak() async throws {
        let clock = VirtualClock()
        let sink = WeakBox()
        let kept = Keeper<AttemptCompletion<Int>>()
        let task = Task {
            try await withRetry(maxAttempts: 1, attemptTimeout: .seconds(5), clock: clock) {
                (_, done: AttemptCompletion<Int>) in
                sink.set(done.sink)
                kept.set(done)  // never called
            }
        }
        await clock.waitForSleepers(1)
        await clock.advance(by: .seconds(5))
        let result = await task.result
        #expect((try? result.get()) == nil)
        #expect(sink.isAlive)  // the operation still keeps the completion
        kept.set(nil)
        #expect(!sink.isAlive)
    }

    // MARK: - Defect 3: the caller's generator was called under RetryKit's lock

    @Test("A generator that draws from its own strategy does not deadlock, and draws stay in sequence")
    func aReentrantGeneratorDoesNotDeadlock() async throws {
        let nested = Keeper<Duration>()
        let strategyBox = Keeper<BackoffStrategy<ContinuousClock>>()
        let generator = ReentrantGenerator(inner: SeededRandomNumberGenerator(seed: 42)) {
            // Runs inside the first draw: draws from the same strategy (and so the same shared generator).
            if let strategy = strategyBox.get { nested.set(strategy.delay(forRetry: 3)) }
        }
        let strategy = BackoffStrategy<ContinuousClock>.exponential(a: .seconds(1), b: 2).jitter(using: generator)
        strategyBox.set(strategy)

        // Off the cooperative pool (a deadlock blocks a thread of its own, and the suite's time limit fails the test).
        let outer = await offThePool { strategy.delay(forRetry: 3) }

        // The nested draw found the generator taken by the outer one and drew from the system generator instead; the
        // outer draw is the first of the seeded sequence, and the next draw the second: each drawn exactly once.
        let reference = BackoffStrategy<ContinuousClock>.exponential(a: .seconds(1), b: 2)
            .jitter(using: SeededRandomNumberGenerator(seed: 42))
        #expect(outer == reference.delay(forRetry: 3))
        #expect(strategy.delay(forRetry: 3) == reference.delay(forRetry: 3))
        let nestedDelay = try #require(nested.get)
        #expect(nestedDelay >= .zero && nestedDelay < .seconds(8), "full jitter of 8 s")
    }

    @Test("A generator that cancels the retrier drawing from it does not deadlock")
    func aGeneratorThatCancelsItsRetrier() async throws {
        let handleBox = Keeper<RetryHandle<Int>>()
        let generator = ReentrantGenerator(inner: SeededRandomNumberGenerator(seed: 7)) {
            handleBox.get?.cancel()
        }
        let strategy = BackoffStrategy<ContinuousClock>.constant(.seconds(1)).jitter(using: generator)
        let queue = DispatchQueue(label: "reentrant-generator")
        let finished = DispatchSemaphore(value: 0)
        let outcome = Keeper<RetrySummary>()
        queue.suspend()  // the handle is kept before the retrier's first step runs
        let handle = retry(
            maxAttempts: 3, on: queue,
            operation: { (_, done: AttemptCompletion<Int>) in done(.failure(CBError(code: 1))) },
            strategy: { _ in .backoff(strategy) },
            completion: { _, summary in
                outcome.set(summary)
                finished.signal()
            })
        handleBox.set(handle)
        queue.resume()
        // Waited for off the cooperative pool: a deadlock fails the test after 60 s instead of holding a pool thread.
        try #require(await wait(for: finished, upTo: .seconds(60)))
        #expect(outcome.get?.reason == .cancelled)
        #expect(outcome.get?.attempts == 1)
    }

    // MARK: - Defect 4: the observer stayed alive after the retrier finished

    @Test("After the completion, a callback retrier keeps none of the caller's closures, even while done is kept")
    func theCallbackRunnerLetsGoOfTheCallersClosures() {
        let scheduler = VirtualScheduler()
        let queue = DispatchQueue(label: "retention")
        let kept = Keeper<AttemptCompletion<Int>>()
        let recorder = CBRecorder<Int>()
        let canary = startRetrierCapturingACanary(on: queue, scheduler: scheduler, keeping: kept, recorder: recorder)
        scheduler.run()
        queue.sync {}
        #expect(recorder.completionCount == 1)
        #expect(kept.get != nil)  // the operation still keeps its completion
        #expect(canary.object == nil)
        // A late second call is dropped: nothing is kept to report it with.
        kept.get?(.success(3))
        scheduler.run()
        queue.sync {}
        #expect(
            recorder.events == [
                "start 1", "fail 1 E1 retry \(Duration.seconds(1))", "start 2", "ok 2 2", "finished succeeded 2",
            ])
    }

    /// Starts a callback retrier (fail, then succeed after a 1 s wait) whose operation, strategy, observer and completion
    /// all capture one object, and returns a weak reference to it.
    private func startRetrierCapturingACanary(
        on queue: DispatchQueue, scheduler: VirtualScheduler, keeping kept: Keeper<AttemptCompletion<Int>>,
        recorder: CBRecorder<Int>
    ) -> CBWeak<CBCanary> {
        let canary = CBCanary()
        retry(
            maxAttempts: 3, attemptTimeout: .seconds(30), on: queue, scheduler: scheduler,
            operation: { attempt, done in
                _ = canary
                kept.set(done)
                done(attempt.number == 1 ? .failure(CBError(code: 1)) : .success(2))
            },
            strategy: { _ in
                _ = canary
                return .backoff(.constant(.seconds(1)))
            },
            observer: { event in
                _ = canary
                recorder.observer(event)
            },
            completion: { result, summary in
                _ = canary
                recorder.completion(result, summary)
            })
        return CBWeak(canary)
    }

    // MARK: - Defect 5: a wait outlived its task's cancellation

    @Test(
        "Cancelling a task waiting on its backoff ends it at once, whatever the clock's sleep does",
        arguments: ["retry", "retry observed", "withRetry"])
    func cancellingAWaitEndsItAtOnce(style: String) async throws {
        let base = VirtualClock()
        let clock = UncancellableClock(base: base)
        let task = Task<Int, any Error> {
            let strategy: @Sendable (any Error) -> RetryStrategy<UncancellableClock> = { _ in
                .backoff(.constant(.seconds(60)))
            }
            switch style {
            case "retry":
                return try await retry(maxAttempts: 2, clock: clock) { () async throws -> Int in
                    throw AsyncTestError(id: 1)
                } strategy: {
                    strategy($0)
                }
            case "retry observed":
                return try await retry(maxAttempts: 2, clock: clock) { attempt -> Int in
                    throw AsyncTestError(id: attempt.number)
                } strategy: {
                    strategy($0)
                } observer: { _ in
                }
            default:
                return try await withRetry(maxAttempts: 2, clock: clock) { (attempt, done: AttemptCompletion<Int>) in
                    done(.failure(AsyncTestError(id: attempt.number)))
                } strategy: {
                    strategy($0)
                }
            }
        }
        await base.waitForSleepers(1)  // in the 60 s backoff
        task.cancel()
        #expect(await endsWhileTimeStandsStill(task, base))
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
        await base.run()  // ends the sleep the clock kept going, so that no task is left asleep after the test
    }

    @Test(
        "An attempt that ends before its timeout does not wait for the clock's sleep to end",
        arguments: ["retry observed", "withRetry"])
    func anAttemptTimerEndsWithItsAttempt(style: String) async throws {
        let base = VirtualClock()
        let clock = UncancellableClock(base: base)
        let task = Task<Int, any Error> {
            switch style {
            case "retry observed":
                return try await retry(maxAttempts: 2, attemptTimeout: .seconds(60), clock: clock) { _ -> Int in
                    await base.waitForSleepers(1)  // the attempt's timer is armed
                    return 1
                }
            default:
                return try await withRetry(maxAttempts: 2, attemptTimeout: .seconds(60), clock: clock) {
                    (_, done: AttemptCompletion<Int>) in
                    Task {
                        await base.waitForSleepers(1)  // the attempt's timer is armed
                        done(.success(1))
                    }
                }
            }
        }
        #expect(await endsWhileTimeStandsStill(task, base))
        #expect(try await task.value == 1)
        await base.run()  // ends the sleep the clock kept going, so that no task is left asleep after the test
    }

    /// Whether `task` ends without `base` moving. If it has not within ``promptBound`` (30 s: a retrier that waits for
    /// the clock never ends on its own, one that does not ends in milliseconds, on a busy machine in seconds at worst),
    /// moves `base` until it does, so that the test fails instead of hanging.
    private func endsWhileTimeStandsStill(_ task: Task<Int, any Error>, _ base: VirtualClock) async -> Bool {
        let ended = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                _ = await task.result
                return true
            }
            group.addTask {
                try? await Task.sleep(for: promptBound)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if !ended {
            let driver = Task {
                while !Task.isCancelled {
                    await base.advance(by: .seconds(3600))
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
            _ = await task.result
            driver.cancel()
        }
        return ended
    }
}

/// A generator that runs `hook` once, at its first draw, before drawing from `inner`.
private struct ReentrantGenerator: RandomNumberGenerator {
    var inner: SeededRandomNumberGenerator
    let hook: OnceHook

    init(inner: SeededRandomNumberGenerator, hook: @escaping @Sendable () -> Void) {
        self.inner = inner
        self.hook = OnceHook(hook)
    }

    mutating func next() -> UInt64 {
        hook.run()
        return inner.next()
    }
}

/// A closure that runs at most once, whichever copy calls it.
private final class OnceHook: Sendable {
    private let body = Locked<(@Sendable () -> Void)?>(nil)

    init(_ body: @escaping @Sendable () -> Void) {
        self.body.withLock { $0 = body }
    }

    func run() {
        body.withLock { body in
            defer { body = nil }
            return body
        }?()
    }
}

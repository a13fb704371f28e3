// Issue 15.5, "one meaning of time": the completion-handler runner and the async runner measure waits, attempt timeouts
// and the total deadline alike. On virtual time (a `VirtualScheduler` for the one, a `VirtualClock` for the other) a policy
// run in either style starts its attempts at the same instants and ends at the same instant for the same reason.

import Dispatch
import RetryKit
import RetryKitTesting
import Testing

@Suite("One meaning of time across styles", .timeLimit(.minutes(3)))
struct TimeSemanticsTests {
    /// What a run looked like on its clock: when each attempt started, and how it ended.
    private struct Timeline: Equatable, CustomStringConvertible {
        var starts: [Duration] = []
        var end: RetrySummary?

        var description: String { "starts \(starts), end \(end.map { "\($0.reason) at \($0.elapsed)" } ?? "none")" }
    }

    /// A log of started attempts and the final summary, written from any thread.
    private final class TimelineLog: Sendable {
        private let timeline = Locked(Timeline())
        private let backingOff = Locked(false)

        func record<Value>(_ event: RetryEvent<Value>) {
            switch event {
            case .attemptStarted(let attempt):
                backingOff.withLock { $0 = false }
                timeline.withLock { $0.starts.append(attempt.elapsed) }
            case .attemptFailed(_, _, .retry):
                backingOff.withLock { $0 = true }
            case .finished(let summary, _): timeline.withLock { $0.end = summary }
            default: break
            }
        }

        /// Whether the run is between a failed attempt and the next one (waiting on its backoff).
        var isBackingOff: Bool { backingOff.withLock { $0 } }

        var value: Timeline { timeline.withLock { $0 } }
    }

    /// A jittered exponential policy with a total deadline, built afresh (with its own seeded generator) for each run,
    /// so that both styles draw the same delays.
    private static func policy(attemptTimeout: Duration? = nil) -> RetryPlan {
        var policy = RetryPlan.exponentialBackoff(
            initialDelay: .milliseconds(700), multiplier: 2, maxDelay: .seconds(8), jitter: .full,
            using: SeededRandomNumberGenerator(seed: 15)
        )
        .giveUpAfter(maxAttempts: 30)
        .giveUpAfter(totalTimeout: .seconds(20))
        if let attemptTimeout { policy = policy.attemptTimeout(attemptTimeout) }
        return policy
    }

    private func callbackTimeline(_ policy: RetryPlan, hangs: Bool) -> Timeline {
        let scheduler = VirtualScheduler()
        let log = TimelineLog()
        let queue = DispatchQueue(label: "time-semantics")
        let kept = CBKeeper<Int>()
        policy.execute(
            on: queue, scheduler: scheduler,
            operation: { (attempt, done: AttemptCompletion<Int>) in
                if hangs { kept.keep(done) } else { done(.failure(AsyncTestError(id: attempt.number))) }
            },
            observer: { log.record($0) }, completion: { (_: Result<Int, any Error>, _) in })
        // One deadline at a time, and the queue drained before each step: an attempt in flight on the queue reaches
        // its next wait before virtual time moves (`scheduler.run()` alone could fire the 20 s deadline first).
        for _ in 0..<10_000 {
            queue.sync {}
            guard log.value.end == nil, let next = scheduler.nextDeadline else { break }
            scheduler.advance(by: max(next - scheduler.now, .zero))
        }
        return log.value
    }

    private func asyncTimeline(_ policy: RetryPlan, hangs: Bool) async -> Timeline {
        let clock = VirtualClock()
        let log = TimelineLog()
        let task = Task {
            try await policy.execute(
                clock: clock,
                operation: { attempt -> Int in
                    // Hangs until its timeout cancels it (on real time, which the test never waits for: the attempt's
                    // timer is the only sleeper on the virtual clock, as the callback attempt's is on the scheduler).
                    if hangs { try await Task.sleep(for: .seconds(3600)) }
                    throw AsyncTestError(id: attempt.number)
                }, observer: { log.record($0) })
        }
        // While an attempt runs, the only sleeper may be the total deadline's, raced against the attempt: waking it
        // then would let virtual time outrun an attempt that fails at once. So time moves during an attempt only when
        // attempts hang (their timeout is what ends them); otherwise only while the run waits on its backoff.
        let driver = Task {
            while !Task.isCancelled {
                await clock.waitForSleepers(1)
                while !hangs, !log.isBackingOff, !Task.isCancelled {
                    try? await Task.sleep(for: .microseconds(100))
                }
                if Task.isCancelled { return }
                await clock.wakeNext()
            }
        }
        _ = try? await task.value
        driver.cancel()
        await driver.value
        return log.value
    }

    @Test("Failing attempts: the same attempt instants and the same deadline, in both styles")
    func failingAttempts() async {
        let callback = callbackTimeline(Self.policy(), hangs: false)
        let async = await asyncTimeline(Self.policy(), hangs: false)
        #expect(callback.starts.count > 2)
        #expect(callback.end?.reason == .deadlineExceeded)
        #expect(callback == async)
    }

    @Test("Attempts that time out: the same attempt instants and the same deadline, in both styles")
    func attemptsThatTimeOut() async {
        let callback = callbackTimeline(Self.policy(attemptTimeout: .seconds(3)), hangs: true)
        let async = await asyncTimeline(Self.policy(attemptTimeout: .seconds(3)), hangs: true)
        #expect(callback.starts.count > 2)
        #expect(callback.starts.dropFirst().allSatisfy { $0 >= .seconds(3) })
        #expect(callback.end?.reason == .deadlineExceeded)
        #expect(callback == async)
    }

    @Test("The production scheduler's time is ContinuousClock's: the same spans, reading for reading")
    func theDispatchSchedulerReadsContinuousTime() {
        let scheduler = DispatchTimerScheduler()
        let clock = ContinuousClock()
        // Two readings of each, interleaved: the scheduler's span lies within the clock's outer span and contains its
        // inner one (uptime and continuous time only part while a device sleeps, so this checks the wiring).
        let c0 = clock.now
        let s0 = scheduler.now
        let c1 = clock.now
        var spin = 0
        while clock.now < c1.advanced(by: .milliseconds(2)) { spin &+= 1 }
        let c2 = clock.now
        let s1 = scheduler.now
        let c3 = clock.now
        let span = s1 - s0
        #expect(span <= c0.duration(to: c3))
        #expect(span >= c1.duration(to: c2))
    }
}

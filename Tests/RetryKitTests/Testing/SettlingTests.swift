import Dispatch
import Foundation
import RetryKit
import RetryKitTesting
import Testing

/// How long a wait that is expected to settle may take in real time: long enough for a machine stalled by load (under
/// the thread sanitizer, with other test runs beside it, a thread may wait ten seconds and more for a core). A wait
/// that settles ends as soon as it does; only a failing one takes this long.
private let ample: Duration = .seconds(120)

/// `VirtualScheduler` settling (issue 14.8): virtual time moves only once tracked real work has reached its next wait,
/// so an attempt timeout fires only when virtual time really passes it.
@Suite("VirtualScheduler: settling real work", .timeLimit(.minutes(3)))
struct SettlingTests {
    let queue = DispatchQueue(label: "settling-tests")

    @Test("An attempt whose result arrives through a real queue hop succeeds; its timeout never fires")
    func queueHopBeatsTheTimeout() async throws {
        let scheduler = VirtualScheduler()
        let recorder = CBRecorder<Int>()
        retry(
            attemptTimeout: .seconds(5), on: queue, scheduler: scheduler,
            operation: { attempt, done in
                scheduler.track(on: .global()) { done(.success(attempt.number)) }
            }, observer: recorder.observer, completion: recorder.completion)

        try await scheduler.advance(by: .seconds(10), settlingWithin: ample)

        #expect(recorder.onlyResult?.cbValue == 1)
        #expect(recorder.onlySummary == RetrySummary(reason: .succeeded, attempts: 1, elapsed: .zero))
        #expect(scheduler.now == .seconds(10))
        #expect(scheduler.pendingCount == 0, "the attempt's timer was cancelled")
        #expect(scheduler.unfinishedTrackedWork == 0)
    }

    @Test("Task hops and backoffs: every attempt's result arrives before time moves")
    func tasksAndBackoffs() async throws {
        let scheduler = VirtualScheduler()
        let recorder = CBRecorder<Int>()
        retry(
            maxAttempts: 3, attemptTimeout: .seconds(1), on: queue, scheduler: scheduler,
            operation: { attempt, done in
                scheduler.trackTask {
                    await Task.yield()
                    attempt.number < 3 ? done(.failure(CBError(code: attempt.number))) : done(.success(7))
                }
            }, strategy: { _ in .backoff(.constant(.seconds(30))) }, observer: recorder.observer,
            completion: recorder.completion)

        try await scheduler.advance(by: .seconds(29), settlingWithin: ample)
        #expect(recorder.events == ["start 1", "fail 1 E1 retry 30.0 seconds"])
        try await scheduler.advance(by: .seconds(100), settlingWithin: ample)
        #expect(recorder.onlyResult?.cbValue == 7)
        #expect(recorder.onlySummary == RetrySummary(reason: .succeeded, attempts: 3, elapsed: .seconds(60)))
        #expect(scheduler.now == .seconds(129))
    }

    @Test("Work that never calls back still times out, when virtual time passes the timeout")
    func untrackedSilenceTimesOut() async throws {
        let scheduler = VirtualScheduler()
        let recorder = CBRecorder<Int>()
        let kept = CBKeeper<Int>()
        retry(
            maxAttempts: 2, attemptTimeout: .seconds(5), on: queue, scheduler: scheduler,
            operation: { attempt, done in
                if attempt.number == 2 {
                    scheduler.track(on: .global()) { done(.success(2)) }
                } else {
                    kept.keep(done)  // never calls back
                }
            }, strategy: { _ in .backoff(.none) }, observer: recorder.observer, completion: recorder.completion)

        try await scheduler.advance(by: .seconds(4), settlingWithin: ample)
        #expect(recorder.completionCount == 0)
        try await scheduler.advance(by: .seconds(1), settlingWithin: ample)
        #expect(recorder.onlyResult?.cbValue == 2)
        #expect(recorder.onlySummary == RetrySummary(reason: .succeeded, attempts: 2, elapsed: .seconds(5)))
    }

    @Test("Settling runs the work tracked work schedules for now, while it waits")
    func settlingRunsWorkDueNowWhileWaiting() async throws {
        let scheduler = VirtualScheduler()
        let steps = Locked<[String]>([])
        let later = Locked(false)
        _ = scheduler.schedule(after: .seconds(1)) { later.withLock { $0 = true } }
        // Queues of their own: the tracked work blocks its thread, so it must not wait on a global queue's pool, which
        // other tests (and, under the thread sanitizer, a slower runtime) may have exhausted.
        scheduler.track(on: DispatchQueue(label: "settling.work")) {
            // Waits for work that only the scheduler runs: settling must run it, without moving time.
            let semaphore = DispatchSemaphore(value: 0)
            scheduler.execute(on: DispatchQueue(label: "settling.hop")) {
                steps.withLock { $0.append("hop at \(scheduler.now)") }
                semaphore.signal()
            }
            semaphore.wait()
            steps.withLock { $0.append("done") }
        }
        try await scheduler.settle(timeout: ample)
        #expect(steps.withLock { $0 } == ["hop at 0.0 seconds", "done"])
        #expect(later.withLock { $0 } == false, "settling does not move time")
        #expect(scheduler.now == .zero)
    }

    @Test("Tracked work that never finishes ends the wait with a clear error, and time does not move")
    func unfinishedWorkThrows() async throws {
        let scheduler = VirtualScheduler()
        let fired = Locked(false)
        _ = scheduler.schedule(after: .seconds(1)) { fired.withLock { $0 = true } }
        let work = scheduler.beginTrackedWork()
        await #expect(throws: VirtualScheduler.SettleTimeout.self) {
            try await scheduler.advance(by: .seconds(5), settlingWithin: .milliseconds(50))
        }
        do {
            try await scheduler.settle(timeout: .milliseconds(20))
            Issue.record("settle returned with tracked work running")
        } catch let error as VirtualScheduler.SettleTimeout {
            #expect(error.unfinishedWork == 1)
            #expect(error.now == .zero)
            #expect(error.description.contains("1 piece(s) of tracked work still running"))
        }
        #expect(fired.withLock { $0 } == false)
        #expect(scheduler.now == .zero)

        // A cancelled wait ends at once with CancellationError.
        let waiting = Task { try await scheduler.settle(timeout: .seconds(60)) }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }

        work.finish()
        work.finish()  // only the first call counts
        #expect(scheduler.unfinishedTrackedWork == 0)
        try await scheduler.advance(by: .seconds(5), settlingWithin: ample)
        #expect(fired.withLock { $0 } == true)
        #expect(scheduler.now == .seconds(5))
    }
}

extension VirtualScheduler {
    /// `schedule(after:on:_:)` on an arbitrary queue (the scheduler ignores it).
    fileprivate func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> Token {
        schedule(after: delay, on: .global(), work)
    }
}

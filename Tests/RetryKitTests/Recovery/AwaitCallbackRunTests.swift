import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// A run the test ends by hand. Its `value` waits for ``end(_:)`` or ``cancel()`` and ignores the awaiting task's
/// cancellation: a test sees whether `awaitCallbackRun` itself cancels it (and ends it by hand when it did not, so that
/// a failure never hangs).
final class ManualRun: AwaitedCallbackRun {
    private struct State {
        var result: Result<String, any Error>?
        var waiters: [CheckedContinuation<String, any Error>] = []
        var cancels = 0
    }

    private let state = Locked(State())
    /// Fires when the run is cancelled or a task starts waiting for its ``value``, whichever comes first.
    let touched = AsyncSignal()

    /// How many times ``cancel()`` was called.
    var cancels: Int { state.withLock(\.cancels) }

    func cancel() {
        state.withLock { $0.cancels += 1 }
        touched.fire()
        end(.failure(CancellationError()))
    }

    /// Ends the run with `result`; only the first end counts.
    func end(_ result: Result<String, any Error>) {
        let waiters: [CheckedContinuation<String, any Error>] = state.withLock { state in
            guard state.result == nil else { return [] }
            state.result = result
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(with: result) }
    }

    var value: String {
        get async throws {
            try await withCheckedThrowingContinuation { continuation in
                let result: Result<String, any Error>? = state.withLock { state in
                    if state.result == nil { state.waiters.append(continuation) }
                    return state.result
                }
                if let result { continuation.resume(with: result) } else { touched.fire() }
            }
        }
    }
}

/// `awaitCallbackRun`, the helper the async entry points of the runs with a recovery await their run with.
@Suite("awaitCallbackRun: events on the caller's isolation, cancellation, outcome", .timeLimit(.minutes(1)))
struct AwaitCallbackRunTests {
    /// A caller isolated to an actor: its observer changes the actor's state without a lock, which compiles only
    /// because the observer runs on the actor.
    actor Caller {
        private var seen: [Int] = []

        /// Awaits `run`, whose events (`events`, then the end `result`) come from `queue`; returns the value or the
        /// error and the events the observer saw before this returned.
        func awaitRun(
            _ run: ManualRun, events: [Int], result: Result<String, any Error>, from queue: DispatchQueue
        ) async -> (Result<String, any Error>, [Int]) {
            do {
                let value = try await awaitCallbackRun(observer: { (event: Int) in seen.append(event) }) { sink in
                    queue.async {
                        for event in events { sink.yield(event) }
                        sink.finish()
                        run.end(result)
                    }
                    return run
                }
                return (.success(value), seen)
            } catch {
                return (.failure(error), seen)
            }
        }
    }

    @Test func everyEventReachesTheObserverOnTheCallersIsolationInOrderBeforeTheValue() async throws {
        let run = ManualRun()
        let (result, seen) = await Caller().awaitRun(
            run, events: Array(1...100), result: .success("value"), from: DispatchQueue(label: "run"))
        #expect(try result.get() == "value")
        #expect(seen == Array(1...100))
        #expect(run.cancels == 0)
    }

    @Test func theRunsErrorIsThrownUnchanged() async throws {
        let (result, seen) = await Caller().awaitRun(
            ManualRun(), events: [1, 2], result: .failure(AsyncTestError(id: 7)), from: DispatchQueue(label: "run"))
        #expect(throws: AsyncTestError(id: 7)) { try result.get() }
        #expect(seen == [1, 2])
    }

    @Test func cancellingTheTaskWhileItForwardsEventsCancelsTheRunAtOnce() async throws {
        let run = ManualRun()
        let firstEvent = AsyncSignal()
        let task = Task {
            try await awaitCallbackRun(observer: { (_: Int) in firstEvent.fire() }) { events in
                events.yield(1)  // never finished: only a cancel ends the wait
                return run
            }
        }
        await firstEvent.wait()
        task.cancel()
        // The task's cancellation handler ran inside `cancel()`, on this thread.
        #expect(run.cancels == 1)
        run.end(.failure(AsyncTestError(id: 0)))  // a run nobody cancelled: ends the task all the same
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test func cancellingTheTaskWhileItAwaitsTheValueCancelsTheRunAtOnce() async throws {
        let run = ManualRun()
        let task = Task {
            try await awaitCallbackRun(observer: { (_: Never) in }) { events in
                events.finish()
                return run
            }
        }
        await run.touched.wait()  // the task waits for the value
        task.cancel()
        #expect(run.cancels == 1)
        run.end(.failure(AsyncTestError(id: 0)))
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test func aTaskCancelledBeforeTheCallCancelsTheRunOnceStarted() async throws {
        let run = ManualRun()
        let go = AsyncSignal()
        let startedUncancelled = Locked<Bool?>(nil)
        let task = Task {
            await go.wait()
            return try await awaitCallbackRun(observer: { (_: Int) in }) { _ in
                startedUncancelled.withLock { $0 = run.cancels == 0 }
                return run
            }
        }
        task.cancel()
        go.fire()
        await run.touched.wait()  // cancelled (or, if it was not, waited for)
        #expect(startedUncancelled.withLock { $0 } == true, "the run starts, then is cancelled")
        #expect(run.cancels == 1)
        run.end(.failure(AsyncTestError(id: 0)))
        await #expect(throws: CancellationError.self) { try await task.value }
    }
}

import Dispatch
import RetryKit
import RetryKitTesting
import Testing

extension CallbackRunnerTests {
    /// The issue-4 bridges on the callback side: awaiting a running callback retrier (`handle.value`), and an `async`
    /// operation retried from callback code.
    @Suite("Callback bridges")
    struct CallbackBridgeTests {
        let queue = DispatchQueue(label: "callback-bridge-tests")

        // MARK: - handle.value

        @Test func valueReturnsTheResultAfterTheCompletionRan() async throws {
            let scheduler = VirtualScheduler()
            let completed = CBCounter()
            let handle = retry(
                on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    attempt.number < 2 ? done(.failure(CBError(code: 1))) : done(.success(21))
                }, strategy: { _ in .backoff(.constant(.seconds(3))) }, completion: { _, _ in completed.increment() })
            let awaiter = Task { () -> (Int, Int) in
                let value = try await handle.value
                return (value, completed.count)  // the completion has run by the time value returns
            }
            try await Task.sleep(for: .milliseconds(5))  // most likely registered by now; either order is correct
            scheduler.run()

            let (value, completionsSeen) = try await awaiter.value
            #expect(value == 21)
            #expect(completionsSeen == 1)
            #expect(scheduler.now == .seconds(3))
        }

        @Test func severalAwaitersAllGetTheResult() async throws {
            let scheduler = VirtualScheduler()
            let handle = retry(
                on: queue, scheduler: scheduler, operation: { _, done in done(.success("shared")) },
                completion: { _, _ in })
            let awaiters = (0..<5).map { _ in Task { try await handle.value } }
            try await Task.sleep(for: .milliseconds(5))
            scheduler.run()
            for awaiter in awaiters {
                #expect(try await awaiter.value == "shared")
            }
        }

        @Test func awaitingAFinishedRetrierReturnsAtOnce() async throws {
            let scheduler = VirtualScheduler()
            let handle: RetryHandle<Int> = retry(
                maxAttempts: 2, on: queue, scheduler: scheduler,
                operation: { attempt, done in done(.failure(CBError(code: attempt.number))) }, completion: { _, _ in })
            scheduler.run()
            #expect(handle.isFinished)

            await #expect(throws: CBError(code: 2)) { try await handle.value }
            // Even from a task that is already cancelled: the result is settled and cancel is a no-op.
            let cancelled = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await handle.value
            }
            await #expect(throws: CBError(code: 2)) { try await cancelled.value }
        }

        @Test func cancellingTheAwaitingTaskCancelsTheRetrierDuringALongBackoff() async throws {
            let scheduler = CBRecordingScheduler(DispatchTimerScheduler())
            let recorder = CBRecorder<Int>(checking: queue)
            let calls = CBCounter()
            let handle = retry(
                on: queue, scheduler: scheduler,
                operation: { _, done in
                    calls.increment()
                    done(.failure(CBError(code: 1)))
                }, strategy: { _ in .backoff(.constant(.seconds(60))) }, completion: recorder.completion)
            let awaiter = Task { try await handle.value }
            #expect(await cbWait { scheduler.scheduledDelays == [.seconds(60)] })

            let clock = ContinuousClock()
            let start = clock.now
            awaiter.cancel()
            let result = await awaiter.result
            let took = clock.now - start
            #expect(took < promptBound, "returned promptly (took \(took))")
            #expect(result.cbError is CancellationError)
            #expect(handle.isFinished)
            #expect(recorder.onlyResult?.cbError is CancellationError, "the completion saw the same cancellation")
            #expect(calls.count == 1)
            #expect(await cbWait { scheduler.liveTokens == 0 }, "the 60 s timer was cancelled and released")
        }

        @Test func cancellingTheAwaitingTaskRunsTheAttemptsCancelHook() async throws {
            let hooks = CBCounter()
            let started = CBCounter()
            let kept = CBKeeper<Int>()
            let handle: RetryHandle<Int> = retry(
                on: queue,
                operation: { _, done in
                    done.onCancel { hooks.increment() }
                    kept.keep(done)  // never calls back
                    started.increment()
                }, completion: { _, _ in })
            let awaiter = Task { try await handle.value }
            #expect(await cbWait { started.count == 1 })
            awaiter.cancel()
            await #expect(throws: CancellationError.self) { try await awaiter.value }
            #expect(hooks.count == 1)
        }

        @Test func aCancelBeforeTheAwaitIsRegisteredIsRemembered() async throws {
            let scheduler = VirtualScheduler()
            let calls = CBCounter()
            let recorder = CBRecorder<Int>()
            let handle = retry(
                on: queue, scheduler: scheduler,
                operation: { _, done in
                    calls.increment()
                    done(.success(1))
                }, completion: recorder.completion)
            let awaiter = Task {
                withUnsafeCurrentTask { $0?.cancel() }  // cancelled before it starts awaiting
                return try await handle.value
            }
            #expect(await cbWait { handle.isFinished }, "the early cancellation reached the retrier")
            scheduler.run()

            await #expect(throws: CancellationError.self) { try await awaiter.value }
            #expect(calls.count == 0, "no attempt ran")
            #expect(recorder.onlyResult?.cbError is CancellationError)
        }

        // MARK: - async operation from callback code

        @Test func asyncOperationIsRetriedOnTheCallbackRunner() async {
            let recorder = CBRecorder<Int>(checking: queue)
            retryTask(
                maxAttempts: 4, on: queue,
                operation: { attempt in
                    try await Task.sleep(for: .microseconds(100))
                    if attempt.number < 3 { throw CBError(code: attempt.number) }
                    return attempt.number
                }, observer: recorder.observer, completion: recorder.completion)

            #expect(await cbWait { recorder.completionCount == 1 })
            #expect(recorder.onlyResult?.cbValue == 3)
            #expect(recorder.onlySummary?.attempts == 3)
            #expect(recorder.offQueue.isEmpty, "strategy, observer and completion run on the queue")
            let zero = Duration.zero
            #expect(
                recorder.events == [
                    "start 1", "fail 1 E1 retry \(zero)", "start 2", "fail 2 E2 retry \(zero)", "start 3", "ok 3 3",
                    "finished succeeded 3",
                ])
        }

        @Test func asyncOperationWaitsInVirtualTime() async {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            retryTask(
                maxAttempts: 3, on: queue, scheduler: scheduler,
                operation: { attempt in
                    if attempt.number < 3 { throw CBError(code: attempt.number) }
                    return 3
                }, strategy: { _ in .backoff(.linear(a: .seconds(10), b: .seconds(1))) },
                completion: recorder.completion)

            #expect(await cbPump(scheduler, jumpingTimers: true) { recorder.completionCount == 1 })
            #expect(recorder.onlyResult?.cbValue == 3)
            #expect(scheduler.now == .seconds(1) + .seconds(11), "waited f(0) = 1 s and f(1) = 11 s, virtually")
        }

        @Test func bothCompletionFormsTypeCheckForAsyncOperations() async {
            let one = CBSlot<Int>()
            let two = CBSlot<Int>()
            retryTask(on: queue) { _ in
                1
            } completion: { result, _ in
                one.set(result.cbValue ?? -1)
            }
            retryTask(on: queue) { attempt in
                try await Task.sleep(for: .microseconds(10))
                return attempt.number + 1
            } completion: { result, summary in
                two.set((result.cbValue ?? -1) * 10 + summary.attempts)
            }
            #expect(await cbWait { one.get != nil && two.get != nil })
            #expect(one.get == 1)
            #expect(two.get == 21)
        }

        @Test func handleCancelCancelsTheAttemptsTask() async {
            let started = CBCounter()
            let sawCancellation = CBCounter()
            let recorder = CBRecorder<Int>()
            let handle = retryTask(
                on: queue,
                operation: { _ in
                    started.increment()
                    do {
                        try await Task.sleep(for: .seconds(60))
                    } catch {
                        if Task.isCancelled { sawCancellation.increment() }
                        throw error
                    }
                    return 1
                }, completion: recorder.completion)
            #expect(await cbWait { started.count == 1 })

            let clock = ContinuousClock()
            let start = clock.now
            handle.cancel()
            #expect(await cbWait { recorder.completionCount == 1 && sawCancellation.count == 1 })
            let took = clock.now - start
            #expect(took < promptBound, "the task was cancelled, not left sleeping (took \(took))")
            #expect(recorder.onlyResult?.cbError is CancellationError)
            #expect(started.count == 1)
        }

        @Test func taskCancellationDuringALongBackoffOfAnAsyncOperation() async {
            let scheduler = CBRecordingScheduler(DispatchTimerScheduler())
            let handle = retryTask(
                on: queue, scheduler: scheduler,
                operation: { (_: RetryAttempt) async throws -> Int in throw CBError(code: 1) },
                strategy: { _ in .backoff(.constant(.seconds(60))) }, completion: { _, _ in })
            let awaiter = Task { try await handle.value }
            #expect(await cbWait { scheduler.scheduledDelays.count == 1 })

            let clock = ContinuousClock()
            let start = clock.now
            awaiter.cancel()
            let result = await awaiter.result
            let took = clock.now - start
            #expect(took < promptBound, "took \(took)")
            #expect(result.cbError is CancellationError)
        }

        @Test func attemptTimeoutCancelsTheTaskAndRetries() async {
            // Virtual time for the timeout, so that a loaded machine cannot time out attempt 2 as well.
            let scheduler = VirtualScheduler()
            let started = CBCounter()
            let sawCancellation = CBCounter()
            let recorder = CBRecorder<Int>()
            retryTask(
                attemptTimeout: .milliseconds(20), on: queue, scheduler: scheduler,
                operation: { attempt in
                    started.increment()
                    guard attempt.number == 1 else { return 2 }
                    do {
                        try await Task.sleep(for: .seconds(10))
                    } catch {
                        sawCancellation.increment()
                        throw error
                    }
                    return 1
                }, observer: recorder.observer, completion: recorder.completion)

            #expect(await cbPump(scheduler) { started.count == 1 })
            scheduler.advance(by: .milliseconds(20))  // attempt 1 times out: its task is cancelled, attempt 2 starts
            #expect(await cbPump(scheduler) { recorder.completionCount == 1 })
            #expect(recorder.onlyResult?.cbValue == 2)
            #expect(recorder.onlySummary == RetrySummary(reason: .succeeded, attempts: 2, elapsed: .milliseconds(20)))
            #expect(await cbWait { sawCancellation.count == 1 }, "attempt 1's task was cancelled")
        }

        @Test func asyncOperationReleasesEverythingAfterFinishing() async {
            let completions = CBCounter()
            let probes: [CBWeak<CBCanary>]
            let runnerProbe: CallbackRunnerProbe
            do {
                let canaries = [CBCanary(), CBCanary(), CBCanary()]
                probes = canaries.map(CBWeak.init)
                let handle = retryTask(
                    maxAttempts: 2, on: queue,
                    operation: { attempt in
                        withExtendedLifetime(canaries[0]) {}
                        if attempt.number == 1 { throw CBError(code: 1) }
                        return 2
                    },
                    strategy: { _ in
                        withExtendedLifetime(canaries[1]) {}
                        return .backoff(.constant(.milliseconds(1)))
                    },
                    completion: { _, _ in
                        withExtendedLifetime(canaries[2]) {}
                        completions.increment()
                    })
                runnerProbe = handle.runner.probe
            }
            #expect(await cbWait { completions.count == 1 })
            #expect(await cbWait { probes.allSatisfy { $0.object == nil } })
            #expect(await cbWait { runnerProbe.object == nil })
        }
    }
}

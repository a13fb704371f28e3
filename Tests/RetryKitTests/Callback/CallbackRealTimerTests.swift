import Dispatch
import RetryKit
import RetryKitTesting
import Testing

extension CallbackRunnerTests {
    /// A few tests on real `DispatchSourceTimer`s with millisecond delays. Lower bounds are exact (timers never fire
    /// early); upper bounds are generous, for 2 loaded cores and the thread sanitizer.
    @Suite("Callback retry on real timers")
    struct CallbackRealTimerTests {
        @Test func backoffOnRealTimersRunsEverythingOnTheQueue() async {
            let queue = DispatchQueue(label: "callback-real-timer")
            let recorder = CBRecorder<Int>(checking: queue)
            let clock = ContinuousClock()
            let start = clock.now
            retry(
                on: queue,
                operation: { attempt, done in
                    recorder.noteUserCode("operation")
                    DispatchQueue.global().async {  // call back from another thread
                        attempt.number < 3 ? done(.failure(CBError(code: attempt.number))) : done(.success(3))
                    }
                },
                strategy: { _ in
                    recorder.noteUserCode("strategy")
                    return .backoff(.constant(.milliseconds(5)))
                }, observer: recorder.observer, completion: recorder.completion)

            #expect(await cbWait { recorder.completionCount == 1 })
            #expect(clock.now - start >= .milliseconds(10), "two 5 ms waits")
            #expect(recorder.onlyResult?.cbValue == 3)
            #expect((recorder.onlySummary?.elapsed ?? .zero) >= .milliseconds(10))
            #expect(recorder.offQueue.isEmpty, "operation, strategy, observer and completion all ran on the queue")
            let wait = Duration.milliseconds(5)
            #expect(
                recorder.events == [
                    "start 1", "fail 1 E1 retry \(wait)", "start 2", "fail 2 E2 retry \(wait)", "start 3", "ok 3 3",
                    "finished succeeded 3",
                ])
        }

        @Test func cancelDuringALongWaitCompletesPromptlyAndReleasesTheTimer() async {
            let queue = DispatchQueue(label: "callback-real-timer")
            let scheduler = CBRecordingScheduler(DispatchTimerScheduler())
            let recorder = CBRecorder<Int>(checking: queue)
            let handle = retry(
                on: queue, scheduler: scheduler, operation: { _, done in done(.failure(CBError(code: 1))) },
                strategy: { _ in .backoff(.constant(.seconds(60))) }, observer: recorder.observer,
                completion: recorder.completion)
            #expect(await cbWait { scheduler.scheduledDelays.count == 1 })

            let clock = ContinuousClock()
            let start = clock.now
            handle.cancel()
            #expect(await cbWait { recorder.completionCount == 1 })
            let took = clock.now - start
            #expect(took < promptBound, "completed promptly (took \(took))")
            #expect(recorder.onlyResult?.cbError is CancellationError)
            #expect(recorder.offQueue.isEmpty)
            #expect(await cbWait { scheduler.liveTokens == 0 }, "the timer was released")
        }

        @Test func attemptTimeoutOnRealTimers() async {
            let queue = DispatchQueue(label: "callback-real-timer")
            let recorder = CBRecorder<Int>(checking: queue)
            let hooks = CBCounter()
            let kept = CBKeeper<Int>()
            let clock = ContinuousClock()
            let start = clock.now
            retry(
                maxAttempts: 2, attemptTimeout: .milliseconds(20), on: queue,
                operation: { _, done in
                    done.onCancel { hooks.increment() }
                    kept.keep(done)  // never calls back
                },
                observer: recorder.observer, completion: recorder.completion)

            #expect(await cbWait { recorder.completionCount == 1 })
            #expect(clock.now - start >= .milliseconds(40))
            #expect(cbIsRetryError(recorder.onlyResult?.cbError, .attemptTimedOut))
            #expect(recorder.onlySummary?.reason == .exhausted)
            #expect(hooks.count == 2)
            #expect(recorder.offQueue.isEmpty)
        }

        @Test func totalTimeoutOnRealTimers() async {
            let queue = DispatchQueue(label: "callback-real-timer")
            let recorder = CBRecorder<Int>(checking: queue)
            retry(
                maxAttempts: 100, totalTimeout: .milliseconds(200), on: queue,
                operation: { attempt, done in done(.failure(CBError(code: attempt.number))) },
                strategy: { _ in .backoff(.constant(.milliseconds(30))) }, observer: recorder.observer,
                completion: recorder.completion)

            #expect(await cbWait { recorder.completionCount == 1 })
            let error = recorder.onlyResult?.cbError as? RetryError
            #expect(error?.reason == .deadlineExceeded)
            #expect(error?.lastError != nil)
            #expect((error?.attempts ?? 0) >= 1)
            #expect(recorder.events.last?.hasPrefix("finished deadlineExceeded") == true)
            // It gives up once a 30 ms wait would end past 200 ms (so at 170 ms at the earliest), or when the deadline
            // passes during an attempt.
            let elapsed = recorder.onlySummary?.elapsed ?? .zero
            #expect(elapsed >= .milliseconds(170))
            #expect(elapsed < .seconds(1))
            #expect(recorder.offQueue.isEmpty)
        }

        @Test func nothingIsRetainedAfterARealTimerRun() async {
            let queue = DispatchQueue(label: "callback-real-timer")
            let scheduler = CBRecordingScheduler(DispatchTimerScheduler())
            let completions = CBCounter()
            let probes: [CBWeak<CBCanary>]
            let runnerProbe: CallbackRunnerProbe
            do {
                let canaries = [CBCanary(), CBCanary(), CBCanary(), CBCanary()]
                probes = canaries.map(CBWeak.init)
                let handle = retry(
                    attemptTimeout: .seconds(5), on: queue, scheduler: scheduler,
                    operation: { attempt, done in
                        withExtendedLifetime(canaries[0]) {}
                        attempt.number < 3 ? done(.failure(CBError(code: 1))) : done(.success(1))
                    },
                    strategy: { _ in
                        withExtendedLifetime(canaries[1]) {}
                        return .backoff(.constant(.milliseconds(2)))
                    }, observer: { _ in withExtendedLifetime(canaries[2]) {} },
                    completion: { _, _ in
                        withExtendedLifetime(canaries[3]) {}
                        completions.increment()
                    })
                runnerProbe = handle.runner.probe
            }
            #expect(await cbWait { completions.count == 1 })
            #expect(scheduler.scheduledDelays.count == 5, "3 attempt timers and 2 waits")
            #expect(await cbWait { probes.allSatisfy { $0.object == nil } }, "closures released")
            #expect(await cbWait { scheduler.liveTokens == 0 }, "timers released")
            #expect(await cbWait { runnerProbe.object == nil }, "runner released")
            #expect(completions.count == 1)
        }
    }
}

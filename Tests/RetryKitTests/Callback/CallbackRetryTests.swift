import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// An attempt's operation that counts its calls in `calls` and completes with `result` at once.
private func counting(
    _ calls: CBCounter, _ result: Result<Int, any Error>
) -> @Sendable (RetryAttempt, AttemptCompletion<Int>) -> Void {
    { _, done in
        calls.increment()
        done(result)
    }
}

extension CallbackRunnerTests {
    /// Whole retrier sequences on `VirtualScheduler`'s virtual time.
    @Suite("Callback retry on virtual time")
    struct CallbackRetryTests {
        let queue = DispatchQueue(label: "callback-retry-tests")

        // MARK: - Sequences

        @Test func successOnFirstAttempt() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let calls = CBCounter()
            retry(
                on: queue, scheduler: scheduler,
                operation: counting(calls, .success(42)), observer: recorder.observer, completion: recorder.completion)

            #expect(calls.count == 0, "nothing runs before the scheduler is advanced")
            scheduler.advance()
            #expect(calls.count == 1)
            #expect(recorder.onlyResult?.cbValue == 42)
            #expect(recorder.onlySummary == RetrySummary(reason: .succeeded, attempts: 1, elapsed: .zero))
            #expect(recorder.events == ["start 1", "ok 1 42", "finished succeeded 1"])
            #expect(scheduler.pendingCount == 0)
        }

        @Test func successAfterTwoFailuresWaitsExactlyTheBackoff() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let attempts = Locked<[RetryAttempt]>([])
            retry(
                on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    attempts.withLock { $0.append(attempt) }
                    if attempt.number < 3 {
                        done(.failure(CBError(code: attempt.number)))
                    } else {
                        done(.success(attempt.number * 10))
                    }
                }, strategy: { _ in .backoff(.constant(.milliseconds(100))) }, observer: recorder.observer,
                completion: recorder.completion)

            scheduler.advance()
            #expect(attempts.withLock { $0.count } == 1)
            #expect(scheduler.nextDeadline == .milliseconds(100), "one timer for the backoff")
            scheduler.advance(by: .milliseconds(99))
            #expect(attempts.withLock { $0.count } == 1, "the wait is not over 1 ms early")
            scheduler.advance(by: .milliseconds(1))
            #expect(attempts.withLock { $0.count } == 2)
            scheduler.run()

            let seen = attempts.withLock { $0 }
            #expect(seen.map(\.number) == [1, 2, 3])
            #expect(seen.map(\.retriesLeft) == [2, 1, 0])
            #expect(seen.map(\.elapsed) == [.zero, .milliseconds(100), .milliseconds(200)])
            #expect(recorder.onlyResult?.cbValue == 30)
            #expect(recorder.onlySummary == RetrySummary(reason: .succeeded, attempts: 3, elapsed: .milliseconds(200)))
            let wait = Duration.milliseconds(100)
            #expect(
                recorder.events == [
                    "start 1", "fail 1 E1 retry \(wait)", "start 2", "fail 2 E2 retry \(wait)", "start 3", "ok 3 30",
                    "finished succeeded 3",
                ])
        }

        enum SeededCurve: String, CaseIterable {
            case jitteredExponential, decorrelatedJitter

            func make(seed: UInt64) -> BackoffStrategy<ContinuousClock> {
                switch self {
                case .jitteredExponential:
                    return .exponential(a: .milliseconds(100), b: 2).max(.seconds(5)).jitter(
                        using: SeededRandomNumberGenerator(seed: seed))
                case .decorrelatedJitter:
                    return .decorrelatedJitter(
                        base: .milliseconds(10), cap: .seconds(2), using: SeededRandomNumberGenerator(seed: seed))
                }
            }
        }

        /// The acceptance test of the issue: the delays carried out are exactly the core's, for a seeded generator.
        @Test(arguments: SeededCurve.allCases)
        func delaysCarriedOutEqualTheCore(curve: SeededCurve) {
            let seed: UInt64 = 0x5EED_0042
            let maxAttempts = 8
            let reference = curve.make(seed: seed)
            var expected: [Duration] = []
            var previous: Duration?
            for x in 0..<(maxAttempts - 1) {
                let delay = reference.delay(forRetry: x, previous: previous)
                expected.append(delay)
                previous = delay
            }
            #expect(Set(expected).count == expected.count, "the seed gives distinct, non-trivial delays")

            let scheduler = CBRecordingScheduler(VirtualScheduler())
            let recorder = CBRecorder<Int>()
            let starts = Locked<[Duration]>([])
            let backoff = curve.make(seed: seed)
            retry(
                maxAttempts: maxAttempts, on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    starts.withLock { $0.append(attempt.elapsed) }
                    done(.failure(CBError(code: attempt.number)))
                }, strategy: { _ in .backoff(backoff) }, observer: recorder.observer, completion: recorder.completion)
            scheduler.base.run()

            #expect(scheduler.scheduledDelays == expected, "the timers armed are the core's delays")
            let announced = recorder.rawEvents.compactMap { event -> Duration? in
                if case .attemptFailed(_, _, .retry(let delay)) = event { return delay }
                return nil
            }
            #expect(announced == expected, "the events announce the same delays")
            var sum = Duration.zero
            let expectedStarts =
                [Duration.zero]
                + expected.map { delay in
                    sum += delay
                    return sum
                }
            #expect(
                starts.withLock { $0 } == expectedStarts, "attempts start exactly after the delays, in virtual time")
            #expect(recorder.onlyResult?.cbError as? CBError == CBError(code: maxAttempts))
            #expect(recorder.onlySummary == RetrySummary(reason: .exhausted, attempts: maxAttempts, elapsed: sum))
        }

        @Test func exhaustionFinishesWithTheLastError() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            retry(
                maxAttempts: 3, on: queue, scheduler: scheduler,
                operation: { attempt, done in done(.failure(CBError(code: attempt.number))) },
                strategy: { _ in .backoff(.linear(a: .seconds(1), b: .seconds(1))) }, observer: recorder.observer,
                completion: recorder.completion)
            scheduler.run()

            #expect(recorder.onlyResult?.cbError as? CBError == CBError(code: 3))
            #expect(recorder.onlySummary == RetrySummary(reason: .exhausted, attempts: 3, elapsed: .seconds(3)))
            #expect(recorder.events.suffix(2) == ["fail 3 E3 giveUp exhausted", "finished exhausted 3 E3"])
        }

        @Test func stopFinishesWithThatAttemptsError() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let calls = CBCounter()
            retry(
                maxAttempts: 5, on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    calls.increment()
                    done(.failure(CBError(code: attempt.number == 1 ? 1 : 99)))
                }, strategy: { error in (error as? CBError)?.code == 1 ? .retryAfter(.seconds(2)) : .stop },
                observer: recorder.observer, completion: recorder.completion)
            scheduler.run()

            #expect(calls.count == 2)
            #expect(recorder.onlyResult?.cbError as? CBError == CBError(code: 99))
            #expect(recorder.onlySummary == RetrySummary(reason: .stopped, attempts: 2, elapsed: .seconds(2)))
            #expect(
                recorder.events == [
                    "start 1", "fail 1 E1 retry \(Duration.seconds(2))", "start 2", "fail 2 E99 giveUp stopped",
                    "finished stopped 2 E99",
                ])
        }

        @Test func totalTimeoutGivesUpInsteadOfAPointlessWait() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            retry(
                maxAttempts: 5, totalTimeout: .milliseconds(250), on: queue, scheduler: scheduler,
                operation: { attempt, done in done(.failure(CBError(code: attempt.number))) },
                strategy: { _ in .backoff(.constant(.milliseconds(100))) }, observer: recorder.observer,
                completion: recorder.completion)
            scheduler.run()

            // Attempts at 0, 100 and 200 ms; a third wait would end at 300 ms, past the deadline: give up at 200 ms.
            let error = recorder.onlyResult?.cbError as? RetryError
            #expect(error?.reason == .deadlineExceeded)
            #expect(error?.lastError as? CBError == CBError(code: 3))
            #expect(error?.attempts == 3)
            #expect(recorder.onlySummary?.reason == .deadlineExceeded)
            #expect(scheduler.now == .milliseconds(200))
            #expect(scheduler.pendingCount == 0, "the deadline timer of the last attempt was cancelled")
            #expect(recorder.events.suffix(2).first == "fail 3 E3 giveUp deadlineExceeded")
        }

        @Test func totalTimeoutAbandonsAnAttemptThatNeverCallsBack() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let hooks = CBCounter()
            let kept = CBSlot<AttemptCompletion<Int>>()
            retry(
                totalTimeout: .seconds(1), on: queue, scheduler: scheduler,
                operation: { _, done in
                    done.onCancel { hooks.increment() }
                    kept.set(done)
                }, observer: recorder.observer, completion: recorder.completion)

            scheduler.advance(by: .milliseconds(999))
            #expect(recorder.completionCount == 0)
            scheduler.advance(by: .milliseconds(1))
            let error = recorder.onlyResult?.cbError as? RetryError
            #expect(error?.reason == .deadlineExceeded)
            #expect(cbIsRetryError(error?.lastError, .attemptTimedOut))
            #expect(hooks.count == 1, "the abandoned attempt's cancel hook ran")
            #expect(kept.get?.isCancelled == true)

            kept.get?(.success(7))  // the late result is ignored
            scheduler.run()
            #expect(recorder.completionCount == 1)
            #expect(!recorder.events.contains("duplicate 1"))
            #expect(recorder.events.first == "start 1")
            #expect(recorder.events.last?.hasPrefix("finished deadlineExceeded 1") == true)
        }

        @Test func attemptTimeoutFailsTheAttemptRetriesAndIgnoresItsLateResult() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let hooks = CBCounter()
            let strategyErrors = Locked<[RetryError.Reason?]>([])
            let firstDone = CBSlot<AttemptCompletion<Int>>()
            retry(
                attemptTimeout: .milliseconds(50), on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    if attempt.number == 1 {
                        done.onCancel { hooks.increment() }
                        firstDone.set(done)  // never calls back in time
                    } else {
                        done(.success(2))
                    }
                },
                strategy: { error in
                    strategyErrors.withLock { $0.append((error as? RetryError)?.reason) }
                    return .backoff(.none)
                }, observer: recorder.observer, completion: recorder.completion)

            scheduler.advance()
            #expect(scheduler.nextDeadline == .milliseconds(50), "one timer for the attempt")
            scheduler.advance(by: .milliseconds(50))

            #expect(hooks.count == 1)
            #expect(strategyErrors.withLock { $0 } == [.attemptTimedOut])
            #expect(recorder.onlyResult?.cbValue == 2)
            #expect(recorder.onlySummary == RetrySummary(reason: .succeeded, attempts: 2, elapsed: .milliseconds(50)))
            #expect(scheduler.pendingCount == 0, "attempt 2's timer was cancelled when it succeeded")

            firstDone.get?(.success(1))
            scheduler.run()
            #expect(recorder.completionCount == 1)
            let events = recorder.events
            #expect(events.count == 5)
            #expect(events.first == "start 1")
            #expect(events.dropFirst().first?.hasPrefix("fail 1 RetryError(attempt timed out") == true)
            #expect(Array(events.dropFirst(2)) == ["start 2", "ok 2 2", "finished succeeded 2"])
        }

        enum InvalidConfiguration: String, CaseIterable {
            case zeroAttempts, negativeAttempts, negativeTotalTimeout, zeroAttemptTimeout
        }

        @Test(arguments: InvalidConfiguration.allCases)
        func invalidConfigurationCompletesOnceWithoutAnAttempt(_ configuration: InvalidConfiguration) {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let calls = CBCounter()
            let operation = counting(calls, .success(1))
            switch configuration {
            case .zeroAttempts:
                retry(
                    maxAttempts: 0, on: queue, scheduler: scheduler, operation: operation, observer: recorder.observer,
                    completion: recorder.completion)
            case .negativeAttempts:
                retry(
                    maxAttempts: -5, on: queue, scheduler: scheduler, operation: operation, observer: recorder.observer,
                    completion: recorder.completion)
            case .negativeTotalTimeout:
                retry(
                    totalTimeout: .seconds(-1), on: queue, scheduler: scheduler, operation: operation,
                    observer: recorder.observer, completion: recorder.completion)
            case .zeroAttemptTimeout:
                retry(
                    attemptTimeout: .zero, on: queue, scheduler: scheduler, operation: operation,
                    observer: recorder.observer, completion: recorder.completion)
            }
            #expect(recorder.completionCount == 0, "the completion runs on the queue, never inside the call")
            scheduler.run()

            #expect(calls.count == 0)
            let error = recorder.onlyResult?.cbError as? RetryError
            if case .invalidConfiguration = error?.reason {} else { Issue.record("expected invalidConfiguration") }
            #expect(recorder.onlySummary?.reason == .invalidConfiguration)
            #expect(recorder.onlySummary?.attempts == 0)
            #expect(recorder.events.count == 1)
            #expect(recorder.events.first?.hasPrefix("finished invalidConfiguration 0") == true)
        }

        // MARK: - Cancellation

        @Test func cancelDuringWaitCompletesPromptlyAndCancelsTheTimer() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let calls = CBCounter()
            let handle = retry(
                on: queue, scheduler: scheduler,
                operation: counting(calls, .failure(CBError(code: 1))),
                strategy: { _ in .backoff(.constant(.seconds(10))) }, observer: recorder.observer,
                completion: recorder.completion)

            scheduler.advance()
            #expect(scheduler.pendingCount == 1, "waiting on the backoff timer")
            handle.cancel()
            #expect(handle.isFinished)
            scheduler.advance()  // the hop to the queue, without moving time

            #expect(recorder.onlyResult?.cbError is CancellationError)
            #expect(recorder.onlySummary == RetrySummary(reason: .cancelled, attempts: 1, elapsed: .zero))
            #expect(scheduler.pendingCount == 0, "the timer was cancelled")
            scheduler.run()
            #expect(calls.count == 1, "no attempt after cancel")
            #expect(scheduler.now == .zero, "nothing waited for the timer")
            #expect(
                recorder.events == [
                    "start 1", "fail 1 E1 retry \(Duration.seconds(10))", "finished cancelled 1 CancellationError()",
                ])
        }

        @Test func cancelDuringAttemptRunsTheHookAndIgnoresTheLateResult() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let hooks = CBCounter()
            let kept = CBSlot<AttemptCompletion<Int>>()
            let handle = retry(
                attemptTimeout: .seconds(30), on: queue, scheduler: scheduler,
                operation: { _, done in
                    done.onCancel { hooks.increment() }
                    kept.set(done)
                }, observer: recorder.observer, completion: recorder.completion)

            scheduler.advance()
            #expect(scheduler.pendingCount == 1, "the attempt's timer")
            handle.cancel()
            #expect(hooks.count == 1, "the hook runs on the cancelling thread before cancel returns")
            scheduler.advance()
            #expect(recorder.onlyResult?.cbError is CancellationError)
            #expect(scheduler.pendingCount == 0, "the attempt's timer was cancelled")

            kept.get?(.success(5))
            handle.cancel()
            scheduler.run()
            #expect(recorder.completionCount == 1)
            #expect(hooks.count == 1)
            #expect(recorder.events == ["start 1", "finished cancelled 1 CancellationError()"])
        }

        @Test func cancelBeforeTheFirstAttemptRunsNoAttempt() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let calls = CBCounter()
            let handle = retry(
                on: queue, scheduler: scheduler,
                operation: counting(calls, .success(1)), observer: recorder.observer, completion: recorder.completion)
            handle.cancel()
            scheduler.run()

            #expect(calls.count == 0)
            #expect(recorder.onlyResult?.cbError is CancellationError)
            #expect(recorder.onlySummary == RetrySummary(reason: .cancelled, attempts: 0, elapsed: .zero))
        }

        @Test func cancelAfterCompletionIsANoOp() async throws {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let handle = retry(
                on: queue, scheduler: scheduler, operation: { _, done in done(.success(8)) },
                observer: recorder.observer, completion: recorder.completion)
            scheduler.run()
            #expect(handle.isFinished)
            handle.cancel()
            handle.cancel()
            scheduler.run()

            #expect(recorder.completionCount == 1)
            #expect(recorder.onlyResult?.cbValue == 8)
            #expect(try await handle.value == 8, "the result stays the success")
            #expect(recorder.events.last == "finished succeeded 1")
        }

        // MARK: - Misbehaving operations

        @Test func aSecondCallToDoneIsReportedNotDelivered() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            retry(
                on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    if attempt.number == 1 {
                        done(.failure(CBError(code: 1)))
                        done(.success(100))  // duplicate: ignored, reported
                    } else {
                        done(.success(2))
                        done(.failure(CBError(code: 2)))  // duplicate after the final result
                    }
                }, observer: recorder.observer, completion: recorder.completion)
            scheduler.run()

            #expect(recorder.completionCount == 1)
            #expect(recorder.onlyResult?.cbValue == 2)
            // Each duplicate comes before the next `start` or `finished`, as in every other runner.
            #expect(
                recorder.events == [
                    "start 1", "fail 1 E1 retry \(Duration.zero)", "duplicate 1", "start 2", "ok 2 2",
                    "duplicate 2", "finished succeeded 2",
                ])
        }

        @Test func aSecondCallDuringAWaitIsReportedAtOnce() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let kept = CBSlot<AttemptCompletion<Int>>()
            retry(
                on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    if attempt.number == 1 { kept.set(done) }
                    done(attempt.number == 1 ? .failure(CBError(code: 1)) : .success(2))
                }, strategy: { _ in .backoff(.constant(.seconds(5))) }, observer: recorder.observer,
                completion: recorder.completion)
            scheduler.advance()
            kept.get?(.success(100))  // during the 5 s wait
            scheduler.advance()
            #expect(recorder.events == ["start 1", "fail 1 E1 retry \(Duration.seconds(5))", "duplicate 1"])
            scheduler.run()
            #expect(recorder.events.suffix(3) == ["start 2", "ok 2 2", "finished succeeded 2"])
        }

        @Test func aSecondCallAfterAFinalFailureIsReportedBeforeFinished() {
            // The last attempt's failure ends the machine as soon as `done` is called (before the operation returns);
            // its duplicate, made before the operation returns, still comes before `finished`.
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            retry(
                maxAttempts: 2, on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    done(.failure(CBError(code: attempt.number)))
                    if attempt.number == 2 { done(.success(100)) }  // duplicate after the final result
                }, observer: recorder.observer, completion: recorder.completion)
            scheduler.run()

            #expect(recorder.completionCount == 1)
            #expect((recorder.onlyResult?.cbError as? CBError)?.code == 2)
            #expect(
                recorder.events == [
                    "start 1", "fail 1 E1 retry \(Duration.zero)", "start 2", "fail 2 E2 giveUp exhausted",
                    "duplicate 2", "finished exhausted 2 E2",
                ])
        }

        @Test func aCancelFromTheOperationAfterItsResultEndsTheRetrierCancelled() {
            // The result came first (it is not a late one), then the cancel: the retrier ends cancelled, exactly
            // once, and no further attempt runs.
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let handle = CBSlot<RetryHandle<Int>>()
            let calls = CBCounter()
            let strategyCalls = CBCounter()
            handle.set(
                retry(
                    maxAttempts: 3, on: queue, scheduler: scheduler,
                    operation: { _, done in
                        calls.increment()
                        done(.failure(CBError(code: 1)))
                        handle.get?.cancel()
                    },
                    strategy: { _ in
                        strategyCalls.increment()
                        return .backoff(.none)
                    }, observer: recorder.observer, completion: recorder.completion))
            scheduler.run()

            #expect(calls.count == 1)
            #expect(strategyCalls.count == 0)
            #expect(recorder.completionCount == 1)
            #expect(recorder.onlyResult?.cbError is CancellationError)
            #expect(recorder.onlySummary?.reason == .cancelled)
            #expect(recorder.events == ["start 1", "finished cancelled 1 CancellationError()"])
        }

        @Test func aSecondCallAfterTheRetrierFinishedIsDropped() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let kept = CBSlot<AttemptCompletion<Int>>()
            retry(
                on: queue, scheduler: scheduler,
                operation: { _, done in
                    kept.set(done)
                    done(.success(1))
                }, observer: recorder.observer, completion: recorder.completion)
            scheduler.run()
            kept.get?(.success(2))
            scheduler.run()
            #expect(recorder.completionCount == 1)
            // Once the retrier has finished it keeps none of the caller's closures, the observer included (issue 12),
            // as every other runner: the late call is dropped.
            #expect(recorder.events == ["start 1", "ok 1 1", "finished succeeded 1"])
        }

        @Test func legacyValueErrorCompletionStyle() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<String>()
            retry(
                maxAttempts: 3, on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    switch attempt.number {
                    case 1: done(nil, CBError(code: 1))
                    case 2: done(nil, nil)
                    default: done("three", nil)
                    }
                }, observer: recorder.observer, completion: recorder.completion)
            scheduler.run()

            #expect(recorder.onlyResult?.cbValue == "three")
            #expect(recorder.events[1] == "fail 1 E1 retry \(Duration.zero)")
            #expect(
                recorder.rawEvents.contains { event in
                    if case .attemptFailed(let attempt, let error, _) = event {
                        return attempt.number == 2 && cbIsRetryError(error, .missingResult)
                    }
                    return false
                })
        }

        // MARK: - Hops, timers and the API's shape

        @Test func zeroDelayArmsNoTimerAndEveryAttemptStartsInABlockOfItsOwn() {
            let scheduler = CBRecordingScheduler(VirtualScheduler())
            let recorder = CBRecorder<Int>()
            retry(
                maxAttempts: 4, on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    attempt.number < 4 ? done(.failure(CBError(code: attempt.number))) : done(.success(4))
                }, strategy: { error in (error as? CBError)?.code == 2 ? .retryAfter(.zero) : .backoff(.none) },
                observer: recorder.observer, completion: recorder.completion)
            scheduler.base.advance()

            #expect(recorder.onlyResult?.cbValue == 4)
            #expect(scheduler.scheduledDelays.isEmpty, "a zero delay arms no timer")
            #expect(
                scheduler.executeCount == 4,
                "one hop to start, one per zero wait (every attempt in a new block); no hop for early results")
            #expect(scheduler.base.now == .zero)
            let zero = Duration.zero
            #expect(
                recorder.events == [
                    "start 1", "fail 1 E1 retry \(zero)", "start 2", "fail 2 E2 retry \(zero)", "start 3",
                    "fail 3 E3 retry \(zero)", "start 4", "ok 4 4", "finished succeeded 4",
                ])
        }

        @Test func laterResultsHopOncePerAttemptAndEveryRetryStartsInABlockOfItsOwn() {
            let scheduler = CBRecordingScheduler(VirtualScheduler())
            let recorder = CBRecorder<Int>()
            retry(
                maxAttempts: 4, on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    // Completes after the operation returned, like a network callback.
                    scheduler.base.execute(on: queue) {
                        attempt.number < 4 ? done(.failure(CBError(code: attempt.number))) : done(.success(4))
                    }
                }, completion: recorder.completion)
            scheduler.base.advance()

            #expect(recorder.onlyResult?.cbValue == 4)
            #expect(scheduler.scheduledDelays.isEmpty)
            #expect(
                scheduler.executeCount == 1 + 4 + 3,
                "one hop to start, one per attempt's result, one per zero wait before a retry")
        }

        @Test func aLongRunOfSynchronousFailuresDoesNotGrowTheStack() {
            let scheduler = VirtualScheduler()
            let recorder = CBRecorder<Int>()
            let attempts = 10_000
            retry(
                maxAttempts: attempts, on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    attempt.number < attempts ? done(.failure(CBError(code: 0))) : done(.success(attempt.number))
                }, completion: recorder.completion)
            scheduler.advance()

            #expect(recorder.onlyResult?.cbValue == attempts)
            #expect(recorder.onlySummary?.attempts == attempts)
        }

        @Test func completionClosureFormsTypeCheck() {
            let scheduler = VirtualScheduler()
            let one = CBSlot<Result<Int, any Error>>()
            let two = CBSlot<(Int?, Int)>()
            let anonymous = CBCounter()

            retry(on: queue, scheduler: scheduler) { _, done in
                done(.success(1))
            } completion: { result, _ in
                one.set(result)
            }
            retry(on: queue, scheduler: scheduler) { _, done in
                done(.success(2))
            } completion: { result, summary in
                two.set((result.cbValue, summary.attempts))
            }
            retry(maxAttempts: 2, on: queue, scheduler: scheduler) { _, done in
                done(.success(3))
            } strategy: { _ in
                .stop
            } observer: { _ in
            } completion: {
                if $0.cbValue == 3 && $1.attempts == 1 { anonymous.increment() }
            }
            scheduler.run()

            #expect(one.get?.cbValue == 1)
            #expect(two.get?.0 == 2)
            #expect(two.get?.1 == 1)
            #expect(anonymous.count == 1)
        }

        @Test func noLockIsHeldWhileUserCodeRuns() async {
            // Every callback calls back into the handle (which takes the runner's lock). Were the lock held, the
            // background run would deadlock and the wait below would time out.
            let scheduler = VirtualScheduler()
            let handleSlot = CBSlot<RetryHandle<Int>>()
            let touched = Locked<Set<String>>([])
            @Sendable func touch(_ what: String) {
                _ = handleSlot.get?.isFinished
                touched.withLock { _ = $0.insert(what) }
            }
            let handle: RetryHandle<Int> = retry(
                maxAttempts: 3, attemptTimeout: .seconds(1), on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    touch("operation")
                    if attempt.number == 1 {
                        done(.failure(CBError(code: 1)))
                    } else {
                        done.onCancel {
                            touch("cancel hook")
                            handleSlot.get?.cancel()
                        }
                        handleSlot.get?.cancel()  // from inside the operation: runs the hook right here
                    }
                },
                strategy: { _ in
                    touch("strategy")
                    return .backoff(
                        .custom { _ in
                            touch("custom backoff")
                            return .seconds(1)
                        })
                },
                observer: { event in
                    touch("observer")
                    if case .finished = event { handleSlot.get?.cancel() }
                },
                completion: { _, _ in
                    touch("completion")
                    handleSlot.get?.cancel()
                })
            handleSlot.set(handle)

            let finished = CBCounter()
            DispatchQueue.global().async {
                scheduler.run()
                finished.increment()
            }
            #expect(await cbWait(timeout: .seconds(120)) { finished.count == 1 })
            #expect(
                touched.withLock { $0 }
                    == ["operation", "strategy", "custom backoff", "observer", "cancel hook", "completion"])
        }

        // MARK: - Nothing retained

        enum Ending: String, CaseIterable {
            case success, exhausted, stopped, deadline, invalidConfiguration, attemptTimeout, cancelDuringAttempt,
                cancelDuringWait, cancelBeforeStart
        }

        struct Probes {
            let operation: CBWeak<CBCanary>
            let strategy: CBWeak<CBCanary>
            let observer: CBWeak<CBCanary>
            let completion: CBWeak<CBCanary>
            /// The handle, kept like a caller might keep it.
            var handle: RetryHandle<Int>?
            let runner: CallbackRunnerProbe
        }

        /// Starts a retrier whose closures each capture their own canary, keeping only weak references.
        static func startProbed(
            _ ending: Ending, scheduler: VirtualScheduler, queue: DispatchQueue, completions: CBCounter
        )
            -> Probes
        {
            let canaries = (CBCanary(), CBCanary(), CBCanary(), CBCanary())
            let (operationCanary, strategyCanary, observerCanary, completionCanary) = canaries
            let handle = retry(
                maxAttempts: ending == .invalidConfiguration ? 0 : 2,
                totalTimeout: ending == .deadline ? .seconds(1) : nil,
                attemptTimeout: ending == .attemptTimeout ? .seconds(1) : nil,
                on: queue, scheduler: scheduler,
                operation: { _, done in
                    withExtendedLifetime(operationCanary) {}
                    switch ending {
                    case .success: done(.success(1))
                    case .attemptTimeout, .deadline, .cancelDuringAttempt: break  // never calls back
                    default: done(.failure(CBError(code: 1)))
                    }
                },
                strategy: { _ in
                    withExtendedLifetime(strategyCanary) {}
                    return ending == .stopped ? .stop : .backoff(.constant(.seconds(5)))
                },
                observer: { _ in withExtendedLifetime(observerCanary) {} },
                completion: { _, _ in
                    withExtendedLifetime(completionCanary) {}
                    completions.increment()
                })
            switch ending {
            case .cancelBeforeStart:
                handle.cancel()
            case .cancelDuringAttempt, .cancelDuringWait:
                scheduler.advance()
                handle.cancel()
            default:
                break
            }
            return Probes(
                operation: CBWeak(operationCanary), strategy: CBWeak(strategyCanary), observer: CBWeak(observerCanary),
                completion: CBWeak(completionCanary), handle: handle, runner: handle.runner.probe)
        }

        @Test(arguments: Ending.allCases)
        func nothingIsRetainedAfterTheRetrierFinishes(_ ending: Ending) {
            let scheduler = VirtualScheduler()
            let completions = CBCounter()
            var probes = Self.startProbed(ending, scheduler: scheduler, queue: queue, completions: completions)
            scheduler.run()

            #expect(completions.count == 1)
            #expect(probes.handle?.isFinished == true)
            // The caller still holds the handle: the closures must be released anyway.
            #expect(probes.operation.object == nil, "operation released")
            #expect(probes.strategy.object == nil, "strategy released")
            #expect(probes.observer.object == nil, "observer released")
            #expect(probes.completion.object == nil, "completion released")
            #expect(scheduler.pendingCount == 0, "no timer left")
            #expect(probes.runner.object != nil, "the handle keeps its runner")
            probes.handle = nil
            #expect(probes.runner.object == nil, "the runner itself is gone: no retain cycle")
        }
    }
}

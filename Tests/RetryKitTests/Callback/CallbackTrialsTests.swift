import Dispatch
import RetryKitTesting
import Testing

@testable import RetryKit

extension CallbackRunnerTests {
    /// Runs of trials in the one callback runner: a gated policy (`onlyWhen`) and a repeating one carried out from the
    /// machine's actions (`awaitCondition`, `interrupt`, `repeatAfter`), on virtual time, plus a race on real queues.
    @Suite("Callback trials")
    struct CallbackTrialsTests {
        let queue = DispatchQueue(label: "callback-trials-tests")

        /// What a gated run's test starts from: virtual time, a condition with `value`, a recorder.
        private static func fixture(_ value: Bool) -> (VirtualScheduler, RetryCondition, CBRecorder<Int>) {
            (VirtualScheduler(), RetryCondition(value), CBRecorder<Int>())
        }

        /// Awaits a handle's value, whatever its type (a repetition's is `Never`).
        private static func awaitEnd<Value>(of handle: RetryHandle<Value>) async throws {
            _ = try await handle.value
        }

        /// Starts a run of `policy` whose attempts never call back: returns the `done` of each attempt, kept, and a
        /// count of the cancel hooks that ran.
        private func startKept(
            _ policy: RetryPlan, _ scheduler: VirtualScheduler, _ recorder: CBRecorder<Int>
        ) -> (kept: Locked<[AttemptCompletion<Int>]>, hooks: CBCounter) {
            let kept = Locked<[AttemptCompletion<Int>]>([])
            let hooks = CBCounter()
            policy.execute(
                on: queue, scheduler: scheduler,
                operation: { _, done in
                    done.onCancel { hooks.increment() }
                    kept.withLock { $0.append(done) }
                }, observer: recorder.observer, completion: recorder.completion)
            return (kept, hooks)
        }

        @Test func closedAtTheStartThenOpenRunsTheFirstTrialThen() {
            let (scheduler, condition, recorder) = Self.fixture(false)
            let calls = CBCounter()
            let handle = RetryPlan.noDelay.onlyWhen(condition).execute(
                on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    calls.increment()
                    done(.success(attempt.number))
                }, observer: recorder.observer, completion: recorder.completion)
            scheduler.advance(by: .seconds(60))
            #expect(calls.count == 0)
            #expect(scheduler.pendingCount == 0, "nothing armed while the condition is closed")
            #expect(condition.observerCount == 1)
            #expect(!handle.isFinished)

            condition.value = true
            scheduler.advance()
            #expect(calls.count == 1)
            #expect(recorder.onlyResult?.cbValue == 1)
            #expect(recorder.onlySummary == RetrySummary(reason: .succeeded, attempts: 1, elapsed: .seconds(60)))
            #expect(recorder.events == ["start 1", "ok 1 1", "finished succeeded 1"])
            #expect(condition.observerCount == 0, "the run stopped observing")
            #expect(scheduler.pendingCount == 0)
        }

        @Test func closingDuringAnAttemptCancelsItAndIgnoresItsLateResultEvenInTheNextTrial() {
            let (scheduler, condition, recorder) = Self.fixture(true)
            let (kept, hooks) = startKept(
                RetryPlan.noDelay.attemptTimeout(.seconds(5)).onlyWhen(condition), scheduler, recorder)
            scheduler.advance(by: .seconds(1))
            #expect(kept.withLock { $0.count } == 1)
            #expect(scheduler.nextDeadline == .seconds(5), "the attempt's timeout")

            condition.value = false
            #expect(hooks.count == 1, "the hook runs at once, on the thread that closed the condition")
            scheduler.advance()
            #expect(scheduler.pendingCount == 0, "the attempt's timeout was cancelled")
            #expect(recorder.events == ["start 1", "fail 1 CancellationError() giveUp cancelled"])
            scheduler.advance(by: .seconds(10))
            #expect(recorder.completionCount == 0)

            condition.value = true
            scheduler.advance()
            #expect(kept.withLock { $0.count } == 2, "a new trial, its attempt numbered 1 again")
            kept.withLock { $0[0] }(.success(98))  // late: the same number, but an earlier trial's
            scheduler.advance()
            #expect(recorder.completionCount == 0, "the interrupted trial's result does not end the new one")
            kept.withLock { $0[1] }(.success(7))
            scheduler.advance()
            #expect(recorder.onlyResult?.cbValue == 7)
            #expect(recorder.onlySummary == RetrySummary(reason: .succeeded, attempts: 2, elapsed: .seconds(11)))
            #expect(
                recorder.events == [
                    "start 1", "fail 1 CancellationError() giveUp cancelled", "start 1", "ok 1 7",
                    "finished succeeded 2",
                ])
            #expect(hooks.count == 1)
            #expect(scheduler.pendingCount == 0)
        }

        @Test func closingDuringAWaitCancelsTheTimerAndReportsNoFailure() {
            let (scheduler, condition, recorder) = Self.fixture(true)
            let calls = CBCounter()
            RetryPlan.constantDelay(.seconds(10)).onlyWhen(condition).execute(
                on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    calls.increment() == 1 ? done(.failure(CBError(code: 1))) : done(.success(attempt.number))
                }, observer: recorder.observer, completion: recorder.completion)
            scheduler.advance()
            #expect(scheduler.nextDeadline == .seconds(10))
            condition.value = false
            scheduler.advance()
            #expect(scheduler.pendingCount == 0, "the wait's timer was cancelled")
            scheduler.advance(by: .seconds(30))
            #expect(calls.count == 1)

            condition.value = true
            scheduler.run()
            #expect(calls.count == 2)
            #expect(recorder.onlySummary == RetrySummary(reason: .succeeded, attempts: 2, elapsed: .seconds(30)))
            #expect(
                recorder.events == [
                    "start 1", "fail 1 E1 retry 10.0 seconds", "start 1", "ok 1 1", "finished succeeded 2",
                ])
        }

        @Test func reopenedBeforeTheInterruptionIsCarriedOutStartsTheNextTrialRightAfterIt() {
            let (scheduler, condition, recorder) = Self.fixture(true)
            let (kept, hooks) = startKept(RetryPlan.noDelay.onlyWhen(condition), scheduler, recorder)
            scheduler.advance()
            condition.value = false
            condition.value = true  // before the queue carried out the interruption
            scheduler.advance()
            #expect(hooks.count == 1)
            #expect(kept.withLock { $0.count } == 2)
            #expect(recorder.events == ["start 1", "fail 1 CancellationError() giveUp cancelled", "start 1"])
            kept.withLock { $0[1] }(.failure(CBError(code: 2)))
            scheduler.advance()
            #expect(recorder.events.count == 5, "retrying at once within the new trial")
            #expect(recorder.events.last == "start 2")
            kept.withLock { $0[2] }(.success(5))
            scheduler.run()
            #expect(recorder.onlySummary == RetrySummary(reason: .succeeded, attempts: 3, elapsed: .zero))
        }

        /// Closed and ended during an attempt, before the interruption was carried out: the attempt reports its
        /// interruption, then the run ends, carrying no attempt error (the interruption is not one). (Ended while the
        /// run waits for the condition: `ConditionCallbackTests`.)
        @Test func endedWhileClosedDuringAnInterruptionFinishesWithConditionEnded() {
            let (scheduler, condition, recorder) = Self.fixture(true)
            let (_, hooks) = startKept(RetryPlan.noDelay.onlyWhen(condition), scheduler, recorder)
            scheduler.advance()
            condition.value = false
            condition.finish()
            scheduler.run()
            let ended = recorder.onlyResult?.cbError as? RetryError
            #expect(ended?.reason == .conditionEnded && ended?.lastError == nil)
            #expect(recorder.onlySummary?.attempts == 1)
            #expect(recorder.events.count == 3)
            #expect(recorder.events.prefix(2) == ["start 1", "fail 1 CancellationError() giveUp cancelled"])
            #expect(hooks.count == 1 && condition.observerCount == 0 && scheduler.pendingCount == 0)
        }

        @Test func repeatingHandsEachValueOverAndPausesOnATimerWhateverTheCondition() {
            let (scheduler, condition, recorder) = Self.fixture(true)
            let values = Locked<[Int]>([])
            let errors = Locked<[any Error]>([])
            let calls = CBCounter()
            let budget = RetryBudget(capacity: 10, retryCost: 5, successRefund: 1)
            RetryPlan.constantDelay(.seconds(1)).budget(budget).onlyWhen(condition).repeating(
                withDelay: .seconds(10)
            ).execute(
                on: queue, scheduler: scheduler,
                operation: { (_: RetryAttempt, done: AttemptCompletion<Int>) in
                    let call = calls.increment()
                    call == 2 ? done(.failure(CBError(code: call))) : done(.success(call))
                }, observer: recorder.observer, onValue: { value in values.withLock { $0.append(value) } },
                completion: { error in errors.withLock { $0.append(error) } })
            scheduler.advance()
            #expect(values.withLock { $0 } == [1])
            #expect(scheduler.nextDeadline == .seconds(10), "the pause is a timer")
            scheduler.advance(by: .seconds(11))  // call 2 fails at 10 (paying 5), call 3 succeeds at 11 (refunded)
            #expect(values.withLock { $0 } == [1, 3])
            #expect(budget.availableTokens == 10)
            condition.value = false  // during the pause: it goes on; then the next trial waits
            scheduler.advance(by: .seconds(30))
            #expect(calls.count == 3)
            #expect(scheduler.pendingCount == 0)
            condition.value = true
            scheduler.advance()
            #expect(values.withLock { $0 } == [1, 3, 4])
            condition.value = false
            condition.finish()
            scheduler.run()
            #expect((errors.withLock { $0.first } as? RetryError)?.reason == .conditionEnded)
            #expect(errors.withLock { $0.count } == 1)
            #expect(
                recorder.events.dropLast() == [
                    "start 1", "ok 1 1", "start 1", "fail 1 E2 retry 1.0 seconds", "start 2", "ok 2 3", "start 1",
                    "ok 1 4",
                ])
            #expect(recorder.events.last?.hasPrefix("finished conditionEnded 4") == true)
            #expect(condition.observerCount == 0)
        }

        @Test func aZeroPauseStillLetsTheQueueRunOtherWorkBetweenTrials() async {
            // Each pause ends in a new block on the queue, even a zero one: a run of synchronous successes never
            // holds the queue.
            let queue = DispatchQueue(label: "callback-trials-zero-pause")
            let values = CBCounter()
            let marker = Locked<Int?>(nil)
            let errors = Locked<[any Error]>([])
            let handle = RetryPlan.noDelay.repeating(withDelay: .zero).execute(
                on: queue, operation: { _, done in done(.success(1)) },
                onValue: { _ in
                    if values.increment() == 3 {
                        queue.async { marker.withLock { $0 = values.count } }
                    }
                }, completion: { error in errors.withLock { $0.append(error) } })
            #expect(await cbWait { marker.withLock { $0 } != nil })
            #expect(await cbWait { values.count > (marker.withLock { $0 } ?? .max) }, "and the repetition went on")
            handle.cancel()
            #expect(await cbWait { errors.withLock { $0.count } == 1 })
            #expect(errors.withLock { $0.first } is CancellationError)
        }

        /// Where a run is when it is cancelled.
        enum Phase: CaseIterable {
            case awaitingCondition, attempting, waiting, interrupting, pausing, finished
        }

        @Test(arguments: Phase.allCases)
        func cancelEndsTheRunOnceInEveryPhase(phase: Phase) async {
            let (scheduler, condition, recorder) = Self.fixture(phase != .awaitingCondition)
            let hooks = CBCounter()
            let kept = CBKeeper<Int>()
            let calls = CBCounter()
            let handle = RetryPlan.constantDelay(.seconds(10)).onlyWhen(condition).repeating(
                withDelay: .seconds(10)
            ).execute(
                on: queue, scheduler: scheduler,
                operation: { (_: RetryAttempt, done: AttemptCompletion<Int>) in
                    calls.increment()
                    done.onCancel { hooks.increment() }
                    switch phase {
                    case .waiting: done(.failure(CBError(code: 1)))
                    case .pausing, .finished: done(.success(1))
                    case .awaitingCondition, .attempting, .interrupting: kept.keep(done)
                    }
                }, observer: recorder.observer, onValue: { _ in },
                completion: { error in
                    recorder.completion(.failure(error), RetrySummary(reason: .cancelled, attempts: 0, elapsed: .zero))
                })
            scheduler.advance()
            switch phase {
            case .interrupting:
                condition.value = false  // cancelled before the queue carries the interruption out
            case .finished:
                condition.value = false  // during the pause; the next trial finds it ended
                condition.finish()
                scheduler.run()
                #expect((recorder.onlyResult?.cbError as? RetryError)?.reason == .conditionEnded)
            case .awaitingCondition, .attempting, .waiting, .pausing:
                break
            }
            handle.cancel()
            scheduler.run()
            #expect(recorder.completionCount == 1, "exactly once")
            let events = recorder.events
            #expect(events.filter { $0.hasPrefix("finished") }.count == 1)
            #expect(events.last?.hasPrefix("finished") == true, "nothing after `finished`")
            if phase != .finished {
                #expect(recorder.onlyResult?.cbError is CancellationError)
                #expect(events.last == "finished cancelled \(calls.count) CancellationError()")
            }
            #expect(events.contains { $0.hasPrefix("fail 1 CancellationError") } == false, "not interrupted")
            #expect(hooks.count == (phase == .attempting || phase == .interrupting ? 1 : 0))
            #expect(scheduler.pendingCount == 0, "no timer, no hop left")
            #expect(condition.observerCount == 0)
            #expect(handle.isFinished)
            await #expect(throws: (any Error).self) { try await Self.awaitEnd(of: handle) }
        }

        /// The condition closes on one thread while the attempt's completion is called on another: whichever the
        /// runner sees first wins, the other is ignored, and the run completes exactly once with a consistent story.
        @Test func aConditionClosingConcurrentlyWithTheAttemptsResultCompletesOnceAndConsistently() async {
            let runs = 400
            let queue = DispatchQueue(label: "callback-trials-race")
            let network = DispatchQueue(label: "callback-trials-network", attributes: .concurrent)
            let recorders = (0..<runs).map { _ in CBRecorder<Int>(checking: queue) }
            let hooks = (0..<runs).map { _ in CBCounter() }
            let conditions = (0..<runs).map { _ in RetryCondition(true) }
            for run in 0..<runs {
                let condition = conditions[run]
                RetryPlan.noDelay.onlyWhen(condition).execute(
                    on: queue,
                    operation: { attempt, done in
                        done.onCancel { hooks[run].increment() }
                        // Attempt 1 of the first trial races the condition; any later attempt succeeds at once.
                        guard recorders[run].events.count <= 1 else { return done(.success(attempt.number)) }
                        let toggle: @Sendable () -> Void = {
                            condition.value = false
                            condition.value = true
                        }
                        // Three orders, so that either side wins often: the result from another thread first, the
                        // condition first, or the result inside the operation while the condition changes.
                        switch run % 3 {
                        case 0:
                            network.async { done(.success(100 + run)) }
                            network.async(execute: toggle)
                        case 1:
                            network.async(execute: toggle)
                            network.async { done(.success(100 + run)) }
                        default:
                            network.async(execute: toggle)
                            done(.success(100 + run))
                        }
                    }, observer: recorders[run].observer, completion: recorders[run].completion)
            }
            #expect(await cbWait(timeout: .seconds(120)) { recorders.allSatisfy { $0.completionCount > 0 } })
            try? await Task.sleep(for: .milliseconds(20))  // a second completion, if any, would show by now
            for run in 0..<runs {
                let recorder = recorders[run]
                #expect(recorder.completionCount == 1)
                #expect(recorder.offQueue.isEmpty)
                #expect(hooks[run].count <= 1)
                #expect(conditions[run].observerCount == 0)
                let events = recorder.events
                switch recorder.onlyResult?.cbValue {
                case 100 + run:
                    #expect(events == ["start 1", "ok 1 \(100 + run)", "finished succeeded 1"])
                case 1:
                    #expect(
                        events == [
                            "start 1", "fail 1 CancellationError() giveUp cancelled", "start 1", "ok 1 1",
                            "finished succeeded 2",
                        ])
                default:
                    Issue.record("unexpected result \(String(describing: recorder.onlyResult)), events \(events)")
                }
            }
        }

        @Test func nothingIsRetainedAfterTheEnd() {
            let scheduler = VirtualScheduler()
            let condition = RetryCondition(true)
            let kept = Locked<[AttemptCompletion<Int>]>([])
            let canaries: [CBWeak<CBCanary>]
            let probe: CallbackRunnerProbe
            do {
                let (operationCanary, observerCanary, valueCanary, completionCanary) =
                    (CBCanary(), CBCanary(), CBCanary(), CBCanary())
                canaries = [operationCanary, observerCanary, valueCanary, completionCanary].map { CBWeak($0) }
                let handle = RetryPlan.noDelay.onlyWhen(condition).repeating(withDelay: .seconds(1)).execute(
                    on: queue, scheduler: scheduler,
                    operation: { (attempt: RetryAttempt, done: AttemptCompletion<Int>) in
                        _ = operationCanary
                        // The first never calls back.
                        attempt.number == 1 ? kept.withLock { $0.append(done) } : done(.success(1))
                    }, observer: { _ in _ = observerCanary }, onValue: { _ in _ = valueCanary },
                    completion: { _ in _ = completionCanary })
                probe = handle.runner.probe
                scheduler.advance()
                condition.value = false  // interrupts the attempt that keeps its `done`
                scheduler.advance()
                condition.value = false
                condition.finish()
                scheduler.run()
                #expect(handle.isFinished)
            }
            #expect(kept.withLock { $0.count } == 1, "the operation still keeps a completion")
            #expect(canaries.allSatisfy { $0.object == nil }, "operation, observer, onValue and completion released")
            #expect(condition.observerCount == 0, "the condition keeps nothing of the run")
            #expect(scheduler.pendingCount == 0)
            #expect(probe.object != nil, "the kept completion keeps the runner's storage")
            kept.withLock { $0 = [] }
            #expect(probe.object == nil, "and nothing else does")
        }
    }
}

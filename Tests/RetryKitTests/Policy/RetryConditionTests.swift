import Dispatch
import RetryKitTesting
import Testing

@testable import RetryKit

@Suite("RetryCondition sources", .timeLimit(.minutes(3)))
struct RetryConditionSourceTests {
    @Test func aSetConditionNotifiesChangesOnlyAndFreezesWhenFinished() {
        let condition = RetryCondition()
        let seen = Locked<[RetryConditionSnapshot]>([])
        let (initial, observation) = condition.observe { snapshot in seen.withLock { $0.append(snapshot) } }
        #expect(initial.value == nil && !initial.ended && !initial.isOpen)
        condition.value = true
        condition.value = true  // unchanged: no notification
        condition.value = false
        condition.finish()
        condition.value = true  // ignored after finish
        condition.finish()  // idempotent
        let snapshots = seen.withLock { $0 }
        #expect(snapshots.map(\.value) == [true, false, false])
        #expect(snapshots.map(\.ended) == [false, false, true])
        #expect(snapshots.map(\.version) == [1, 2, 3])
        #expect(condition.value == false && condition.isFinished)
        #expect(condition.observerCount == 0, "observers are released when the condition finishes")
        observation.cancel()
        let (late, _) = condition.observe { _ in Issue.record("an ended condition notifies nobody") }
        #expect(late.ended && late.value == false)
    }

    @Test func allIsTrueOnlyWhileEveryConditionIsAndEndsWithTheFirstThatEndsClosed() {
        let a = RetryCondition()
        let b = RetryCondition(true)
        let both = RetryCondition.all([a, b])
        #expect(both.value == nil)
        a.value = true
        #expect(both.value == true)
        b.value = false
        #expect(both.value == false)
        a.value = nil
        #expect(both.value == false, "false wins over no value")
        b.value = true
        #expect(both.value == nil)
        b.finish()  // ended while true: the combination goes on
        #expect(!both.isFinished)
        a.value = true
        #expect(both.value == true)
        #expect(a.observerCount == 1)
        a.value = false
        a.finish()
        #expect(both.isFinished && both.value == false)
        #expect(a.observerCount == 0, "an ended combination stops observing")

        let c = RetryCondition(true)
        let d = RetryCondition(true)
        var all: RetryCondition? = RetryCondition.all([c, d])
        c.finish()
        d.finish()
        #expect(all?.isFinished == true && all?.value == true, "all ended true")
        let e = RetryCondition(true)
        all = RetryCondition.all([RetryCondition(true), d, e])
        #expect(all?.value == true)
        #expect(e.observerCount == 1)
        all = nil
        #expect(e.observerCount == 0, "releasing the combination stops its observations")
    }

    @Test func allSettlesOnTheLatestValuesWhenSourcesChangeConcurrently() {
        let sources = [RetryCondition(false), RetryCondition(false)]
        let both = RetryCondition.all(sources)
        for round in 0..<20 {
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                for flip in 0..<200 { sources[index].value = (flip + index + round) % 2 == 0 }
                sources[index].value = round % 2 == 0
            }
            #expect(both.value == (round % 2 == 0), "round \(round)")
        }
    }

    @Test func cancellingAnObservationStopsNotifications() {
        let condition = RetryCondition(false)
        let count = CBCounter()
        let (_, observation) = condition.observe { _ in count.increment() }
        condition.value = true
        observation.cancel()
        condition.value = false
        #expect(count.count == 1)
        #expect(condition.observerCount == 0)
    }

    @Test func aRegisteredSourceIsStoppedOnceWhenTheConditionFinishesOrIsReleased() {
        let stops = CBCounter()
        let update = CBSlot<RetryCondition.Update>()
        let condition = RetryCondition { sink in
            update.set(sink)
            return { stops.increment() }
        }
        update.get?(true)
        #expect(condition.value == true)
        update.get?.finish()
        #expect(condition.isFinished)
        #expect(stops.count == 1)
        condition.finish()
        #expect(stops.count == 1)

        let released = CBCounter()
        let weakCondition: CBWeak<RetryCondition>
        do {
            let transient = RetryCondition { sink in
                update.set(sink)
                return { released.increment() }
            }
            weakCondition = CBWeak(transient)
            #expect(transient.value == nil)
        }
        #expect(weakCondition.object == nil, "the source's update does not keep the condition alive")
        #expect(released.count == 1)
        update.get?(true)  // harmless after release
    }

    @Test func aSourceThatEndsWhileRegisteringIsStoppedAtOnce() {
        let stops = CBCounter()
        let condition = RetryCondition { update in
            update(false)
            update.finish()
            return { stops.increment() }
        }
        #expect(condition.isFinished && condition.value == false)
        #expect(stops.count == 1)
    }

    @Test func anAsyncSequenceFeedsTheConditionAndItsEndEndsIt() async {
        let (stream, continuation) = AsyncStream.makeStream(of: Bool.self)
        let condition = RetryCondition(stream)
        continuation.yield(true)
        #expect(await cbWait { condition.value == true })
        continuation.yield(false)
        #expect(await cbWait { condition.value == false })
        continuation.finish()
        #expect(await cbWait { condition.isFinished })
    }

    @Test func releasingAConditionCancelsTheIterationOfItsSequence() async {
        let (stream, continuation) = AsyncStream.makeStream(of: Bool.self)
        let terminated = AsyncSignal()
        continuation.onTermination = { _ in terminated.fire() }
        var condition: RetryCondition? = RetryCondition(stream)
        #expect(condition?.isFinished == false)
        condition = nil
        await terminated.wait()  // the iterating task was cancelled
    }
}

@Suite("onlyWhen, completion-handler style", .timeLimit(.minutes(3)))
struct ConditionCallbackTests {
    let queue = DispatchQueue(label: "condition-callback-tests")

    @Test func waitsWithoutBurningAttemptsAndStartsAfreshEachTimeItOpens() {
        let scheduler = VirtualScheduler()
        let condition = RetryCondition(false)
        let recorder = CBRecorder<Int>()
        let calls = CBCounter()
        let handle = RetryPlan.constantDelay(.seconds(1)).giveUpAfter(maxAttempts: 3).onlyWhen(condition).execute(
            on: queue, scheduler: scheduler,
            operation: { attempt, done in
                calls.increment()
                done(.failure(CBError(code: attempt.number)))
            }, observer: recorder.observer, completion: recorder.completion)
        scheduler.advance(by: .seconds(60))
        #expect(calls.count == 0)
        #expect(condition.observerCount == 1)
        #expect(!handle.isFinished)

        condition.value = true
        scheduler.advance()
        #expect(calls.count == 1)
        #expect(scheduler.nextDeadline == .seconds(61), "trial 1 waits before its second attempt")

        condition.value = false  // abandons trial 1 during its wait
        scheduler.advance(by: .seconds(5))
        #expect(calls.count == 1)
        #expect(scheduler.pendingCount == 0, "the wait's timer was cancelled")

        condition.value = true
        scheduler.run()
        #expect(calls.count == 4, "trial 2 gets all three attempts")
        #expect(recorder.onlyResult?.cbError as? CBError == CBError(code: 3))
        #expect(recorder.onlySummary == RetrySummary(reason: .exhausted, attempts: 4, elapsed: .seconds(67)))
        let retry = "retry 1.0 seconds"
        #expect(
            recorder.events == [
                "start 1", "fail 1 E1 \(retry)",
                "start 1", "fail 1 E1 \(retry)", "start 2", "fail 2 E2 \(retry)", "start 3",
                "fail 3 E3 giveUp exhausted", "finished exhausted 4 E3",
            ])
        #expect(condition.observerCount == 0, "the run stopped observing")
    }

    @Test func closingAbandonsTheRunningAttemptThroughItsCancelHook() {
        let scheduler = VirtualScheduler()
        let condition = RetryCondition(true)
        let recorder = CBRecorder<Int>()
        let dones = Locked<[AttemptCompletion<Int>]>([])
        let hooks = CBCounter()
        RetryPlan.noDelay.onlyWhen(condition).execute(
            on: queue, scheduler: scheduler,
            operation: { _, done in
                done.onCancel { hooks.increment() }
                dones.withLock { $0.append(done) }
            }, observer: recorder.observer, completion: recorder.completion)
        scheduler.advance()
        #expect(dones.withLock { $0.count } == 1)
        condition.value = false
        #expect(hooks.count == 1, "the hook runs at once, on the thread that closed the condition")
        dones.withLock { $0[0] }(.success(99))  // a late result is ignored
        scheduler.run()
        #expect(recorder.completionCount == 0)

        condition.value = true
        scheduler.advance()
        #expect(dones.withLock { $0.count } == 2)
        dones.withLock { $0[1] }(.success(7))
        scheduler.run()
        #expect(recorder.onlyResult?.cbValue == 7)
        #expect(recorder.onlySummary == RetrySummary(reason: .succeeded, attempts: 2, elapsed: .zero))
        #expect(
            recorder.events == [
                "start 1", "fail 1 CancellationError() giveUp cancelled", "start 1", "ok 1 7", "finished succeeded 2",
            ], "the interrupted attempt reports a failure, like SwiftRetrier")
        #expect(hooks.count == 1)
    }

    @Test func chainedConditionsMustAllHold() {
        let scheduler = VirtualScheduler()
        let online = RetryCondition(true)
        let signedIn = RetryCondition(false)
        let recorder = CBRecorder<Int>()
        let calls = CBCounter()
        RetryPlan.noDelay.onlyWhen(online).onlyWhen(signedIn).execute(
            on: queue, scheduler: scheduler,
            operation: { attempt, done in
                calls.increment()
                done(.success(attempt.number))
            }, observer: recorder.observer, completion: recorder.completion)
        scheduler.run()
        #expect(calls.count == 0, "the later condition does not replace the earlier one")
        online.value = false
        signedIn.value = true
        scheduler.run()
        #expect(calls.count == 0, "the earlier condition still applies")
        online.value = true
        scheduler.run()
        #expect(calls.count == 1)
        #expect(recorder.onlyResult?.cbValue == 1)
        #expect(online.observerCount == 0 && signedIn.observerCount == 0)
    }

    @Test func anyChainedConditionEndingWhileClosedEndsTheRun() {
        let scheduler = VirtualScheduler()
        let online = RetryCondition(true)
        let signedIn = RetryCondition(false)
        let recorder = CBRecorder<Int>()
        RetryPlan.noDelay.onlyWhen(online).onlyWhen(signedIn).execute(
            on: queue, scheduler: scheduler,
            operation: { attempt, done in done(.success(attempt.number)) },
            observer: recorder.observer, completion: recorder.completion)
        scheduler.run()
        online.finish()  // ended while true: no effect
        scheduler.run()
        #expect(recorder.completionCount == 0)
        signedIn.finish()  // ended while false
        scheduler.run()
        #expect((recorder.onlyResult?.cbError as? RetryError)?.reason == .conditionEnded)
    }

    @Test func interruptingAWaitReportsNoExtraFailure() {
        let scheduler = VirtualScheduler()
        let condition = RetryCondition(true)
        let recorder = CBRecorder<Int>()
        let calls = CBCounter()
        RetryPlan.constantDelay(.seconds(1)).onlyWhen(condition).execute(
            on: queue, scheduler: scheduler,
            operation: { attempt, done in
                calls.increment()
                done(calls.count == 1 ? .failure(CBError(code: 1)) : .success(attempt.number))
            }, observer: recorder.observer, completion: recorder.completion)
        scheduler.advance()
        condition.value = false  // during the wait: the attempt has already reported its failure
        scheduler.run()
        condition.value = true
        scheduler.run()
        #expect(
            recorder.events == [
                "start 1", "fail 1 E1 retry 1.0 seconds", "start 1", "ok 1 1", "finished succeeded 2",
            ])
    }

    @Test func endingWhileClosedFinishesWithConditionEndedAndTheLastError() {
        let scheduler = VirtualScheduler()
        let condition = RetryCondition(true)
        let recorder = CBRecorder<Int>()
        RetryPlan.constantDelay(.seconds(1)).onlyWhen(condition).execute(
            on: queue, scheduler: scheduler,
            operation: { attempt, done in done(.failure(CBError(code: attempt.number))) },
            observer: recorder.observer, completion: recorder.completion)
        scheduler.advance()
        condition.value = false
        condition.finish()
        scheduler.run()
        let error = recorder.onlyResult?.cbError as? RetryError
        #expect(error?.reason == .conditionEnded)
        #expect(error?.lastError as? CBError == CBError(code: 1))
        #expect(error?.attempts == 1)
        #expect(recorder.onlySummary == RetrySummary(reason: .conditionEnded, attempts: 1, elapsed: .zero))
        #expect(recorder.events.last?.hasPrefix("finished conditionEnded 1 RetryError(") == true)
    }

    @Test func endingWithoutEverPublishingFinishesAtOnce() {
        let scheduler = VirtualScheduler()
        let recorder = CBRecorder<Int>()
        let condition = RetryCondition()
        RetryPlan.noDelay.onlyWhen(condition).execute(
            on: queue, scheduler: scheduler, operation: { _, done in done(.success(1)) },
            observer: recorder.observer, completion: recorder.completion)
        scheduler.advance()
        condition.finish()
        scheduler.run()
        let error = recorder.onlyResult?.cbError as? RetryError
        #expect(error?.reason == .conditionEnded && error?.lastError == nil && error?.attempts == 0)
        #expect(recorder.events == ["finished conditionEnded 0 \(error.map { "\($0)" } ?? "")"])

        // A condition that has already ended is seen as such when the run starts.
        let late = CBRecorder<Int>()
        RetryPlan.noDelay.onlyWhen(condition).execute(
            on: queue, scheduler: scheduler, operation: { _, done in done(.success(1)) },
            completion: late.completion)
        scheduler.run()
        #expect((late.onlyResult?.cbError as? RetryError)?.reason == .conditionEnded)
    }

    @Test func endingWhileOpenLetsTheRunGoOn() {
        let scheduler = VirtualScheduler()
        let condition = RetryCondition(true)
        condition.finish()
        let recorder = CBRecorder<Int>()
        RetryPlan.constantDelay(.seconds(1)).onlyWhen(condition).execute(
            on: queue, scheduler: scheduler,
            operation: { attempt, done in
                attempt.number < 3 ? done(.failure(CBError(code: 0))) : done(.success(attempt.number))
            }, completion: recorder.completion)
        scheduler.run()
        #expect(recorder.onlyResult?.cbValue == 3)
    }

    @Test func registeredAndAsyncSequenceSourcesGateRunsToo() async {
        let scheduler = VirtualScheduler()
        let update = CBSlot<RetryCondition.Update>()
        let registered = RetryCondition { sink in
            update.set(sink)
            return {}
        }
        let (stream, continuation) = AsyncStream.makeStream(of: Bool.self)
        let recorders = [CBRecorder<Int>(), CBRecorder<Int>()]
        let policies = [RetryPlan.noDelay.onlyWhen(registered), RetryPlan.noDelay.onlyWhen(RetryCondition(stream))]
        for (policy, recorder) in zip(policies, recorders) {
            policy.execute(
                on: queue, scheduler: scheduler, operation: { _, done in done(.success(5)) },
                completion: recorder.completion)
        }
        scheduler.run()
        #expect(recorders.allSatisfy { $0.completionCount == 0 })
        update.get?(true)
        scheduler.run()
        #expect(recorders[0].onlyResult?.cbValue == 5)
        #expect(recorders[1].completionCount == 0)
        continuation.yield(true)
        #expect(await cbPump(scheduler) { recorders[1].completionCount == 1 })
        #expect(recorders[1].onlyResult?.cbValue == 5)
        continuation.finish()
    }

    @Test func cancelWhileWaitingForTheCondition() async throws {
        let scheduler = VirtualScheduler()
        let condition = RetryCondition(false)
        let recorder = CBRecorder<Int>()
        let handle = RetryPlan.noDelay.onlyWhen(condition).execute(
            on: queue, scheduler: scheduler, operation: { _, done in done(.success(1)) },
            observer: recorder.observer, completion: recorder.completion)
        scheduler.advance()
        handle.cancel()
        scheduler.run()
        #expect(recorder.onlyResult?.cbError is CancellationError)
        #expect(recorder.onlySummary?.reason == .cancelled)
        #expect(recorder.events == ["finished cancelled 0 CancellationError()"])
        #expect(condition.observerCount == 0)
        condition.value = true
        scheduler.run()
        #expect(recorder.completionCount == 1)
        await #expect(throws: CancellationError.self) { try await handle.value }
    }

    @Test func nothingIsRetainedAfterAGatedRunEnds() {
        let scheduler = VirtualScheduler()
        let condition = RetryCondition(true)
        let recorder = CBRecorder<Int>()
        let weakCanary: CBWeak<CBCanary>
        let handle: RetryHandle<Int>
        do {
            let canary = CBCanary()
            weakCanary = CBWeak(canary)
            handle = RetryPlan.constantDelay(.seconds(1)).onlyWhen(condition).execute(
                on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    _ = canary
                    done(.failure(CBError(code: attempt.number)))
                }, completion: recorder.completion)
        }
        scheduler.advance()
        condition.value = false
        condition.value = true
        scheduler.advance()
        handle.cancel()
        scheduler.run()
        #expect(recorder.completionCount == 1)
        #expect(weakCanary.object == nil, "the operation was released")
        #expect(condition.observerCount == 0)
        #expect(scheduler.pendingCount == 0)
    }
}

@Suite("onlyWhen, async style", .timeLimit(.minutes(3)))
struct ConditionAsyncTests {
    @Test func waitsWithoutBurningAttemptsAndStartsAfreshEachTimeItOpens() async throws {
        let clock = VirtualClock()
        let condition = RetryCondition(false)
        let calls = AsyncCounter()
        let events = AsyncLog<String>()
        let policy = RetryPlan.constantDelay(.seconds(1)).giveUpAfter(maxAttempts: 3).onlyWhen(condition)
        let task = Task {
            try await policy.execute(clock: clock) { attempt -> Int in
                calls.increment()
                throw AsyncTestError(id: attempt.number)
            } observer: { event in
                events.append(asyncEventLine(event))
            }
        }
        #expect(await cbWait { condition.observerCount == 1 })
        #expect(calls.value == 0)
        condition.value = true
        await clock.waitForSleepers()
        #expect(calls.value == 1)
        condition.value = false
        #expect(await cbWait { clock.sleeperCount == 0 }, "the wait was cancelled")
        condition.value = true
        await #expect(throws: AsyncTestError(id: 3)) { try await clock.run(until: task) }
        #expect(calls.value == 4)
        let retry = "next retry(after: 1.0 seconds)"
        #expect(
            events.values == [
                "started 1/3 at 0.0 seconds", "failed 1 with AsyncTestError(1) \(retry)",
                "started 1/3 at 0.0 seconds", "failed 1 with AsyncTestError(1) \(retry)",
                "started 2/3 at 1.0 seconds", "failed 2 with AsyncTestError(2) \(retry)",
                "started 3/3 at 2.0 seconds",
                "failed 3 with AsyncTestError(3) next giveUp(exhausted)",
                "finished exhausted after 4 at 2.0 seconds with AsyncTestError(3)",
            ])
        #expect(condition.observerCount == 0)
    }

    @Test func closingCancelsTheRunningAttempt() async throws {
        let condition = RetryCondition(true)
        let calls = AsyncCounter()
        let started = AsyncSignal()
        let cancelled = AsyncSignal()
        let task = Task {
            try await RetryPlan.noDelay.onlyWhen(condition).execute(clock: InstantClock()) { _ in
                if calls.increment() == 1 {
                    started.fire()
                    do {
                        try await Task.sleep(for: .seconds(3600))
                    } catch {
                        cancelled.fire()
                        throw error
                    }
                }
                return calls.value
            }
        }
        await started.wait()
        condition.value = false
        await cancelled.wait()
        #expect(calls.value == 1)
        condition.value = true
        #expect(try await task.value == 2)
    }

    @Test func anInterruptedAttemptReportsAFailure() async throws {
        let clock = VirtualClock()
        let condition = RetryCondition(true)
        let calls = AsyncCounter()
        let events = AsyncLog<String>()
        let task = Task {
            try await RetryPlan.noDelay.onlyWhen(condition).execute(clock: clock) { _ -> Int in
                if calls.increment() == 1 { try await clock.sleep(for: .seconds(3600)) }
                return calls.value
            } observer: { event in
                events.append(asyncEventLine(event))
            }
        }
        await clock.waitForSleepers()
        condition.value = false
        #expect(await cbWait { clock.sleeperCount == 0 })
        condition.value = true
        #expect(try await clock.run(until: task) == 2)
        #expect(events.values == interruptedThenFreshTrialEvents(succeedingWith: 2))
    }

    @Test func chainedConditionsMustAllHold() async throws {
        let clock = VirtualClock()
        let online = RetryCondition(true)
        let signedIn = RetryCondition(false)
        let calls = AsyncCounter()
        let policy = RetryPlan.noDelay.onlyWhen(online).onlyWhen(signedIn)
        let task = Task {
            try await policy.execute(clock: clock) { attempt -> Int in
                calls.increment()
                return attempt.number
            }
        }
        #expect(await cbWait { policy.condition?.observerCount == 1 })
        #expect(calls.value == 0, "the later condition does not replace the earlier one")
        online.value = false
        signedIn.value = true
        #expect(policy.condition?.value == false, "the earlier condition still applies")
        #expect(calls.value == 0)
        online.value = true
        #expect(try await clock.run(until: task) == 1)
        #expect(calls.value == 1)
    }

    @Test func endingWhileClosedThrowsConditionEndedWithTheLastError() async {
        let clock = VirtualClock()
        let condition = RetryCondition(true)
        let task = Task {
            try await RetryPlan.constantDelay(.seconds(1)).onlyWhen(condition).execute(clock: clock) {
                attempt -> Int in
                throw AsyncTestError(id: attempt.number)
            }
        }
        await clock.waitForSleepers()
        condition.value = false
        condition.finish()
        let error = await #expect(throws: RetryError.self) { try await task.value }
        #expect(error?.reason == .conditionEnded)
        #expect(error?.lastError as? AsyncTestError == AsyncTestError(id: 1))
        #expect(error?.attempts == 1)
    }

    @Test func endingWithoutEverPublishingAndEndingWhileOpen() async throws {
        let silent = RetryCondition()
        silent.finish()
        let events = AsyncLog<String>()
        do {
            _ = try await RetryPlan.noDelay.onlyWhen(silent).execute(clock: InstantClock()) { _ in
                1
            } observer: {
                events.append(asyncEventLine($0))
            }
            Issue.record("no error")
        } catch let error as RetryError {
            #expect(error.reason == .conditionEnded && error.attempts == 0 && error.lastError == nil)
        }
        #expect(events.values.count == 1)
        #expect(events.values.first?.hasPrefix("finished conditionEnded after 0") == true)

        let open = RetryCondition(true)
        open.finish()
        let calls = AsyncCounter()
        let value = try await RetryPlan.noDelay.onlyWhen(open).execute(clock: InstantClock()) { _ in
            if calls.increment() < 3 { throw AsyncTestError(id: 0) }
            return "done"
        }
        #expect(value == "done")
    }

    @Test func anAsyncSequenceGatesTheRun() async throws {
        let (stream, continuation) = AsyncStream.makeStream(of: Bool.self)
        let policy = RetryPlan.noDelay.onlyWhen(RetryCondition(stream))
        let calls = AsyncCounter()
        let task = Task { try await policy.execute(clock: InstantClock()) { _ in calls.increment() } }
        #expect(await cbWait { policy.condition?.observerCount == 1 })
        #expect(calls.value == 0)
        continuation.yield(true)
        #expect(try await task.value == 1)

        let second = Task { try await policy.execute(clock: InstantClock()) { _ in calls.increment() } }
        #expect(try await second.value == 2, "the latest value is shared by every run")
        continuation.yield(false)
        continuation.finish()
        #expect(await cbWait { policy.condition?.isFinished == true })
        await #expect(throws: RetryError.self) {
            _ = try await policy.execute(clock: InstantClock()) { _ in calls.increment() }
        }
    }

    @Test func cancellingTheTaskWhileWaitingForTheCondition() async {
        let condition = RetryCondition(false)
        let events = AsyncLog<String>()
        let task = Task {
            try await RetryPlan.noDelay.onlyWhen(condition).execute(clock: InstantClock()) { _ in
                1
            } observer: {
                events.append(asyncEventLine($0))
            }
        }
        #expect(await cbWait { condition.observerCount == 1 })
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(condition.observerCount == 0)
        #expect(events.values == ["finished cancelled after 0 at 0.0 seconds with CancellationError()"])
    }
}

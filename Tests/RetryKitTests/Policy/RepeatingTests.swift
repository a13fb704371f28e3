import Dispatch
import RetryKitTesting
import Testing

@testable import RetryKit

/// A scripted operation for repeat tests: call `n` (1-based, across all trials) succeeds with `n` if `succeeds(n)`,
/// otherwise fails with `CBError(code: n)`.
private final class Script: Sendable {
    let calls = CBCounter()
    let times = Locked<[Duration]>([])
    let succeeds: @Sendable (Int) -> Bool

    init(_ succeeds: @escaping @Sendable (Int) -> Bool) {
        self.succeeds = succeeds
    }

    func run(at now: Duration) -> Result<Int, any Error> {
        let call = calls.increment()
        times.withLock { $0.append(now) }
        return succeeds(call) ? .success(call) : .failure(CBError(code: call))
    }
}

/// Awaits a handle's value, whatever its type (a repeater's is `Never`).
private func awaitValue<Value>(of handle: RetryHandle<Value>) async throws {
    _ = try await handle.value
}

@Suite("repeating(withDelay:), completion-handler style", .timeLimit(.minutes(3)))
struct RepeatingCallbackTests {
    let queue = DispatchQueue(label: "repeating-callback-tests")

    @Test func everySuccessReachesOnValueAndThePolicyStartsAfreshAfterEach() {
        let scheduler = VirtualScheduler()
        // Calls 1, 3 and 6 succeed; from call 7 on everything fails.
        let script = Script { [1, 3, 6].contains($0) }
        let values = Locked<[Int]>([])
        let errors = Locked<[any Error]>([])
        let recorder = CBRecorder<Int>()
        let handle = RetryPlan.constantDelay(.seconds(1)).giveUpAfter(maxAttempts: 3).repeating(
            withDelay: .seconds(10)
        )
        .execute(
            on: queue, scheduler: scheduler,
            operation: { _, done in done(script.run(at: scheduler.now)) },
            observer: recorder.observer,
            onValue: { value in values.withLock { $0.append(value) } },
            completion: { error in errors.withLock { $0.append(error) } })
        scheduler.advance()
        #expect(values.withLock { $0 } == [1])
        #expect(scheduler.nextDeadline == .seconds(10), "the pause is a scheduler timer")
        scheduler.run()
        #expect(values.withLock { $0 } == [1, 3, 6])
        // 0 ok; pause to 10: fail, 11 ok; pause to 21: fail, 22 fail, 23 ok (3 attempts: the policy started afresh);
        // pause to 33: fail, 34, 35: exhausted.
        #expect(script.times.withLock { $0 } == [0, 10, 11, 21, 22, 23, 33, 34, 35].map { Duration.seconds($0) })
        #expect(errors.withLock { $0.count } == 1)
        #expect(errors.withLock { $0.first } as? CBError == CBError(code: 9))
        #expect(handle.isFinished)
        #expect(recorder.events.filter { $0.hasPrefix("finished") } == ["finished exhausted 9 E9"])
        #expect(recorder.events.filter { $0.hasPrefix("ok") } == ["ok 1 1", "ok 2 3", "ok 3 6"])
        #expect(scheduler.pendingCount == 0)
    }

    @Test func cancelDuringThePauseCancelsTheTimer() async {
        let scheduler = VirtualScheduler()
        let values = CBCounter()
        let errors = Locked<[any Error]>([])
        let handle = RetryPlan.noDelay.repeating(withDelay: .seconds(30)).execute(
            on: queue, scheduler: scheduler, operation: { _, done in done(.success(1)) },
            onValue: { _ in values.increment() }, completion: { error in errors.withLock { $0.append(error) } })
        scheduler.advance(by: .seconds(65))
        #expect(values.count == 3)
        handle.cancel()
        scheduler.run()
        #expect(values.count == 3)
        #expect(errors.withLock { $0.count } == 1 && errors.withLock { $0.first } is CancellationError)
        #expect(scheduler.pendingCount == 0)
        await #expect(throws: CancellationError.self) { try await awaitValue(of: handle) }
    }

    @Test func cancelDuringAnAttemptRunsItsCancelHook() {
        let scheduler = VirtualScheduler()
        let hooks = CBCounter()
        let kept = CBKeeper<Int>()
        let errors = Locked<[any Error]>([])
        let handle = RetryPlan.noDelay.repeating(withDelay: .seconds(1)).execute(
            on: queue, scheduler: scheduler,
            operation: { (_: RetryAttempt, done: AttemptCompletion<Int>) in
                done.onCancel { hooks.increment() }
                kept.keep(done)  // never calls back
            },
            onValue: { _ in }, completion: { error in errors.withLock { $0.append(error) } })
        scheduler.advance()
        handle.cancel()
        #expect(hooks.count == 1)
        scheduler.run()
        #expect(errors.withLock { $0.count } == 1)
    }

    @Test func cancellingFromOnValueStopsTheRepetition() {
        let scheduler = VirtualScheduler()
        let values = CBCounter()
        let handle = CBSlot<RetryHandle<Never>>()
        handle.set(
            RetryPlan.noDelay.repeating(withDelay: .seconds(1)).execute(
                on: queue, scheduler: scheduler, operation: { _, done in done(.success(1)) },
                onValue: { _ in
                    if values.increment() == 2 { handle.get?.cancel() }
                }))
        scheduler.run()
        #expect(values.count == 2)
        #expect(scheduler.pendingCount == 0)
    }

    @Test func theConditionGatesEachRepetition() {
        let scheduler = VirtualScheduler()
        let condition = RetryCondition(true)
        let times = Locked<[Duration]>([])
        let errors = Locked<[any Error]>([])
        RetryPlan.noDelay.onlyWhen(condition).repeating(withDelay: .seconds(10)).execute(
            on: queue, scheduler: scheduler,
            operation: { _, done in
                times.withLock { $0.append(scheduler.now) }
                done(.success(1))
            }, onValue: { _ in }, completion: { error in errors.withLock { $0.append(error) } })
        scheduler.advance()
        condition.value = false  // during the pause: the pause goes on, the next trial waits
        scheduler.advance(by: .seconds(30))
        #expect(times.withLock { $0 } == [.zero])
        condition.value = true
        scheduler.advance()
        #expect(times.withLock { $0 } == [.zero, .seconds(30)])
        condition.value = false
        condition.finish()
        scheduler.run()
        #expect((errors.withLock { $0.first } as? RetryError)?.reason == .conditionEnded)
    }

    @Test func asyncOperationsRepeatFromCallbackCode() async {
        let scheduler = VirtualScheduler()
        let values = Locked<[Int]>([])
        let calls = AsyncCounter()
        let errors = Locked<[any Error]>([])
        let handle = RetryPlan.noDelay.repeating(withDelay: .seconds(5)).executeTask(
            on: queue, scheduler: scheduler,
            operation: { _ in
                let call = calls.increment()
                if call == 2 { throw CBError(code: call) }
                return call
            }, onValue: { value in values.withLock { $0.append(value) } },
            completion: { error in errors.withLock { $0.append(error) } })
        // Each attempt runs in a task of the cooperative pool, which a loaded machine (TSan, 20+ runnable threads) can
        // keep from running for seconds: the limit is only how long a hang takes to fail, a passing run does not wait.
        #expect(
            await cbPump(scheduler, jumpingTimers: true, timeout: .seconds(120)) { values.withLock { $0.count } == 3 })
        handle.cancel()
        // The cancellation reaches the completion through a hop on the scheduler: run it, so that nothing (the run,
        // its runner and the scheduler holding them) is left pending when the test ends.
        scheduler.run()
        #expect(values.withLock { $0 } == [1, 3, 4])
        #expect(errors.withLock { $0.count } == 1)
        #expect(errors.withLock { $0.first } is CancellationError)
        #expect(scheduler.pendingCount == 0)
    }

    @Test func nothingIsRetainedAfterTheRepetitionEnds() {
        let scheduler = VirtualScheduler()
        let weakCanary: CBWeak<CBCanary>
        let handle: RetryHandle<Never>
        do {
            let canary = CBCanary()
            weakCanary = CBWeak(canary)
            handle = RetryPlan.noDelay.repeating(withDelay: .seconds(1)).execute(
                on: queue, scheduler: scheduler,
                operation: { _, done in
                    _ = canary
                    done(.success(1))
                }, onValue: { _ in })
        }
        scheduler.advance(by: .seconds(3))
        handle.cancel()
        scheduler.run()
        #expect(weakCanary.object == nil)
        #expect(scheduler.pendingCount == 0)
    }
}

@Suite("repeating(withDelay:), async style", .timeLimit(.minutes(3)))
struct RepeatingAsyncTests {
    /// A repetition gated by `condition` on `clock`: attempts without delay, a 5 s pause after each success.
    private func gatedValues(
        _ condition: RetryCondition, clock: VirtualClock, _ operation: @escaping @Sendable () -> Int
    ) -> RepeatingRetrySequence<Int, VirtualClock> {
        RetryPlan.noDelay.onlyWhen(condition).repeating(withDelay: .seconds(5)).values(clock: clock) { _ in
            operation()
        }
    }

    @Test func valuesPauseAfterEachSuccessOnTheClockAndThePolicyStartsAfresh() async throws {
        let clock = VirtualClock()
        let script = Script { [1, 3, 6].contains($0) }
        let events = AsyncLog<String>()
        let sequence = RetryPlan.constantDelay(.seconds(1)).giveUpAfter(maxAttempts: 3).repeating(
            withDelay: .seconds(10)
        )
        .values(clock: clock) { _ in
            try script.run(at: VirtualClock.Instant.zero.duration(to: clock.now)).get()
        } observer: { event in
            events.append(asyncEventLine(event))
        }
        let task = Task {
            var values: [Int] = []
            do {
                for try await value in sequence { values.append(value) }
                Issue.record("the sequence should throw")
            } catch {
                #expect(error as? CBError == CBError(code: 9))
            }
            return values
        }
        #expect(await clock.run(until: task) == [1, 3, 6])
        #expect(script.times.withLock { $0 } == [0, 10, 11, 21, 22, 23, 33, 34, 35].map { Duration.seconds($0) })
        #expect(events.values.last == "finished exhausted after 9 at 35.0 seconds with E9")
        #expect(events.values.filter { $0.hasPrefix("finished") }.count == 1)
    }

    @Test func theSequenceEndsAfterItThrows() async throws {
        var iterator = RetryPlan.noDelay.giveUpAfter(maxAttempts: 2).repeating(withDelay: .seconds(1))
            .values(clock: InstantClock()) { attempt -> Int in throw CBError(code: attempt.number) }
            .makeAsyncIterator()
        await #expect(throws: CBError(code: 2)) { _ = try await iterator.next() }
        #expect(try await iterator.next() == nil)
    }

    @Test func cancellingTheConsumerEndsTheSequenceDuringThePause() async throws {
        let clock = VirtualClock()
        let events = AsyncLog<String>()
        let calls = AsyncCounter()
        let sequence = RetryPlan.noDelay.repeating(withDelay: .seconds(60)).values(clock: clock) { _ in
            calls.increment()
        } observer: { event in
            events.append(asyncEventLine(event))
        }
        let received = AsyncCounter()
        let task = Task {
            for try await _ in sequence { received.increment() }
            return "ended"
        }
        await clock.waitForSleepers()
        #expect(received.value == 1)
        task.cancel()
        #expect(try await task.value == "ended", "a cancelled consumer sees the end, not an error")
        #expect(calls.value == 1)
        #expect(events.values.last == "finished cancelled after 1 at 0.0 seconds with CancellationError()")
    }

    @Test func droppingTheIteratorLeavesNothingRunning() async throws {
        let clock = VirtualClock()
        let calls = AsyncCounter()
        let sequence = RetryPlan.noDelay.repeating(withDelay: .seconds(1)).values(clock: clock) { _ in
            calls.increment()
        }
        let task = Task {
            var seen = 0
            for try await _ in sequence {
                seen += 1
                if seen == 3 { break }
            }
            return seen
        }
        #expect(try await clock.run(until: task) == 3)
        await clock.advance(by: .seconds(3600))
        #expect(calls.value == 3)
        #expect(clock.sleeperCount == 0)
    }

    @Test func aSlowConsumerDelaysTheNextRunOnlyBeyondThePause() async throws {
        let clock = VirtualClock()
        let times = AsyncLog<Duration>()
        let sequence = RetryPlan.noDelay.repeating(withDelay: .seconds(10)).values(clock: clock) { _ in
            times.append(VirtualClock.Instant.zero.duration(to: clock.now))
            return times.values.count
        }
        let task = Task {
            var iterator = sequence.makeAsyncIterator()
            _ = try await iterator.next()
            try await clock.sleep(for: .seconds(4))  // consumer work shorter than the pause
            _ = try await iterator.next()
            try await clock.sleep(for: .seconds(25))  // longer than the pause
            _ = try await iterator.next()
        }
        try await clock.run(until: task)
        #expect(times.values == [.zero, .seconds(10), .seconds(35)])
    }

    @Test func theIteratorObservesTheConditionOnlyInsideNextAndKeepsItsPauseBetweenCalls() async throws {
        let clock = VirtualClock()
        let condition = RetryCondition(true)
        let calls = AsyncCounter()
        let sequence = gatedValues(condition, clock: clock) { calls.increment() }
        let task = Task {
            var iterator = sequence.makeAsyncIterator()
            let first = try await iterator.next()
            let observersBetweenCalls = condition.observerCount
            condition.value = false  // during the pause: the pause still runs its course, then the gate waits
            let second = try await iterator.next()
            var fresh = sequence.makeAsyncIterator()  // a new iteration starts afresh, without a pause
            let third = try await fresh.next()
            return [first, second, third, observersBetweenCalls]
        }
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(5))
        #expect(await cbWait { condition.observerCount == 1 }, "after the pause, waiting for the condition")
        #expect(calls.value == 1)
        condition.value = true
        #expect(try await task.value == [1, 2, 3, 0], "nothing observes the condition between two calls")
        #expect(condition.observerCount == 0)
    }

    @Test func theConditionGatesEachRepetitionAndItsEndEndsTheSequence() async throws {
        let clock = VirtualClock()
        let condition = RetryCondition(true)
        let calls = AsyncCounter()
        let sequence = gatedValues(condition, clock: clock) { calls.increment() }
        let task = Task {
            var values: [Int] = []
            do {
                for try await value in sequence { values.append(value) }
            } catch {
                #expect((error as? RetryError)?.reason == .conditionEnded)
            }
            return values
        }
        await clock.waitForSleepers()
        condition.value = false
        await clock.advance(by: .seconds(5))
        #expect(await cbWait { condition.observerCount == 1 }, "waiting for the condition after the pause")
        #expect(calls.value == 1)
        condition.value = true
        await clock.waitForSleepers()
        #expect(calls.value == 2)
        condition.value = false
        condition.finish()
        await clock.advance(by: .seconds(5))
        #expect(await task.value == [1, 2])
    }
}

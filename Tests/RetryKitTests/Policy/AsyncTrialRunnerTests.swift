import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// The async runner carrying out a machine with trials: `RetryPlan.execute(clock:)` with a condition and the iterator
/// of `RepeatingRetryPlan.values(clock:)` run as one loop, whose attempts and waits race the condition's changes.
@Suite("Async runner: runs of trials (gating, repetition)", .timeLimit(.minutes(1)))
struct AsyncTrialRunnerTests {
    private static let retry = "next retry(after: 1.0 seconds)"

    @Test func closedAtStartThenOpenRunsTheFirstTrialWhenItOpens() async throws {
        let clock = VirtualClock()
        let condition = RetryCondition(false)
        let calls = AsyncCounter()
        let events = AsyncLog<String>()
        let task = Task {
            try await RetryPlan.constantDelay(.seconds(1)).onlyWhen(condition).execute(clock: clock) {
                attempt -> Int in
                if calls.increment() == 1 { throw AsyncTestError(id: 1) }
                return attempt.number
            } observer: {
                events.append(asyncEventLine($0))
            }
        }
        #expect(await cbWait { condition.observerCount == 1 })
        await clock.advance(by: .seconds(5))
        #expect(calls.value == 0, "no attempt while closed")
        #expect(clock.sleeperCount == 0, "no timer while the run waits for the condition")
        condition.value = true
        #expect(try await clock.run(until: task) == 2)
        #expect(
            events.values == [
                "started 1/\(Int.max) at 0.0 seconds", "failed 1 with AsyncTestError(1) \(Self.retry)",
                "started 2/\(Int.max) at 1.0 seconds", "succeeded 2 with 2",
                "finished succeeded after 2 at 6.0 seconds with nil",
            ])
        #expect(condition.observerCount == 0)
    }

    @Test func closingDuringAnAttemptCancelsItsTaskAndIgnoresItsLateValue() async throws {
        let clock = VirtualClock()
        let condition = RetryCondition(true)
        let calls = AsyncCounter()
        let cancelled = AsyncSignal()
        let events = AsyncLog<String>()
        let task = Task {
            try await RetryPlan.noDelay.onlyWhen(condition).execute(clock: clock) { _ -> String in
                guard calls.increment() == 1 else { return "fresh" }
                do {
                    try await clock.sleep(for: .seconds(3600))
                } catch {
                    cancelled.fire()  // the attempt's task was cancelled; it returns a value anyway
                }
                return "late"
            } observer: {
                events.append(asyncEventLine($0))
            }
        }
        await clock.waitForSleepers()
        condition.value = false
        await cancelled.wait()
        #expect(await cbWait { events.values.count == 2 }, "the interruption is reported")
        #expect(calls.value == 1, "no attempt while closed")
        condition.value = true
        #expect(try await clock.run(until: task) == "fresh", "the late value is not the result")
        #expect(events.values == interruptedThenFreshTrialEvents(succeedingWith: "fresh"))
    }

    @Test func closingDuringABackoffWaitEndsItAndTheNextTrialStartsAfresh() async throws {
        let clock = VirtualClock()
        let condition = RetryCondition(true)
        let calls = AsyncCounter()
        let events = AsyncLog<String>()
        let task = Task {
            try await RetryPlan.constantDelay(.seconds(10)).giveUpAfter(maxAttempts: 3).onlyWhen(condition).execute(
                clock: clock
            ) { attempt -> Int in
                if calls.increment() == 1 { throw AsyncTestError(id: 1) }
                return attempt.number
            } observer: {
                events.append(asyncEventLine($0))
            }
        }
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(4))
        condition.value = false
        #expect(await cbWait { clock.sleeperCount == 0 }, "the wait ended at once")
        await clock.advance(by: .seconds(2))
        condition.value = true
        #expect(try await clock.run(until: task) == 1)
        #expect(
            events.values == [
                "started 1/3 at 0.0 seconds", "failed 1 with AsyncTestError(1) next retry(after: 10.0 seconds)",
                "started 1/3 at 0.0 seconds", "succeeded 1 with 1",
                "finished succeeded after 2 at 6.0 seconds with nil",
            ])
    }

    @Test func reopenedBeforeTheInterruptedAttemptReturnedTheNextTrialStartsOnceItHas() async throws {
        let clock = VirtualClock()
        let condition = RetryCondition(true)
        let calls = AsyncCounter()
        let cancelled = AsyncSignal()
        let release = AsyncSignal()
        let events = AsyncLog<String>()
        let task = Task {
            try await RetryPlan.noDelay.onlyWhen(condition).execute(clock: clock) { _ -> Int in
                guard calls.increment() == 1 else { return calls.value }
                // Ignores cancellation until released: the runner must wait for it (structured concurrency).
                await withTaskCancellationHandler {
                    await release.wait()
                } onCancel: {
                    cancelled.fire()
                }
                return -1
            } observer: {
                events.append(asyncEventLine($0))
            }
        }
        #expect(await cbWait { calls.value == 1 })
        condition.value = false
        await cancelled.wait()
        condition.value = true
        // Nothing can happen until the attempt returns: the runner waits for its task (structured concurrency).
        #expect(events.values.count == 1)
        #expect(calls.value == 1)
        release.fire()
        #expect(try await clock.run(until: task) == 2, "the condition is open again: the next trial starts at once")
        #expect(events.values == interruptedThenFreshTrialEvents(succeedingWith: 2))
    }

    @Test func endedWhileTheInterruptedAttemptDrainsThrowsConditionEnded() async {
        let clock = VirtualClock()
        let condition = RetryCondition(true)
        let calls = AsyncCounter()
        let events = AsyncLog<String>()
        let task = Task {
            try await RetryPlan.constantDelay(.seconds(1)).onlyWhen(condition).execute(clock: clock) {
                attempt -> Int in
                if calls.increment() == 1 { throw AsyncTestError(id: 1) }
                try? await clock.sleep(for: .seconds(3600))
                return 99  // late: ignored
            } observer: {
                events.append(asyncEventLine($0))
            }
        }
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(1))  // the wait; attempt 2 hangs on the clock
        await clock.waitForSleepers()
        condition.value = false
        condition.finish()
        let error = await #expect(throws: RetryError.self) { try await task.value }
        #expect(error?.reason == .conditionEnded)
        #expect(error?.lastError as? AsyncTestError == AsyncTestError(id: 1), "the interruption is not the error")
        #expect(error?.attempts == 2)
        let lines = events.values
        #expect(lines.dropLast().last == "failed 2 with CancellationError() next giveUp(cancelled)")
        #expect(lines.last?.hasPrefix("finished conditionEnded after 2 at 1.0 seconds") == true)
        #expect(clock.sleeperCount == 0)
        #expect(condition.observerCount == 0)
    }

    @Test func cancellingTheTaskEndsAGatedRunPromptlyInEveryPhase() async {
        for phase in ["awaiting the condition", "attempt", "backoff wait"] {
            let clock = VirtualClock()
            let condition = RetryCondition(phase != "awaiting the condition")
            let events = AsyncLog<String>()
            let task = Task {
                try await RetryPlan.constantDelay(.seconds(60)).onlyWhen(condition).execute(clock: clock) {
                    attempt -> Int in
                    if phase == "attempt" { try await clock.sleep(for: .seconds(3600)) }
                    throw AsyncTestError(id: attempt.number)
                } observer: {
                    events.append(asyncEventLine($0))
                }
            }
            if phase == "awaiting the condition" {
                #expect(await cbWait { condition.observerCount == 1 })
            } else {
                await clock.waitForSleepers()
            }
            task.cancel()
            // No time moves: the run ends on its own, at once.
            await #expect(throws: CancellationError.self, "\(phase)") { try await task.value }
            #expect(events.values.last?.hasPrefix("finished cancelled") == true, "\(phase)")
            #expect(clock.sleeperCount == 0, "\(phase)")
            #expect(condition.observerCount == 0, "\(phase)")
        }
    }

    // MARK: - Repeating

    @Test func valuesPauseFromEachSuccessAndObserveTheConditionOnlyInsideNext() async throws {
        let clock = VirtualClock()
        let condition = RetryCondition(true)
        let calls = AsyncCounter()
        let events = AsyncLog<String>()
        let sequence = RetryPlan.noDelay.onlyWhen(condition).repeating(withDelay: .seconds(30)).values(clock: clock) {
            _ in
            calls.increment()
        } observer: {
            events.append(asyncEventLine($0))
        }
        var iterator = sequence.makeAsyncIterator()
        #expect(condition.observerCount == 0, "nothing runs before the first next()")
        #expect(try await iterator.next() == 1)
        #expect(condition.observerCount == 0, "not observed between two calls")
        await clock.advance(by: .seconds(10))  // a slow consumer: 10 s of the pause pass outside next()
        condition.value = false  // closed and opened again between calls: nothing to interrupt
        condition.value = true
        let second = Task { [iterator] in
            var iterator = iterator
            return try await iterator.next()
        }
        await clock.waitForSleepers()
        #expect(clock.nextDeadline == clock.now.advanced(by: .seconds(20)), "the rest of the pause")
        #expect(condition.observerCount == 1, "observed during the call")
        #expect(try await clock.run(until: second) == 2)
        #expect(
            events.values == [
                "started 1/\(Int.max) at 0.0 seconds", "succeeded 1 with 1",
                "started 1/\(Int.max) at 0.0 seconds", "succeeded 1 with 2",
            ])
        #expect(condition.observerCount == 0)
    }

    @Test func valuesPauseAndThenWaitForAClosedCondition() async throws {
        let clock = VirtualClock()
        let condition = RetryCondition(true)
        let calls = AsyncCounter()
        var iterator = RetryPlan.noDelay.onlyWhen(condition).repeating(withDelay: .seconds(5)).values(clock: clock) {
            _ in
            calls.increment()
        }.makeAsyncIterator()
        #expect(try await iterator.next() == 1)
        condition.value = false
        let second = Task { [iterator] in
            var iterator = iterator
            return try await iterator.next()
        }
        await clock.waitForSleepers()
        await clock.advance(by: .seconds(5))
        #expect(await cbWait { clock.sleeperCount == 0 })
        #expect(calls.value == 1, "the pause is over; the next trial waits for the condition")
        condition.value = true
        #expect(try await clock.run(until: second) == 2)
    }

    @Test func cancellingTheConsumerEndsTheValuesInEveryPhase() async throws {
        for phase in ["pause", "awaiting the condition", "attempt"] {
            let clock = VirtualClock()
            let condition = RetryCondition(true)
            let calls = AsyncCounter()
            let events = AsyncLog<String>()
            var iterator = RetryPlan.noDelay.onlyWhen(condition).repeating(withDelay: .seconds(5)).values(
                clock: clock
            ) { _ -> Int in
                if calls.increment() == 2, phase == "attempt" { try await clock.sleep(for: .seconds(3600)) }
                return calls.value
            } observer: {
                events.append(asyncEventLine($0))
            }.makeAsyncIterator()
            #expect(try await iterator.next() == 1)
            if phase == "awaiting the condition" { condition.value = false }
            let second = Task { [iterator] in
                var iterator = iterator
                let value = try await iterator.next()
                return (value, try await iterator.next())  // the second: ended for good
            }
            await clock.waitForSleepers()
            if phase != "pause" {
                await clock.advance(by: .seconds(5))
                if phase == "attempt" {
                    await clock.waitForSleepers()
                } else {
                    #expect(await cbWait { clock.sleeperCount == 0 })
                }
            }
            second.cancel()
            let (value, after) = try await second.value
            #expect(value == nil, "\(phase): the sequence ends")
            #expect(after == nil, "\(phase): ended for good")
            #expect(events.values.last?.hasPrefix("finished cancelled") == true, "\(phase)")
            #expect(clock.sleeperCount == 0, "\(phase)")
            #expect(condition.observerCount == 0, "\(phase)")
        }
    }

    // MARK: - Races and retention

    @Test func aConditionToggledFromAnotherThreadWhileAttemptsComplete() async throws {
        for round in 0..<50 {
            let condition = RetryCondition(true)
            let events = AsyncLog<String>()
            let toggler = DispatchQueue(label: "toggler")
            let toggled = AsyncSignal()
            toggler.async {
                for flip in 0..<200 { condition.value = flip % 2 == 1 }
                condition.value = true
                toggled.fire()
            }
            let value = try await RetryPlan.noDelay.onlyWhen(condition).execute(clock: InstantClock()) {
                attempt -> Int in
                await Task.yield()
                if attempt.number < 3 { throw AsyncTestError(id: attempt.number) }
                return round
            } observer: {
                events.append(asyncEventLine($0))
            }
            await toggled.wait()
            #expect(value == round)
            let lines = events.values
            #expect(lines.filter { $0.hasPrefix("finished") }.count == 1)
            #expect(lines.last?.hasPrefix("finished succeeded") == true)
            let started = lines.filter { $0.hasPrefix("started") }.count
            let ended = lines.filter { $0.hasPrefix("failed") || $0.hasPrefix("succeeded") }.count
            #expect(started == ended, "every attempt that started reports exactly one result")
            #expect(condition.observerCount == 0)
        }
    }

    @Test func nothingIsRetainedAfterTheRunEnds() async throws {
        weak var operationCanary: AnyObject?
        weak var observerCanary: AnyObject?
        let condition = RetryCondition(true)
        let clock = VirtualClock()
        do {
            let forOperation = Canary()
            let forObserver = Canary()
            operationCanary = forOperation
            observerCanary = forObserver
            let value = try await RetryPlan.noDelay.onlyWhen(condition).execute(clock: clock) { attempt in
                withExtendedLifetime(forOperation) { attempt.number }
            } observer: { _ in
                withExtendedLifetime(forObserver) {}
            }
            #expect(value == 1)
            var iterator = RetryPlan.noDelay.onlyWhen(condition).repeating(withDelay: .seconds(1)).values(
                clock: clock
            ) { _ in
                withExtendedLifetime(forOperation) { 2 }
            } observer: { _ in
                withExtendedLifetime(forObserver) {}
            }.makeAsyncIterator()
            #expect(try await iterator.next() == 2)
        }
        #expect(operationCanary == nil)
        #expect(observerCanary == nil)
        #expect(condition.observerCount == 0)
        #expect(clock.sleeperCount == 0)
    }
}

private final class Canary: Sendable {}

/// The events of a gated async run (no attempt limit, no delay) whose first attempt the condition interrupted at 0 s,
/// and whose next trial's first attempt then returned `value`: the interruption's failure, the fresh trial, the end.
func interruptedThenFreshTrialEvents(succeedingWith value: some Sendable) -> [String] {
    [
        "started 1/\(Int.max) at 0.0 seconds", "failed 1 with CancellationError() next giveUp(cancelled)",
        "started 1/\(Int.max) at 0.0 seconds", "succeeded 1 with \(value)",
        "finished succeeded after 2 at 0.0 seconds with nil",
    ]
}

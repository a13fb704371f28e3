import Dispatch
import RetryKitTesting
import Testing

@testable import RetryKit

@Suite("RetryPlan.execute, completion-handler style", .timeLimit(.minutes(3)))
struct PolicyCallbackExecuteTests {
    let queue = DispatchQueue(label: "policy-callback-tests")

    @Test func backoffLimitsAndEventsComeFromThePolicy() {
        let scheduler = VirtualScheduler()
        let recorder = CBRecorder<Int>()
        let policy = RetryPlan.exponentialBackoff(initialDelay: .seconds(1), jitter: .none).giveUpAfter(
            maxAttempts: 3)
        policy.execute(
            on: queue, scheduler: scheduler,
            operation: { attempt, done in done(.failure(CBError(code: attempt.number))) },
            observer: recorder.observer, completion: recorder.completion)
        scheduler.run()
        #expect(recorder.onlyResult?.cbError as? CBError == CBError(code: 3), "the operation's own last error")
        #expect(recorder.onlySummary == RetrySummary(reason: .exhausted, attempts: 3, elapsed: .seconds(3)))
        #expect(
            recorder.events == [
                "start 1", "fail 1 E1 retry 1.0 seconds", "start 2", "fail 2 E2 retry 2.0 seconds", "start 3",
                "fail 3 E3 giveUp exhausted", "finished exhausted 3 E3",
            ])
    }

    @Test func giveUpOnErrorsStopsWithTheMatchingError() {
        let scheduler = VirtualScheduler()
        let recorder = CBRecorder<Int>()
        RetryPlan.constantDelay(.seconds(1)).giveUpOnErrors { $0 is PolicyFatal }.execute(
            on: queue, scheduler: scheduler,
            operation: { attempt, done in
                done(.failure(attempt.number == 3 ? PolicyFatal() as any Error : CBError(code: attempt.number)))
            }, completion: recorder.completion)
        scheduler.run()
        #expect(recorder.onlyResult?.cbError is PolicyFatal)
        #expect(recorder.onlySummary == RetrySummary(reason: .stopped, attempts: 3, elapsed: .seconds(2)))
    }

    @Test func giveUpAfterTimeoutAndAttemptTimeout() {
        let scheduler = VirtualScheduler()
        let recorder = CBRecorder<Int>()
        let hooks = CBCounter()
        let kept = CBKeeper<Int>()
        RetryPlan.constantDelay(.seconds(4)).giveUpAfter(totalTimeout: .seconds(10)).attemptTimeout(.seconds(1))
            .execute(
                on: queue, scheduler: scheduler,
                operation: { _, done in
                    done.onCancel { hooks.increment() }
                    kept.keep(done)  // never completes
                },
                completion: recorder.completion)
        scheduler.run()
        // t=0 attempt 1 times out at 1, waits 4; attempt 2 at 5 times out at 6, waits 4; attempt 3 at 10: deadline.
        let error = recorder.onlyResult?.cbError as? RetryError
        #expect(error?.reason == .deadlineExceeded)
        #expect((error?.lastError as? RetryError)?.reason == .attemptTimedOut)
        #expect(hooks.count == 2, "each timed-out attempt was cancelled")
        #expect(recorder.onlySummary?.elapsed == .seconds(6))
    }

    @Test func oneValueRunsManyIndependentJobs() {
        let scheduler = VirtualScheduler()
        let policy = RetryPlan.constantDelay(.seconds(1)).giveUpAfter(maxAttempts: 4)
        let recorders = (0..<20).map { _ in CBRecorder<Int>() }
        for (job, recorder) in recorders.enumerated() {
            policy.execute(
                on: queue, scheduler: scheduler,
                operation: { attempt, done in
                    // Job j succeeds on attempt (j % 4) + 1; jobs 3, 7, … never succeed.
                    if job % 4 != 3, attempt.number == job % 4 + 1 {
                        done(.success(job))
                    } else {
                        done(.failure(CBError(code: job)))
                    }
                }, observer: recorder.observer, completion: recorder.completion)
        }
        scheduler.run()
        for (job, recorder) in recorders.enumerated() {
            if job % 4 == 3 {
                #expect(recorder.onlySummary == RetrySummary(reason: .exhausted, attempts: 4, elapsed: .seconds(3)))
            } else {
                #expect(recorder.onlyResult?.cbValue == job)
                #expect(recorder.onlySummary?.attempts == job % 4 + 1)
            }
        }
    }

    @Test func asyncOperationFormAndHandleValue() async throws {
        let policy = RetryPlan.noDelay.giveUpAfter(maxAttempts: 5)
        let calls = AsyncCounter()
        let summaries = Locked<[RetrySummary]>([])
        let handle = policy.executeTask(
            on: queue,
            operation: { attempt in
                calls.increment()
                if attempt.number < 3 { throw CBError(code: attempt.number) }
                return "ok \(attempt.number)"
            }, completion: { _, summary in summaries.withLock { $0.append(summary) } })
        #expect(try await handle.value == "ok 3")
        #expect(calls.value == 3)
        #expect(summaries.withLock { $0.map(\.attempts) } == [3])
    }

    @Test func cancelledBeforeItsFirstHopNoAttemptRuns() async {
        // SwiftRetrier's contract: created and cancelled in the same main-queue cycle, the job never runs. Here the
        // first attempt starts after a hop to the queue, and a cancel that comes first (from any thread) wins.
        let condition = RetryCondition(true)
        let queue = DispatchQueue(label: "same-cycle")
        let calls = CBCounter()
        let results = Locked<[Result<Int, any Error>]>([])
        queue.async {  // created and cancelled in one block of the run's queue
            for policy in [RetryPlan.noDelay, RetryPlan.noDelay.onlyWhen(condition)] {
                let handle = policy.execute(
                    on: queue,
                    operation: { _, done in
                        calls.increment()
                        done(.success(1))
                    }, completion: { result, _ in results.withLock { $0.append(result) } })
                handle.cancel()
            }
        }
        #expect(await cbWait { results.withLock { $0.count } == 2 })
        #expect(calls.count == 0)
        #expect(results.withLock { $0 }.allSatisfy { $0.cbError is CancellationError })
    }

    @Test func cancelDuringTheWaitCancelsTheTimer() {
        let scheduler = VirtualScheduler()
        let recorder = CBRecorder<Int>()
        let handle = RetryPlan.constantDelay(.seconds(10)).execute(
            on: queue, scheduler: scheduler, operation: { _, done in done(.failure(CBError(code: 1))) },
            completion: recorder.completion)
        scheduler.advance()
        #expect(scheduler.nextDeadline == .seconds(10))
        handle.cancel()
        scheduler.advance()
        #expect(recorder.onlyResult?.cbError is CancellationError)
        #expect(scheduler.pendingCount == 0, "the timer is gone")
    }
}

@Suite("RetryPlan.execute, async style", .timeLimit(.minutes(3)))
struct PolicyAsyncExecuteTests {
    @Test func backoffOnTheTestClockWithEvents() async throws {
        let clock = VirtualClock()
        let events = AsyncLog<String>()
        let policy = RetryPlan.exponentialBackoff(initialDelay: .seconds(1), jitter: .none).giveUpAfter(
            maxAttempts: 4)
        let task = Task {
            try await policy.execute(clock: clock) { attempt in
                if attempt.number < 3 { throw AsyncTestError(id: attempt.number) }
                return attempt.number
            } observer: { event in
                events.append(asyncEventLine(event))
            }
        }
        #expect(try await clock.run(until: task) == 3)
        #expect(clock.now == .zero.advanced(by: .seconds(3)))
        #expect(
            events.values == [
                "started 1/4 at 0.0 seconds",
                "failed 1 with AsyncTestError(1) next retry(after: 1.0 seconds)",
                "started 2/4 at 1.0 seconds",
                "failed 2 with AsyncTestError(2) next retry(after: 2.0 seconds)",
                "started 3/4 at 3.0 seconds",
                "succeeded 3 with 3",
                "finished succeeded after 3 at 3.0 seconds with nil",
            ])
    }

    @Test func giveUpOnErrorsTimeoutAndAttemptTimeout() async throws {
        let fatal = RetryPlan.noDelay.giveUpOnErrors { $0 is PolicyFatal }
        let calls = AsyncCounter()
        await #expect(throws: PolicyFatal.self) {
            try await fatal.execute(clock: InstantClock()) { _ in
                if calls.increment() == 2 { throw PolicyFatal() }
                throw AsyncTestError(id: calls.value)
            } as Int
        }
        #expect(calls.value == 2)

        let clock = VirtualClock()
        let timed = RetryPlan.constantDelay(.seconds(4)).giveUpAfter(totalTimeout: .seconds(10)).attemptTimeout(
            .seconds(1))
        let task = Task {
            try await timed.execute(clock: clock) { _ in
                try await Task.sleep(for: .seconds(3600))  // cancelled by each attempt timeout
                return 0
            }
        }
        do {
            _ = try await clock.run(until: task)
            Issue.record("no error")
        } catch let error as RetryError {
            #expect(error.reason == .deadlineExceeded)
            #expect((error.lastError as? RetryError)?.reason == .attemptTimedOut)
            #expect(error.attempts == 2)
        } catch {
            Issue.record("\(error)")
        }
        #expect(clock.now == .zero.advanced(by: .seconds(6)))
    }

    @Test func manyConcurrentJobsOfOnePolicy() async throws {
        let policy = RetryPlan.constantDelay(.seconds(1)).giveUpAfter(maxAttempts: 3)
        let calls = AsyncCounter()
        let value = try await policy.execute(clock: InstantClock()) { _ in
            if calls.increment() < 3 { throw AsyncTestError(id: calls.value) }
            return "third"
        }
        #expect(value == "third")
        try await withThrowingTaskGroup(of: Int.self) { group in
            for job in 0..<50 {
                group.addTask {
                    let attempts = AsyncCounter()
                    return try await policy.execute(clock: InstantClock()) { _ in
                        if attempts.increment() <= job % 3 { throw AsyncTestError(id: job) }
                        return job
                    }
                }
            }
            var sum = 0
            for try await job in group { sum += job }
            #expect(sum == (0..<50).reduce(0, +))
        }
        let tried = AsyncCounter()
        await #expect(throws: AsyncTestError.self) {
            _ = try await policy.execute(clock: InstantClock()) { _ async throws -> Int in
                throw AsyncTestError(id: tried.increment())
            }
        }
        #expect(tried.value == 3)
    }

    @Test func runsInTheCallersIsolation() async throws {
        let owner = PolicyOwner()
        #expect(try await owner.load(gated: false) == 2)
        #expect(try await owner.load(gated: true) == 2)
    }

    @Test func cancellingTheTaskCancelsTheRun() async {
        let clock = VirtualClock()
        let task = Task {
            try await RetryPlan.constantDelay(.seconds(60)).execute(clock: clock) { _ -> Int in
                throw AsyncTestError(id: 1)
            }
        }
        await clock.waitForSleepers()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }
}

/// An actor that runs policies and checks that their observer runs in its isolation.
private actor PolicyOwner {
    func load(gated: Bool) async throws -> Int {
        let calls = AsyncCounter()
        let events = AsyncCounter()
        var policy = RetryPlan.noDelay
        if gated { policy = policy.onlyWhen(RetryCondition(true)) }
        let value = try await policy.execute(clock: InstantClock()) { _ in
            if calls.increment() < 2 { throw AsyncTestError(id: 1) }
            return calls.value
        } observer: { _ in
            self.preconditionIsolated()
            events.increment()
        }
        #expect(events.value == 5, "started, failed, started, succeeded, finished")
        return value
    }
}

import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// A shared recovery on virtual time: one refresh for every waiting retrier, generations, limits, cancellation.
@Suite("Recovery: refresh once, retry everyone", .timeLimit(.minutes(2)))
struct RecoveryTests {
    let queue = DispatchQueue(label: "recovery-tests")

    /// Starts a completion-handler run of `plan` whose operation calls `server` with the credential and answers at once
    /// or, with `held`, the first attempt only when the test runs what it holds (so that several attempts can run before any fails).
    @discardableResult
    func start(
        _ plan: RecoveringRetryPlan<String>, server: TokenServer, scheduler: VirtualScheduler,
        recorder: CBRecorder<String>, tokens: Locked<[String]>? = nil, held: Held? = nil
    ) -> RetryHandle<String> {
        plan.execute(
            on: queue, scheduler: scheduler,
            operation: { token, attempt, done in
                tokens?.withLock { $0.append(token) }
                let result = server.call(token)
                if let held, attempt.number == 1 {
                    held.hold { done(result) }
                } else {
                    done(result)
                }
            }, observer: recorder.observer, completion: recorder.completion)
    }

    /// Answers the tests hold back and release together.
    final class Held: Sendable {
        private let answers = Locked<[@Sendable () -> Void]>([])
        func hold(_ answer: @escaping @Sendable () -> Void) { answers.withLock { $0.append(answer) } }
        func release() {
            let due = answers.withLock { a in
                defer { a = [] }
                return a
            }
            for answer in due { answer() }
        }
    }

    @Test func retriersThatFailWithTheSameTokenShareOneRefreshAndRetryWithTheNewToken() throws {
        let scheduler = VirtualScheduler()
        let server = TokenServer()
        server.expire()  // t1 is expired: the server wants t2
        let refresh = ManualRefresh(server: server)
        let recovery = tokenRecovery(refresh, scheduler: scheduler)
        let plan = RetryPlan.constantDelay(.seconds(1)).giveUpAfter(maxAttempts: 3).recovering(with: recovery)
        let recorders = (0..<10).map { _ in CBRecorder<String>() }
        let held = Held()
        for recorder in recorders { start(plan, server: server, scheduler: scheduler, recorder: recorder, held: held) }

        scheduler.advance()
        held.release()  // ten 401s with t1
        scheduler.advance()
        #expect(refresh.started == ["t1"], "one refresh, from the expired token")
        #expect(server.requests == Array(repeating: "t1", count: 10))
        #expect(recorders.allSatisfy { $0.completionCount == 0 }, "every retrier waits for the refresh")

        scheduler.advance(by: .milliseconds(250))
        refresh.complete()
        scheduler.advance()
        #expect(recovery.refreshes == 1)
        #expect(recovery.credential == "t2")
        #expect(server.requests.suffix(10) == Array(repeating: "t2", count: 10))
        for recorder in recorders {
            #expect(recorder.onlyResult?.cbValue == "ok(t2)")
            #expect(
                recorder.events == [
                    "start 1", "fail 1 401(t1) recover", "start 2", "ok 2 ok(t2)", "finished succeeded 2",
                ])
            let summary = try #require(recorder.onlySummary)
            #expect(summary.recoveries == 1)
            #expect(summary.recoveryWait == .milliseconds(250), "waited from the failure to the refresh's end")
            #expect(summary.elapsed == .milliseconds(250), "no backoff after a recovery")
        }
        #expect(scheduler.pendingCount == 0, "no timer left")
    }

    @Test func aFailureWithATokenAlreadyReplacedRetriesWithoutANewRefresh() {
        let scheduler = VirtualScheduler()
        let server = TokenServer()
        server.expire()
        let refresh = ManualRefresh(server: server)
        let recovery = tokenRecovery(refresh, scheduler: scheduler)
        let plan = RetryPlan.constantDelay(.seconds(1)).giveUpAfter(maxAttempts: 3).recovering(with: recovery)
        // B's first attempt runs with t1 and answers only after A's refresh has made t2.
        let heldB = Locked<[@Sendable () -> Void]>([])
        let recorderB = CBRecorder<String>()
        plan.execute(
            on: queue, scheduler: scheduler,
            operation: { token, attempt, done in
                let result = server.call(token)
                if attempt.number == 1 {
                    heldB.withLock { $0.append { done(result) } }
                } else {
                    done(result)
                }
            }, observer: recorderB.observer, completion: recorderB.completion)
        let recorderA = CBRecorder<String>()
        start(plan, server: server, scheduler: scheduler, recorder: recorderA)

        scheduler.advance()
        refresh.complete()
        scheduler.advance()
        #expect(recorderA.onlyResult?.cbValue == "ok(t2)")
        for answer in heldB.withLock({ $0 }) { answer() }  // B's late 401 with t1
        scheduler.advance()
        #expect(recorderB.onlyResult?.cbValue == "ok(t2)")
        #expect(recovery.refreshes == 1, "t1 was already replaced: B retried with t2 at once")
        #expect(refresh.started == ["t1"])
        #expect(recorderB.onlySummary?.recoveries == 1)
        #expect(recorderB.onlySummary?.recoveryWait == .zero)
    }

    @Test func anAttemptThatWouldStartDuringARefreshWaitsForItAndSendsTheNewToken() {
        let scheduler = VirtualScheduler()
        let server = TokenServer()
        server.expire()
        let refresh = ManualRefresh(server: server)
        let recovery = tokenRecovery(refresh, scheduler: scheduler)
        let plan = RetryPlan.constantDelay(.seconds(1)).recovering(with: recovery)
        start(plan, server: server, scheduler: scheduler, recorder: CBRecorder<String>())
        scheduler.advance()
        #expect(refresh.pendingCount == 1)

        let tokens = Locked<[String]>([])
        let late = CBRecorder<String>()
        start(plan, server: server, scheduler: scheduler, recorder: late, tokens: tokens)
        scheduler.advance(by: .seconds(3))
        #expect(tokens.withLock { $0 }.isEmpty, "no request with the token being replaced")
        #expect(late.events.isEmpty, "the attempt has not started")

        refresh.complete()
        scheduler.advance()
        #expect(tokens.withLock { $0 } == ["t2"])
        #expect(late.onlyResult?.cbValue == "ok(t2)")
        #expect(late.onlySummary?.recoveries == 0, "it waited, but no failure of its own asked for a recovery")
        #expect(late.onlySummary?.recoveryWait == .seconds(3))
        #expect(recovery.refreshes == 1)
    }

    @Test func aFailedRefreshFailsEveryWaitingRetrierWithItsErrorAndStartsNoSecond() throws {
        let scheduler = VirtualScheduler()
        let server = TokenServer()
        server.expire()
        let refresh = ManualRefresh(server: server)
        let recovery = tokenRecovery(refresh, scheduler: scheduler)
        let plan = RetryPlan.constantDelay(.seconds(1)).giveUpAfter(maxAttempts: 5).recovering(with: recovery)
        let recorders = (0..<5).map { _ in CBRecorder<String>() }
        let held = Held()
        for recorder in recorders { start(plan, server: server, scheduler: scheduler, recorder: recorder, held: held) }
        scheduler.advance()
        held.release()
        scheduler.advance()
        refresh.complete(with: .failure(RefreshFailed()))
        scheduler.run()

        #expect(recovery.refreshes == 1)
        #expect(recovery.credential == "t1", "a failed refresh keeps the credential")
        for recorder in recorders {
            let error = try #require(recorder.onlyResult?.cbError as? RetryError)
            #expect(error.reason == .recoveryFailed)
            #expect(error.lastError is RefreshFailed)
            #expect(error.attempts == 1)
            #expect(recorder.onlySummary?.reason == .recoveryFailed)
            #expect(recorder.events.last == "finished recoveryFailed 1 \(error)")
        }
        #expect(server.requests.count == 5, "no attempt after the failed refresh")
    }

    @Test func refreshingMoreOftenThanTheWindowAllowsFailsWithTheNamedReason() throws {
        let scheduler = VirtualScheduler()
        let server = TokenServer()
        // A server that rejects every token: each refresh is followed by another 401.
        let refresh = ManualRefresh(server: server, automatic: true)
        let recovery = RetryRecovery<String>(
            credential: "t0", window: RecoveryWindow(interval: .seconds(30), maximumRefreshes: 2),
            when: { $0 is Unauthorized }, refresh: refresh.refresh, now: { scheduler.now })
        let plan = RetryPlan.constantDelay(.seconds(1)).giveUpAfter(maxAttempts: 10).recovering(with: recovery)
        let recorder = CBRecorder<String>()
        plan.execute(
            on: queue, scheduler: scheduler,
            operation: { token, _, done in done(.failure(Unauthorized(token: token))) },
            observer: recorder.observer, completion: recorder.completion)
        scheduler.run()

        let error = try #require(recorder.onlyResult?.cbError as? RetryError)
        #expect(error.reason == .recoveryLimitExceeded)
        #expect(error.lastError as? Unauthorized == Unauthorized(token: "t1"), "the failure that asked for a refresh")
        #expect(recovery.refreshes == 2)
        #expect(error.attempts == 3)

        // 30 s later the window allows refreshes again.
        scheduler.advance(by: .seconds(30))
        let again = CBRecorder<String>()
        plan.execute(
            on: queue, scheduler: scheduler,
            operation: { token, attempt, done in
                done(attempt.number == 1 ? .failure(Unauthorized(token: token)) : .success(token))
            }, observer: again.observer, completion: again.completion)
        scheduler.run()
        #expect(again.onlyResult?.cbValue == "t1")
        #expect(recovery.refreshes == 3)
    }

    @Test func aCancelWhileWaitingEndsThatRetrierAtOnceAndTheOthersStillSucceed() {
        let scheduler = VirtualScheduler()
        let server = TokenServer()
        server.expire()
        let refresh = ManualRefresh(server: server)
        let recovery = tokenRecovery(refresh, scheduler: scheduler)
        let plan = RetryPlan.constantDelay(.seconds(1)).recovering(with: recovery)
        let stays = CBRecorder<String>()
        let leaves = CBRecorder<String>()
        let held = Held()
        start(plan, server: server, scheduler: scheduler, recorder: stays, held: held)
        var handle: RetryHandle<String>? = start(
            plan, server: server, scheduler: scheduler, recorder: leaves, held: held)
        scheduler.advance()
        held.release()
        scheduler.advance()
        #expect(refresh.pendingCount == 1)
        let probe = handle?.runner.probe
        handle?.cancel()
        handle = nil
        scheduler.advance()
        #expect(leaves.onlyResult?.cbError is CancellationError)
        #expect(leaves.events.last == "finished cancelled 1 CancellationError()")
        #expect(probe?.object == nil, "the recovery keeps nothing of a retrier that stopped waiting")
        #expect(stays.completionCount == 0)

        refresh.complete()
        scheduler.advance()
        #expect(stays.onlyResult?.cbValue == "ok(t2)")
        #expect(recovery.refreshes == 1)
        #expect(recovery.credential == "t2")
    }

    @Test func aRefreshThatHangsIsBoundedByTheTotalTimeout() throws {
        let scheduler = VirtualScheduler()
        let server = TokenServer()
        server.expire()
        let refresh = ManualRefresh(server: server)
        let recovery = tokenRecovery(refresh, scheduler: scheduler)
        let plan = RetryPlan.constantDelay(.seconds(1)).giveUpAfter(totalTimeout: .seconds(5))
            .recovering(with: recovery)
        let failed = CBRecorder<String>()
        start(plan, server: server, scheduler: scheduler, recorder: failed)
        scheduler.advance(by: .seconds(2))
        let late = CBRecorder<String>()
        start(plan, server: server, scheduler: scheduler, recorder: late)  // waits before its first attempt
        scheduler.advance(by: .milliseconds(2_999))
        #expect(failed.completionCount == 0)
        scheduler.advance(by: .milliseconds(1))

        let error = try #require(failed.onlyResult?.cbError as? RetryError)
        #expect(error.reason == .deadlineExceeded)
        #expect(error.lastError as? Unauthorized == Unauthorized(token: "t1"))
        #expect(failed.onlySummary?.elapsed == .seconds(5))
        #expect(failed.onlySummary?.recoveryWait == .seconds(5))
        scheduler.advance(by: .seconds(2))
        let lateError = try #require(late.onlyResult?.cbError as? RetryError)
        #expect(lateError.reason == .deadlineExceeded)
        #expect(lateError.attempts == 0)
        #expect(scheduler.pendingCount == 0)
        #expect(refresh.pendingCount == 1, "the refresh itself goes on")
        // The hanging refresh holds its completion, which holds the recovery, whose refresh function holds the refresh:
        // released here, as a refresh that finally gives up would (otherwise the test itself leaks that cycle).
        refresh.abandon()
        #expect(recovery.refreshes == 1)
    }

    @Test func aSecondExpiryAfterASuccessfulRefreshRefreshesExactlyOnceMore() {
        let scheduler = VirtualScheduler()
        let server = TokenServer()
        server.expire()
        let refresh = ManualRefresh(server: server, automatic: true)
        let recovery = tokenRecovery(refresh, scheduler: scheduler)
        let plan = RetryPlan.constantDelay(.seconds(1)).recovering(with: recovery)
        let first = (0..<3).map { _ in CBRecorder<String>() }
        for recorder in first { start(plan, server: server, scheduler: scheduler, recorder: recorder) }
        scheduler.run()
        #expect(first.allSatisfy { $0.onlyResult?.cbValue == "ok(t2)" })
        #expect(recovery.refreshes == 1)

        server.expire()
        let second = (0..<3).map { _ in CBRecorder<String>() }
        for recorder in second { start(plan, server: server, scheduler: scheduler, recorder: recorder) }
        scheduler.run()
        #expect(second.allSatisfy { $0.onlyResult?.cbValue == "ok(t3)" })
        #expect(recovery.refreshes == 2)
        #expect(refresh.started == ["t1", "t2"])
    }

    @Test func aCredentialThatNeedsARefreshBeforeUseIsRefreshedOnceBeforeTheAttempts() {
        let scheduler = VirtualScheduler()
        let server = TokenServer()
        server.expire()
        let refresh = ManualRefresh(server: server)
        let recovery = tokenRecovery(refresh, scheduler: scheduler, requiresRefresh: { $0 == "t1" })
        let plan = RetryPlan.constantDelay(.seconds(1)).recovering(with: recovery)
        let tokens = Locked<[String]>([])
        let recorders = (0..<4).map { _ in CBRecorder<String>() }
        for recorder in recorders {
            start(plan, server: server, scheduler: scheduler, recorder: recorder, tokens: tokens)
        }
        scheduler.advance()
        #expect(refresh.started == ["t1"])
        #expect(tokens.withLock { $0 }.isEmpty)
        refresh.complete()
        scheduler.advance()
        #expect(tokens.withLock { $0 } == Array(repeating: "t2", count: 4))
        #expect(recorders.allSatisfy { $0.onlyResult?.cbValue == "ok(t2)" && $0.onlySummary?.attempts == 1 })
        #expect(recovery.refreshes == 1)
    }

    @Test func noCredentialAtAllRefreshesBeforeTheFirstAttempt() {
        let scheduler = VirtualScheduler()
        let server = TokenServer()
        let refresh = ManualRefresh(server: server, automatic: true)
        let recovery = tokenRecovery(refresh, credential: nil, scheduler: scheduler)
        let recorder = CBRecorder<String>()
        start(
            RetryPlan.constantDelay(.seconds(1)).recovering(with: recovery), server: server, scheduler: scheduler,
            recorder: recorder)
        scheduler.run()
        #expect(refresh.started == [nil])
        #expect(recorder.onlyResult?.cbValue == "ok(t1)")
    }

    @Test func aRefreshThatReleasesItsCompletionUncalledFailsTheWaitingRetriers() throws {
        let scheduler = VirtualScheduler()
        let server = TokenServer()
        server.expire()
        let refresh = ManualRefresh(server: server)
        let recovery = tokenRecovery(refresh, scheduler: scheduler)
        let recorder = CBRecorder<String>()
        start(
            RetryPlan.constantDelay(.seconds(1)).recovering(with: recovery), server: server, scheduler: scheduler,
            recorder: recorder)
        scheduler.advance()
        refresh.abandon()
        scheduler.advance()
        let error = try #require(recorder.onlyResult?.cbError as? RetryError)
        #expect(error.reason == .recoveryFailed)
        #expect((error.lastError as? RetryError)?.reason == .completionReleased)
    }

    @Test func otherErrorsGoToTheStrategyAndMaxAttemptsCountsRetriesAfterARecovery() throws {
        let scheduler = VirtualScheduler()
        let server = TokenServer()
        server.expire()
        let refresh = ManualRefresh(server: server, automatic: true)
        let recovery = tokenRecovery(refresh, scheduler: scheduler)
        let plan = RetryPlan.constantDelay(.seconds(1)).giveUpAfter(maxAttempts: 3).recovering(with: recovery)
        let recorder = CBRecorder<String>()
        plan.execute(
            on: queue, scheduler: scheduler,
            operation: { token, attempt, done in
                done(attempt.number == 1 ? server.call(token) : .failure(CBError(code: attempt.number)))
            }, observer: recorder.observer, completion: recorder.completion)
        scheduler.run()
        #expect(
            recorder.events == [
                "start 1", "fail 1 401(t1) recover", "start 2", "fail 2 E2 retry 1.0 seconds", "start 3",
                "fail 3 E3 giveUp exhausted", "finished exhausted 3 E3",
            ])
        #expect(recorder.onlySummary?.elapsed == .seconds(1))
    }

    @Test func theAsyncFormsShareTheRecoveryWithTheCallbackForm() async throws {
        let server = TokenServer()
        server.expire()
        let refresh = ManualRefresh(server: server, automatic: true)
        let recovery = RetryRecovery<String>(credential: "t1", when: { $0 is Unauthorized }, refresh: refresh.refresh)
        let plan = RetryPlan.constantDelay(.milliseconds(1)).giveUpAfter(maxAttempts: 3).recovering(with: recovery)
        let results = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<60 {
                group.addTask {
                    switch index % 3 {
                    case 0:
                        return try await plan.execute { token, _ in try server.call(token).get() }
                    case 1:
                        return try await plan.executeTask(on: DispatchQueue(label: "r\(index)")) { token, _ in
                            try server.call(token).get()
                        } completion: { _, _ in
                        }.value
                    default:
                        return try await plan.execute(on: DispatchQueue(label: "r\(index)")) { token, _, done in
                            DispatchQueue.global().async { done(server.call(token)) }
                        } completion: { _, _ in
                        }.value
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 60)
        #expect(results.allSatisfy { $0 == "ok(t2)" })
        #expect(recovery.refreshes == 1)
    }

    /// The async `execute` awaits its run's `value`: cancelling the awaiting task cancels the run, the
    /// attempt's task with it, and the observer (on the run's queue) still sees the run end.
    @Test func cancellingTheTaskThatAwaitsTheAsyncExecuteCancelsTheAttemptInFlight() async throws {
        let server = TokenServer()
        let recovery = RetryRecovery<String>(
            credential: "t1", when: { $0 is Unauthorized }, refresh: ManualRefresh(server: server).refresh)
        let plan = RetryPlan.noDelay.giveUpAfter(maxAttempts: 3).recovering(with: recovery)
        let attempt = AttemptUntilCancelled()
        let events = AsyncLog<String>()
        let task = Task {
            try await plan.execute(
                operation: { _, _ -> String in try await attempt.run() },
                observer: { events.append(asyncEventLine($0)) })
        }
        await attempt.started.wait()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        await attempt.cancelled.wait()  // the attempt's task was cancelled
        #expect(events.values.count == 2)
        #expect(events.values.first?.hasPrefix("started 1/3") == true, "\(events.values)")
        #expect(events.values.last?.hasPrefix("finished cancelled after 1") == true, "\(events.values)")
        #expect(recovery.refreshes == 0)
    }
}

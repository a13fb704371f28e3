import RetryKit
import Testing

/// The state machine's recovery inputs and actions, fed by hand: no runner, no clock.
@Suite("Recovery: the state machine")
struct RecoveryMachineTests {
    let core = RetryRecovery<String>(
        credential: "t1", window: RecoveryWindow(), when: { $0 is Unauthorized }, refresh: { _, _ in },
        now: { .zero }
    ).core

    func machine(maxAttempts: Int = 3, totalTimeout: Duration? = nil) -> RetryStateMachine {
        var configuration = RetryConfiguration(maxAttempts: maxAttempts, totalTimeout: totalTimeout)
        configuration.recovery = core
        return RetryStateMachine(configuration)
    }

    func isRun(_ action: RetryStateMachine.Action, _ number: Int) -> Bool {
        if case .run(let attempt, _) = action { return attempt.number == number }
        return false
    }

    func isAcquire(_ action: RetryStateMachine.Action) -> Bool {
        if case .acquire = action { return true }
        return false
    }

    @Test func everyAttemptFirstAsksForACredentialAndRunsWithTheOneGiven() {
        var m = machine()
        #expect(isAcquire(m.start(at: .zero)))
        #expect(m.isAcquiring)
        #expect(m.recoveryRequest?.newerThan == nil, "before the first attempt: any credential")
        #expect(m.recoveryRequest?.timeout == nil)
        #expect(isRun(m.recoveryAnswered(.ready("t1", generation: 0), at: .zero), 1))
        #expect(m.credential as? String == "t1")
        #expect(!m.isAcquiring)
    }

    @Test func aRecognisedFailureAsksForANewerCredentialWithoutBackoffOrBudget() throws {
        var configuration = RetryConfiguration(maxAttempts: 3, budget: RetryBudget(capacity: 0))
        configuration.recovery = core
        var m = RetryStateMachine(configuration)
        _ = m.start(at: .zero)
        _ = m.recoveryAnswered(.ready("t1", generation: 4), at: .zero)
        guard case .consultStrategy = m.attemptFailed(1, error: Unauthorized(token: "t1"), at: .seconds(1)) else {
            Issue.record("the failure is decided like any other")
            return
        }
        guard case .recover(let failed, let error) = m.decide(.recover, at: .seconds(1)) else {
            Issue.record("a recover decision asks the recovery")
            return
        }
        #expect(failed.number == 1)
        #expect(error is Unauthorized)
        #expect(m.recoveryRequest?.newerThan == 4, "newer than the generation attempt 1 ran with")
        #expect(
            isRun(m.recoveryAnswered(.ready("t2", generation: 5), at: .seconds(3)), 2),
            "a budget that refuses every retry is not asked")
        #expect(m.credential as? String == "t2")
        _ = m.attemptSucceeded(2, at: .seconds(3))
        let summary = try #require(m.termination?.summary)
        #expect(summary.recoveries == 1)
        #expect(summary.recoveryWait == .seconds(2))
    }

    @Test func theLastAttemptsFailureIsNotRecovered() {
        var m = machine(maxAttempts: 1)
        _ = m.start(at: .zero)
        _ = m.recoveryAnswered(.ready("t1", generation: 0), at: .zero)
        guard case .finish = m.attemptFailed(1, error: Unauthorized(token: "t1"), at: .zero) else {
            Issue.record("no attempt is left: no recovery")
            return
        }
        #expect(m.termination?.summary.reason == .exhausted)
        #expect(m.termination?.summary.recoveries == 0)
    }

    @Test func theWaitIsBoundedByTheTotalTimeoutAndAnAnswerAfterItIsIgnored() throws {
        var m = machine(totalTimeout: .seconds(10))
        _ = m.start(at: .zero)
        _ = m.recoveryAnswered(.ready("t1", generation: 0), at: .seconds(1))
        _ = m.attemptFailed(1, error: Unauthorized(token: "t1"), at: .seconds(4))
        _ = m.decide(.recover, at: .seconds(4))
        #expect(m.recoveryRequest?.timeout == .seconds(6))
        #expect(m.isWaiting, "the runner's timer for the deadline is wanted")
        guard case .none = m.waitElapsed(at: .seconds(9)) else {
            Issue.record("before the deadline, a stray wait does nothing")
            return
        }
        guard case .finish = m.waitElapsed(at: .seconds(10)) else {
            Issue.record("the deadline ends the wait")
            return
        }
        let error = try #require(m.finalError as? RetryError)
        #expect(error.reason == .deadlineExceeded)
        #expect(error.lastError is Unauthorized)
        #expect(m.termination?.summary.recoveryWait == .seconds(7), "1 s before attempt 1, 6 s after it")
        guard case .none = m.recoveryAnswered(.ready("t2", generation: 1), at: .seconds(11)) else {
            Issue.record("a late answer is stale")
            return
        }
    }

    @Test func aFailedRecoveryEndsWithItsErrorAndARefusedOneWithTheNamedReason() throws {
        var failing = machine()
        _ = failing.start(at: .zero)
        guard case .finish = failing.recoveryAnswered(.failed(RefreshFailed()), at: .seconds(1)) else {
            Issue.record("a failed recovery finishes")
            return
        }
        let failed = try #require(failing.finalError as? RetryError)
        #expect(failed.reason == .recoveryFailed)
        #expect(failed.lastError is RefreshFailed)
        #expect(failed.attempts == 0)

        var refused = machine()
        _ = refused.start(at: .zero)
        _ = refused.recoveryAnswered(.ready("t1", generation: 0), at: .zero)
        _ = refused.attemptFailed(1, error: Unauthorized(token: "t1"), at: .zero)
        _ = refused.decide(.recover, at: .zero)
        _ = refused.recoveryAnswered(.limitExceeded, at: .zero)
        let limit = try #require(refused.finalError as? RetryError)
        #expect(limit.reason == .recoveryLimitExceeded)
        #expect(limit.lastError as? Unauthorized == Unauthorized(token: "t1"))
        #expect(refused.termination?.failedAttempt == nil, "attempt 1's failure was reported with next: .recover")
    }

    @Test func aCancelWhileWaitingFinishesAndCountsTheWait() {
        var m = machine()
        _ = m.start(at: .zero)
        guard case .finish = m.cancel(at: .seconds(2)) else {
            Issue.record("a cancel finishes")
            return
        }
        #expect(!m.isAcquiring, "the runner calls its registration off")
        #expect(m.termination?.summary.recoveryWait == .seconds(2))
        #expect(m.finalError is CancellationError)
    }

    @Test func recoverWithoutARecoveryStops() {
        var m = RetryStateMachine(RetryConfiguration(maxAttempts: 3))
        _ = m.start(at: .zero)
        _ = m.attemptFailed(1, error: Unauthorized(token: "t1"), at: .zero)
        guard case .finish = m.decide(.recover, at: .zero) else {
            Issue.record("nothing to wait for")
            return
        }
        #expect(m.termination?.summary.reason == .stopped(.unspecified))
    }

    @Test func aGatedRunInterruptsAWaitForTheRecoveryWhenItsConditionCloses() {
        var configuration = RetryConfiguration(maxAttempts: 3)
        configuration.recovery = core
        var m = RetryStateMachine(configuration, trials: RetryStateMachine.Trials(gated: true, repeatDelay: nil))
        let open = RetryConditionSnapshot(value: true, ended: false, version: 1)
        #expect(isAcquire(m.start(at: .zero, condition: open)))
        guard
            case .interrupt(nil) = m.conditionChanged(
                RetryConditionSnapshot(value: false, ended: false, version: 2), at: .seconds(1))
        else {
            Issue.record("the wait is interrupted")
            return
        }
        #expect(!m.isAcquiring)
    }
}

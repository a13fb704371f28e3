import RetryKit
import Testing

extension RetryStateMachine.Action {
    var isAwaitCondition: Bool {
        if case .awaitCondition = self { return true }
        return false
    }

    /// The attempt an interruption names (`.some(nil)` for an interrupted wait), `nil` for another action.
    var interruption: RetryAttempt?? {
        if case .interrupt(let attempt) = self { return .some(attempt) }
        return nil
    }

    var repeatPause: (delay: Duration, succeeded: RetryAttempt)? {
        if case .repeatAfter(let delay, let attempt) = self { return (delay, attempt) }
        return nil
    }
}

/// Condition gating and repetition are inputs and actions of the one machine: a run of trials, each a fresh retrier.
@Suite("RetryStateMachine trials", .timeLimit(.minutes(3)))
struct RetryStateMachineTrialsTests {
    private static let constant = RetryStrategy<ContinuousClock>.backoff(.constant(.milliseconds(100)))
    private static let growing = RetryStrategy<ContinuousClock>.backoff(
        .exponential(a: .milliseconds(100), b: 2))

    private func snapshot(_ value: Bool?, ended: Bool = false, version: UInt64) -> RetryConditionSnapshot {
        RetryConditionSnapshot(value: value, ended: ended, version: version)
    }

    private func gated(
        _ configuration: RetryConfiguration = RetryConfiguration(maxAttempts: 3), repeatDelay: Duration? = nil
    ) -> RetryStateMachine {
        RetryStateMachine(configuration, trials: .init(gated: true, repeatDelay: repeatDelay))
    }

    /// Fails the current attempt `number` at `now` and resolves `strategy`: the machine's next action.
    private func fail(
        _ machine: inout RetryStateMachine, _ number: Int, at now: Duration,
        strategy: RetryStrategy<ContinuousClock> = constant
    ) -> RetryStateMachine.Action {
        let action = machine.attemptFailed(number, error: TestError(number), at: now)
        guard let consult = action.consultation else { return action }
        return machine.decide(consult.context.resolve(strategy), at: now)
    }

    @Test func aClosedConditionHoldsTheFirstTrialUntilItOpens() {
        var machine = gated()
        #expect(machine.start(at: .zero, condition: snapshot(false, version: 0)).isAwaitCondition)
        #expect(machine.currentAttempt == nil)
        #expect(machine.conditionChanged(snapshot(false, version: 1), at: .seconds(1)).isNone)
        let run = machine.conditionChanged(snapshot(true, version: 2), at: .seconds(2)).runAttempt
        #expect(run?.attempt.number == 1)
        #expect(run?.attempt.elapsed == .zero, "a trial's times are measured from its start")
        #expect(machine.attemptSucceeded(1, at: .seconds(3)).isFinish)
        let termination = machine.termination
        #expect(termination?.summary.reason == .succeeded)
        #expect(termination?.summary.attempts == 1)
        #expect(termination?.summary.elapsed == .seconds(3), "the summary measures the whole run")
    }

    @Test func anOpenConditionOrNoneStartsAtOnce() {
        var open = gated()
        #expect(open.start(at: .zero, condition: snapshot(true, version: 0)).runAttempt?.attempt.number == 1)
        var ungated = RetryStateMachine(
            RetryConfiguration(maxAttempts: 3), trials: .init(gated: false, repeatDelay: .seconds(1)))
        #expect(ungated.start(at: .zero).runAttempt?.attempt.number == 1)
        #expect(ungated.conditionChanged(snapshot(false, version: 1), at: .zero).isNone, "not gated: ignored")
        #expect(ungated.currentAttempt == 1)
    }

    @Test func anEndedClosedConditionFinishesTheRunWithTheLastAttemptError() {
        var before = gated()
        #expect(before.start(at: .zero, condition: snapshot(false, ended: true, version: 3)).isFinish)
        let error = before.finalError as? RetryError
        #expect(error?.reason == .conditionEnded)
        #expect(error?.lastError == nil)
        #expect(before.termination?.summary.attempts == 0)

        var later = gated()
        _ = later.start(at: .zero, condition: snapshot(true, version: 0))
        #expect(fail(&later, 1, at: .seconds(1)).retryDelay == .milliseconds(100))
        #expect(later.conditionChanged(snapshot(false, version: 1), at: .seconds(1)).interruption == .some(nil))
        #expect(later.interrupted(at: .seconds(1)).isAwaitCondition)
        #expect(later.conditionChanged(snapshot(false, ended: true, version: 2), at: .seconds(4)).isFinish)
        let ended = later.finalError as? RetryError
        #expect(ended?.reason == .conditionEnded)
        #expect(ended?.lastError as? TestError == TestError(1))
        #expect(ended?.attempts == 1)
        #expect(later.termination?.summary.reason == .conditionEnded)
        #expect(later.termination?.summary.elapsed == .seconds(4))
        #expect(later.termination?.failedAttempt == nil, "no attempt result ends the run")
    }

    @Test func closingDuringAnAttemptInterruptsItAndItsLateResultIsIgnored() {
        var machine = gated()
        _ = machine.start(at: .zero, condition: snapshot(true, version: 0))
        let interrupt = machine.conditionChanged(snapshot(false, version: 1), at: .seconds(1)).interruption
        #expect(interrupt??.number == 1)
        #expect(machine.attemptSucceeded(1, at: .seconds(2)).isNone, "the interrupted attempt's result is stale")
        #expect(machine.attemptFailed(1, error: TestError(1), at: .seconds(2)).isNone)
        #expect(machine.attemptTimedOut(1, at: .seconds(2)).isNone)
        #expect(machine.interrupted(at: .seconds(2)).isAwaitCondition)
        #expect(machine.interrupted(at: .seconds(2)).isNone, "reported once")
        let run = machine.conditionChanged(snapshot(true, version: 2), at: .seconds(5)).runAttempt
        #expect(run?.attempt.number == 1, "a new trial starts afresh")
        #expect(run?.attempt.elapsed == .zero)
        #expect(fail(&machine, 1, at: .seconds(6)).retryDelay == .milliseconds(100))
        #expect(machine.waitElapsed(at: .milliseconds(6_100)).runAttempt?.attempt.elapsed == .milliseconds(1_100))
        #expect(machine.attemptSucceeded(2, at: .seconds(7)).isFinish)
        #expect(machine.termination?.summary.attempts == 3, "every trial's attempts")
        #expect(machine.termination?.summary.elapsed == .seconds(7))
        #expect(machine.termination?.succeededAttempt?.number == 2)
        #expect(machine.termination?.succeededAttempt?.elapsed == .milliseconds(1_100))
    }

    @Test func closingDuringAWaitOrADecisionInterruptsTheTrial() {
        var waiting = gated()
        _ = waiting.start(at: .zero, condition: snapshot(true, version: 0))
        _ = fail(&waiting, 1, at: .seconds(1))
        #expect(waiting.conditionChanged(snapshot(false, version: 1), at: .seconds(1)).interruption == .some(nil))
        #expect(waiting.waitElapsed(at: .seconds(2)).isNone, "the wait was cancelled")

        var deciding = gated()
        _ = deciding.start(at: .zero, condition: snapshot(true, version: 0))
        let consult = deciding.attemptFailed(1, error: TestError(1), at: .seconds(1)).consultation
        #expect(consult != nil)
        #expect(deciding.conditionChanged(snapshot(false, version: 1), at: .seconds(1)).interruption??.number == 1)
        #expect(deciding.decide(.retry(after: .zero), at: .seconds(1)).isNone, "the decision is stale")

        let budget = RetryBudget(capacity: 10, retryCost: 5)
        var paying = gated(RetryConfiguration(maxAttempts: 3, budget: budget))
        _ = paying.start(at: .zero, condition: snapshot(true, version: 0))
        #expect(fail(&paying, 1, at: .seconds(1)).withdrawal != nil)
        #expect(paying.conditionChanged(snapshot(false, version: 1), at: .seconds(1)).interruption??.number == 1)
        #expect(paying.budgetAnswered(5, at: .seconds(1)).isNone, "the answer is stale")
    }

    @Test func reopenedOrEndedBeforeTheInterruptionIsCarriedOut() {
        var reopened = gated()
        _ = reopened.start(at: .zero, condition: snapshot(true, version: 0))
        _ = reopened.conditionChanged(snapshot(false, version: 1), at: .seconds(1))
        #expect(reopened.conditionChanged(snapshot(true, version: 2), at: .seconds(1)).isNone)
        #expect(reopened.interrupted(at: .seconds(2)).runAttempt?.attempt.number == 1)

        var ended = gated()
        _ = ended.start(at: .zero, condition: snapshot(true, version: 0))
        _ = ended.conditionChanged(snapshot(false, version: 1), at: .seconds(1))
        #expect(ended.conditionChanged(snapshot(false, ended: true, version: 2), at: .seconds(1)).isNone)
        #expect(ended.interrupted(at: .seconds(2)).isFinish)
        #expect(ended.termination?.summary.reason == .conditionEnded)
        #expect(ended.termination?.summary.attempts == 1)
    }

    @Test func eachTrialHasANumberAPlainRetrierNone() {
        var plain = RetryStateMachine(RetryConfiguration(maxAttempts: 3))
        _ = plain.start(at: .zero)
        #expect(plain.currentTrial == 0)

        var machine = gated(repeatDelay: .seconds(1))
        _ = machine.start(at: .zero, condition: snapshot(false, version: 0))
        #expect(machine.currentTrial == 0, "no trial before the condition opens")
        _ = machine.conditionChanged(snapshot(true, version: 1), at: .seconds(1))
        #expect(machine.currentTrial == 1)
        _ = machine.conditionChanged(snapshot(false, version: 2), at: .seconds(2))
        _ = machine.interrupted(at: .seconds(2))
        #expect(machine.currentTrial == 1, "an interruption starts no trial")
        _ = machine.conditionChanged(snapshot(true, version: 3), at: .seconds(3))
        #expect(machine.currentTrial == 2)
        _ = machine.attemptSucceeded(1, at: .seconds(3))
        _ = machine.waitElapsed(at: .seconds(4))
        #expect(machine.currentTrial == 3, "a repetition is a new trial")
        #expect(machine.currentAttempt == 1)
    }

    @Test func staleSnapshotsAndAnEndWhileOpenChangeNothing() {
        var machine = gated()
        _ = machine.start(at: .zero, condition: snapshot(true, version: 5))
        #expect(machine.conditionChanged(snapshot(false, version: 4), at: .seconds(1)).isNone, "older")
        #expect(machine.conditionChanged(snapshot(false, version: 5), at: .seconds(1)).isNone, "the same")
        #expect(machine.conditionChanged(snapshot(true, ended: true, version: 6), at: .seconds(1)).isNone)
        #expect(machine.currentAttempt == 1)
        #expect(machine.attemptSucceeded(1, at: .seconds(2)).isFinish)
    }

    @Test func staleSnapshotsBeforeTheStartOrWhileWaitingChangeNothing() {
        // Fed in the order they arrived, as the async runner's inbox does: the machine alone tells a stale one.
        var machine = gated()
        #expect(machine.conditionChanged(snapshot(false, version: 2), at: .zero).isNone, "recorded before the start")
        #expect(machine.conditionChanged(snapshot(true, version: 1), at: .zero).isNone, "older: ignored")
        #expect(machine.start(at: .zero).isAwaitCondition, "the newest snapshot, closed, holds the first trial")
        #expect(machine.conditionChanged(snapshot(true, version: 1), at: .seconds(1)).isNone, "older")
        #expect(machine.conditionChanged(snapshot(true, version: 2), at: .seconds(1)).isNone, "the same version")
        #expect(machine.currentTrial == 0)
        #expect(machine.conditionChanged(snapshot(true, version: 3), at: .seconds(2)).runAttempt?.attempt.number == 1)
        #expect(machine.conditionChanged(snapshot(false, version: 2), at: .seconds(3)).isNone, "no interruption")
        #expect(machine.currentAttempt == 1)

        var newestFirst = gated()
        _ = newestFirst.conditionChanged(snapshot(true, version: 7), at: .zero)
        _ = newestFirst.conditionChanged(snapshot(false, version: 6), at: .zero)
        #expect(newestFirst.start(at: .zero).runAttempt?.attempt.number == 1)
    }

    @Test func theMachineKeepsTheEndOfItsPause() {
        // Virtual time: `now` is passed in, the time since the run started.
        var machine = RetryStateMachine(
            RetryConfiguration(maxAttempts: 3), trials: .init(gated: false, repeatDelay: .seconds(30)))
        _ = machine.start(at: .zero)
        #expect(machine.pauseRemaining(at: .zero) == nil, "not pausing during a trial")
        #expect(machine.attemptSucceeded(1, at: .seconds(3)).repeatPause?.delay == .seconds(30))
        #expect(machine.pauseRemaining(at: .seconds(3)) == .seconds(30), "measured from the success")
        #expect(machine.pauseRemaining(at: .milliseconds(10_500)) == .milliseconds(22_500))
        #expect(machine.pauseRemaining(at: .seconds(33)) == .zero)
        #expect(machine.pauseRemaining(at: .seconds(50)) == .zero, "over: nothing remains, never less")
        #expect(machine.waitElapsed(at: .seconds(50)).runAttempt?.attempt.number == 1)
        #expect(machine.pauseRemaining(at: .seconds(50)) == nil, "the next trial runs")
        _ = machine.attemptSucceeded(1, at: .seconds(60))
        #expect(machine.pauseRemaining(at: .seconds(61)) == .seconds(29), "each pause from its own success")
        _ = machine.cancel(at: .seconds(62))
        #expect(machine.pauseRemaining(at: .seconds(62)) == nil, "finished")

        var gatedPause = gated(repeatDelay: .seconds(5))
        _ = gatedPause.start(at: .zero, condition: snapshot(true, version: 0))
        _ = gatedPause.attemptSucceeded(1, at: .seconds(1))
        _ = gatedPause.conditionChanged(snapshot(false, version: 1), at: .seconds(2))
        #expect(gatedPause.pauseRemaining(at: .seconds(2)) == .seconds(4), "the condition does not touch the pause")
    }

    @Test func repeatingPausesAfterEachSuccessAndStartsAFreshTrial() {
        var machine = gated(repeatDelay: .seconds(30))
        _ = machine.start(at: .zero, condition: snapshot(true, version: 0))
        #expect(fail(&machine, 1, at: .seconds(1), strategy: Self.growing).retryDelay != nil)
        #expect(machine.waitElapsed(at: .seconds(2)).runAttempt?.attempt.number == 2)
        let pause = machine.attemptSucceeded(2, at: .seconds(3)).repeatPause
        #expect(pause?.delay == .seconds(30))
        #expect(pause?.succeeded.number == 2)
        #expect(!machine.isFinished)
        #expect(machine.conditionChanged(snapshot(false, version: 1), at: .seconds(4)).isNone, "the pause goes on")
        #expect(machine.waitElapsed(at: .seconds(33)).isAwaitCondition, "then the next trial waits for the condition")
        let run = machine.conditionChanged(snapshot(true, version: 2), at: .seconds(40)).runAttempt
        #expect(run?.attempt.number == 1)
        let consult = machine.attemptFailed(1, error: TestError(1), at: .seconds(41)).consultation
        #expect(consult?.context.retryIndex == 0)
        #expect(consult?.context.previousDelay == nil, "the backoff chain starts afresh")
        _ = machine.decide(.stop, at: .seconds(41))
        #expect(machine.termination?.summary.reason == .stopped(.unspecified))
        #expect(machine.termination?.summary.attempts == 3)
        #expect(machine.termination?.failedAttempt?.attempt.number == 1)
        #expect(machine.termination?.failedAttempt?.attempt.elapsed == .zero)
    }

    @Test func theRepeatDelayIsClampedByTheMachine() {
        for (delay, expected) in [
            (Duration.seconds(-5), Duration.zero),
            (.seconds(Int64.max), BackoffStrategy<ContinuousClock>.saturationLimit),
            (.nanoseconds(1), .nanoseconds(1)),
        ] {
            var machine = RetryStateMachine(
                RetryConfiguration(maxAttempts: 1), trials: .init(gated: false, repeatDelay: delay))
            _ = machine.start(at: .zero)
            #expect(machine.attemptSucceeded(1, at: .zero).repeatPause?.delay == expected)
            #expect(machine.pauseRemaining(at: .zero) == expected, "the pause's end too")
        }
    }

    @Test func eachTrialHasItsOwnDeadline() {
        var machine = gated(RetryConfiguration(maxAttempts: 3, totalTimeout: .seconds(10)))
        _ = machine.start(at: .zero, condition: snapshot(true, version: 0))
        _ = machine.conditionChanged(snapshot(false, version: 1), at: .seconds(9))
        _ = machine.interrupted(at: .seconds(9))
        let run = machine.conditionChanged(snapshot(true, version: 2), at: .seconds(100)).runAttempt
        #expect(run?.timeout == .seconds(10))
        #expect(fail(&machine, 1, at: .seconds(105)).retryDelay == .milliseconds(100))
        #expect(machine.waitElapsed(at: .seconds(111)).isFinish, "past this trial's deadline")
        let error = machine.finalError as? RetryError
        #expect(error?.reason == .deadlineExceeded)
        #expect(error?.elapsed == .seconds(11), "measured from the trial's start")
        #expect(machine.termination?.summary.elapsed == .seconds(111))
        #expect(machine.termination?.summary.attempts == 2)
    }

    @Test func aRepeatedSuccessRefundsItsBudget() {
        let budget = RetryBudget(capacity: 10, retryCost: 5, successRefund: 1)
        var machine = RetryStateMachine(
            RetryConfiguration(maxAttempts: 3, budget: budget), trials: .init(gated: false, repeatDelay: .seconds(1)))
        _ = machine.start(at: .zero)
        #expect(fail(&machine, 1, at: .zero).withdrawal != nil)
        #expect(machine.budgetAnswered(budget.withdraw(afterTimeout: false), at: .zero).retryDelay != nil)
        #expect(budget.availableTokens == 5)
        _ = machine.waitElapsed(at: .milliseconds(100))
        #expect(machine.attemptSucceededRefunding(2, at: .milliseconds(100)).repeatPause != nil)
        #expect(budget.availableTokens == 10, "the retry's cost came back")
        _ = machine.waitElapsed(at: .seconds(2))
        #expect(machine.attemptSucceededRefunding(1, at: .seconds(2)).repeatPause != nil)
        #expect(budget.availableTokens == 10, "a first-try success refunds successRefund, up to the capacity")
    }

    @Test func cancelEndsTheRunInEveryPhase() {
        var awaiting = gated()
        _ = awaiting.start(at: .zero, condition: snapshot(false, version: 0))
        #expect(awaiting.cancel(at: .seconds(3)).isFinish)
        #expect(awaiting.termination?.summary.reason == .cancelled)
        #expect(awaiting.termination?.summary.elapsed == .seconds(3))
        #expect(awaiting.conditionChanged(snapshot(true, version: 1), at: .seconds(4)).isNone)

        var interrupting = gated()
        _ = interrupting.start(at: .zero, condition: snapshot(true, version: 0))
        _ = interrupting.conditionChanged(snapshot(false, version: 1), at: .seconds(1))
        #expect(interrupting.cancel(at: .seconds(1)).isFinish)
        #expect(interrupting.interrupted(at: .seconds(1)).isNone)

        var pausing = gated(repeatDelay: .seconds(1))
        _ = pausing.start(at: .zero, condition: snapshot(true, version: 0))
        _ = pausing.attemptSucceeded(1, at: .zero)
        #expect(pausing.cancel(at: .milliseconds(500)).isFinish)
        #expect(pausing.waitElapsed(at: .seconds(1)).isNone)
        #expect(pausing.termination?.summary.attempts == 1)
    }

    /// Random inputs in random order (seeded): the machine never runs an attempt while the gate is closed, runs one
    /// attempt at a time, finishes once, and answers every input after the end with nothing.
    @Test(arguments: 0..<40)
    func randomInputsKeepTheGateInvariants(seed: UInt64) {
        var random = SplitMix(seed: seed)
        var machine = gated(
            RetryConfiguration(maxAttempts: 1 + Int(random.next() % 3), totalTimeout: .seconds(50)),
            repeatDelay: random.next() % 2 == 0 ? nil : .seconds(1))
        var now = Duration.zero
        var version: UInt64 = 0
        var open = random.next() % 2 == 0
        var running: Int?
        var finishes = 0
        var action = machine.start(at: now, condition: snapshot(open, version: version))
        for step in 0...200 {
            switch action {
            case .run(let attempt, _):
                #expect(open, "an attempt runs only while the condition is open")
                #expect(running == nil, "one attempt at a time")
                running = attempt.number
            case .interrupt:
                running = nil
            case .repeatAfter, .retry, .consultStrategy, .withdraw, .recover, .acquire:
                running = nil
            case .finish:
                finishes += 1
                running = nil
            case .awaitCondition, .none:
                break
            }
            if machine.isFinished || step == 200 { break }
            now += .milliseconds(Int64(random.next() % 3_000))
            switch random.next() % 8 {
            case 0, 1:
                version += 1
                open = random.next() % 2 == 0
                action = machine.conditionChanged(
                    snapshot(open, ended: random.next() % 10 == 0, version: version), at: now)
            case 2: action = machine.attemptSucceeded(running ?? 1, at: now)
            case 3: action = fail(&machine, running ?? 1, at: now)
            case 4: action = machine.waitElapsed(at: now)
            case 5: action = machine.interrupted(at: now)
            case 6: action = machine.attemptTimedOut(running ?? 1, at: now)
            default: action = random.next() % 20 == 0 ? machine.cancel(at: now) : .none
            }
        }
        #expect(finishes <= 1)
        if machine.isFinished {
            #expect(finishes == 1)
            #expect(machine.cancel(at: now).isNone)
            #expect(machine.conditionChanged(snapshot(true, version: version + 1), at: now).isNone)
            #expect(machine.interrupted(at: now).isNone)
            #expect(machine.waitElapsed(at: now).isNone)
        }
    }
}

/// A small seeded generator for the random walks.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

import RetryKit
import RetryKitTesting
import Testing

/// Issue 12.6, "parity extended": gated (`onlyWhen`) and repeating policies carry out the same attempts, wait the same
/// timers and emit the same events in the completion-handler style (`policy.execute(on:)`,
/// `policy.repeating(withDelay:).execute(on:…onValue:…)`, on a `VirtualScheduler`), its bridges (`executeTask(on:)`
/// with an async operation; `handle.value` awaited from a task) and the async style (`policy.execute(clock:)`,
/// `policy.repeating(withDelay:).values(clock:)`, on a `VirtualClock`).
///
/// Each test scripts the condition and the moves of time (``PolicyParityScenario/Command``), runs the script in both
/// styles, and compares the logs with the one the test writes down: every event with its attempt (number, attempts
/// allowed, retries left, elapsed time since its trial started), error and next step, each value where it was
/// delivered, the final result; and the timers the driver moved time through.
///
/// What the styles cannot share, and so is not compared: the completion handler's summary (the `finished` event
/// carries the same one) and the end of an async `values` loop cancelled from outside (not scripted here; a
/// cancelled sequence returns `nil` where the callback style calls its completion with `CancellationError`).
@Suite("Parity of gated and repeating policies", .timeLimit(.minutes(1)))
struct PolicyParityTests {

    /// Runs `scenario` in both styles and compares each run with `expected`, or with `inherent[style]` for a style
    /// whose run differs by design (each test says why).
    private func expectPolicyParity(
        _ scenario: PolicyParityScenario, expected: ParityRun, inherent: [PolicyParityStyle: ParityRun] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        for style in PolicyParityStyle.allCases {
            let run = await runPolicyParity(scenario, style)
            let expected = inherent[style] ?? expected
            #expect(run.log == expected.log, "\(style)", sourceLocation: sourceLocation)
            #expect(run.waits == expected.waits, "\(style)", sourceLocation: sourceLocation)
            #expect(run.tokens == expected.tokens, "\(style)", sourceLocation: sourceLocation)
        }
    }

    // MARK: - Gated

    @Test(
        "Gated: waits while false burn no attempt; false during a wait abandons the trial; reopened, it starts afresh")
    func falseDuringAWait() async {
        let scenario = PolicyParityScenario(
            maxAttempts: 3, condition: .some(false), steps: [],
            script: [.idle(.seconds(60)), .set(true), .halfWait, .set(false), .idle(.seconds(10)), .set(true), .toEnd])
        let t3 = attempt(3, of: 3, at: .seconds(3))
        let expected = ParityRun(
            // Trial 1, opened after 60 s: its wait is cut short halfway by the condition; no event says so.
            log: .failedAndRetried([.seconds(1)], of: 3)
                // Trial 2, 10.5 s later: all three attempts again, the same waits.
                + .failedAndRetried([.seconds(1), .seconds(2)], of: 3, firstError: 2)
                + [.started(t3), .failed(t3, error: "TestError(4)", next: .giveUp(.exhausted))]
                + .endFailed(.exhausted, attempts: 4, elapsed: .milliseconds(73_500), error: "TestError(4)"),
            waits: [.seconds(1), .seconds(1), .seconds(2)])
        await expectPolicyParity(scenario, expected: expected)
    }

    @Test("Gated: false during an attempt cancels it (reported as a cancelled failure); the next trial succeeds")
    func falseDuringAnAttempt() async {
        let scenario = PolicyParityScenario(
            maxAttempts: 5, condition: .some(true), steps: [.fail, .hang, .succeed],
            script: [.wait, .hang, .set(false), .idle(.seconds(5)), .set(true), .toEnd])
        let a1 = attempt(1, of: 5, at: .zero)
        let a2 = attempt(2, of: 5, at: .seconds(1))
        let expected = ParityRun(
            log: .failedAndRetried([.seconds(1)], of: 5) + [
                .started(a2), .failed(a2, error: "CancellationError()", next: .giveUp(.cancelled)),
                .started(a1), .succeeded(a1, value: "v3"),
            ] + .endSucceeded("v3", attempts: 3, elapsed: .seconds(6)),
            waits: [.seconds(1)])
        await expectPolicyParity(scenario, expected: expected)
    }

    @Test(
        "Gated: closed during a wait, then ended (conditionEnded, the last error) or cancelled: no further attempt",
        arguments: [
            (
                PolicyParityScenario.Command.finish, RetryError.Reason.conditionEnded,
                "RetryError(retry condition ended while false after 1 attempt; last error: TestError(1))"
            ),
            (.cancel, .cancelled, "CancellationError()"),
        ])
    func endsWhileWaitingForTheCondition(end: PolicyParityScenario.Command, reason: RetryError.Reason, error: String)
        async
    {
        let scenario = PolicyParityScenario(
            maxAttempts: 5, condition: .some(true), steps: [],
            script: [.halfWait, .set(false), .idle(.seconds(2)), end])
        let expected = ParityRun(
            log: .failedAndRetried([.seconds(1)], of: 5)
                + .endFailed(reason, attempts: 1, elapsed: .milliseconds(2_500), error: error),
            waits: [.seconds(1)])
        await expectPolicyParity(scenario, expected: expected)
    }

    @Test("Gated: a condition that never had a value ends: conditionEnded without an attempt")
    func endsWithoutAValue() async {
        let scenario = PolicyParityScenario(
            maxAttempts: 5, condition: .some(nil), steps: [], script: [.idle(.seconds(5)), .finish])
        let ended = "RetryError(retry condition ended while false after 0 attempts)"
        let expected = ParityRun(
            log: .endFailed(.conditionEnded, attempts: 0, elapsed: .seconds(5), error: ended),
            waits: [])
        await expectPolicyParity(scenario, expected: expected)
    }

    @Test("Gated: false, then true again, during a wait: the trial is abandoned and the next one starts at once")
    func flickerDuringAWait() async {
        let scenario = PolicyParityScenario(
            maxAttempts: 2, condition: .some(true), steps: [.fail, .fail, .succeed],
            script: [.halfWait, .set(false), .set(true), .toEnd])
        let a2 = attempt(2, of: 2, at: .seconds(1))
        let expected = ParityRun(
            log: .failedAndRetried([.seconds(1)], of: 2)
                + .failedAndRetried([.seconds(1)], of: 2, firstError: 2) + [.started(a2), .succeeded(a2, value: "v3")]
                + .endSucceeded("v3", attempts: 3, elapsed: .milliseconds(1_500)),
            waits: [.seconds(1), .seconds(1)])
        await expectPolicyParity(scenario, expected: expected)
    }

    @Test("Gated: the total timeout restarts with each trial; the run ends with the trial's deadline")
    func totalTimeoutPerTrial() async {
        let scenario = PolicyParityScenario(
            maxAttempts: 5, condition: .some(true), totalTimeout: .seconds(4), steps: [],
            script: [.wait, .halfWait, .set(false), .idle(.seconds(30)), .set(true), .toEnd])
        let a3 = attempt(3, of: 5, at: .seconds(3))
        let deadline = "RetryError(retry deadline exceeded after 3 attempts in 3.0 seconds; last error: TestError(5))"
        let expected = ParityRun(
            log: .failedAndRetried([.seconds(1), .seconds(2)], of: 5)
                // abandoned halfway through that wait; 30 s later, a trial with its own 4 s
                + .failedAndRetried([.seconds(1), .seconds(2)], of: 5, firstError: 3)
                + [.started(a3), .failed(a3, error: "TestError(5)", next: .giveUp(.deadlineExceeded))]
                + .endFailed(.deadlineExceeded, attempts: 5, elapsed: .seconds(35), error: deadline),
            waits: [.seconds(1), .seconds(2), .seconds(1), .seconds(2)])
        await expectPolicyParity(scenario, expected: expected)
    }

    @Test("Gated: an attempt timeout, then the condition closes during the next attempt")
    func attemptTimeoutThenClosedDuringAnAttempt() async {
        let scenario = PolicyParityScenario(
            maxAttempts: 5, condition: .some(true), attemptTimeout: .seconds(3), steps: [.hang, .hang, .succeed],
            script: [.wait, .wait, .hang, .set(false), .idle(.seconds(10)), .set(true), .toEnd])
        let a1 = attempt(1, of: 5, at: .zero)
        let a2 = attempt(2, of: 5, at: .seconds(4))
        let expected = ParityRun(
            log: .timedOutAndRetried(after: .seconds(3), of: 5, retryAfter: .seconds(1)) + [
                .started(a2), .failed(a2, error: "CancellationError()", next: .giveUp(.cancelled)),
                .started(a1), .succeeded(a1, value: "v3"),
            ] + .endSucceeded("v3", attempts: 3, elapsed: .seconds(14)),
            waits: [.seconds(3), .seconds(1)])
        await expectPolicyParity(scenario, expected: expected)
    }

    @Test("Gated: one shared budget pays for the retries of every trial, and refusing ends the run")
    func budgetAcrossTrials() async {
        let scenario = PolicyParityScenario(
            maxAttempts: 5, condition: .some(true),
            budget: ParityBudget(capacity: 15, retryCost: 5, timeoutRetryCost: 10), steps: [],
            script: [.halfWait, .set(false), .idle(.seconds(1)), .set(true), .toEnd])
        let a3 = attempt(3, of: 5, at: .seconds(3))
        let refused = "RetryError(retry budget exhausted after 3 attempts in 3.0 seconds; last error: TestError(4))"
        let expected = ParityRun(
            log: .failedAndRetried([.seconds(1)], of: 5)
                + .failedAndRetried([.seconds(1), .seconds(2)], of: 5, firstError: 2)
                + [.started(a3), .failed(a3, error: "TestError(4)", next: .giveUp(.budgetExhausted))]
                + .endFailed(.budgetExhausted, attempts: 4, elapsed: .milliseconds(4_500), error: refused),
            waits: [.seconds(1), .seconds(1), .seconds(2)], tokens: 0)
        await expectPolicyParity(scenario, expected: expected)
    }

    /// The machine decides for every style: once the condition has closed during an attempt, the attempt is
    /// interrupted and its result, if it still comes, is stale and ignored (a value from a callback attempt's cancel
    /// hook, or returned by an async operation that ignores its task's cancellation); the run waits for the condition.
    @Test("Gated: an attempt that delivers a value after the condition closed: ignored in every style")
    func lateValueAfterTheConditionClosed() async {
        let scenario = PolicyParityScenario(
            maxAttempts: 5, condition: .some(true), steps: [.fail, .hangThenLateValue],
            script: [.wait, .hang, .set(false), .finish])
        let a2 = attempt(2, of: 5, at: .seconds(1))
        let ended = "RetryError(retry condition ended while false after 2 attempts; last error: TestError(1))"
        let expected = ParityRun(
            log: .failedAndRetried([.seconds(1)], of: 5) + [
                .started(a2), .failed(a2, error: "CancellationError()", next: .giveUp(.cancelled)),
            ] + .endFailed(.conditionEnded, attempts: 2, elapsed: .seconds(1), error: ended),
            waits: [.seconds(1)])
        await expectPolicyParity(scenario, expected: expected)
    }

    // MARK: - Repeating

    @Test("Repeating: the same values, attempts and pauses over four rounds with failures in between")
    func repeating() async {
        let scenario = PolicyParityScenario(
            maxAttempts: 3, condition: nil, repeatDelay: .seconds(10),
            steps: [.fail, .succeed, .succeed, .fail, .fail, .succeed], script: [.toEnd])
        let a1 = attempt(1, of: 3, at: .zero)
        let a2 = attempt(2, of: 3, at: .seconds(1))
        let a3 = attempt(3, of: 3, at: .seconds(3))
        let expected = ParityRun(
            log: .failedAndRetried([.seconds(1)], of: 3)
                + .delivering("v2", at: a2) + .delivering("v3", at: a1)
                + .failedAndRetried([.seconds(1), .seconds(2)], of: 3, firstError: 4)
                + .delivering("v6", at: a3)
                + .failedAndRetried([.seconds(1), .seconds(2)], of: 3, firstError: 7)
                + [.started(a3), .failed(a3, error: "TestError(9)", next: .giveUp(.exhausted))]
                + .endFailed(.exhausted, attempts: 9, elapsed: .seconds(37), error: "TestError(9)"),
            waits: [
                .seconds(1), .seconds(10), .seconds(10), .seconds(1), .seconds(2), .seconds(10), .seconds(1),
                .seconds(2),
            ])
        await expectPolicyParity(scenario, expected: expected)
    }

    @Test("Repeating and gated: the pause ignores the condition; the next trial waits for it")
    func repeatingAndGated() async {
        let scenario = PolicyParityScenario(
            maxAttempts: 2, condition: .some(true), repeatDelay: .seconds(10),
            steps: [.succeed, .fail, .succeed],
            script: [.halfWait, .set(false), .restOfWait, .idle(.seconds(20)), .set(true), .toEnd])
        let a1 = attempt(1, of: 2, at: .zero)
        let a2 = attempt(2, of: 2, at: .seconds(1))
        let expected = ParityRun(
            log: .delivering("v1", at: a1)
                + .failedAndRetried([.seconds(1)], of: 2, firstError: 2) + .delivering("v3", at: a2)
                + .failedAndRetried([.seconds(1)], of: 2, firstError: 4)
                + [.started(a2), .failed(a2, error: "TestError(5)", next: .giveUp(.exhausted))]
                + .endFailed(.exhausted, attempts: 5, elapsed: .seconds(42), error: "TestError(5)"),
            waits: [.seconds(10), .seconds(5), .seconds(1), .seconds(10), .seconds(1)])
        await expectPolicyParity(scenario, expected: expected)
    }

    @Test("Repeating and gated: closed during an attempt, then ended: conditionEnded after the values so far")
    func repeatingEndsWhileClosed() async {
        let scenario = PolicyParityScenario(
            maxAttempts: 3, condition: .some(true), repeatDelay: .seconds(10), steps: [.succeed, .hang],
            script: [.wait, .hang, .set(false), .finish])
        let a1 = attempt(1, of: 3, at: .zero)
        let ended = "RetryError(retry condition ended while false after 2 attempts)"
        let expected = ParityRun(
            log: .delivering("v1", at: a1)
                + [.started(a1), .failed(a1, error: "CancellationError()", next: .giveUp(.cancelled))]
                + .endFailed(.conditionEnded, attempts: 2, elapsed: .seconds(10), error: ended),
            waits: [.seconds(10)])
        await expectPolicyParity(scenario, expected: expected)
    }

    @Test("Repeating with a pause of .seconds(Int64.max): clamped to the saturation limit alike in every style")
    func repeatingWithAHugePause() async {
        let limit = BackoffStrategy<ContinuousClock>.saturationLimit
        let scenario = PolicyParityScenario(
            maxAttempts: 2, condition: nil, repeatDelay: .seconds(Int64.max), steps: [.succeed, .fail, .fail],
            script: [.toEnd])
        let a2 = attempt(2, of: 2, at: .seconds(1))
        let expected = ParityRun(
            log: .delivering("v1", at: attempt(1, of: 2, at: .zero))
                + .failedAndRetried([.seconds(1)], of: 2, firstError: 2)
                + [.started(a2), .failed(a2, error: "TestError(3)", next: .giveUp(.exhausted))]
                + .endFailed(.exhausted, attempts: 3, elapsed: limit + .seconds(1), error: "TestError(3)"),
            waits: [limit, .seconds(1)])
        await expectPolicyParity(scenario, expected: expected)
    }

    @Test("Repeating and gated: closed at first, no attempt until it opens; the next trial waits after the pause")
    func repeatingClosedAtFirst() async {
        let scenario = PolicyParityScenario(
            maxAttempts: 2, condition: .some(false), repeatDelay: .seconds(10), steps: [.succeed],
            script: [.idle(.seconds(5)), .set(true), .halfWait, .set(false), .restOfWait, .idle(.seconds(1)), .finish])
        let a1 = attempt(1, of: 2, at: .zero)
        let ended = "RetryError(retry condition ended while false after 1 attempt)"
        let expected = ParityRun(
            log: .delivering("v1", at: a1)
                + .endFailed(.conditionEnded, attempts: 1, elapsed: .seconds(16), error: ended),
            waits: [.seconds(10), .seconds(5)])
        await expectPolicyParity(scenario, expected: expected)
    }

    @Test("Repeating: an operation's CancellationError ends the repetition at once, without asking the strategy")
    func repeatingEndsOnTheOperationsCancellation() async {
        let scenario = PolicyParityScenario(
            maxAttempts: 3, condition: nil, repeatDelay: .seconds(10), steps: [.succeed, .fail, .throwCancellation],
            script: [.toEnd])
        let a2 = attempt(2, of: 3, at: .seconds(1))
        let expected = ParityRun(
            log: .delivering("v1", at: attempt(1, of: 3, at: .zero))
                + .failedAndRetried([.seconds(1)], of: 3, firstError: 2)
                + [.started(a2), .failed(a2, error: "CancellationError()", next: .giveUp(.cancelled))]
                + .endFailed(.cancelled, attempts: 3, elapsed: .seconds(11), error: "CancellationError()"),
            waits: [.seconds(10), .seconds(1)])
        await expectPolicyParity(scenario, expected: expected)
    }

    /// Inherent to the styles: cancelling a callback repetition calls its completion with `CancellationError`; a
    /// cancelled `values` sequence ends (returns `nil`), as an `AsyncSequence` does. Both emit the same `finished`.
    @Test("Repeating: cancelled during a pause: the same events; the callback completes with CancellationError")
    func repeatingCancelledDuringAPause() async {
        let scenario = PolicyParityScenario(
            maxAttempts: 3, condition: nil, repeatDelay: .seconds(10), steps: [.succeed, .fail, .succeed],
            script: [.wait, .wait, .halfWait, .cancel])
        let a1 = attempt(1, of: 3, at: .zero)
        let a2 = attempt(2, of: 3, at: .seconds(1))
        let events: [ParityEntry] =
            .delivering("v1", at: a1) + .failedAndRetried([.seconds(1)], of: 3, firstError: 2)
            + .delivering("v3", at: a2)
            + [
                .finished(
                    RetrySummary(reason: .cancelled, attempts: 3, elapsed: .seconds(16)), error: "CancellationError()")
            ]
        let waits: [Duration] = [.seconds(10), .seconds(1), .seconds(10)]
        await expectPolicyParity(
            scenario, expected: ParityRun(log: events + [.result("error CancellationError()")], waits: waits),
            inherent: [.async: ParityRun(log: events + [.result("end of the values")], waits: waits)])
    }
}

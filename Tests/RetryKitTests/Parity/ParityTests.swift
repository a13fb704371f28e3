import RetryKit
import RetryKitTesting
import Testing

/// The promise of `Migration.md`: for one configuration and a seeded generator, the completion-handler runner, the
/// bridges and the async API carry out the same attempts, wait the same delays and emit the same events.
///
/// Each test runs one scenario through every style (``ParityStyle``) on virtual time, each run with a fresh strategy
/// whose generator has the same seed, and compares the normalized logs: every event with its attempt (number,
/// attempts allowed, retries left, elapsed time), error and next step, then the caller's result; plus the timers the
/// retrier waited for. The first style's log must also match the log the test builds from the core's delays
/// (`BackoffStrategy.delay(forRetry:previous:)` of an identically seeded strategy).
@Suite("Parity of all retry styles", .timeLimit(.minutes(1)))
struct ParityTests {
    @Test("The core's seeded full-jitter delays are what the scenarios expect: jittered, distinct, reproducible")
    func seededDelays() {
        let scenario = ParityScenario(maxAttempts: 4, steps: [])
        let delays = scenario.coreDelays(3)
        #expect(delays == scenario.coreDelays(3), "a fresh generator with the same seed repeats the delays")
        #expect(Set(delays).count == 3)
        for (retry, delay) in delays.enumerated() {
            #expect(delay > .zero)
            #expect(delay < .seconds(1) * (1 << retry), "full jitter stays below a·2^x")
        }
    }

    @Test("Success after two failures, with seeded full-jitter exponential backoff")
    func successAfterTwoFailures() async {
        let scenario = ParityScenario(maxAttempts: 4, steps: [.fail, .fail, .succeed])
        let d = scenario.coreDelays(2)
        let a3 = attempt(3, of: 4, at: d[0] + d[1])
        let expected = ParityRun(
            log: .failedAndRetried(d, of: 4) + .succeeding(a3),
            waits: d)
        await expectParity(scenario, expected: expected, styles: ParityStyle.allCases)
    }

    @Test("Exhaustion: the last attempt's own error, no strategy call after it")
    func exhaustion() async {
        let scenario = ParityScenario(maxAttempts: 3, steps: [.fail, .fail, .fail])
        let d = scenario.coreDelays(2)
        let a3 = attempt(3, of: 3, at: d[0] + d[1])
        let expected = ParityRun(
            log: .failedAndRetried(d, of: 3) + [
                .started(a3), .failed(a3, error: "TestError(3)", next: .giveUp(.exhausted)),
            ] + .endFailed(.exhausted, attempts: 3, elapsed: d[0] + d[1], error: "TestError(3)"),
            waits: d)
        await expectParity(scenario, expected: expected, styles: ParityStyle.allCases)
    }

    @Test("`.stop`: the stopped attempt's own error, attempts left unused")
    func stop() async {
        let scenario = ParityScenario(maxAttempts: 5, steps: [.fail, .fail, .succeed], stopOn: 2)
        let d = scenario.coreDelays(1)
        let a2 = attempt(2, of: 5, at: d[0])
        let expected = ParityRun(
            log: .failedAndRetried(d, of: 5) + [
                .started(a2), .failed(a2, error: "TestError(2)", next: .giveUp(.stopped)),
            ] + .endFailed(.stopped, attempts: 2, elapsed: d[0], error: "TestError(2)"),
            waits: d)
        await expectParity(scenario, expected: expected, styles: ParityStyle.allCases)
    }

    @Test("A total deadline that the next wait would cross: give up at once, keeping the last error")
    func deadlineBeforeAWait() async {
        var scenario = ParityScenario(maxAttempts: 10, steps: [])
        let d = scenario.coreDelays(3)
        scenario.totalTimeout = d[0] + d[1] + d[2] / 2  // the third wait would end after it
        let a3 = attempt(3, of: 10, at: d[0] + d[1])
        let deadline =
            "RetryError(retry deadline exceeded after 3 attempts in \(d[0] + d[1]); last error: TestError(3))"
        let expected = ParityRun(
            log: .failedAndRetried([d[0], d[1]], of: 10) + [
                .started(a3), .failed(a3, error: "TestError(3)", next: .giveUp(.deadlineExceeded)),
            ] + .endFailed(.deadlineExceeded, attempts: 3, elapsed: d[0] + d[1], error: deadline),
            waits: [d[0], d[1]])
        await expectParity(scenario, expected: expected, styles: ParityStyle.timed)
    }

    @Test("A total deadline that expires during a hanging attempt: its timer ends the attempt and the retrier")
    func deadlineDuringAnAttempt() async {
        var scenario = ParityScenario(maxAttempts: 5, steps: [.fail, .hang])
        let d = scenario.coreDelays(1)
        scenario.totalTimeout = d[0] + .seconds(3)
        let a2 = attempt(2, of: 5, at: d[0])
        let deadline =
            "RetryError(retry deadline exceeded after 2 attempts in \(d[0] + .seconds(3)); last error: TestError(1))"
        let expected = ParityRun(
            log: .failedAndRetried(d, of: 5) + [
                .started(a2),
                .failed(
                    a2, error: "RetryError(attempt timed out after 2 attempts in \(d[0] + .seconds(3)))",
                    next: .giveUp(.deadlineExceeded)),
            ] + .endFailed(.deadlineExceeded, attempts: 2, elapsed: d[0] + .seconds(3), error: deadline),
            waits: [d[0], .seconds(3)])
        await expectParity(scenario, expected: expected, styles: ParityStyle.timed)
    }

    @Test("A cancel halfway through the second wait: CancellationError, no further attempt, no result for the wait")
    func cancelDuringAWait() async {
        let scenario = ParityScenario(maxAttempts: 5, steps: [], cancel: .duringWait(2))
        let d = scenario.coreDelays(2)
        let expected = ParityRun(
            log: .failedAndRetried(d, of: 5)
                + .endFailed(.cancelled, attempts: 2, elapsed: d[0] + d[1] / 2, error: "CancellationError()"),
            waits: d)
        await expectParity(scenario, expected: expected, styles: ParityStyle.allCases)
    }

    @Test("A per-attempt timeout: attemptTimedOut goes to the strategy, which backs off; the next attempt succeeds")
    func attemptTimeout() async {
        let scenario = ParityScenario(maxAttempts: 3, attemptTimeout: .seconds(2), steps: [.hang, .succeed])
        let d = scenario.coreDelays(1)
        let a2 = attempt(2, of: 3, at: .seconds(2) + d[0])
        let expected = ParityRun(
            log: .timedOutAndRetried(after: .seconds(2), of: 3, retryAfter: d[0]) + .succeeding(a2),
            waits: [.seconds(2), d[0]])
        await expectParity(scenario, expected: expected, styles: ParityStyle.timed)
    }
    @Test("A cancel while the second attempt hangs: CancellationError at once, no result for that attempt")
    func cancelDuringAnAttempt() async {
        let scenario = ParityScenario(maxAttempts: 5, steps: [.fail, .hang], cancel: .duringAttempt(2))
        let d = scenario.coreDelays(1)
        let a2 = attempt(2, of: 5, at: d[0])
        let expected = ParityRun(
            log: .failedAndRetried(d, of: 5) + [
                .started(a2)
            ] + .endFailed(.cancelled, attempts: 2, elapsed: d[0], error: "CancellationError()"),
            waits: [d[0]])
        await expectParity(scenario, expected: expected, styles: ParityStyle.allCases)
    }

    @Test("An operation's own CancellationError on the first attempt is final: no retry, the strategy is not asked")
    func operationCancellationOnTheFirstAttempt() async {
        var scenario = ParityScenario(maxAttempts: 5, steps: [.throwCancellation, .succeed])
        scenario.strategyCalls = ParityStrategyCalls()
        let a1 = attempt(1, of: 5, at: .zero)
        let expected = ParityRun(
            log: [.started(a1), .failed(a1, error: "CancellationError()", next: .giveUp(.cancelled))]
                + .endFailed(.cancelled, attempts: 1, elapsed: .zero, error: "CancellationError()"),
            waits: [])
        await expectParity(scenario, expected: expected, styles: ParityStyle.allCases)
        #expect(scenario.strategyCalls?.value == 0, "no style asks the strategy")
    }

    @Test("An operation's CancellationError after a retry ends the retrier there, with attempts and a budget left")
    func operationCancellationAfterARetry() async {
        var scenario = ParityScenario(maxAttempts: 5, steps: [.fail, .throwCancellation, .succeed])
        scenario.strategyCalls = ParityStrategyCalls()
        scenario.budget = ParityBudget(capacity: 10, retryCost: 1, timeoutRetryCost: 1)
        let d = scenario.coreDelays(1)
        let a2 = attempt(2, of: 5, at: d[0])
        let expected = ParityRun(
            log: .failedAndRetried(d, of: 5) + [
                .started(a2), .failed(a2, error: "CancellationError()", next: .giveUp(.cancelled)),
            ] + .endFailed(.cancelled, attempts: 2, elapsed: d[0], error: "CancellationError()"),
            waits: d, tokens: 9)
        await expectParity(scenario, expected: expected, styles: ParityStyle.allCases)
        // Once per style, for the first failure only.
        #expect(scenario.strategyCalls?.value == ParityStyle.allCases.count)
    }

    @Test("A cancel before the first attempt: no attempt runs")
    func cancelBeforeTheFirstAttempt() async {
        let scenario = ParityScenario(maxAttempts: 3, steps: [.succeed], cancel: .beforeStart)
        let expected = ParityRun(
            log: .endFailed(.cancelled, attempts: 0, elapsed: .zero, error: "CancellationError()"),
            waits: [])
        await expectParity(scenario, expected: expected, styles: ParityStyle.allCases)
    }

    @Test("An invalid configuration: RetryError, no attempt")
    func invalidConfiguration() async {
        await expectInvalidConfiguration(
            ParityScenario(maxAttempts: 0, steps: [.succeed]), problem: "maxAttempts must be at least 1 (got 0)",
            styles: ParityStyle.allCases)
    }

    @Test("An attempt that completes twice: the duplicate is reported before the next attempt starts")
    func duplicateCompletionBeforeAWait() async {
        let scenario = ParityScenario(maxAttempts: 3, steps: [.failTwice, .succeedTwice])
        let d = scenario.coreDelays(1)
        let a1 = attempt(1, of: 3, at: .zero)
        let a2 = attempt(2, of: 3, at: d[0])
        let expected = ParityRun(
            log: [
                .started(a1), .failed(a1, error: "TestError(1)", next: .retry(after: d[0])), .duplicate(a1),
                .started(a2), .succeeded(a2, value: "v2"), .duplicate(a2),
            ] + .endSucceeded("v2", attempts: 2, elapsed: d[0]),
            waits: [d[0]])
        await expectParity(scenario, expected: expected, styles: ParityStyle.completionHandler)
    }

    @Test("Attempts that complete twice with immediate retries: each duplicate comes before the next event")
    func duplicateCompletionWithImmediateRetries() async {
        var scenario = ParityScenario(maxAttempts: 3, steps: [.failTwice, .failTwice, .succeedTwice])
        scenario.immediateRetries = true
        let a1 = attempt(1, of: 3, at: .zero)
        let a2 = attempt(2, of: 3, at: .zero)
        let a3 = attempt(3, of: 3, at: .zero)
        let expected = ParityRun(
            log: [
                .started(a1), .failed(a1, error: "TestError(1)", next: .retry(after: .zero)), .duplicate(a1),
                .started(a2), .failed(a2, error: "TestError(2)", next: .retry(after: .zero)), .duplicate(a2),
                .started(a3), .succeeded(a3, value: "v3"), .duplicate(a3),
            ] + .endSucceeded("v3", attempts: 3, elapsed: .zero),
            waits: [])
        await expectParity(scenario, expected: expected, styles: ParityStyle.completionHandler)
    }
}

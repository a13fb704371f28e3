import RetryKit
import RetryKitTesting
import Testing

// MARK: - Helpers

extension RetryStateMachine {
    /// Feeds the machine one input (`body`) and returns how it ended if that input finished it.
    mutating func finishing(_ body: (inout RetryStateMachine) -> Action) -> RetryTermination? {
        body(&self).isFinish ? termination : nil
    }
}

extension RetryStateMachine.Action {
    var runAttempt: (attempt: RetryAttempt, timeout: Duration?)? {
        if case .run(let attempt, let timeout) = self { return (attempt, timeout) }
        return nil
    }

    var consultation: (context: RetryDecisionContext, error: any Error)? {
        if case .consultStrategy(let context, let error) = self { return (context, error) }
        return nil
    }

    var retryDelay: Duration? {
        if case .retry(let delay, _, _) = self { return delay }
        return nil
    }

    var isFinish: Bool {
        if case .finish = self { return true }
        return false
    }

    var isNone: Bool {
        if case .none = self { return true }
        return false
    }
}

/// A readable, comparable form of an event.
func describe(_ event: RetryEvent<Int>) -> String {
    func text(_ error: (any Error)?) -> String {
        guard let error else { return "nil" }
        if let retry = error as? RetryError { return "RetryError(\(retry.reason), last: \(text(retry.lastError)))" }
        return "\(error)"
    }
    switch event {
    case .attemptStarted(let attempt):
        return "started \(attempt.number)"
    case .attemptFailed(let attempt, let error, .retry(let delay)):
        return "failed \(attempt.number) \(text(error)) retry after \(delay)"
    case .attemptFailed(let attempt, let error, .giveUp(let reason)):
        return "failed \(attempt.number) \(text(error)) give up \(reason)"
    case .attemptFailed(let attempt, let error, .recover):
        return "failed \(attempt.number) \(text(error)) recover"
    case .attemptSucceeded(let attempt, let value):
        return "succeeded \(attempt.number) \(value)"
    case .finished(let summary, let error):
        return "finished \(summary.reason) after \(summary.attempts) at \(summary.elapsed) \(text(error))"
    case .duplicateCompletion(let attempt):
        return "duplicate \(attempt.number)"
    }
}

private func isRetryError(_ error: (any Error)?, _ reason: RetryError.Reason) -> Bool {
    (error as? RetryError)?.reason == reason
}

private func isInvalidConfiguration(_ error: (any Error)?) -> Bool {
    guard case .invalidConfiguration(let message)? = (error as? RetryError)?.reason else { return false }
    return !message.isEmpty
}

/// Everything a virtual-time run of the state machine did.
struct VirtualRun {
    var started: [RetryAttempt] = []
    var timeouts: [Duration?] = []
    var contexts: [RetryDecisionContext] = []
    var delays: [Duration] = []
    var value: Int?
    var termination: RetryTermination?
    var end: Duration = .zero
    /// The withdrawals the machine asked for, each with whether it followed a timeout.
    var withdrawals: [Bool] = []

    var events: [String] { termination?.events(value: value).map(describe) ?? [] }
}

/// A runner on virtual time: carries out the machine's actions until it finishes. Each attempt takes
/// `attemptTakes`; waits advance the time by exactly the chosen delay. No Dispatch, no clock, no sleeping.
func drive(
    _ configuration: RetryConfiguration,
    attemptTakes: Duration = .milliseconds(10),
    outcome: (RetryAttempt) -> Result<Int, TestError>,
    strategy: (any Error, RetryDecisionContext) -> RetryStrategy<ContinuousClock>
) -> VirtualRun {
    var machine = RetryStateMachine(configuration)
    var run = VirtualRun()
    var now = Duration.zero
    var action = machine.start(at: now)
    for _ in 0..<1_000 {
        switch action {
        case .run(let attempt, let timeout):
            run.started.append(attempt)
            run.timeouts.append(timeout)
            #expect(machine.currentAttempt == attempt.number)
            now += attemptTakes
            switch outcome(attempt) {
            case .success(let value):
                run.value = value
                action = machine.attemptSucceeded(attempt.number, at: now)
                if action.isFinish, let refund = machine.budgetRefund { refund.budget.deposit(refund.tokens) }
            case .failure(let error):
                action = machine.attemptFailed(attempt.number, error: error, at: now)
            }
        case .consultStrategy(let context, let error):
            run.contexts.append(context)
            action = machine.decide(context.resolve(strategy(error, context)), at: now)
        case .withdraw(let budget, let afterTimeout):
            run.withdrawals.append(afterTimeout)
            action = machine.budgetAnswered(budget.withdraw(afterTimeout: afterTimeout), at: now)
        case .retry(let delay, _, _):
            run.delays.append(delay)
            now += delay
            action = machine.waitElapsed(at: now)
        case .finish:
            #expect(machine.isFinished)
            run.termination = machine.termination
            run.end = now
            return run
        case .none:
            Issue.record("the machine answered .none to an event that fits its state")
            return run
        case .awaitCondition, .interrupt, .repeatAfter, .recover, .acquire:
            Issue.record("not an action of a plain retrier: \(action)")
            return run
        }
    }
    Issue.record("the machine did not finish within 1,000 steps")
    return run
}

private let oneSecond: RetryStrategy<ContinuousClock> = .backoff(.constant(.seconds(1)))

// MARK: - Whole sequences

@Suite("Core: retry state machine sequences")
struct RetryStateMachineSequenceTests {
    @Test("success on attempt k runs k attempts, waits k − 1 times, and finishes succeeded", arguments: 1...4)
    func successOnAttempt(_ k: Int) throws {
        let run = drive(RetryConfiguration(maxAttempts: 4)) { attempt in
            attempt.number < k ? .failure(TestError(attempt.number)) : .success(100 + attempt.number)
        } strategy: { _, _ in
            oneSecond
        }

        #expect(run.started.map(\.number) == Array(1...k))
        #expect(run.started.map(\.maxAttempts) == Array(repeating: 4, count: k))
        #expect(run.started.map(\.retriesLeft) == (1...k).map { 4 - $0 })
        // Attempt n starts after n − 1 attempts of 10 ms and n − 1 waits of 1 s.
        #expect(run.started.map(\.elapsed) == (0..<k).map { .milliseconds(1010 * $0) })
        #expect(run.timeouts.allSatisfy { $0 == nil })
        #expect(run.contexts.count == k - 1)
        #expect(run.delays == Array(repeating: .seconds(1), count: k - 1))

        let termination = run.termination
        let elapsed = Duration.milliseconds(1010 * (k - 1) + 10)
        #expect(termination?.summary == RetrySummary(reason: .succeeded, attempts: k, elapsed: elapsed))
        #expect(termination?.error == nil)
        #expect(termination?.failedAttempt == nil)
        #expect(termination?.succeededAttempt == run.started.last)
        #expect(run.events == ["succeeded \(k) \(100 + k)", "finished succeeded after \(k) at \(elapsed) nil"])
        #expect(try termination?.result(value: run.value).get() == 100 + k)
    }

    @Test("exhaustion finishes with the last attempt's own error, without consulting the strategy after it")
    func exhaustion() {
        let run = drive(RetryConfiguration(maxAttempts: 3)) { attempt in
            .failure(TestError(attempt.number))
        } strategy: { _, _ in
            oneSecond
        }

        #expect(run.started.map(\.number) == [1, 2, 3])
        #expect(run.contexts.map(\.retryIndex) == [0, 1])  // asked after attempts 1 and 2 only
        let termination = run.termination
        #expect(termination?.summary.reason == .exhausted)
        #expect(termination?.summary.attempts == 3)
        #expect(termination?.error as? TestError == TestError(3))
        #expect(termination?.failedAttempt?.attempt == run.started.last)
        #expect(termination?.failedAttempt?.error as? TestError == TestError(3))
        #expect(termination?.succeededAttempt == nil)
        #expect(
            run.events == [
                "failed 3 TestError(3) give up exhausted", "finished exhausted after 3 at \(run.end) TestError(3)",
            ])
        #expect(throws: TestError(3)) { try termination?.result(value: nil).get() }
    }

    @Test("a single attempt never consults the strategy")
    func singleAttempt() {
        var consulted = false
        let run = drive(RetryConfiguration(maxAttempts: 1)) { _ in
            .failure(TestError(1))
        } strategy: { _, _ in
            consulted = true
            return oneSecond
        }
        #expect(!consulted)
        #expect(run.termination?.summary.reason == .exhausted)
        #expect(run.termination?.error as? TestError == TestError(1))
    }

    @Test(".stop finishes with the error of the attempt that was just asked about")
    func stop() {
        let run = drive(RetryConfiguration(maxAttempts: 5)) { attempt in
            .failure(TestError(attempt.number))
        } strategy: { error, _ in
            (error as? TestError)?.id == 2 ? .stop : oneSecond
        }
        #expect(run.started.map(\.number) == [1, 2])
        #expect(run.contexts.count == 2)
        #expect(run.termination?.summary.reason == .stopped)
        #expect(run.termination?.summary.attempts == 2)
        #expect(run.termination?.error as? TestError == TestError(2))
        #expect(
            run.events == [
                "failed 2 TestError(2) give up stopped", "finished stopped after 2 at \(run.end) TestError(2)",
            ])
        #expect(throws: TestError(2)) { try run.termination?.result(value: nil).get() }
    }

    @Test("the context carries the retry index 0, 1, 2 … and the last delay a backoff computed (a hint is not one)")
    func contextIndexAndPreviousDelay() {
        let chosen: [RetryStrategy<ContinuousClock>] = [
            .backoff(.constant(.seconds(1))), .retryAfter(.seconds(5)), .backoff(.linear(a: .seconds(1), b: .zero)),
            .backoff(.none),
        ]
        let run = drive(RetryConfiguration(maxAttempts: 5)) { attempt in
            .failure(TestError(attempt.number))
        } strategy: { _, context in
            chosen[context.retryIndex]
        }

        #expect(run.contexts.map(\.retryIndex) == [0, 1, 2, 3])
        #expect(run.contexts.map(\.previousDelay) == [nil, .seconds(1), .seconds(1), .seconds(2)])
        #expect(run.delays == [.seconds(1), .seconds(5), .seconds(2), .zero])
    }

    @Test("decorrelated jitter driven by the machine sees its own previous delays")
    func decorrelatedThroughMachine() {
        let backoff: BackoffStrategy<ContinuousClock> = .decorrelatedJitter(
            base: .milliseconds(100), cap: .seconds(10), using: SeededRandomNumberGenerator(seed: 12))
        let run = drive(RetryConfiguration(maxAttempts: 30)) { attempt in
            .failure(TestError(attempt.number))
        } strategy: { _, _ in
            .backoff(backoff)
        }

        #expect(run.delays.count == 29)
        #expect(run.contexts.dropFirst().map(\.previousDelay) == run.delays.dropLast().map { $0 })
        for (index, delay) in run.delays.enumerated() {
            let previous = index == 0 ? Duration.milliseconds(100) : run.delays[index - 1]
            #expect(delay >= .milliseconds(100) && delay <= Swift.min(.seconds(10), previous * 3))
        }
    }
}

// MARK: - Deadline and attempt timeout

@Suite("Core: retry state machine deadlines and timeouts")
struct RetryStateMachineDeadlineTests {
    @Test("each attempt's timeout is min(attemptTimeout, deadline − now)")
    func attemptTimeoutIsBoundedByDeadline() {
        var machine = RetryStateMachine(
            RetryConfiguration(maxAttempts: 5, totalTimeout: .seconds(10), attemptTimeout: .seconds(3)))
        #expect(machine.start(at: .zero).runAttempt?.timeout == .seconds(3))
        _ = machine.attemptFailed(1, error: TestError(1), at: .seconds(1))
        #expect(machine.decide(.retry(after: .seconds(7)), at: .seconds(1)).retryDelay == .seconds(7))
        let second = machine.waitElapsed(at: .milliseconds(8500)).runAttempt
        #expect(second?.attempt.number == 2)
        #expect(second?.timeout == .milliseconds(1500))

        var deadlineOnly = RetryStateMachine(RetryConfiguration(maxAttempts: 5, totalTimeout: .seconds(10)))
        #expect(deadlineOnly.start(at: .milliseconds(250)).runAttempt?.timeout == .milliseconds(9750))
    }

    @Test(
        "a delay that would end at or after the deadline gives up at once with deadlineExceeded",
        arguments: [
            Duration.milliseconds(900), .seconds(5), .seconds(1_000_000_000),
        ])
    func delayPastDeadline(_ delay: Duration) {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 5, totalTimeout: .seconds(1)))
        _ = machine.start(at: .zero)
        _ = machine.attemptFailed(1, error: TestError(1), at: .milliseconds(100))
        let termination = machine.finishing { $0.decide(.retry(after: delay), at: .milliseconds(100)) }
        #expect(
            termination?.summary == RetrySummary(reason: .deadlineExceeded, attempts: 1, elapsed: .milliseconds(100)))
        let error = termination?.error as? RetryError
        #expect(error?.reason == .deadlineExceeded)
        #expect(error?.lastError as? TestError == TestError(1))
        #expect(error?.attempts == 1)
        #expect(termination?.failedAttempt?.error as? TestError == TestError(1))
        #expect(
            termination?.events(value: nil).map(describe) == [
                "failed 1 TestError(1) give up deadlineExceeded",
                "finished deadlineExceeded after 1 at 0.1 seconds RetryError(deadlineExceeded, last: TestError(1))",
            ])
        #expect(machine.isFinished)
        #expect(machine.waitElapsed(at: .seconds(1)).isNone)
    }

    @Test("a retry-after hint past the deadline gives up at once too")
    func retryAfterPastDeadline() {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 5, totalTimeout: .seconds(30)))
        _ = machine.start(at: .zero)
        let consultation = machine.attemptFailed(1, error: TestError(1), at: .seconds(1)).consultation
        let decision = consultation?.context.resolve(RetryStrategy<ContinuousClock>.retryAfter(.seconds(120)))
        #expect(decision == .retryAfterHint(.seconds(120)))
        let termination = decision.flatMap { decision in machine.finishing { $0.decide(decision, at: .seconds(1)) } }
        #expect(termination?.summary.reason == .deadlineExceeded)
    }

    @Test("a delay that ends just before the deadline still retries")
    func delayJustBeforeDeadline() {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 5, totalTimeout: .seconds(1)))
        _ = machine.start(at: .zero)
        _ = machine.attemptFailed(1, error: TestError(1), at: .milliseconds(100))
        #expect(
            machine.decide(.retry(after: .milliseconds(899)), at: .milliseconds(100)).retryDelay == .milliseconds(899))
        #expect(machine.waitElapsed(at: .milliseconds(999)).runAttempt?.timeout == .milliseconds(1))
    }

    @Test(
        "a wait that ends at or past the deadline finishes at waitElapsed",
        arguments: [
            Duration.seconds(1), .milliseconds(1200),
        ])
    func waitEndsPastDeadline(_ wokeAt: Duration) {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 5, totalTimeout: .seconds(1)))
        _ = machine.start(at: .zero)
        _ = machine.attemptFailed(1, error: TestError(1), at: .milliseconds(100))
        _ = machine.decide(.retry(after: .milliseconds(500)), at: .milliseconds(100))
        let termination = machine.finishing { $0.waitElapsed(at: wokeAt) }
        #expect(termination?.summary == RetrySummary(reason: .deadlineExceeded, attempts: 1, elapsed: wokeAt))
        #expect(isRetryError(termination?.error, .deadlineExceeded))
        #expect((termination?.error as? RetryError)?.lastError as? TestError == TestError(1))
        // The failed attempt was already reported with its retry; only `finished` remains.
        #expect(termination?.failedAttempt == nil)
        #expect(termination?.events(value: Int?.none).count == 1)
    }

    @Test("an attempt timeout fails the attempt with RetryError(.attemptTimedOut) and consults the strategy")
    func attemptTimeout() {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 3, attemptTimeout: .seconds(2)))
        #expect(machine.start(at: .zero).runAttempt?.timeout == .seconds(2))
        #expect(machine.attemptTimedOut(2, at: .seconds(2)).isNone)  // not the running attempt
        let consultation = machine.attemptTimedOut(1, at: .seconds(2)).consultation
        #expect(consultation?.context.retryIndex == 0)
        let error = consultation?.error as? RetryError
        #expect(error?.reason == .attemptTimedOut)
        #expect(error?.attempts == 1)
        // The attempt's late result is stale now.
        #expect(machine.attemptSucceeded(1, at: .seconds(3)).isNone)
        #expect(machine.attemptFailed(1, error: TestError(1), at: .seconds(3)).isNone)
        #expect(machine.decide(.retry(after: .seconds(1)), at: .seconds(2)).retryDelay == .seconds(1))
        #expect(machine.waitElapsed(at: .seconds(3)).runAttempt?.attempt.number == 2)
    }

    @Test("the last attempt timing out exhausts the retrier with the timeout error")
    func lastAttemptTimesOut() {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 1, attemptTimeout: .seconds(2)))
        _ = machine.start(at: .zero)
        let termination = machine.finishing { $0.attemptTimedOut(1, at: .seconds(2)) }
        #expect(termination?.summary.reason == .exhausted)
        #expect(isRetryError(termination?.error, .attemptTimedOut))
    }

    @Test("an attempt timer firing at or past the deadline finishes with deadlineExceeded")
    func attemptTimeoutPastDeadline() {
        var machine = RetryStateMachine(
            RetryConfiguration(maxAttempts: 5, totalTimeout: .seconds(2), attemptTimeout: .seconds(5)))
        #expect(machine.start(at: .zero).runAttempt?.timeout == .seconds(2))
        let termination = machine.finishing { $0.attemptTimedOut(1, at: .seconds(2)) }
        #expect(termination?.summary == RetrySummary(reason: .deadlineExceeded, attempts: 1, elapsed: .seconds(2)))
        let error = termination?.error as? RetryError
        #expect(error?.reason == .deadlineExceeded)
        #expect(isRetryError(error?.lastError, .attemptTimedOut))
        #expect(isRetryError(termination?.failedAttempt?.error, .attemptTimedOut))
        #expect(termination?.events(value: Int?.none).count == 2)
    }

    @Test("past the deadline, a timed-out later attempt keeps the operation's own earlier error as the last error")
    func attemptTimeoutPastDeadlineKeepsOperationError() {
        var machine = RetryStateMachine(
            RetryConfiguration(maxAttempts: 5, totalTimeout: .seconds(2), attemptTimeout: .seconds(5)))
        _ = machine.start(at: .zero)
        _ = machine.attemptFailed(1, error: TestError(1), at: .milliseconds(100))
        _ = machine.decide(.retry(after: .milliseconds(100)), at: .milliseconds(100))
        #expect(machine.waitElapsed(at: .milliseconds(200)).runAttempt?.timeout == .milliseconds(1800))
        let termination = machine.finishing { $0.attemptTimedOut(2, at: .seconds(2)) }
        let error = termination?.error as? RetryError
        #expect(error?.reason == .deadlineExceeded)
        #expect(error?.attempts == 2)
        #expect(error?.lastError as? TestError == TestError(1))
        #expect(isRetryError(termination?.failedAttempt?.error, .attemptTimedOut))
    }

    @Test("a zero total timeout gives up before the first attempt")
    func zeroTotalTimeout() {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 3, totalTimeout: .zero))
        let termination = machine.finishing { $0.start(at: .zero) }
        #expect(termination?.summary == RetrySummary(reason: .deadlineExceeded, attempts: 0, elapsed: .zero))
        #expect(isRetryError(termination?.error, .deadlineExceeded))
        #expect((termination?.error as? RetryError)?.lastError == nil)
    }
}

// MARK: - Invalid configuration, cancel, stale events

@Suite("Core: retry state machine edges")
struct RetryStateMachineEdgeTests {
    @Test(
        "an invalid configuration finishes at start with RetryError(.invalidConfiguration) and no attempt",
        arguments: [
            RetryConfiguration(maxAttempts: 0),
            RetryConfiguration(maxAttempts: -1),
            RetryConfiguration(maxAttempts: Int.min),
            RetryConfiguration(maxAttempts: 3, totalTimeout: .seconds(-1)),
            RetryConfiguration(maxAttempts: 3, totalTimeout: .nanoseconds(-1)),
            RetryConfiguration(maxAttempts: 3, totalTimeout: .seconds(Int64.min) + .seconds(Int64.min)),
            RetryConfiguration(maxAttempts: 3, attemptTimeout: .zero),
            RetryConfiguration(maxAttempts: 3, attemptTimeout: .seconds(-1)),
        ])
    func invalidConfiguration(_ configuration: RetryConfiguration) {
        #expect(configuration.problem != nil)
        var machine = RetryStateMachine(configuration)
        let termination = machine.finishing { $0.start(at: .milliseconds(3)) }
        #expect(
            termination?.summary == RetrySummary(reason: .invalidConfiguration, attempts: 0, elapsed: .milliseconds(3)))
        #expect(isInvalidConfiguration(termination?.error))
        #expect((termination?.error as? RetryError)?.attempts == 0)
        #expect(termination?.failedAttempt == nil)
        #expect(termination?.succeededAttempt == nil)
        #expect(termination?.events(value: Int?.none).count == 1)
        #expect(machine.isFinished)
        #expect(machine.currentAttempt == nil)
        // Nothing runs afterwards.
        #expect(machine.start(at: .zero).isNone)
        #expect(machine.attemptSucceeded(1, at: .zero).isNone)
        #expect(machine.attemptFailed(1, error: TestError(1), at: .zero).isNone)
        #expect(machine.waitElapsed(at: .zero).isNone)
        #expect(machine.cancel(at: .zero).isNone)
    }

    @Test("valid edges: one attempt, unlimited attempts, a huge deadline")
    func validEdges() {
        for configuration in [
            RetryConfiguration(maxAttempts: 1),
            RetryConfiguration(maxAttempts: Int.max, totalTimeout: .seconds(Int64.max) + .seconds(Int64.max)),
            RetryConfiguration(maxAttempts: 2, attemptTimeout: .nanoseconds(1)),
        ] {
            #expect(configuration.problem == nil)
            var machine = RetryStateMachine(configuration)
            #expect(machine.start(at: .zero).runAttempt?.attempt.number == 1)
        }
    }

    @Test("cancel before start finishes cancelled with no attempt; start is stale afterwards")
    func cancelIdle() {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 3))
        let termination = machine.finishing { $0.cancel(at: .zero) }
        #expect(termination?.summary == RetrySummary(reason: .cancelled, attempts: 0, elapsed: .zero))
        #expect(termination?.error is CancellationError)
        #expect(machine.start(at: .zero).isNone)
    }

    @Test("cancel while an attempt runs finishes with CancellationError and no result for that attempt")
    func cancelAttempting() {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 3))
        _ = machine.start(at: .zero)
        let termination = machine.finishing { $0.cancel(at: .seconds(1)) }
        #expect(termination?.summary == RetrySummary(reason: .cancelled, attempts: 1, elapsed: .seconds(1)))
        #expect(termination?.error is CancellationError)
        #expect(termination?.failedAttempt == nil)
        #expect(termination?.succeededAttempt == nil)
        #expect(
            termination?.events(value: 5).map(describe) == [
                "finished cancelled after 1 at 1.0 seconds CancellationError()"
            ])
        #expect(throws: CancellationError.self) { try termination?.result(value: 5).get() }
        #expect(machine.attemptSucceeded(1, at: .seconds(2)).isNone)
        #expect(machine.attemptFailed(1, error: TestError(1), at: .seconds(2)).isNone)
        #expect(machine.attemptTimedOut(1, at: .seconds(2)).isNone)
    }

    @Test(
        "an attempt that fails with CancellationError finishes cancelled with its failure, asking no strategy",
        arguments: [1, 3])
    func operationCancellation(maxAttempts: Int) {
        var machine = RetryStateMachine(
            RetryConfiguration(maxAttempts: maxAttempts, budget: RetryBudget(capacity: 10, retryCost: 1)))
        _ = machine.start(at: .zero)
        let termination = machine.finishing { $0.attemptFailed(1, error: CancellationError(), at: .seconds(1)) }
        #expect(termination?.summary == RetrySummary(reason: .cancelled, attempts: 1, elapsed: .seconds(1)))
        #expect(termination?.error is CancellationError)
        #expect(machine.finalError is CancellationError)
        #expect(termination?.failedAttempt?.attempt.number == 1)
        #expect(termination?.failedAttempt?.error is CancellationError)
        #expect(
            termination?.events(value: 5).map(describe) == [
                "failed 1 CancellationError() give up cancelled",
                "finished cancelled after 1 at 1.0 seconds CancellationError()",
            ])
        #expect(machine.budgetRefund == nil, "no refund after a cancellation")
        #expect(machine.decide(.retry(after: .seconds(1)), at: .seconds(1)).isNone)
        #expect(machine.cancel(at: .seconds(2)).isNone)
    }

    @Test("a CancellationError inside another error is the operation's error like any other: the strategy is asked")
    func wrappedCancellationIsAskedAbout() {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 3))
        _ = machine.start(at: .zero)
        let wrapped = RetryError(.exhausted, lastError: CancellationError(), attempts: 1)
        #expect(machine.attemptFailed(1, error: wrapped, at: .zero).consultation != nil)
    }

    @Test("cancel while the strategy is consulted makes the decision stale")
    func cancelDeciding() {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 3))
        _ = machine.start(at: .zero)
        _ = machine.attemptFailed(1, error: TestError(1), at: .zero)
        #expect(machine.finishing { $0.cancel(at: .zero) }?.summary.reason == .cancelled)
        #expect(machine.decide(.retry(after: .seconds(1)), at: .zero).isNone)
        #expect(machine.decide(.stop, at: .zero).isNone)
    }

    @Test("cancel during the wait makes the timer stale; cancel after finish is .none")
    func cancelWaiting() {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 3))
        _ = machine.start(at: .zero)
        _ = machine.attemptFailed(1, error: TestError(1), at: .zero)
        _ = machine.decide(.retry(after: .seconds(1)), at: .zero)
        let termination = machine.finishing { $0.cancel(at: .milliseconds(500)) }
        #expect(termination?.summary == RetrySummary(reason: .cancelled, attempts: 1, elapsed: .milliseconds(500)))
        #expect(termination?.error is CancellationError)
        #expect(machine.waitElapsed(at: .seconds(1)).isNone)
        #expect(machine.cancel(at: .seconds(2)).isNone)
    }

    @Test("cancel after success is .none")
    func cancelAfterFinish() {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 3))
        _ = machine.start(at: .zero)
        #expect(machine.finishing { $0.attemptSucceeded(1, at: .zero) }?.summary.reason == .succeeded)
        #expect(machine.cancel(at: .zero).isNone)
        #expect(machine.attemptSucceeded(1, at: .zero).isNone)
    }

    @Test("stale events return .none and leave the state unchanged")
    func staleEvents() {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 3))
        #expect(machine.attemptSucceeded(1, at: .zero).isNone)  // before start
        #expect(machine.waitElapsed(at: .zero).isNone)
        #expect(machine.decide(.stop, at: .zero).isNone)
        _ = machine.start(at: .zero)
        #expect(machine.start(at: .zero).isNone)  // second start
        #expect(machine.attemptSucceeded(2, at: .zero).isNone)  // wrong attempt number
        #expect(machine.attemptFailed(0, error: TestError(0), at: .zero).isNone)
        #expect(machine.attemptTimedOut(7, at: .zero).isNone)
        #expect(machine.waitElapsed(at: .zero).isNone)  // not waiting
        #expect(machine.decide(.retry(after: .zero), at: .zero).isNone)  // not deciding
        #expect(machine.currentAttempt == 1)

        _ = machine.attemptFailed(1, error: TestError(1), at: .zero)
        #expect(machine.currentAttempt == nil)
        #expect(machine.attemptFailed(1, error: TestError(1), at: .zero).isNone)  // duplicate failure
        #expect(machine.waitElapsed(at: .zero).isNone)  // deciding, not waiting
        #expect(machine.decide(.retry(after: .zero), at: .zero).retryDelay == .zero)
        #expect(machine.decide(.retry(after: .zero), at: .zero).isNone)  // second decision
        #expect(machine.attemptSucceeded(2, at: .zero).isNone)  // attempt 2 has not started
        #expect(machine.waitElapsed(at: .zero).runAttempt?.attempt.number == 2)
        #expect(machine.waitElapsed(at: .zero).isNone)  // second timer fire
        #expect(machine.attemptSucceeded(1, at: .zero).isNone)  // the old attempt
        #expect(machine.finishing { $0.attemptSucceeded(2, at: .zero) }?.summary.attempts == 2)
    }

    @Test("result(value:) and events(value:) agree on success and failure")
    func terminationHelpers() throws {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 2))
        _ = machine.start(at: .zero)
        let success = try #require(machine.finishing { $0.attemptSucceeded(1, at: .milliseconds(7)) })
        #expect(try success.result(value: "done").get() == "done")
        #expect(
            success.events(value: 9).map(describe) == [
                "succeeded 1 9", "finished succeeded after 1 at 0.007 seconds nil",
            ])
        // A failure ignores a value passed by mistake.
        var failing = RetryStateMachine(RetryConfiguration(maxAttempts: 1))
        _ = failing.start(at: .zero)
        let failure = try #require(failing.finishing { $0.attemptFailed(1, error: TestError(4), at: .zero) })
        #expect(throws: TestError(4)) { try failure.result(value: 1).get() }
        #expect(failure.events(value: 1).map(describe).first == "failed 1 TestError(4) give up exhausted")
    }

    @Test("duplicate completions are taken in order, up to a sequence number or all, and dropped once finished")
    func duplicateCompletions() {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: 3))
        _ = machine.start(at: .zero)
        let first = RetryAttempt(number: 1, maxAttempts: 3, elapsed: .zero)
        let second = RetryAttempt(number: 2, maxAttempts: 3, elapsed: .zero)
        #expect(!machine.hasDuplicates)
        let one = machine.duplicateCompleted(first)
        let two = machine.duplicateCompleted(second)
        let three = machine.duplicateCompleted(first)
        #expect(one == 1 && two == 2 && three == 3)
        #expect(machine.hasDuplicates)
        #expect(machine.takeDuplicates(through: 2) == [first, second])  // the third is still on its way
        #expect(machine.takeDuplicates(through: 2).isEmpty)
        _ = machine.duplicateCompleted(second)
        #expect(machine.takeDuplicates() == [first, second])
        #expect(!machine.hasDuplicates)
        _ = machine.attemptSucceeded(1, at: .zero)
        #expect(machine.duplicateCompleted(first) == nil)
        #expect(!machine.hasDuplicates)
    }
}

/// Where the async runner keeps its state machine, and how it feeds it: the one loop
/// (``runAsyncRetry(machine:observed:tolerance:clock:isolation:now:runAttempt:interruption:strategy:observe:)``)
/// is generic over it, so that each shape runs specialized, with no indirection of its own.
///
/// Every method feeds the machine one event and returns the runner's next step, showing the machine's action to
/// `observe` first.
@usableFromInline
protocol AsyncRetryMachineHolder {
    /// The first step; `now` is read only by a run of trials (``AsyncTrialMachine``): to start it, or to wait what its
    /// machine says remains of the pause after a repeating success (``RetryStateMachine/pauseRemaining(at:)``).
    mutating func begin(
        cancelled: Bool, at start: Duration, now: () -> Duration, observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep
    mutating func succeeded(_ number: Int, at now: Duration, observe: RetryStateMachine.ActionObserver)
    mutating func failed(
        _ number: Int, _ error: any Error, cancelled: Bool, at now: Duration,
        observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep
    mutating func timedOut(
        _ number: Int, cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep
    mutating func decided(
        _ decision: RetryDecision, waitsOnClock: Bool, cancelled: Bool, at now: Duration,
        observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep
    mutating func waited(cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep
    /// The clock's sleep threw `error` (`CancellationError` when the task was cancelled): the retrier ends with it.
    /// Returns the error to throw.
    mutating func sleepFailed(
        _ error: any Error, at now: Duration, observe: RetryStateMachine.ActionObserver
    )
        -> any Error
    /// Where a gated run of trials receives its condition's changes; `nil` for any other run.
    var conditions: RetryConditionInbox? { get }
    /// Feeds the machine the condition's pending change (or `cancel`, if `cancelled`): the step that follows, or `nil`
    /// if the machine goes on as it was.
    mutating func conditionChanged(cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep?
    /// The interruption the machine asked for is carried out.
    mutating func interrupted(cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep
}

extension AsyncRetryMachineHolder {
    // A machine that runs no trials (the basic shape's): nothing to wait for, nothing to interrupt.

    @inlinable
    var conditions: RetryConditionInbox? { nil }

    @inlinable
    mutating func conditionChanged(cancelled: Bool, at _: Duration, observe _: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep?
    {
        .fail(AsyncRetry.inconsistency())
    }

    @inlinable
    mutating func interrupted(cancelled: Bool, at _: Duration, observe _: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep
    {
        .fail(AsyncRetry.inconsistency())
    }
}

/// The observed shape's machine: a value in the runner's frame, fed the time since the call; every action is shown
/// to `observe` (the events, the running attempt and its timeout, the error the strategy is asked about).
@usableFromInline
struct AsyncRetryFrameMachine: AsyncRetryMachineHolder {
    @usableFromInline var machine: RetryStateMachine
    /// Whether a finishing action is shown with the machine's termination; `false` when no one observes the events
    /// (``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:isolation:operation:strategy:)``).
    @usableFromInline let reportsTermination: Bool

    @inlinable
    init(_ configuration: consuming RetryConfiguration, reportsTermination: Bool = true) {
        machine = RetryStateMachine(configuration)
        self.reportsTermination = reportsTermination
    }

    /// The frame of `machine` (a run of trials' machine, say).
    init(machine: RetryStateMachine) {
        self.machine = machine
        reportsTermination = true
    }

    /// Shows `action` to `observe` (with the termination, if it finishes) and returns the runner's step. Called with
    /// an action computed beforehand, never as `step(machine.input(…), …)`: `self` would be read before the input
    /// changes it, and a finished machine would look unfinished.
    @inlinable @inline(__always)
    func step(_ action: consuming RetryStateMachine.Action, _ observe: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep
    {
        if case .finish = action, reportsTermination {
            observe(action, machine.termination)
        } else {
            observe(action, nil)
        }
        return AsyncRetryStep(action, finalError: machine.finalError)
    }

    @inlinable @inline(__always)
    mutating func begin(
        cancelled: Bool, at start: Duration, now: () -> Duration, observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep {
        input(cancelled: cancelled, at: start, observe: observe) { $0.start(at: start) }
    }

    @inlinable @inline(__always)
    mutating func succeeded(_ number: Int, at now: Duration, observe: RetryStateMachine.ActionObserver) {
        let action = machine.attemptSucceededRefunding(number, at: now)  // deposits a budget's refund
        if case .finish = action, reportsTermination {
            observe(action, machine.termination)
        } else {
            observe(action, nil)
        }
    }

    @inlinable @inline(__always)
    mutating func failed(
        _ number: Int, _ error: any Error, cancelled: Bool, at now: Duration,
        observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep {
        let action = cancelled ? machine.cancel(at: now) : machine.attemptFailed(number, error: error, at: now)
        return step(action, observe)
    }

    @inlinable @inline(__always)
    mutating func timedOut(
        _ number: Int, cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep {
        let action = cancelled ? machine.cancel(at: now) : machine.attemptTimedOut(number, at: now)
        return step(action, observe)
    }

    @inlinable @inline(__always)
    mutating func decided(
        _ decision: RetryDecision, waitsOnClock _: Bool, cancelled _: Bool, at now: Duration,
        observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep {
        // Every retry, even one without delay, goes through a `wait` step, where cancellation is checked. A budget's
        // withdrawal, if the machine asks for one, is carried out at once (`decidePaying`); it is not observed.
        let action = machine.decidePaying(decision, at: now)
        return step(action, observe)
    }

    @inlinable @inline(__always)
    mutating func waited(cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep
    {
        input(cancelled: cancelled, at: now, observe: observe) { $0.waitElapsed(at: now) }
    }

    /// Feeds the machine `cancel` if `cancelled`, otherwise `input`, and returns the step that follows.
    @inlinable @inline(__always)
    mutating func input(
        cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver,
        _ input: (inout RetryStateMachine) -> RetryStateMachine.Action
    ) -> AsyncRetryStep {
        let action = cancelled ? machine.cancel(at: now) : input(&machine)
        return step(action, observe)
    }

    @inlinable @inline(__always)
    mutating func sleepFailed(
        _ error: any Error, at now: Duration, observe: RetryStateMachine.ActionObserver
    ) -> any Error {
        guard case .finish = machine.cancel(at: now), let termination = machine.termination else { return error }
        if error is CancellationError {
            observe(.finish, termination)
        } else {
            observe(
                .finish,
                RetryTermination(summary: termination.summary, error: error, failedAttempt: nil, succeededAttempt: nil))
        }
        return error
    }
}

/// The async runner's machine for a run of trials (``RetryStateMachine/Trials``: a policy gated by a condition, a
/// repeating policy): the observed shape's ``AsyncRetryFrameMachine``, kept by reference, with what the runner needs
/// beside it.
///
/// By reference, so that a gated attempt, which races the condition's changes in a child task, can feed each change to
/// the machine from the race (``attemptSignalled(at:)``, in the runner's isolation, while the runner awaits the
/// attempt), and so that a repeating run's iterator keeps the paused machine between two calls. Used by one task at a
/// time, never concurrently. It decides nothing: every input goes to the one ``RetryStateMachine``.
@usableFromInline
final class AsyncTrialMachine: AsyncRetryMachineHolder {
    var frame: AsyncRetryFrameMachine
    /// Where a gated run's condition changes arrive; `nil` for a run without a condition.
    @usableFromInline let conditions: RetryConditionInbox?
    /// The interruption the machine decided while an attempt ran, shown to the observer once the attempt is over.
    private var pendingInterruption: RetryStateMachine.Action?

    /// A run of trials of `configuration`, gated by the condition whose changes `conditions` receives (if any),
    /// repeating after each success when `repeatDelay` is set.
    init(_ configuration: RetryConfiguration, conditions: RetryConditionInbox?, repeatDelay: Duration?) {
        frame = AsyncRetryFrameMachine(
            machine: RetryStateMachine(
                configuration, trials: .init(gated: conditions != nil, repeatDelay: repeatDelay)))
        self.conditions = conditions
    }

    /// Whether the run has ended.
    var isFinished: Bool { frame.machine.isFinished }

    /// Starts the run, with the condition as it is now if it is gated; or, after a repeating success, waits what the
    /// machine says remains of its pause (``RetryStateMachine/pauseRemaining(at:)``). The condition's changes queued
    /// since the last call are fed to the machine first, in order: before the start, it records them (ignoring a stale
    /// one) for ``RetryStateMachine/start(at:)``; during the pause, they do not affect it.
    @usableFromInline
    func begin(cancelled: Bool, at _: Duration, now: () -> Duration, observe: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep
    {
        let now = now()
        while let snapshot = conditions?.take() { _ = frame.machine.conditionChanged(snapshot, at: now) }
        guard let remaining = frame.machine.pauseRemaining(at: now) else {
            return frame.input(cancelled: cancelled, at: now, observe: observe) { $0.start(at: now) }
        }
        if cancelled { return frame.input(cancelled: true, at: now, observe: observe) { _ in .none } }
        return .wait(remaining)
    }

    @usableFromInline
    func succeeded(_ number: Int, at now: Duration, observe: RetryStateMachine.ActionObserver) {
        // The frame's success (shown, not turned into a step: the runner returns the value either way). The machine
        // keeps the end of a repeating run's pause; the next call asks it.
        frame.succeeded(number, at: now, observe: observe)
    }

    @usableFromInline
    func failed(
        _ number: Int, _ error: any Error, cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep {
        frame.failed(number, error, cancelled: cancelled, at: now, observe: observe)
    }

    @usableFromInline
    func timedOut(_ number: Int, cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep
    {
        frame.timedOut(number, cancelled: cancelled, at: now, observe: observe)
    }

    @usableFromInline
    func decided(
        _ decision: RetryDecision, waitsOnClock: Bool, cancelled: Bool, at now: Duration,
        observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep {
        frame.decided(decision, waitsOnClock: waitsOnClock, cancelled: cancelled, at: now, observe: observe)
    }

    @usableFromInline
    func waited(cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver) -> AsyncRetryStep {
        frame.waited(cancelled: cancelled, at: now, observe: observe)
    }

    @usableFromInline
    func sleepFailed(_ error: any Error, at now: Duration, observe: RetryStateMachine.ActionObserver) -> any Error {
        frame.sleepFailed(error, at: now, observe: observe)
    }

    @usableFromInline
    func conditionChanged(cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep?
    {
        if cancelled { return frame.input(cancelled: true, at: now, observe: observe) { _ in .none } }
        guard let snapshot = conditions?.take() else { return nil }
        let action = frame.machine.conditionChanged(snapshot, at: now)
        if case .none = action { return nil }
        return frame.step(action, observe)
    }

    /// A change of the condition is pending while an attempt runs: fed to the machine; `true` if it interrupts the
    /// attempt (the interruption is shown to the observer by ``interrupted(cancelled:at:observe:)``, once the attempt's
    /// task is over).
    func attemptSignalled(at now: Duration) -> Bool {
        guard let snapshot = conditions?.take() else { return false }
        let action = frame.machine.conditionChanged(snapshot, at: now)
        guard case .interrupt = action else { return false }
        pendingInterruption = action
        return true
    }

    @usableFromInline
    func interrupted(cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver) -> AsyncRetryStep {
        if let pending = pendingInterruption {
            pendingInterruption = nil
            _ = frame.step(pending, observe)
        }
        return frame.input(cancelled: cancelled, at: now, observe: observe) { $0.interrupted(at: now) }
    }
}

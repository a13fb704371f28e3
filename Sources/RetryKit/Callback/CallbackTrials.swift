/// What a run of trials (a policy gated by ``RetryPlan/onlyWhen(_:)``, or repeating with
/// ``RetryPlan/repeating(withDelay:)``) adds to a completion-handler retrier: the condition it observes, the typed
/// handler of a repeating run's successes, and the registration with the condition that carrying out ``RetryStateMachine``'s trial actions
/// needs. The machine decides everything (when a trial starts, is interrupted, pauses, how the run ends); this only
/// holds what its actions are carried out with.
///
/// Kept in the runner's state while the run goes on (``CallbackPhase/running(waiters:trials:)``, so that a plain
/// retrier, almost all of them, pays nothing for it) and released after the end; the condition's observation is
/// cancelled then (in `deliver`), so that the condition keeps nothing of the run.
@usableFromInline
final class CallbackTrials: @unchecked Sendable {
    // @unchecked Sendable: the `let`s are immutable; `observation` is only accessed while the runner's lock is held.

    /// The machine's view of the run: gated or not, and the pause after each success.
    let trials: RetryStateMachine.Trials
    /// The condition that gates the trials; `nil` for a repetition without one.
    let condition: RetryCondition?
    /// A repeating run's success (on the queue): emits `attemptSucceeded` and hands the value to `onValue`. Typed where
    /// the value type is known; `nil` for a run that ends with its first success.
    let succeeded: (@Sendable (RetryAttempt, ErasedValue) -> Void)?
    /// The registration with ``condition``, from the runner's start until it finishes. Under the runner's lock.
    var observation: RetryConditionObservation?

    /// A run of trials gated by `condition` (if any), pausing `repeatDelay` after each success (if repeating).
    @usableFromInline
    init(
        condition: RetryCondition?, repeatDelay: Duration?,
        succeeded: (@Sendable (RetryAttempt, ErasedValue) -> Void)?
    ) {
        self.trials = RetryStateMachine.Trials(gated: condition != nil, repeatDelay: repeatDelay)
        self.condition = condition
        self.succeeded = succeeded
    }
}

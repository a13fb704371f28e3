import Dispatch

extension RetryPlan {
    /// Runs a completion-handler operation with this policy, calling `completion` with the result and a summary.
    ///
    /// Each call is an independent run ("hot retrier") of the same policy:
    ///
    /// ```swift
    /// let handle = policy.execute(on: .main) { attempt, done in
    ///     let task = legacyLoad(id) { value, error in done(value, error) }
    ///     done.onCancel { task.cancel() }
    /// } completion: { result, summary in
    ///     show(result)
    /// }
    /// handle.cancel()
    /// ```
    ///
    /// Without a condition the run is exactly the completion-handler `retry(…, on: queue, …)` with the policy's
    /// limits, budget and strategy, with all of its guarantees: the operation, strategy, observer and completion run
    /// on `queue`, the completion runs exactly once, cancel stops the timer or the attempt (its cancel hook runs), and
    /// nothing is retained after the end.
    ///
    /// With ``onlyWhen(_:)`` the run is a series of trials, one at a time, each a fresh start of such a retrier (in
    /// the same runner: one handle, one completion): a trial starts when the condition is `true`, is cancelled when it
    /// turns `false` (the attempt's cancel hook runs on the thread that changed the condition, and its late result is
    /// ignored), and a new trial starts afresh when it turns `true` again. The run ends with the first trial that succeeds or gives
    /// up, with ``RetryError`` (``RetryError/Reason-swift.enum/conditionEnded``) if the condition ends while `false`,
    /// or with `CancellationError` when cancelled; the same guarantees hold. The observer sees each trial's events
    /// (attempt numbers restart at 1 with each trial) and one ``RetryEvent/finished(_:error:)`` at the end, whose
    /// summary counts the attempts of all trials.
    ///
    /// - Parameters:
    ///   - queue: The queue the operation, strategy, observer and completion run on.
    ///   - scheduler: Where time, hops and timers come from. ``RetryScheduler/dispatch`` by default.
    ///   - isolation: The caller's actor, inherited (`#isolation`): on the main actor every closure runs on the main
    ///     queue; from nonisolated code, on `queue`; another actor gets ``RetryError`` `.invalidConfiguration`.
    ///   - operation: One attempt. Call the completion once, from any thread.
    ///   - observer: Receives ``RetryEvent``s on `queue`, in order. `nil` by default. See ``RetryEvent/makeStream()``
    ///     for an `AsyncStream` of them.
    ///   - completion: The result and a ``RetrySummary``; runs exactly once, on `queue`.
    /// - Returns: A handle to cancel the run or await its value.
    @discardableResult
    public func execute<Value: Sendable>(
        on queue: DispatchQueue,
        scheduler: any RetryScheduler = .dispatch,
        isolation: isolated (any Actor)? = #isolation,
        operation: @escaping (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
        observer: ((RetryEvent<Value>) -> Void)? = nil,
        completion: @escaping (Result<Value, any Error>, RetrySummary) -> Void
    ) -> RetryHandle<Value> {
        startCallbackRetrier(
            configuration: configuration, on: queue, scheduler: scheduler, isolation: isolation, operation: operation,
            strategy: strategy(on: ContinuousClock.self), observer: observer, completion: completion,
            trials: effectiveCondition.map { (RetryStateMachine.Trials(gated: true, repeatDelay: nil), $0) })
    }

    /// Runs an `async` operation with this policy from completion-handler code, calling `completion` with the result
    /// and a summary.
    ///
    /// Each attempt runs in a new `Task`, cancelled when the run is cancelled, when the attempt times out and when the
    /// condition turns `false`. Otherwise the same run as the completion-handler variant; see there.
    ///
    /// The distinct name keeps the two closure shapes apart: `execute(on:)` accepts only `{ attempt, done in … }` and
    /// `executeTask(on:)` only `{ attempt in … }`, so an operation that forgets `done` does not compile.
    ///
    /// - Parameters:
    ///   - queue: The queue the strategy, observer and completion run on (the operation runs in its own task).
    ///   - scheduler: Where time, hops and timers come from. ``RetryScheduler/dispatch`` by default.
    ///   - isolation: The caller's actor, inherited (`#isolation`): on the main actor every closure runs on the main
    ///     queue; from nonisolated code, on `queue`; another actor gets ``RetryError`` `.invalidConfiguration`.
    ///   - operation: One attempt, run in a new `Task`.
    ///   - observer: Receives ``RetryEvent``s on `queue`, in order. `nil` by default.
    ///   - completion: The result and a ``RetrySummary``; runs exactly once, on `queue`.
    /// - Returns: A handle to cancel the run or await its value.
    @discardableResult
    public func executeTask<Value: Sendable>(
        on queue: DispatchQueue,
        scheduler: any RetryScheduler = .dispatch,
        isolation: isolated (any Actor)? = #isolation,
        @_inheritActorContext operation: @escaping @Sendable (_ attempt: RetryAttempt) async throws -> Value,
        observer: ((RetryEvent<Value>) -> Void)? = nil,
        completion: @escaping (Result<Value, any Error>, RetrySummary) -> Void
    ) -> RetryHandle<Value> {
        execute(
            on: queue, scheduler: scheduler, isolation: isolation, operation: taskAttempt(operation),
            observer: observer, completion: completion)
    }
}

import Dispatch

extension RetryPlan {
    /// This plan with a shared ``RetryRecovery``: every attempt receives the recovery's current credential, and a
    /// failure the recovery recognises waits for it (one refresh for every waiting run) and retries at once, instead of
    /// backing off.
    ///
    /// ```swift
    /// let plan = RetryPlan.exponentialBackoff().giveUpAfter(maxAttempts: 4).recovering(with: session)
    /// let items = try await plan.execute { token, attempt in try await api.items(token: token) }
    /// ```
    ///
    /// The plan's limits, budget, condition and strategy keep their meaning (see ``RetryRecovery`` for how they apply
    /// to recoveries).
    ///
    /// - Parameter recovery: The recovery, shared with every other run that uses the same credential.
    /// - Returns: A plan whose runs use `recovery`.
    public func recovering<Credential>(with recovery: RetryRecovery<Credential>) -> RecoveringRetryPlan<Credential> {
        RecoveringRetryPlan(plan: self, recovery: recovery)
    }
}

/// A ``RetryPlan`` whose runs share a ``RetryRecovery``: made by ``RetryPlan/recovering(with:)``.
///
/// Its runs are those of the plan, with two differences: each attempt receives the credential the recovery gives (an
/// attempt that would start while a refresh runs waits for it), and a failure the recovery recognises is answered by
/// the recovery (``RetryNextStep/recover``) instead of the strategy. Every style runs on the completion-handler
/// runner, so that all of them behave alike to the event: the async ``execute(scheduler:operation:observer:)`` awaits
/// such a run.
public struct RecoveringRetryPlan<Credential: Sendable>: Sendable {
    /// The plan: limits, budget, condition, strategy.
    public let plan: RetryPlan
    /// The recovery the runs share.
    public let recovery: RetryRecovery<Credential>

    /// Runs a completion-handler operation that receives the credential, calling `completion` with the result and a
    /// summary.
    ///
    /// ```swift
    /// plan.execute(on: .main) { token, attempt, done in
    ///     api.load(id, token: token) { value, error in done(value, error) }
    /// } completion: { result, summary in show(result) }
    /// ```
    ///
    /// The run of ``RetryPlan/execute(on:scheduler:isolation:operation:observer:completion:)``, with its guarantees
    /// (every closure on `queue`, the completion exactly once, cancel at any point), plus the recovery: a cancel while
    /// the run waits for a refresh ends it at once (the refresh goes on for the others).
    ///
    /// - Parameters:
    ///   - queue: The queue the operation, strategy, observer and completion run on (and a refresh this run starts).
    ///   - scheduler: Where time, hops and timers come from. ``RetryScheduler/dispatch`` by default.
    ///   - isolation: The caller's actor, inherited (`#isolation`): on the main actor every closure runs on the main
    ///     queue; from nonisolated code, on `queue`; another actor gets ``RetryError`` `.invalidConfiguration`.
    ///   - operation: One attempt, with the credential to use. Call the completion once, from any thread.
    ///   - observer: Receives ``RetryEvent``s on `queue`, in order. `nil` by default.
    ///   - completion: The result and a ``RetrySummary``; runs exactly once, on `queue`.
    /// - Returns: A handle to cancel the run or await its value.
    @discardableResult
    public func execute<Value: Sendable>(
        on queue: DispatchQueue,
        scheduler: any RetryScheduler = .dispatch,
        isolation: isolated (any Actor)? = #isolation,
        operation:
            @escaping (_ credential: Credential, _ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) ->
            Void,
        observer: ((RetryEvent<Value>) -> Void)? = nil,
        completion: @escaping (Result<Value, any Error>, RetrySummary) -> Void
    ) -> RetryHandle<Value> {
        start(
            on: queue, scheduler: scheduler, isolation: isolation, operation: operation, observer: observer,
            completion: completion)
    }

    /// Starts a run on the completion-handler runner: the one place every style of this plan goes through.
    private func start<Value: Sendable>(
        on queue: DispatchQueue, scheduler: any RetryScheduler, isolation: isolated (any Actor)?,
        operation: @escaping (Credential, RetryAttempt, AttemptCompletion<Value>) -> Void,
        observer: ((RetryEvent<Value>) -> Void)?,
        completion: @escaping (Result<Value, any Error>, RetrySummary) -> Void
    ) -> RetryHandle<Value> {
        var configuration = plan.configuration
        configuration.recovery = recovery.core
        return startCallbackRetrier(
            configuration: configuration, on: queue, scheduler: scheduler, isolation: isolation,
            operation: { attempt, done in
                // Every attempt of a run with a recovery has the recovery's credential (the machine acquires one first).
                guard let credential = done.credential as? Credential else {
                    done(.failure(RetryError(.invalidConfiguration("internal: an attempt without a credential"))))
                    return
                }
                operation(credential, attempt, done)
            },
            strategy: plan.strategy(on: ContinuousClock.self), observer: observer, completion: completion,
            trials: plan.effectiveCondition.map { (RetryStateMachine.Trials(gated: true, repeatDelay: nil), $0) })
    }

    /// Runs an `async` operation that receives the credential from completion-handler code, each attempt in a new
    /// `Task` (cancelled when the run is cancelled or the attempt times out); otherwise as
    /// ``execute(on:scheduler:isolation:operation:observer:completion:)``.
    ///
    /// - Parameters:
    ///   - queue: The queue the strategy, observer and completion run on (the operation runs in its own task).
    ///   - scheduler: Where time, hops and timers come from. ``RetryScheduler/dispatch`` by default.
    ///   - isolation: The caller's actor, inherited (`#isolation`): on the main actor every closure runs on the main
    ///     queue; from nonisolated code, on `queue`; another actor gets ``RetryError`` `.invalidConfiguration`.
    ///   - operation: One attempt, with the credential to use, run in a new `Task`.
    ///   - observer: Receives ``RetryEvent``s on `queue`, in order. `nil` by default.
    ///   - completion: The result and a ``RetrySummary``; runs exactly once, on `queue`.
    /// - Returns: A handle to cancel the run or await its value.
    @discardableResult
    public func executeTask<Value: Sendable>(
        on queue: DispatchQueue,
        scheduler: any RetryScheduler = .dispatch,
        isolation: isolated (any Actor)? = #isolation,
        @_inheritActorContext operation:
            @escaping @Sendable (_ credential: Credential, _ attempt: RetryAttempt)
            async throws -> Value,
        observer: ((RetryEvent<Value>) -> Void)? = nil,
        completion: @escaping (Result<Value, any Error>, RetrySummary) -> Void
    ) -> RetryHandle<Value> {
        execute(
            on: queue, scheduler: scheduler, isolation: isolation, operation: Self.taskAttempts(operation),
            observer: observer, completion: completion)
    }

    /// Runs an `async` operation that receives the credential and returns its value.
    ///
    /// ```swift
    /// let items = try await plan.execute { token, attempt in try await api.items(token: token) }
    /// ```
    ///
    /// The run of ``executeTask(on:scheduler:isolation:operation:observer:completion:)``, awaited: each attempt runs in a
    /// new `Task`, and the strategy and the observer run on a serial queue of the run's own. Cancelling the calling task
    /// cancels the run (the attempt's task is cancelled, a wait for a refresh ends at once): it throws
    /// `CancellationError`.
    ///
    /// - Parameters:
    ///   - scheduler: Where time, hops and timers come from. ``RetryScheduler/dispatch`` by default.
    ///   - operation: One attempt, with the credential to use, run in a new `Task`.
    ///   - observer: Receives ``RetryEvent``s in order, on the run's queue. Ignores them by default.
    /// - Returns: The value of the first attempt that succeeds.
    /// - Throws: As the plan's runs do, and ``RetryError`` ``RetryError/Reason-swift.enum/recoveryFailed`` or
    ///   ``RetryError/Reason-swift.enum/recoveryLimitExceeded`` when the recovery cannot give a credential.
    public func execute<Value: Sendable>(
        scheduler: any RetryScheduler = .dispatch,
        operation: @escaping @Sendable (_ credential: Credential, _ attempt: RetryAttempt) async throws -> Value,
        observer: @escaping @Sendable (RetryEvent<Value>) -> Void = { _ in }
    ) async throws -> Value {
        // The observer runs on the run's queue, as the other styles' do (it sees `finished` even when the task is
        // cancelled): no event goes through the awaiting task, so no stream is needed (`awaitCallbackRun` would hold
        // one, ~1.3 KB per waiting run); `value` cancels the run when the awaiting task is cancelled.
        let handle = start(
            on: DispatchQueue(label: "RetryKit.RecoveringRetryPlan"), scheduler: scheduler, isolation: nil,
            operation: Self.taskAttempts(operation), observer: observer, completion: { _, _ in })
        return try await handle.value
    }

    /// A completion-handler attempt that runs `operation` in a new `Task`, cancelled with the attempt.
    private static func taskAttempts<Value: Sendable>(
        _ operation: @escaping @Sendable (Credential, RetryAttempt) async throws -> Value
    ) -> @Sendable (Credential, RetryAttempt, AttemptCompletion<Value>) -> Void {
        { credential, attempt, done in
            RetryKit.taskAttempt({ attempt in try await operation(credential, attempt) })(attempt, done)
        }
    }
}

extension RetryPolicy {
    /// Runs an async operation with this policy and returns its value.
    ///
    /// ```swift
    /// let user = try await policy.execute { attempt in try await api.user(id) }
    /// let inTests = try await policy.execute(clock: VirtualClock()) { attempt in try await api.user(id) }
    /// ```
    ///
    /// Without a condition this is the observed async `retry` with the policy's limits, budget and strategy, in the
    /// caller's isolation, with the same events and errors: the operation's own last error when attempts run out or a
    /// give-up predicate matches, ``RetryError`` for a deadline, a refused budget or an invalid configuration,
    /// `CancellationError` when the task is cancelled.
    ///
    /// With ``onlyWhen(_:)`` the run is a series of trials, one at a time: it waits (burning no
    /// attempt) until the condition is `true`, runs a trial (that retrier) in a child task, and cancels the trial when
    /// the condition turns `false` (a wait ends at once, a running attempt is cancelled cooperatively; if it still
    /// returns a value, that value is the result). When the condition turns `true` again a new trial starts afresh.
    /// If the condition ends while `false`, the run throws ``RetryError``
    /// (``RetryError/Reason-swift.enum/conditionEnded``) with the last attempt error. The observer sees each trial's
    /// events and one ``RetryEvent/finished(_:error:)`` at the end, whose summary counts the attempts of all trials.
    ///
    /// Cancelling the calling task cancels the run: it throws `CancellationError`.
    ///
    /// - Parameters:
    ///   - tolerance: The tolerance passed to the clock for each sleep. `nil` by default.
    ///   - clock: The clock that measures waits and timeouts (`C.Duration == Duration`). `ContinuousClock()` by
    ///     default.
    ///   - isolation: The actor the policy's strategy and the observer run on; inherited from the caller.
    ///   - operation: The work to try; it receives the attempt.
    ///   - observer: Receives every event, in order, in `isolation`. Ignores them by default. See
    ///     ``RetryEvent/makeStream()`` for an `AsyncStream` of them.
    /// - Returns: The value of the first attempt that succeeds.
    /// - Throws: See above.
    public func execute<Value: Sendable, C: Clock>(
        tolerance: Duration? = nil,
        clock: C = ContinuousClock(),
        isolation: isolated (any Actor)? = #isolation,
        operation: @escaping @Sendable (_ attempt: RetryAttempt) async throws -> Value,
        observer: @escaping @Sendable (RetryEvent<Value>) -> Void = { _ in }
    ) async throws -> Value where C.Duration == Duration {
        guard effectiveCondition != nil else {
            return try await retry(
                configuration: configuration, tolerance: tolerance, clock: clock, isolation: isolation,
                operation: operation, strategy: strategy(on: C.self), observer: observer)
        }
        let ledger = TrialLedger()
        let start = clock.now
        let gate = AsyncPolicyGate(condition: effectiveCondition, repeats: false)
        let (result, reason) = await runTrials(
            gate: gate, tolerance: tolerance, clock: clock, isolation: isolation, operation: operation,
            observer: observer, ledger: ledger)
        let summary = RetrySummary(reason: reason, attempts: ledger.attempts, elapsed: start.duration(to: clock.now))
        switch result {
        case .success(let value):
            observer(.finished(summary, error: nil))
            return value
        case .failure(let error):
            observer(.finished(summary, error: error))
            throw error
        }
    }

    /// Carries out what `gate` decides (its ``PolicyGateMachine``, the one the completion-handler policy run uses too):
    /// waits for the condition, runs a trial (one observed async retrier: the async runner is the only thing here that
    /// runs attempts), cancels the trial when the condition closes. Returns when the gate finishes, or when it pauses
    /// after a success (repeating); emits no `finished` event (the caller does, for the whole run).
    ///
    /// - Returns: The result, and the reason the run ends (``RetryError/Reason-swift.enum/succeeded`` for a success).
    func runTrials<Value: Sendable, C: Clock>(
        gate: AsyncPolicyGate, tolerance: Duration?, clock: C, isolation: isolated (any Actor)?,
        operation: @escaping @Sendable (RetryAttempt) async throws -> Value,
        observer: @escaping @Sendable (RetryEvent<Value>) -> Void,
        ledger: TrialLedger
    ) async -> (Result<Value, any Error>, RetryError.Reason) where C.Duration == Duration {
        let configuration = self.configuration
        let strategy = self.strategy(on: C.self)
        let trialObserver = ledger.observer(forwardingTo: observer)
        var result: Result<Value, any Error> = .failure(CancellationError())
        var action = gate.begin()
        defer { gate.endObservation() }
        while true {
            switch action {
            case .none, .cancelTrial:
                // Waiting for the condition (a `cancelTrial` cannot reach this point: no trial is running).
                action = await gate.next(listening: false)
            case .startTrial(let number):
                if gate.gated {
                    result = await withTaskGroup(
                        of: AsyncTrialEvent<Value>.self, returning: Result<Value, any Error>.self,
                        isolation: isolation
                    ) { group in
                        group.addTask {
                            await runTrial(
                                configuration: configuration, tolerance: tolerance, clock: clock, isolation: isolation,
                                operation: operation, strategy: strategy, observer: trialObserver)
                        }
                        group.addTask {
                            await gate.next(listening: true) == .cancelTrial ? .conditionClosed : .conditionStaysOpen
                        }
                        while let event = await group.next() {
                            switch event {
                            case .conditionClosed:
                                ledger.interruptTrial()
                                group.cancelAll()
                            case .conditionStaysOpen:
                                continue
                            case .trialFinished(let result):
                                group.cancelAll()
                                return result
                            }
                        }
                        return .failure(CancellationError())  // unreachable: the trial always reports
                    }
                } else {
                    result = await runTrial(
                        configuration: configuration, tolerance: tolerance, clock: clock, isolation: isolation,
                        operation: operation, strategy: strategy, observer: trialObserver
                    ).result
                }
                let cancelled = (ledger.lastSummary?.reason ?? .cancelled) == .cancelled
                action = gate.trialFinished(
                    number, succeeded: result.succeeded, cancelled: cancelled, taskCancelled: Task.isCancelled)
            case .pause:
                return (result, .succeeded)
            case .finish(.trialResult):
                return (result, result.succeeded ? .succeeded : ledger.lastSummary?.reason ?? .cancelled)
            case .finish(.conditionEnded):
                return (.failure(ledger.conditionEndedError()), .conditionEnded)
            case .finish(.cancelled):
                return (.failure(CancellationError()), .cancelled)
            }
        }
    }
}

extension Result {
    /// Whether this is a success.
    fileprivate var succeeded: Bool {
        if case .success = self { return true }
        return false
    }
}

/// What a child task of a gated async run reports.
enum AsyncTrialEvent<Value: Sendable>: Sendable {
    case trialFinished(Result<Value, any Error>)
    case conditionClosed
    case conditionStaysOpen

    /// The trial's result (a failure with `CancellationError` for the other events, which never carry one).
    var result: Result<Value, any Error> {
        if case .trialFinished(let result) = self { return result }
        return .failure(CancellationError())
    }
}

/// One trial: the observed async retrier, in `isolation`.
private func runTrial<Value: Sendable, C: Clock>(
    configuration: RetryConfiguration, tolerance: Duration?, clock: C, isolation: isolated (any Actor)?,
    operation: @escaping @Sendable (RetryAttempt) async throws -> Value,
    strategy: @escaping @Sendable (any Error) -> RetryStrategy<C>,
    observer: @escaping @Sendable (RetryEvent<Value>) -> Void
) async -> AsyncTrialEvent<Value> where C.Duration == Duration {
    do {
        return .trialFinished(
            .success(
                try await retry(
                    configuration: configuration, tolerance: tolerance, clock: clock, isolation: isolation,
                    operation: operation, strategy: strategy, observer: observer)))
    } catch {
        return .trialFinished(.failure(error))
    }
}

/// The gate of an async policy run: the pure ``PolicyGateMachine`` (shared with the completion-handler policy run)
/// behind a lock, fed the condition's changes from whatever thread makes them, and the one task that waits for what it
/// decides: the run itself while the condition is closed, or a listener beside a running trial.
///
/// The machine outlives one run when repeating: ``RepeatingRetrySequence``'s iterator keeps its gate (paused after a
/// success) between two `next()` calls, and observes the condition only during a call. No user code and no
/// continuation runs under the lock.
final class AsyncPolicyGate: Sendable {
    private enum Waiter {
        case none
        /// Registered, not yet suspended.
        case registered(id: UInt64, listening: Bool)
        /// Suspended.
        case waiting(id: UInt64, listening: Bool, CheckedContinuation<PolicyGateMachine.Action, Never>)
        /// Cancelled before it suspended, with its answer.
        case cancelled(id: UInt64, PolicyGateMachine.Action)
    }

    private struct State {
        var machine: PolicyGateMachine
        var observation: RetryConditionObservation?
        /// An action the condition's change decided while no task was suspended for it.
        var pending: PolicyGateMachine.Action?
        var waiter: Waiter = .none
        var nextID: UInt64 = 0
    }

    private let condition: RetryCondition?
    private let state: Locked<State>

    /// Whether a condition gates the trials.
    var gated: Bool { condition != nil }

    /// A gate for `condition` (none: every trial starts at once); `repeats` pauses after a success instead of
    /// finishing.
    init(condition: RetryCondition?, repeats: Bool) {
        self.condition = condition
        state = Locked(State(machine: PolicyGateMachine(gated: condition != nil, repeats: repeats)))
    }

    /// Starts observing the condition and returns the machine's first action: `start` for a new run, or the end of the
    /// pause (with the condition as it is now) for a paused one.
    func begin() -> PolicyGateMachine.Action {
        var snapshot: RetryConditionSnapshot?
        var observation: RetryConditionObservation?
        if let condition {
            (snapshot, observation) = condition.observe { [weak self] snapshot in self?.conditionChanged(snapshot) }
        }
        let (action, stale): (PolicyGateMachine.Action, RetryConditionObservation?) = state.withLock { s in
            let stale = s.observation
            s.observation = observation
            s.pending = nil
            switch s.machine.phase {
            case .idle:
                return (s.machine.start(snapshot), stale)
            case .pausing(let epoch):
                if let snapshot { _ = s.machine.conditionChanged(snapshot) }
                return (s.machine.pauseElapsed(epoch), stale)
            case .waiting, .running, .abandoning, .finished:
                return (.finish(.cancelled), stale)  // not reached: a run begins idle or paused
            }
        }
        stale?.cancel()
        return action
    }

    /// Stops observing the condition (a paused machine keeps its state for the next ``begin()``).
    func endObservation() {
        let observation = state.withLock { s in
            defer { s.observation = nil }
            return s.observation
        }
        observation?.cancel()
    }

    /// Trial `number` finished; `cancelled` when its retrier ended cancelled. A cancelled trial of a cancelled task
    /// cancels the run.
    func trialFinished(_ number: Int, succeeded: Bool, cancelled: Bool, taskCancelled: Bool)
        -> PolicyGateMachine.Action
    {
        state.withLock { s in
            s.pending = nil
            if !succeeded, cancelled, taskCancelled { return s.machine.cancel() }
            return s.machine.trialFinished(number, succeeded: succeeded, cancelled: cancelled)
        }
    }

    private func conditionChanged(_ snapshot: RetryConditionSnapshot) {
        let continuation: (CheckedContinuation<PolicyGateMachine.Action, Never>, PolicyGateMachine.Action)? =
            state.withLock { s in
                let action = s.machine.conditionChanged(snapshot)
                if action == .none { return nil }
                if case .waiting(_, _, let continuation) = s.waiter {
                    s.waiter = .none
                    return (continuation, action)
                }
                s.pending = action
                return nil
            }
        if let (continuation, action) = continuation { continuation.resume(returning: action) }
    }

    /// Suspends until the condition makes the machine decide something. Cancelling the task ends the wait: the run
    /// (`listening: false`) is then cancelled (``PolicyGateMachine/cancel()``); a listener beside a trial
    /// (`listening: true`) only returns ``PolicyGateMachine/Action/none``.
    func next(listening: Bool) async -> PolicyGateMachine.Action {
        let registered: UInt64? = state.withLock { s in
            if s.pending != nil { return nil }
            let id = s.nextID
            s.nextID &+= 1
            s.waiter = .registered(id: id, listening: listening)
            return id
        }
        guard let id = registered else {
            return state.withLock { s in
                defer { s.pending = nil }
                return s.pending ?? .none
            }
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<PolicyGateMachine.Action, Never>) in
                let now: PolicyGateMachine.Action? = state.withLock { s in
                    switch s.waiter {
                    case .registered(id, _):
                        if let pending = s.pending {
                            s.pending = nil
                            s.waiter = .none
                            return pending
                        }
                        s.waiter = .waiting(id: id, listening: listening, continuation)
                        return nil
                    case .cancelled(id, let answer):
                        s.waiter = .none
                        return answer
                    case .none, .registered, .waiting, .cancelled:
                        return PolicyGateMachine.Action.none  // not reached: only this task replaces its registration
                    }
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let continuation: (CheckedContinuation<PolicyGateMachine.Action, Never>, PolicyGateMachine.Action)? =
                state.withLock { s in
                    switch s.waiter {
                    case .registered(id, let listening):
                        s.waiter = .cancelled(id: id, listening ? .none : s.machine.cancel())
                        return nil
                    case .waiting(id, let listening, let continuation):
                        s.waiter = .none
                        return (continuation, listening ? .none : s.machine.cancel())
                    case .none, .registered, .waiting, .cancelled:
                        return nil
                    }
                }
            if let (continuation, answer) = continuation { continuation.resume(returning: answer) }
        }
    }
}

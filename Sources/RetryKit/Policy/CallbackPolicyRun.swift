import Dispatch

/// A completion-handler policy run made of trials: each trial is one callback retrier
/// (`retry(configuration:on:scheduler:…)`), started and abandoned as ``PolicyGateMachine`` decides.
///
/// The run itself is the single attempt of an outer callback retrier (one attempt, no limits, no observer): the outer
/// runner provides the ``RetryHandle``, the completion exactly once on the queue, `value` and cancellation, and its
/// attempt's cancel hook cancels the run. The run hands its result to the outer attempt's completion.
///
/// Events: each trial's events reach the caller's observer except its `finished`; the run emits one `finished` of its
/// own, with a summary over all trials, just before its completion. Condition changes are handled on the thread that
/// makes them (starting a trial hops to the queue; cancelling one is allowed from any thread); everything else runs
/// on the queue. No lock is held while user code, the scheduler or another runner is called.
final class CallbackPolicyRun<Value: Sendable>: Sendable {
    private struct State {
        var machine: PolicyGateMachine
        /// Hands the run's result to the outer attempt; taken when the run finishes.
        var deliver: (@Sendable (Result<Value, any Error>) -> Void)?
        /// The running trial and how to cancel it.
        var trial: (number: Int, cancel: @Sendable () -> Void)?
        /// The pending repeat timer.
        var timer: (any RetryCancellable)?
        /// The registration with the condition.
        var observation: RetryConditionObservation?
        /// How the run ended, once it has.
        var endReason: RetryError.Reason?
    }

    /// What a transition took out of the state, to stop or call outside the lock.
    private struct Released {
        var cancelTrial: (@Sendable () -> Void)?
        var timer: (any RetryCancellable)?
        var observation: RetryConditionObservation?
        var deliver: (@Sendable (Result<Value, any Error>) -> Void)?

        func stop() {
            cancelTrial?()
            timer?.cancel()
            observation?.cancel()
        }
    }

    private let policy: RetryPolicy
    private let condition: RetryCondition?
    private let repeatDelay: Duration
    private let queue: DispatchQueue
    private let scheduler: any RetryScheduler
    private let operation: @Sendable (RetryAttempt, AttemptCompletion<Value>) -> Void
    private let observer: (@Sendable (RetryEvent<Value>) -> Void)?
    private let onValue: (@Sendable (Value) -> Void)?
    private let ledger = TrialLedger()
    private let state: Locked<State>

    private init(
        policy: RetryPolicy, repeatDelay: Duration?, queue: DispatchQueue, scheduler: any RetryScheduler,
        operation: @escaping @Sendable (RetryAttempt, AttemptCompletion<Value>) -> Void,
        observer: (@Sendable (RetryEvent<Value>) -> Void)?, onValue: (@Sendable (Value) -> Void)?
    ) {
        self.policy = policy
        self.condition = policy.effectiveCondition
        self.repeatDelay = repeatDelay ?? .zero
        self.queue = queue
        self.scheduler = scheduler
        self.operation = operation
        self.observer = observer
        self.onValue = onValue
        self.state = Locked(
            State(machine: PolicyGateMachine(gated: condition != nil, repeats: repeatDelay != nil)))
    }

    /// Starts a run as the single attempt of an outer retrier and returns that retrier's handle.
    ///
    /// - Parameters:
    ///   - repeatDelay: The pause after each success when repeating; `nil` to end the run with the first success.
    ///   - onValue: Receives each success when repeating (on the queue).
    ///   - deliver: Hands the run's result to the outer attempt's completion.
    ///   - completion: The caller's completion, with the run's summary.
    static func start<Outcome: Sendable>(
        policy: RetryPolicy, repeatDelay: Duration?, queue: DispatchQueue, scheduler: any RetryScheduler,
        operation: @escaping @Sendable (RetryAttempt, AttemptCompletion<Value>) -> Void,
        observer: (@Sendable (RetryEvent<Value>) -> Void)?, onValue: (@Sendable (Value) -> Void)?,
        deliver: @escaping @Sendable (Result<Value, any Error>, AttemptCompletion<Outcome>) -> Void,
        completion: @escaping @Sendable (Result<Outcome, any Error>, RetrySummary) -> Void
    ) -> RetryHandle<Outcome> {
        let run = CallbackPolicyRun(
            policy: policy, repeatDelay: repeatDelay, queue: queue, scheduler: scheduler, operation: operation,
            observer: observer, onValue: onValue)
        return retry(
            configuration: RetryConfiguration(maxAttempts: 1),
            on: queue,
            scheduler: scheduler,
            operation: { _, done in
                done.onCancel { run.cancel() }
                run.begin { result in deliver(result, done) }
            },
            strategy: { _ in .stop },
            observer: nil,
            completion: { result, outer in
                let summary = run.summary(outer)
                if let observer {
                    var error: (any Error)?
                    if case .failure(let failure) = result { error = failure }
                    observer(.finished(summary, error: error))
                }
                completion(result, summary)
            })
    }

    /// The run's summary: how it ended, the attempts of all its trials, the time since it started.
    private func summary(_ outer: RetrySummary) -> RetrySummary {
        let reason = state.withLock { $0.endReason } ?? outer.reason
        return RetrySummary(reason: reason, attempts: ledger.attempts, elapsed: outer.elapsed)
    }

    // MARK: - Events

    /// The outer attempt runs (on the queue): observe the condition and start.
    private func begin(deliver: @escaping @Sendable (Result<Value, any Error>) -> Void) {
        let cancelled: Bool = state.withLock { s in
            guard !s.machine.isFinished else { return true }
            s.deliver = deliver
            return false
        }
        if cancelled { return }
        var snapshot: RetryConditionSnapshot?
        if let condition {
            let (current, observation) = condition.observe { snapshot in self.conditionChanged(snapshot) }
            snapshot = current
            let kept: Bool = state.withLock { s in
                guard !s.machine.isFinished else { return false }
                s.observation = observation
                return true
            }
            if !kept {
                observation.cancel()
                return
            }
        }
        transition { $0.machine.start(snapshot) }
    }

    /// The condition changed (on the thread that changed it).
    private func conditionChanged(_ snapshot: RetryConditionSnapshot) {
        transition { $0.machine.conditionChanged(snapshot) }
    }

    /// Trial `number` called its completion (on the queue).
    private func trialFinished(_ number: Int, _ result: Result<Value, any Error>, _ summary: RetrySummary) {
        var succeeded = false
        if case .success = result { succeeded = true }
        transition(trialResult: result, reason: summary.reason) { s in
            if s.trial?.number == number { s.trial = nil }
            return s.machine.trialFinished(number, succeeded: succeeded, cancelled: summary.reason == .cancelled)
        }
    }

    /// The pause with timer `epoch` is over (on the queue).
    private func pauseElapsed(_ epoch: UInt64) {
        transition { s in
            guard s.machine.isPausing(epoch) else { return .none }
            s.timer = nil
            return s.machine.pauseElapsed(epoch)
        }
    }

    /// The outer retrier was cancelled (on the cancelling thread).
    private func cancel() {
        transition { $0.machine.cancel() }
    }

    // MARK: - Carrying out

    /// Applies an event inside the lock, then carries out the machine's answer outside it.
    ///
    /// - Parameters:
    ///   - trialResult: The result of the trial that just finished, for ``PolicyGateMachine/Action/pause(epoch:)``
    ///     and ``PolicyGateMachine/Ending/trialResult``.
    ///   - reason: Why that trial finished.
    private func transition(
        trialResult: Result<Value, any Error>? = nil, reason: RetryError.Reason? = nil,
        _ event: (inout State) -> PolicyGateMachine.Action
    ) {
        var released = Released()
        let action: PolicyGateMachine.Action = state.withLock { s in
            let action = event(&s)
            switch action {
            case .cancelTrial:
                ledger.interruptTrial()
                released.cancelTrial = s.trial?.cancel
                s.trial = nil
            case .finish(let ending):
                switch ending {
                case .trialResult: s.endReason = reason
                case .conditionEnded: s.endReason = .conditionEnded
                case .cancelled: s.endReason = .cancelled
                }
                released = Released(
                    cancelTrial: s.trial?.cancel, timer: s.timer, observation: s.observation, deliver: s.deliver)
                s.trial = nil
                s.timer = nil
                s.observation = nil
                s.deliver = nil
            case .none, .startTrial, .pause:
                break
            }
            return action
        }
        released.stop()
        switch action {
        case .none, .cancelTrial:
            break
        case .startTrial(let number):
            startTrial(number)
        case .pause(let epoch):
            if case .success(let value) = trialResult { onValue?(value) }
            pause(epoch)
        case .finish(.trialResult):
            if let trialResult { released.deliver?(trialResult) }
        case .finish(.conditionEnded):
            released.deliver?(.failure(ledger.conditionEndedError()))
        case .finish(.cancelled):
            break  // the outer retrier delivers CancellationError
        }
    }

    private func startTrial(_ number: Int) {
        let handle = retry(
            configuration: policy.configuration,
            on: queue,
            scheduler: scheduler,
            operation: operation,
            strategy: policy.strategy(on: ContinuousClock.self),
            observer: ledger.observer(forwardingTo: observer),
            completion: { result, summary in self.trialFinished(number, result, summary) })
        let kept: Bool = state.withLock { s in
            guard s.machine.isRunning(number) else { return false }
            s.trial = (number, { handle.cancel() })
            return true
        }
        if !kept { handle.cancel() }  // abandoned or cancelled before it could be kept
    }

    private func pause(_ epoch: UInt64) {
        let timer = scheduler.schedule(after: repeatDelay, on: queue) { self.pauseElapsed(epoch) }
        let kept: Bool = state.withLock { s in
            guard s.machine.isPausing(epoch) else { return false }
            s.timer = timer
            return true
        }
        if !kept { timer.cancel() }
    }
}

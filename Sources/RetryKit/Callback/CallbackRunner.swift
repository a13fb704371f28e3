import Dispatch

// The completion-handler runner. It carries out the answers of `RetryStateMachine` with a `RetryScheduler`:
//
// - every event (start, a result, a timer, cancel) is fed to the machine inside the lock, together with the state
//   changes that must be atomic with it (taking the attempt's slot, the pending timer, the user's closures);
// - the resulting `Transition` is carried out after the lock is released: user code (operation, strategy, observer,
//   completion, cancel hooks) and scheduler calls never run under the lock;
// - everything except `cancel()` runs on the caller's queue, so observer events come out in order. `cancel()` decides
//   on the calling thread and hops to the queue to deliver the completion.
//
// Queue hops per attempt match a hand-written recursive retry: one `execute` when the operation calls `done`; the
// strategy runs in that block, and a zero-delay retry starts the next attempt inline, arming no timer.

extension RetryHandle {
    /// What to do after a transition, outside the lock.
    enum Step {
        /// Nothing: the event was stale, or the work is done.
        case idle
        /// Emit `attemptStarted`, arm the attempt timer if `timeout` is set, run the operation.
        case run(RetryAttempt, timeout: Duration?, slot: AttemptSlot<Value>, epoch: UInt64, Callbacks)
        /// Ask the strategy about `error` and report the decision.
        case consult(RetryDecisionContext, error: any Error, Callbacks)
        /// Emit `attemptFailed(…, next: .retry(after: delay))`, then wait (a timer unless `delay` is zero).
        case wait(Duration, failed: RetryAttempt, error: any Error, epoch: UInt64, Callbacks)
        /// Emit the final events, run the completion, resume awaiting tasks.
        case finish(RetryTermination, value: Value?, Callbacks)
    }

    /// A step, plus what the transition took out of the state: an attempt to abandon (runs its cancel hook) and a
    /// timer to cancel, both outside the lock.
    struct Transition {
        var step: Step = .idle
        var abandoned: AttemptSlot<Value>?
        var stopped: (any RetryCancellable)?
    }

    /// Starts the retrier: its first step runs on the queue.
    func start() {
        scheduler.execute(on: queue) { self.begin() }
    }

    /// Time since the retrier was created.
    private var elapsed: Duration {
        scheduler.now - origin
    }

    // MARK: - Events

    private func begin() {
        let now = elapsed
        carryOut(state.withLock { apply($0.machine.start(at: now), to: &$0) })
    }

    /// Attempt `number` called its completion (first call only; runs on the queue).
    private func attemptCompleted(_ number: Int, _ result: Result<Value, any Error>) {
        let now = elapsed
        let transition: Transition = state.withLock { s in
            let action: RetryStateMachine.Action
            var value: Value?
            switch result {
            case .success(let success):
                value = success
                action = s.machine.attemptSucceeded(number, at: now)
            case .failure(let error):
                action = s.machine.attemptFailed(number, error: error, at: now)
            }
            if case .none = action { return Transition() }  // late: the attempt was cancelled or timed out
            let timer = s.timer
            s.timer = nil
            s.slot = nil
            s.timerEpoch &+= 1
            var transition = apply(action, value: value, to: &s)
            transition.stopped = timer
            return transition
        }
        carryOut(transition)
    }

    /// The timer of attempt `number` fired (on the queue).
    private func attemptTimerFired(_ number: Int, epoch: UInt64) {
        let now = elapsed
        let transition: Transition = state.withLock { s in
            guard s.timerEpoch == epoch else { return Transition() }
            let action = s.machine.attemptTimedOut(number, at: now)
            if case .none = action { return Transition() }
            let timer = s.timer
            let slot = s.slot
            s.timer = nil
            s.slot = nil
            s.timerEpoch &+= 1
            var transition = apply(action, to: &s)
            transition.stopped = timer
            transition.abandoned = slot
            return transition
        }
        carryOut(transition)
    }

    /// The wait before a retry is over (on the queue).
    private func waitTimerFired(epoch: UInt64) {
        let now = elapsed
        let transition: Transition = state.withLock { s in
            guard s.timerEpoch == epoch else { return Transition() }
            let timer = s.timer
            s.timer = nil
            s.timerEpoch &+= 1
            var transition = apply(s.machine.waitElapsed(at: now), to: &s)
            transition.stopped = timer
            return transition
        }
        carryOut(transition)
    }

    /// ``cancel()``: decided on the calling thread; the completion is delivered on the queue.
    func cancelRetrier() {
        let now = elapsed
        let transition = state.withLock { apply($0.machine.cancel(at: now), to: &$0) }
        guard case .finish(let termination, let value, let callbacks) = transition.step else { return }
        transition.abandoned?.abandon()
        transition.stopped?.cancel()
        scheduler.execute(on: queue) { self.deliver(termination, value: value, callbacks) }
    }

    /// Registers a task awaiting ``value``, or resumes it at once if the result is already known.
    func register(_ continuation: CheckedContinuation<Value, any Error>) {
        let outcome: Result<Value, any Error>? = state.withLock { s in
            if let outcome = s.outcome { return outcome }
            s.waiters.append(continuation)
            return nil
        }
        if let outcome { continuation.resume(with: outcome) }
    }

    // MARK: - Transitions (inside the lock)

    /// Turns the machine's action into a step, updating the runner's state to match. Runs inside the lock and runs no
    /// user code.
    private func apply(_ action: RetryStateMachine.Action, value: Value? = nil, to s: inout RunnerState)
        -> Transition
    {
        guard let callbacks = s.callbacks else { return Transition() }
        switch action {
        case .none:
            return Transition()
        case .run(let attempt, let timeout):
            let slot = makeSlot(for: attempt, observer: callbacks.observer)
            s.slot = slot
            var epoch: UInt64 = 0
            if timeout != nil {
                s.timerEpoch &+= 1
                epoch = s.timerEpoch
            }
            return Transition(step: .run(attempt, timeout: timeout, slot: slot, epoch: epoch, callbacks))
        case .consultStrategy(let context, let error):
            return Transition(step: .consult(context, error: error, callbacks))
        case .retry(let delay, let failed, let error):
            var epoch: UInt64 = 0
            if delay > .zero {
                s.timerEpoch &+= 1
                epoch = s.timerEpoch
            }
            return Transition(step: .wait(delay, failed: failed, error: error, epoch: epoch, callbacks))
        case .finish(let termination):
            let transition = Transition(
                step: .finish(termination, value: value, callbacks), abandoned: s.slot, stopped: s.timer)
            s.callbacks = nil
            s.slot = nil
            s.timer = nil
            s.timerEpoch &+= 1
            return transition
        }
    }

    /// The once-only completion for one attempt. Its result hops to the queue once; a duplicate call is reported to
    /// the observer on the queue (even after the retrier finished, as long as the operation keeps the completion).
    private func makeSlot(for attempt: RetryAttempt, observer: (@Sendable (RetryEvent<Value>) -> Void)?)
        -> AttemptSlot<Value>
    {
        let number = attempt.number
        let onDuplicate: @Sendable () -> Void
        if let observer {
            let queue = self.queue
            let scheduler = self.scheduler
            onDuplicate = { scheduler.execute(on: queue) { observer(.duplicateCompletion(attempt)) } }
        } else {
            onDuplicate = {}
        }
        return AttemptSlot(
            onResult: { result in
                self.scheduler.execute(on: self.queue) { self.attemptCompleted(number, result) }
            },
            onDuplicate: onDuplicate)
    }

    // MARK: - Carrying out (outside the lock, on the queue)

    private func carryOut(_ first: Transition) {
        var transition = first
        while true {
            transition.abandoned?.abandon()
            transition.stopped?.cancel()
            switch transition.step {
            case .idle:
                return
            case .run(let attempt, let timeout, let slot, let epoch, let callbacks):
                callbacks.observer?(.attemptStarted(attempt))
                if let timeout {
                    let number = attempt.number
                    arm(after: timeout, epoch: epoch) { self.attemptTimerFired(number, epoch: epoch) }
                }
                callbacks.operation(attempt, AttemptCompletion(slot))
                return
            case .consult(let context, let error, let callbacks):
                let decision = context.resolve(callbacks.strategy(error))
                let now = elapsed
                transition = state.withLock { apply($0.machine.decide(decision, at: now), to: &$0) }
            case .wait(let delay, let failed, let error, let epoch, let callbacks):
                callbacks.observer?(.attemptFailed(failed, error: error, next: .retry(after: delay)))
                if delay > .zero {
                    arm(after: delay, epoch: epoch) { self.waitTimerFired(epoch: epoch) }
                    return
                }
                let now = elapsed
                transition = state.withLock { apply($0.machine.waitElapsed(at: now), to: &$0) }
            case .finish(let termination, let value, let callbacks):
                deliver(termination, value: value, callbacks)
                return
            }
        }
    }

    /// Schedules a timer and keeps it in the state, unless the runner stopped wanting it meanwhile (cancelled, or on a
    /// concurrent queue already past it): then it is cancelled at once.
    private func arm(after delay: Duration, epoch: UInt64, _ fired: @escaping @Sendable () -> Void) {
        let timer = scheduler.schedule(after: delay, on: queue, fired)
        let kept: Bool = state.withLock { s in
            guard s.timerEpoch == epoch else { return false }
            s.timer = timer
            return true
        }
        if !kept { timer.cancel() }
    }

    /// Emits the final events, runs the completion, then resumes the tasks awaiting ``value``. On the queue.
    private func deliver(_ termination: RetryTermination, value: Value?, _ callbacks: Callbacks) {
        let result = termination.result(value: value)
        if let observer = callbacks.observer {
            for event in termination.events(value: value) { observer(event) }
        }
        callbacks.completion(result, termination.summary)
        let waiters: [CheckedContinuation<Value, any Error>] = state.withLock { s in
            s.outcome = result
            let waiters = s.waiters
            s.waiters = []
            return waiters
        }
        for waiter in waiters { waiter.resume(with: result) }
    }
}

import Dispatch

/// What a ``RetryHandle`` controls: a running completion-handler retrier, whatever its operation's value type.
@usableFromInline
package protocol CallbackRetrier: AnyObject, Sendable {
    /// ``RetryHandle/cancel()``.
    func cancel()
    /// ``RetryHandle/isFinished``.
    var isFinished: Bool { get }
    /// Calls `waiter` once with the result (the operation's value, erased), after the completion has run (at once if it
    /// has).
    func awaitResult(_ waiter: @escaping @Sendable (Result<any Sendable, any Error>) -> Void)
    /// A weak reference to the retrier, for tests that check it is released once finished.
    var probe: CallbackRunnerProbe { get }
}

/// The completion-handler runner: it feeds ``RetryStateMachine`` its inputs and carries out the actions it returns.
/// It decides nothing itself.
///
/// **Inputs** come from anywhere: the start, an attempt's completion (any thread), a timer (on the queue), `cancel()`
/// (any thread), a gated run's condition (any thread). Each one is fed to the machine under the lock, by ``input(_:)``,
/// which also takes out of the state what the machine no longer wants (the cancel hook of an abandoned attempt, a
/// timer it no longer waits for) to run or cancel after unlocking.
///
/// **Actions** are carried out by ``perform(_:)``, always on the queue, outside the lock: user code (operation,
/// strategy, observer, `onValue`, completion, cancel hooks) never runs under it. An input that arrives off the queue
/// hops there first. How each action is carried out:
///
/// | action | carried out as |
/// | --- | --- |
/// | `run(attempt)` | `attemptStarted`, the attempt's timeout timer, then the operation, in the current block |
/// | `consultStrategy` | the strategy, then its decision fed back |
/// | `withdraw` | the budget's withdrawal (thread-safe, no user code), then its answer fed back |
/// | `retry(after: d)` | `attemptFailed(…, next: .retry(after: d))`, then a wait: a timer, or a hop for zero |
/// | `repeatAfter(d)` | `attemptSucceeded`, `onValue`, then a wait as for `retry` |
/// | `interrupt` | the interrupted attempt's event, then ``RetryStateMachine/interrupted(at:)`` fed back |
/// | `finish` | the final events, the completion, then the tasks awaiting ``RetryHandle/value`` |
///
/// Because every wait ends in a new block on the queue (the timer's handler, or a hop), every attempt starts in a block
/// of its own: a retrier never holds its queue, and work enqueued between two attempts (a `cancel()` among it) runs
/// before the next one. A result that the operation reports before it returns is kept (``CallbackRunnerState/early``)
/// and fed once the operation has returned; one reported later hops to the queue.
final class CallbackRunner: CallbackRetrier {
    typealias Action = RetryStateMachine.Action

    /// The queue every user closure runs on.
    let queue: DispatchQueue
    /// Where time, hops and timers come from.
    let scheduler: any RetryScheduler
    /// The scheduler's time when the retrier was created: elapsed time is measured from it.
    let origin: Duration
    /// Whether an observer is attached (duplicate completions are reported only then).
    let observes: Bool
    /// The condition that gates a run of trials, if any.
    let condition: RetryCondition?
    /// The recovery that answers the failures it recognises, if any.
    let recovery: RecoveryCore?
    private let state: Locked<CallbackRunnerState>

    init(
        machine: RetryStateMachine, user: CallbackUserClosures, condition: RetryCondition?,
        queue: DispatchQueue, scheduler: any RetryScheduler
    ) {
        self.queue = queue
        self.scheduler = scheduler
        self.origin = scheduler.now
        self.observes = user.observer != nil
        self.condition = condition
        self.recovery = machine.configuration.recovery
        self.state = Locked(CallbackRunnerState(machine: machine, user: user))
    }

    /// Starts the retrier: its first attempt runs in a block on the queue.
    func start() {
        hop { self.begin() }
    }

    var probe: CallbackRunnerProbe { CallbackRunnerProbe(self) }

    private var now: Duration { scheduler.now - origin }

    private func hop(_ work: @escaping @Sendable () -> Void) {
        scheduler.execute(on: queue, work)
    }

    /// Feeds an input to the machine under the lock; runs or cancels what it made unwanted after unlocking.
    private func input(_ feed: (inout CallbackRunnerState, Duration) -> Action) -> Action {
        let now = self.now
        let (action, leftovers) = state.withLock { s in
            let action = feed(&s, now)
            return (action, s.takeUnwanted())
        }
        leftovers.discard()
        return action
    }

    // MARK: - Inputs

    /// The start, on the queue. A gated run observes its condition first and starts with it as it was then.
    private func begin() {
        var snapshot: RetryConditionSnapshot?
        var observation: RetryConditionObservation?
        if let condition {
            (snapshot, observation) = condition.observe { snapshot in self.conditionChanged(snapshot) }
        }
        let action = input { s, now in
            guard !s.machine.isFinished else { return .none }  // cancelled before it began
            s.observation = observation.take()
            if let snapshot { return s.machine.start(at: now, condition: snapshot) }
            return s.machine.start(at: now)
        }
        observation?.cancel()  // not taken: the run had finished
        perform(action)
    }

    /// ``RetryHandle/cancel()``: decided on the calling thread (the hook of an attempt in flight runs here, a pending
    /// timer is cancelled here); the completion is delivered on the queue.
    func cancel() {
        let action = input { s, now in s.machine.cancel(at: now) }
        if case .finish = action { hop { self.perform(action) } }
    }

    var isFinished: Bool {
        state.withLock { $0.machine.isFinished }
    }

    func awaitResult(_ waiter: @escaping @Sendable (Result<any Sendable, any Error>) -> Void) {
        let outcome: Result<any Sendable, any Error>? = state.withLock { s in
            if let outcome = s.outcome { return outcome }
            s.waiters.append(waiter)
            return nil
        }
        if let outcome { waiter(outcome) }
    }

    /// A gated run's condition changed (any thread): decided here, carried out on the queue.
    func conditionChanged(_ snapshot: RetryConditionSnapshot) {
        let action = input { s, now in s.machine.conditionChanged(snapshot, at: now) }
        if case .none = action { return }
        hop { self.perform(action) }
    }

    /// A timer fired (on the queue).
    func timerFired(_ timer: PendingTimer) {
        let action = input { s, now in
            guard s.timer === timer else { return .none }  // no longer wanted: cancelled meanwhile
            switch timer.purpose {
            case .wait: return s.machine.waitElapsed(at: now)
            case .timeout(let id): return s.machine.attemptTimedOut(id.number, at: now)
            }
        }
        perform(action)
    }

    /// The completion of `record`'s attempt was called (any thread).
    func complete(_ record: CallbackAttempt, _ result: Result<any Sendable, any Error>, _ attempt: RetryAttempt) {
        var result = Optional(result)
        var dropped: (@Sendable () -> Void)?  // the attempt's hook: it can no longer run
        let route: CompletionRoute = state.withLock { s in
            guard case .none = record.calls else { return .duplicate }
            guard s.currentAttempt == record.id else {
                record.calls = .ignored
                return .ignored
            }
            record.calls = .result
            dropped = s.hook.take()?.run
            guard s.calling === record else { return .hop }
            s.early = result.take()  // the operation has not returned: fed when it does
            return .kept
        }
        withExtendedLifetime(dropped) {}  // released after unlocking
        switch route {
        case .hop:
            guard let result else { return }
            hop { self.perform(self.input { s, now in s.feed(result, of: record.id, at: now) }) }
        case .duplicate:
            if observes { duplicateCompleted(attempt) }
        case .kept, .ignored:
            break
        }
    }

    /// The last copy of an attempt's completion was released uncalled (any thread): the attempt fails with
    /// ``RetryError/Reason-swift.enum/completionReleased`` if it is still current.
    func released(_ id: AttemptID) {
        var dropped: (@Sendable () -> Void)?
        let current: Bool = state.withLock { s in
            guard s.currentAttempt == id else { return false }
            dropped = s.hook.take()?.run
            return true
        }
        withExtendedLifetime(dropped) {}  // released after unlocking
        guard current else { return }
        hop {
            self.perform(
                self.input { s, now in
                    s.feed(
                        .failure(RetryError(.completionReleased, attempts: id.number, elapsed: now)), of: id, at: now)
                })
        }
    }

    /// `record`'s attempt registers a cancel hook (any thread).
    func setCancelHook(_ hook: @escaping @Sendable () -> Void, of record: CallbackAttempt) {
        var dropped: (@Sendable () -> Void)?  // a hook this one replaces, or this one if it can never run
        let runNow: Bool = state.withLock { s in
            guard case .none = record.calls else {
                dropped = hook
                return false
            }
            guard s.currentAttempt == record.id else { return true }  // abandoned before it completed
            dropped = s.hook.take()?.run
            s.hook = (record.id, hook)
            return false
        }
        withExtendedLifetime(dropped) {}  // released after unlocking
        if runNow { hook() }
    }

    /// Whether `record`'s attempt ended before its completion was called.
    func isAbandoned(_ record: CallbackAttempt) -> Bool {
        state.withLock { s in
            switch record.calls {
            case .result: return false
            case .ignored: return true
            case .none: return s.currentAttempt != record.id
            }
        }
    }

    /// A completion was called again (any thread): reported to the observer on the queue, before the next
    /// `attemptStarted` or `finished` if one comes first.
    private func duplicateCompleted(_ attempt: RetryAttempt) {
        guard let sequence = state.withLock({ $0.machine.duplicateCompleted(attempt) }) else { return }
        hop {
            let (due, observer) = self.state.withLock { s in
                (s.machine.takeDuplicates(through: sequence), s.user?.observer)
            }
            guard let observer else { return }
            for duplicate in due { observer(.duplicateCompletion(duplicate)) }
        }
    }

    // MARK: - Carrying out actions (on the queue, outside the lock)

    private func perform(_ first: Action) {
        // The user's closures, read once: the retrier may finish meanwhile (a cancel from another thread), but these are
        // released on the queue all the same, when this returns.
        guard let user = state.withLock({ $0.user }) else { return }  // the completion has run: nothing is left to do
        var action = first
        while true {
            switch action {
            case .none, .awaitCondition:
                return
            case .run(let attempt, let timeout):
                action = run(attempt, timeout: timeout, user)
            case .consultStrategy(let context, let error):
                let decision = context.decision(for: error, recovery: recovery, strategy: user.strategy)
                action = input { s, now in s.machine.decide(decision, at: now) }
            case .recover(let failed, let error):
                user.observer?(.attemptFailed(failed, error: error, next: .recover))
                action = acquire(afterFailure: true)
            case .acquire:
                action = acquire(afterFailure: false)
            case .withdraw(let budget, let afterTimeout):
                let paid = budget.withdraw(afterTimeout: afterTimeout)
                action = input { s, now in s.machine.budgetAnswered(paid, at: now) }
            case .retry(let delay, let failed, let error):
                user.observer?(.attemptFailed(failed, error: error, next: .retry(after: delay)))
                wait(delay)
                return
            case .repeatAfter(let delay, let succeeded):
                if let value = state.withLock({ $0.value.take() }) {
                    user.observer?(.attemptSucceeded(succeeded, value))
                    user.onValue?(value)
                }
                wait(delay)
                return
            case .interrupt(let attempt):
                var live = false
                action = input { s, now in
                    live = !s.machine.isFinished
                    return s.machine.interrupted(at: now)
                }
                if live, let attempt {
                    user.observer?(.attemptFailed(attempt, error: CancellationError(), next: .giveUp(.cancelled)))
                }
            case .finish:
                deliver()
                return
            }
        }
    }

    /// Carries out ``RetryStateMachine/Action/run(_:timeout:)``: returns what follows a result reported before the
    /// operation returned, or `.none`.
    private func run(_ attempt: RetryAttempt, timeout: Duration?, _ user: CallbackUserClosures) -> Action {
        // The attempt may have ended since the action was decided (a cancel): then nothing of it happens.
        let started: (id: AttemptID, duplicates: [RetryAttempt], credential: (any Sendable)?)? = state.withLock { s in
            guard s.machine.currentAttempt == attempt.number, let id = s.currentAttempt else { return nil }
            return (id, s.machine.hasDuplicates ? s.machine.takeDuplicates() : [], s.machine.credential)
        }
        guard let (id, duplicates, credential) = started else { return .none }
        if let observer = user.observer {
            for duplicate in duplicates { observer(.duplicateCompletion(duplicate)) }
            observer(.attemptStarted(attempt))
        }
        let record = CallbackAttempt(runner: self, id: id, credential: credential)
        let timer = timeout.map { _ in PendingTimer(.timeout(id), of: self) }
        // Checked again, atomically with marking the operation as being called: the observer may have cancelled, and so
        // may any thread until here. Once this returns `true`, a cancel is a cancel during the attempt (its hook runs).
        var replaced: PendingTimer?
        let current: Bool = state.withLock { s in
            guard s.currentAttempt == id else {
                record.calls = .ignored
                return false
            }
            s.calling = record
            if let timer { replaced = s.keep(timer) }
            return true
        }
        replaced?.cancel()
        guard current else { return .none }
        if let timer, let timeout { arm(timer, after: timeout) }
        user.operation(attempt, record)
        let early = state.withLock { s in
            s.calling = nil
            return s.early.take()
        }
        guard let early else { return .none }
        return input { s, now in s.feed(early, of: id, at: now) }
    }

    /// Carries out ``RetryStateMachine/Action/acquire``: asks the recovery for a credential. An answer that comes at once
    /// is fed at once before an attempt that follows a wait or the start (this block is the attempt's own), and after a
    /// hop after a failure (so that the retry, too, starts in a block of its own); a later one hops to the queue
    /// (``recoveryAnswered(_:)``), and the wait is bounded by a timer for what is left of the total timeout. The
    /// registration is kept in the state, so that an input that ends the wait (a cancel, the deadline) calls it off.
    private func acquire(afterFailure: Bool) -> Action {
        guard let (recovery, stale, timeout) = state.withLock({ $0.machine.recoveryRequest }) else { return .none }
        let acquisition = recovery.acquire(newerThan: stale) { answer in self.recoveryAnswered(answer) }
        switch acquisition {
        case .answered(let answer):
            if afterFailure {
                recoveryAnswered(answer)
                return .none
            }
            return input { s, now in s.machine.recoveryAnswered(answer, at: now) }
        case .waiting(let ticket):
            let waiting: Bool = state.withLock { s in
                guard s.machine.isAcquiring else { return false }
                s.recoveryWait = (recovery, ticket)
                return true
            }
            guard waiting else {
                recovery.stopWaiting(ticket)
                return .none
            }
            if let timeout { wait(timeout) }
            return .none
        }
    }

    /// The recovery answered a wait (any thread): fed to the machine on the queue.
    private func recoveryAnswered(_ answer: RecoveryAnswer) {
        hop { self.perform(self.input { s, now in s.machine.recoveryAnswered(answer, at: now) }) }
    }

    /// Waits `delay` before the machine's next step: a timer of the scheduler, or a hop to the queue for zero (which
    /// yields the queue all the same). Nothing is armed if the machine stopped waiting meanwhile (a cancel).
    private func wait(_ delay: Duration) {
        if DelayMath.isZero(delay) {
            // No timer: the hop cannot be called off, and finds the machine no longer waiting if it was cancelled. At
            // most one such hop is on its way: the next wait comes only after the attempt this one starts.
            hop { self.perform(self.input { s, now in s.timer == nil ? s.machine.waitElapsed(at: now) : .none }) }
            return
        }
        let timer = PendingTimer(.wait, of: self)
        var replaced: PendingTimer?
        let waiting: Bool = state.withLock { s in
            guard s.machine.isWaiting else { return false }
            replaced = s.keep(timer)
            return true
        }
        replaced?.cancel()
        if waiting { arm(timer, after: delay) }
    }

    /// Schedules `timer`, which the state keeps, unless the state stopped wanting it meanwhile: then it is cancelled.
    private func arm(_ timer: PendingTimer, after delay: Duration) {
        let token = scheduler.schedule(after: delay, on: queue) { timer.fired() }
        let kept: Bool = state.withLock { s in
            guard s.timer === timer else { return false }
            timer.token = token
            return true
        }
        if !kept { token.cancel() }
    }

    /// Emits the final events, runs the completion, then resumes the tasks awaiting the value. Once, on the queue.
    private func deliver() {
        let taken = state.withLock { s in
            guard s.machine.isFinished, let user = s.user.take(), let termination = s.machine.termination else {
                return nil as (CallbackUserClosures, RetryTermination, (any Sendable)?, [RetryAttempt])?
            }
            return (user, termination, s.value.take(), s.machine.takeDuplicates())
        }
        guard let (user, termination, value, duplicates) = taken else { return }
        state.withLock { $0.observation.take() }?.cancel()  // the condition keeps nothing of the run from here on
        if let observer = user.observer {
            termination.forEachEvent(value: value) { event in
                if case .finished = event {
                    for duplicate in duplicates { observer(.duplicateCompletion(duplicate)) }
                }
                observer(event)
            }
        }
        let result = termination.result(value: value)
        user.completion(result, termination.summary)
        let waiters = state.withLock { s in
            s.outcome = result
            defer { s.waiters = [] }
            return s.waiters
        }
        for waiter in waiters { waiter(result) }
    }
}

/// Where the first call of an attempt's completion goes (``CallbackRunner/complete(_:_:_:)``).
private enum CompletionRoute {
    /// Kept until the operation returns.
    case kept
    /// Handled after a hop to the queue.
    case hop
    /// The attempt had ended: ignored.
    case ignored
    /// Not the first call: reported to the observer.
    case duplicate
}

extension CallbackRunnerState {
    /// Feeds the result of attempt `id` to the machine; a success's value is kept for the completion (or `onValue`).
    /// A result of an attempt that is no longer current changes nothing.
    mutating func feed(_ result: Result<any Sendable, any Error>, of id: AttemptID, at now: Duration)
        -> RetryStateMachine.Action
    {
        guard currentAttempt == id else { return .none }
        switch result {
        case .success(let success):
            value = success
            return machine.attemptSucceededRefunding(id.number, at: now)  // a budget's refund: no user code
        case .failure(let error):
            return machine.attemptFailed(id.number, error: error, at: now)
        }
    }
}

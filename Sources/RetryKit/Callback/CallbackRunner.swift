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
/// timer it no longer waits for, a wait for the recovery it no longer wants) to run, cancel or call off after unlocking.
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
/// | `recover` | `attemptFailed(…, next: .recover)`, then as `acquire` (an answer that comes at once hops first) |
/// | `acquire` | the recovery asked for a credential; its answer fed back, at once or (later) after a hop; a timer for the deadline |
/// | `repeatAfter(d)` | `attemptSucceeded`, `onValue`, then a wait as for `retry` |
/// | `interrupt` | the interrupted attempt's event, then ``RetryStateMachine/interrupted(at:)`` fed back |
/// | `finish` | the final events, the completion, then the tasks awaiting ``RetryHandle/value`` |
///
/// Because every wait ends in a new block on the queue (the timer's handler, or a hop), every attempt starts in a block
/// of its own: a retrier never holds its queue, and work enqueued between two attempts (a `cancel()` among it) runs
/// before the next one. A result that the operation reports before it returns is kept (``CallbackRunnerState/early``)
/// and fed once the operation has returned; one reported later hops to the queue.
final class CallbackRunner: CallbackRetrier, RecoveryWaiter {
    typealias Action = RetryStateMachine.Action

    /// The queue every user closure runs on.
    let queue: DispatchQueue
    /// Where time, hops and timers come from.
    let scheduler: any RetryScheduler
    /// Where elapsed time is measured from (the retrier's creation).
    let clock: RunnerClock
    /// Whether an observer is attached (duplicate completions are reported only then).
    let observes: Bool
    /// The condition that gates a run of trials, if any.
    let condition: RetryCondition?
    /// The recovery that answers the failures it recognises, if any.
    let recovery: RecoveryCore?
    private let state: Locked<CallbackRunnerState>

    init(
        machine: consuming RetryStateMachine, user: any CallbackUserClosures, condition: RetryCondition?,
        queue: DispatchQueue, scheduler: any RetryScheduler
    ) {
        self.queue = queue
        self.scheduler = scheduler
        self.clock = RunnerClock(scheduler)
        self.observes = user.observes
        self.condition = condition
        self.recovery = machine.configuration.recovery
        self.state = Locked(CallbackRunnerState(machine: consume machine, user: user))
    }

    /// Starts the retrier: its first attempt runs in a block on the queue.
    func start() {
        hop { self.begin() }
    }

    var probe: CallbackRunnerProbe { CallbackRunnerProbe(self) }

    private var now: Duration { clock.elapsed(scheduler) }

    private func hop(_ work: @escaping @Sendable () -> Void) {
        // The production scheduler's `execute` is `queue.async`: called directly, without the existential.
        if case .continuous = clock { queue.async(execute: work) } else { scheduler.execute(on: queue, work) }
    }

    /// Feeds an input to the machine under the lock; runs or cancels what it made unwanted after unlocking. When the
    /// machine starts an attempt, the duplicate completions to report before it are taken in the same lock.
    private func input(_ feed: (inout CallbackRunnerState, Duration) -> Action) -> Fed {
        let now = self.now
        let (fed, leftovers) = state.withLock { s in
            let fed = s.fed(feed(&s, now))
            return (fed, s.takeUnwanted())
        }
        leftovers.discard()
        return fed
    }

    /// Feeds an input (on the queue) and carries out what follows. The user's closures are read in the same lock: the
    /// retrier may finish meanwhile (a cancel from another thread), but they are released on the queue all the same,
    /// when this returns.
    private func perform(_ feed: (inout CallbackRunnerState, Duration) -> Action) {
        let now = self.now
        let (fed, user, leftovers) = state.withLock { s in
            let fed = s.fed(feed(&s, now))
            return (fed, s.user, s.takeUnwanted())
        }
        leftovers.discard()
        guard let user else { return }  // the completion has run: nothing is left to do
        carryOut(fed, user)
    }

    // MARK: - Inputs

    /// The start, on the queue. A gated run observes its condition first and starts with it as it was then.
    private func begin() {
        var snapshot: RetryConditionSnapshot?
        var observation: RetryConditionObservation?
        if let condition {
            (snapshot, observation) = condition.observe { snapshot in self.conditionChanged(snapshot) }
        }
        var unused = observation
        perform { s, now in
            guard !s.machine.isFinished else { return .none }  // cancelled before it began
            s.observation = unused.take()
            if let snapshot { return s.machine.start(at: now, condition: snapshot) }
            return s.machine.start(at: now)
        }
        unused?.cancel()  // not taken: the run had finished
    }

    /// ``RetryHandle/cancel()``: decided on the calling thread (the hook of an attempt in flight runs here, a pending
    /// timer is cancelled here); the completion is delivered on the queue.
    func cancel() {
        let fed = input { s, now in s.machine.cancel(at: now) }
        if case .finish = fed.action { hop { self.perform { _, _ in .finish } } }
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
        let fed = input { s, now in s.machine.conditionChanged(snapshot, at: now) }
        if case .none = fed.action { return }
        hop { self.carryOutOnQueue(fed) }
    }

    /// A timer fired (on the queue).
    func timerFired(_ timer: PendingTimer) {
        perform { s, now in
            guard s.timer === timer else { return .none }  // no longer wanted: cancelled meanwhile
            switch timer.purpose {
            case .wait: return s.machine.waitElapsed(at: now)
            case .timeout(let id): return s.machine.attemptTimedOut(id.number, at: now)
            }
        }
    }

    /// The completion of `record`'s attempt was called (any thread). `keep` stores what the report needs in the record
    /// (a success's value), under the lock, when the call is the attempt's result.
    func complete(
        _ record: CallbackAttempt, _ report: consuming AttemptReport, keep: (CallbackAttempt) -> Void
    ) {
        var report = Optional(report)
        var dropped: (@Sendable () -> Void)?  // the attempt's hook: it can no longer run
        let route: CompletionRoute = state.withLock { s in
            guard case .none = record.calls else { return .duplicate }
            guard s.currentAttempt == record.id else {
                record.calls = .ignored
                return .ignored
            }
            record.calls = .result
            keep(record)
            dropped = s.hook.take()?.run
            guard s.calling === record else { return .hop }
            s.early = report.take()  // the operation has not returned: fed when it does
            return .kept
        }
        withExtendedLifetime(dropped) {}  // released after unlocking
        switch route {
        case .hop:
            guard let report = report.take() else { return }
            hop { self.perform { s, now in s.feed(report, of: record.id, at: now) } }
        case .duplicate:
            if observes { duplicateCompleted(record.attempt) }
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
            self.perform { s, now in
                s.feed(.failed(RetryError(.completionReleased, attempts: id.number, elapsed: now)), of: id, at: now)
            }
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

    /// The credential `record`'s attempt runs with, while it is current (a run with a recovery).
    func credential(of record: CallbackAttempt) -> (any Sendable)? {
        state.withLock { s in s.currentAttempt == record.id ? s.machine.credential : nil }
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
            let (due, user) = self.state.withLock { s in
                (s.machine.takeDuplicates(through: sequence), s.user)
            }
            guard let user else { return }
            for duplicate in due { user.observe(.duplicateCompletion(duplicate)) }
        }
    }

    // MARK: - Carrying out actions (on the queue, outside the lock)

    /// Carries out an action decided off the queue (a condition's change), on the queue.
    private func carryOutOnQueue(_ fed: consuming Fed) {
        guard let user = state.withLock({ $0.user }) else { return }  // the completion has run
        carryOut(fed, user)
    }

    /// Carries out `fed`'s action and those that follow it, until one waits or finishes.
    private func carryOut(_ fed: consuming Fed, _ user: any CallbackUserClosures) {
        var next = fed
        while true {
            let step = consume next
            switch step.action {
            case .none, .awaitCondition:
                return
            case .run(let attempt, let timeout):
                next = run(attempt, timeout: timeout, as: step.started, after: step.duplicates, user)
            case .consultStrategy(let context, let error):
                let decision = context.decision(for: error, recovery: recovery, strategy: user.strategy(for:))
                next = input { s, now in s.machine.decide(decision, at: now) }
            case .recover(let failed, let error):
                if observes { user.observe(.attemptFailed(failed, error: error, next: .recover)) }
                next = acquire(afterFailure: true)
            case .acquire:
                next = acquire(afterFailure: false)
            case .withdraw(let budget, let afterTimeout):
                let paid = budget.withdraw(afterTimeout: afterTimeout)
                next = input { s, now in s.machine.budgetAnswered(paid, at: now) }
            case .retry(let delay, let failed, let error):
                if observes { user.observe(.attemptFailed(failed, error: error, next: .retry(after: delay))) }
                wait(delay)
                return
            case .repeatAfter(let delay, let succeeded):
                if let value = state.withLock({ $0.value.take() }) {
                    if observes { user.observe(.attemptSucceeded(succeeded, value)) }
                    user.handOver(value)
                }
                wait(delay)
                return
            case .interrupt(let attempt):
                var live = false
                next = input { s, now in
                    live = !s.machine.isFinished
                    return s.machine.interrupted(at: now)
                }
                if live, observes, let attempt {
                    user.observe(.attemptFailed(attempt, error: CancellationError(), next: .giveUp(.cancelled)))
                }
            case .finish:
                deliver()
                return
            }
        }
    }

    /// Carries out ``RetryStateMachine/Action/run(_:timeout:)``, after reporting `duplicates` (taken with the action):
    /// returns what follows a result reported before the operation returned, or `.none`.
    private func run(
        _ attempt: RetryAttempt, timeout: Duration?, as id: AttemptID?, after duplicates: [RetryAttempt],
        _ user: any CallbackUserClosures
    ) -> Fed {
        if observes {
            for duplicate in duplicates { user.observe(.duplicateCompletion(duplicate)) }
            user.observe(.attemptStarted(attempt))
        }
        // The attempt may have ended since the action was decided (a cancel from any thread, or from the observer):
        // checked atomically with marking the operation as being called. Once this returns `true`, a cancel is a
        // cancel during the attempt (its hook runs).
        var replaced: PendingTimer?
        let started: (record: CallbackAttempt, timer: PendingTimer?)? = state.withLock { s in
            guard let id, s.currentAttempt == id else { return nil }
            let record = CallbackAttempt(runner: self, id: id, attempt: attempt)
            let timer = timeout.map { _ in PendingTimer(.timeout(id), of: self) }
            s.calling = record
            if let timer { replaced = s.keep(timer) }
            return (record, timer)
        }
        replaced?.cancel()
        guard let (record, timer) = started else { return Fed(.none) }
        if let timer, let timeout { arm(timer, after: timeout) }
        user.run(record)
        // A result reported while the operation ran waits in `early`: fed now, in the lock that ends the call.
        // A report whose attempt ended meanwhile (a cancel from the operation) is released after unlocking: it may hold
        // the user's values, whose `deinit` may call back into the retrier.
        let id = record.id
        var stale: AttemptReport?
        let fed = input { s, now in
            s.calling = nil
            guard let early = s.early.take() else { return .none }
            guard s.currentAttempt == id else {
                stale = early
                return .none
            }
            return s.feed(early, of: id, at: now)
        }
        withExtendedLifetime(stale) {}
        return fed
    }

    /// Carries out ``RetryStateMachine/Action/acquire``: asks the recovery for a credential. An answer that comes at once
    /// is fed at once before an attempt that follows a wait or the start (this block is the attempt's own), and after a
    /// hop after a failure (so that the retry, too, starts in a block of its own); a later one hops to the queue
    /// (``recoveryAnswered(_:)``), and the wait is bounded by a timer for what is left of the total timeout. The
    /// registration is kept in the state, so that an input that ends the wait (a cancel, the deadline) calls it off.
    private func acquire(afterFailure: Bool) -> Fed {
        guard let (recovery, stale, timeout) = state.withLock({ $0.machine.recoveryRequest }) else { return Fed(.none) }
        let acquisition = recovery.acquire(newerThan: stale, waiter: self)
        switch acquisition {
        case .answered(let answer):
            if afterFailure {
                recoveryAnswered(answer)
                return Fed(.none)
            }
            return input { s, now in s.machine.recoveryAnswered(answer, at: now) }
        case .waiting(let ticket):
            let registration = RecoveryRegistration(recovery: recovery, ticket: ticket)
            var replaced: RecoveryRegistration?
            let waiting: Bool = state.withLock { s in
                guard s.machine.isAcquiring else { return false }
                replaced = s.recoveryWait.take()
                s.recoveryWait = registration
                return true
            }
            replaced?.cancel()
            guard waiting else {
                registration.cancel()
                return Fed(.none)
            }
            if let timeout { wait(timeout) }
            return Fed(.none)
        }
    }

    /// The recovery answered a wait (any thread): fed to the machine on the queue.
    func recoveryAnswered(_ answer: RecoveryAnswer) {
        hop { self.perform { s, now in s.machine.recoveryAnswered(answer, at: now) } }
    }

    /// Waits `delay` before the machine's next step: a timer of the scheduler, or a hop to the queue for zero (which
    /// yields the queue all the same). Nothing is armed if the machine stopped waiting meanwhile (a cancel).
    private func wait(_ delay: Duration) {
        if DelayMath.isZero(delay) {
            // No timer: the hop cannot be called off, and finds the machine no longer waiting if it was cancelled. At
            // most one such hop is on its way: the next wait comes only after the attempt this one starts.
            hop { self.perform { s, now in s.timer == nil ? s.machine.waitElapsed(at: now) : .none } }
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
        // Everything is taken in one lock, into plain variables (an optional tuple holding the value would be copied and
        // destroyed through run-time value witnesses).
        var user: (any CallbackUserClosures)?
        var termination: RetryTermination?
        var value: (any Sendable)?
        var duplicates: [RetryAttempt] = []
        var observation: RetryConditionObservation?
        var registration: RecoveryRegistration?
        state.withLock { s in
            guard s.user != nil else { return }
            termination = s.machine.termination(withAttempts: observes)
            guard termination != nil else { return }
            user = s.user.take()
            value = s.value.take()
            duplicates = s.machine.takeDuplicates()
            // The condition and the recovery keep nothing of the run from here on.
            observation = s.observation.take()
            registration = s.recoveryWait.take()
        }
        guard let user, let termination else { return }
        observation?.cancel()
        registration?.cancel()
        if observes {
            termination.forEachEvent(value: value) { event in
                if case .finished = event {
                    for duplicate in duplicates { user.observe(.duplicateCompletion(duplicate)) }
                }
                user.observe(event)
            }
        }
        let result = termination.result(value: value)
        user.complete(result, termination.summary)
        let waiters = state.withLock { s in
            s.outcome = result
            defer { s.waiters = [] }
            return s.waiters
        }
        for waiter in waiters { waiter(result) }
    }
}

import Dispatch

// The completion-handler runner. It carries out the answers of `RetryStateMachine` with a `RetryScheduler`:
//
// - every event (start, a result, a timer, cancel) is fed to the machine inside the lock, together with the state
//   changes that must be atomic with it (taking the attempt's completion, the pending timer, the user's closures);
// - the resulting `CallbackTransition` is carried out after the lock is released: user code (operation, strategy,
//   observer, completion, cancel hooks) and scheduler calls never run under the lock;
// - everything except `cancel()` runs on the caller's queue, so observer events come out in order. `cancel()` decides
//   on the calling thread and hops to the queue to deliver the completion.
//
// Queue hops per attempt match a hand-written recursive retry, or beat it: an operation that calls `done` after it
// returned costs one `execute`; one that calls `done` before returning costs none (the result waits in the state and
// is handled right after the operation returns, in a loop, so that a long run of synchronous failures cannot grow the
// stack). The strategy runs in that same block, and a zero-delay retry starts the next attempt inline, arming no timer.
//
// The runner does not depend on the value type: everything typed (the operation, the observer, the completion and
// the attempt's `AttemptSlot<Value>`) sits behind `CallbackClient`, implemented by `CallbackSet<Value>`. Generic code
// that is not specialized (RetryKit is a separate module from its callers) looks up type metadata at run time, and
// keeping the engine non-generic keeps those lookups off the per-attempt path.

/// A finished retrier's result with its value type erased; `RetryHandle<Value>` casts it back.
typealias CallbackOutcome = Result<any Sendable, any Error>

/// What the runner needs from the typed side of a retrier.
protocol CallbackClient: AnyObject, Sendable {
    /// Calls the strategy closure.
    func decide(after error: any Error) -> RetryStrategy<ContinuousClock>
    /// Creates the attempt's completion, attaches it with ``CallbackRunner/attach(_:to:)`` and, unless the attempt was
    /// abandoned meanwhile, runs the operation.
    func start(_ attempt: RetryAttempt, on runner: CallbackRunner)
    /// Emits `attemptStarted` to the observer, if there is one.
    func emitStarted(_ attempt: RetryAttempt)
    /// Emits `attemptFailed` to the observer, if there is one.
    func emitFailed(_ attempt: RetryAttempt, error: any Error, next: RetryNextStep)
    /// Emits the final events, reporting `duplicates` just before `finished`, and runs the completion.
    func finish(_ termination: RetryTermination, value: (any Sendable)?, duplicates: [@Sendable () -> Void])
}

/// The runner's mutable state.
struct CallbackRunnerState {
    /// The engine: counts attempts, chooses delays, decides when to stop.
    var machine: RetryStateMachine
    /// The user's closures; `nil` once the retrier has finished, so nothing they capture is retained.
    var client: (any CallbackClient)?
    /// The completion handed to the attempt in flight, to abandon on cancel or timeout.
    var slot: (any AttemptAbandoning)?
    /// The attempt whose operation is being called right now (0 when none): a result that arrives meanwhile is left in
    /// `earlyResult` for the queue to handle when the operation returns, instead of hopping.
    var callingOperation = 0
    /// A result that arrived while its operation was still being called.
    var earlyResult: (number: Int, result: CallbackOutcome)?
    /// The one pending timer: the wait before a retry, or the attempt's timeout. Held here (the timer's handler does not
    /// capture it) so that it stays alive until it fires or is cancelled.
    var timer: (any RetryCancellable)?
    /// Identifies the timer the runner currently wants. Bumped when a timer is planned and whenever the current one
    /// stops mattering, so that a late or superseded timer's handler does nothing and cannot clobber `timer`.
    var timerEpoch: UInt64 = 0
    /// The result, once the completion has run: what late ``RetryHandle/value`` awaits return.
    var outcome: CallbackOutcome?
    /// Tasks awaiting ``RetryHandle/value``, each resumed exactly once, after the completion and outside the lock.
    var waiters: [CheckedContinuation<any Sendable, any Error>] = []
    /// Reports of duplicate completions (only kept when there is an observer) that have not been delivered yet, by
    /// sequence number. Taken by the next `attemptStarted` or `finished`, so that they come before it, as in every
    /// other runner; each one's own hop reports it if nothing else does first (during a wait, or after the retrier
    /// finished).
    var duplicates: [(sequence: UInt64, report: @Sendable () -> Void)] = []
    /// The sequence number of the last duplicate completion.
    var duplicateSequence: UInt64 = 0
}

/// What to do after a transition, outside the lock.
enum CallbackStep {
    /// Nothing: the event was stale, or the work is done.
    case idle
    /// Emit `attemptStarted`, arm the attempt timer if `timeout` is set, start the attempt.
    case run(RetryAttempt, timeout: Duration?, epoch: UInt64, any CallbackClient)
    /// Ask the strategy about `error` and report the decision.
    case consult(RetryDecisionContext, error: any Error, any CallbackClient)
    /// Emit `attemptFailed(…, next: .retry(after: delay))`, then wait (a timer unless `delay` is zero).
    case wait(Duration, failed: RetryAttempt, error: any Error, epoch: UInt64, any CallbackClient)
    /// Emit the final events, run the completion, resume awaiting tasks.
    case finish(RetryTermination, value: (any Sendable)?, any CallbackClient)
}

/// A step, plus what the transition took out of the state: an attempt to abandon (runs its cancel hook) and a timer to
/// cancel, both outside the lock, and the duplicate completions to report before the step's `attemptStarted` or
/// `finished`.
struct CallbackTransition {
    var step: CallbackStep = .idle
    var abandoned: (any AttemptAbandoning)?
    var stopped: (any RetryCancellable)?
    var duplicates: [@Sendable () -> Void] = []
}

/// The engine behind ``RetryHandle``.
package final class CallbackRunner: Sendable {
    /// The queue the operation, strategy, observer and completion run on.
    let queue: DispatchQueue
    /// Where time and work come from.
    let scheduler: any RetryScheduler
    /// ``RetryScheduler/now`` when the retrier was created: elapsed time is measured from here.
    let origin: Duration
    /// Whether an observer is attached; events are not built otherwise.
    let observes: Bool
    /// Everything that changes, behind RetryKit's one lock. User code never runs while it is held.
    let state: Locked<CallbackRunnerState>

    init(
        configuration: RetryConfiguration, queue: DispatchQueue, scheduler: any RetryScheduler,
        client: any CallbackClient, observes: Bool
    ) {
        self.queue = queue
        self.scheduler = scheduler
        self.origin = scheduler.now
        self.observes = observes
        self.state = Locked(CallbackRunnerState(machine: RetryStateMachine(configuration), client: client))
    }

    /// Starts the retrier: its first step runs on the queue.
    func start() {
        scheduler.execute(on: queue) { self.begin() }
    }

    /// Runs `work` on the queue.
    func hop(_ work: @escaping @Sendable () -> Void) {
        scheduler.execute(on: queue, work)
    }

    var isFinished: Bool {
        state.withLock { $0.machine.isFinished }
    }

    /// The result, once the completion has run.
    var outcome: CallbackOutcome? {
        state.withLock { $0.outcome }
    }

    /// Time since the retrier was created.
    private var elapsed: Duration {
        scheduler.now - origin
    }

    // MARK: - Events

    private func begin() {
        let now = elapsed
        carryOut(state.withLock { Self.apply($0.machine.start(at: now), to: &$0) })
    }

    /// Keeps the completion of attempt `number` so that cancel and timeouts can abandon it. Returns `false` if that
    /// attempt is no longer current (the retrier was cancelled or the attempt timed out before it started): the caller
    /// then abandons it and does not run the operation.
    func attach(_ slot: any AttemptAbandoning, to number: Int) -> Bool {
        state.withLock { s in
            guard s.machine.currentAttempt == number else { return false }
            s.slot = slot
            s.callingOperation = number
            return true
        }
    }

    /// Attempt `number` called its completion (the first call only, from any thread). If its operation has not
    /// returned yet, the result is left for the queue to pick up when it does; otherwise it hops to the queue.
    func attemptCompleted(_ number: Int, _ result: CallbackOutcome) {
        let leftForLater: Bool = state.withLock { s in
            guard s.callingOperation == number else { return false }
            s.earlyResult = (number, result)
            return true
        }
        if !leftForLater {
            scheduler.execute(on: queue) { self.carryOut(self.resultTransition(number, result)) }
        }
    }

    /// Attempt `number`'s operation returned: ends the call and takes a result that arrived during it, if any.
    private func operationReturned(_ number: Int) -> (number: Int, result: CallbackOutcome)? {
        state.withLock { s in
            if s.callingOperation == number { s.callingOperation = 0 }
            let early = s.earlyResult
            s.earlyResult = nil
            return early
        }
    }

    /// Feeds the result of attempt `number` to the machine (on the queue).
    private func resultTransition(_ number: Int, _ result: CallbackOutcome) -> CallbackTransition {
        let now = elapsed
        return state.withLock { s in
            let action: RetryStateMachine.Action
            var value: (any Sendable)?
            switch result {
            case .success(let success):
                value = success
                action = s.machine.attemptSucceeded(number, at: now)
            case .failure(let error):
                action = s.machine.attemptFailed(number, error: error, at: now)
            }
            if case .none = action { return CallbackTransition() }  // late: the attempt was cancelled or timed out
            let timer = s.timer
            s.timer = nil
            s.slot = nil
            s.timerEpoch &+= 1
            var transition = Self.apply(action, value: value, to: &s)
            transition.stopped = timer
            return transition
        }
    }

    /// The timer of attempt `number` fired (on the queue).
    private func attemptTimerFired(_ number: Int, epoch: UInt64) {
        let now = elapsed
        let transition: CallbackTransition = state.withLock { s in
            guard s.timerEpoch == epoch else { return CallbackTransition() }
            let action = s.machine.attemptTimedOut(number, at: now)
            if case .none = action { return CallbackTransition() }
            let timer = s.timer
            let slot = s.slot
            s.timer = nil
            s.slot = nil
            s.timerEpoch &+= 1
            var transition = Self.apply(action, to: &s)
            transition.stopped = timer
            transition.abandoned = slot
            return transition
        }
        carryOut(transition)
    }

    /// The wait before a retry is over (on the queue).
    private func waitTimerFired(epoch: UInt64) {
        let now = elapsed
        let transition: CallbackTransition = state.withLock { s in
            guard s.timerEpoch == epoch else { return CallbackTransition() }
            let timer = s.timer
            s.timer = nil
            s.timerEpoch &+= 1
            var transition = Self.apply(s.machine.waitElapsed(at: now), to: &s)
            transition.stopped = timer
            return transition
        }
        carryOut(transition)
    }

    /// ``RetryHandle/cancel()``: decided on the calling thread; the completion is delivered on the queue.
    func cancel() {
        let now = elapsed
        let transition = state.withLock { Self.apply($0.machine.cancel(at: now), to: &$0) }
        guard case .finish(let termination, let value, let client) = transition.step else { return }
        transition.abandoned?.abandon()
        transition.stopped?.cancel()
        let duplicates = transition.duplicates
        hop { self.deliver(termination, value: value, client, duplicates: duplicates) }
    }

    /// An attempt's completion was called again (from any thread). The report reaches the observer on the queue: with
    /// the next `attemptStarted` or `finished` if one comes first, otherwise through its own hop.
    func duplicateCompleted(_ report: @escaping @Sendable () -> Void) {
        let sequence: UInt64 = state.withLock { s in
            s.duplicateSequence &+= 1
            s.duplicates.append((s.duplicateSequence, report))
            return s.duplicateSequence
        }
        hop { self.reportDuplicates(through: sequence) }
    }

    /// Reports, in order, the duplicate completions up to `sequence` that nothing has reported yet. On the queue.
    ///
    /// Later ones are left alone: they belong after events that are still on their way to the queue.
    private func reportDuplicates(through sequence: UInt64) {
        let reports: [@Sendable () -> Void] = state.withLock { s in
            let due = s.duplicates.prefix { $0.sequence <= sequence }
            s.duplicates.removeFirst(due.count)
            return due.map(\.report)
        }
        for report in reports { report() }
    }

    /// Registers a task awaiting ``RetryHandle/value``, or resumes it at once if the result is already known.
    func register(_ continuation: CheckedContinuation<any Sendable, any Error>) {
        let outcome: CallbackOutcome? = state.withLock { s in
            if let outcome = s.outcome { return outcome }
            s.waiters.append(continuation)
            return nil
        }
        if let outcome { continuation.resume(with: outcome) }
    }

    // MARK: - Transitions (inside the lock)

    /// Turns the machine's action into a step, updating the runner's state to match. Runs inside the lock and runs no
    /// user code.
    private static func apply(
        _ action: RetryStateMachine.Action, value: (any Sendable)? = nil, to s: inout CallbackRunnerState
    ) -> CallbackTransition {
        guard let client = s.client else { return CallbackTransition() }
        switch action {
        case .none:
            return CallbackTransition()
        case .run(let attempt, let timeout):
            var epoch: UInt64 = 0
            if timeout != nil {
                s.timerEpoch &+= 1
                epoch = s.timerEpoch
            }
            return CallbackTransition(
                step: .run(attempt, timeout: timeout, epoch: epoch, client), duplicates: takeDuplicates(&s))
        case .consultStrategy(let context, let error):
            return CallbackTransition(step: .consult(context, error: error, client))
        case .retry(let delay, let failed, let error):
            var epoch: UInt64 = 0
            if delay > .zero {
                s.timerEpoch &+= 1
                epoch = s.timerEpoch
            }
            return CallbackTransition(step: .wait(delay, failed: failed, error: error, epoch: epoch, client))
        case .finish(let termination):
            let transition = CallbackTransition(
                step: .finish(termination, value: value, client), abandoned: s.slot, stopped: s.timer,
                duplicates: takeDuplicates(&s))
            s.client = nil
            s.slot = nil
            s.timer = nil
            s.timerEpoch &+= 1
            return transition
        }
    }

    /// Takes the duplicate completions not reported yet, for the step that comes next. Inside the lock.
    private static func takeDuplicates(_ s: inout CallbackRunnerState) -> [@Sendable () -> Void] {
        if s.duplicates.isEmpty { return [] }
        let duplicates = s.duplicates.map(\.report)
        s.duplicates = []
        return duplicates
    }

    // MARK: - Carrying out (outside the lock, on the queue)

    private func carryOut(_ first: CallbackTransition) {
        var transition = first
        var decidedAt: Duration?  // the time of the last decision: a zero-delay wait ends at that same instant
        while true {
            transition.abandoned?.abandon()
            transition.stopped?.cancel()
            switch transition.step {
            case .idle:
                return
            case .run(let attempt, let timeout, let epoch, let client):
                for report in transition.duplicates { report() }
                if observes { client.emitStarted(attempt) }
                if let timeout {
                    let number = attempt.number
                    arm(after: timeout, epoch: epoch) { self.attemptTimerFired(number, epoch: epoch) }
                }
                client.start(attempt, on: self)
                guard let early = operationReturned(attempt.number) else { return }
                transition = resultTransition(early.number, early.result)
            case .consult(let context, let error, let client):
                let decision = context.resolve(client.decide(after: error))
                let now = elapsed
                decidedAt = now
                transition = state.withLock { Self.apply($0.machine.decide(decision, at: now), to: &$0) }
            case .wait(let delay, let failed, let error, let epoch, let client):
                if observes { client.emitFailed(failed, error: error, next: .retry(after: delay)) }
                if delay > .zero {
                    arm(after: delay, epoch: epoch) { self.waitTimerFired(epoch: epoch) }
                    return
                }
                let now = decidedAt ?? elapsed
                transition = state.withLock { Self.apply($0.machine.waitElapsed(at: now), to: &$0) }
            case .finish(let termination, let value, let client):
                deliver(termination, value: value, client, duplicates: transition.duplicates)
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

    /// Emits the final events (reporting `duplicates` just before `finished`), runs the completion, then resumes the
    /// tasks awaiting the value. On the queue.
    private func deliver(
        _ termination: RetryTermination, value: (any Sendable)?, _ client: any CallbackClient,
        duplicates: [@Sendable () -> Void]
    ) {
        client.finish(termination, value: value, duplicates: duplicates)
        let outcome: CallbackOutcome = termination.result(value: value)
        let waiters: [CheckedContinuation<any Sendable, any Error>] = state.withLock { s in
            s.outcome = outcome
            let waiters = s.waiters
            s.waiters = []
            return waiters
        }
        for waiter in waiters { waiter.resume(with: outcome) }
    }
}

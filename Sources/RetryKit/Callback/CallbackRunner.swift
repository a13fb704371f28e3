import Dispatch

// The completion-handler runner. It carries out the answers of `RetryStateMachine` with a `RetryScheduler`:
//
// - every event (start, a result, a timer, cancel) is fed to the machine inside the lock, together with the state
//   changes that must be atomic with it (taking the attempt's completion, the pending timer, the user's closures);
// - the resulting `CallbackStep` is carried out after the lock is released, and so is what the transition took out of
//   the state (`CallbackEffects`): user code (operation, strategy, observer, completion, cancel hooks) and scheduler
//   calls never run under the lock;
// - everything except `cancel()` runs on the caller's queue, so observer events come out in order. `cancel()` decides
//   on the calling thread and hops to the queue to deliver the completion.
//
// Queue hops per attempt match a hand-written recursive retry, or beat it: an operation that calls `done` after it
// returned costs one `execute`; one that calls `done` before returning costs none (the result waits in the state and
// is handled right after the operation returns, in a loop, so that a long run of synchronous failures cannot grow the
// stack). The strategy runs in that same block, and a zero-delay retry starts the next attempt inline, arming no timer.
//
// The runner does not depend on the value type: everything typed (the operation, the observer, the completion) sits
// behind the closures of `CallbackClient`, built by the inlinable `startCallbackRetrier` and so specialized in the
// caller's module, and an attempt's `AttemptCompletion<Value>` reports to the runner through the non-generic
// `AttemptSink`, its value boxed in an `ErasedValue`. Generic code that is not specialized (RetryKit is a separate module
// from its callers) looks up type metadata at run time (a few hundred instructions per lookup), and this keeps every
// lookup off the path of a retrier.
//
// Where an attempt's completion is tracked (called, abandoned, cancel hook):
//
// - an attempt without a timer and without an observer can only be abandoned by the end of the retrier, so every
//   earlier attempt has necessarily been delivered: the runner tracks it in its own state (`record`) and is itself the
//   completion's sink. No allocation and no lock besides the runner's own per attempt;
// - an attempt with a timer can be abandoned while the retrier goes on (its late first call must then be ignored, and
//   later ones reported as duplicates), and with an observer every attempt's duplicates are reported until the retrier
//   finishes: such an attempt gets its own small record, a `DetachedAttempt`, guarded by the runner's lock. A record
//   keeps only the runner, never the user's closures: those are let go when the retrier finishes, and duplicates that
//   arrive later are dropped.

/// An attempt's result, or a finished retrier's, with the value type erased. Both payloads are single references, so
/// that moving one around costs a retain (`Result<any Sendable, any Error>` goes through the runtime's generic value
/// witnesses instead).
enum ErasedOutcome: Sendable {
    case success(ErasedValue)
    case failure(any Error)

    /// The outcome a termination delivers: its value on success, otherwise its error.
    init(_ termination: RetryTermination, value: ErasedValue?) {
        if termination.error == nil, let value {
            self = .success(value)
        } else {
            self = .failure(
                termination.error ?? RetryError(.invalidConfiguration("internal: finished without a value or an error"))
            )
        }
    }
}

/// A result that arrived while its operation was still being called. Flat fields rather than an enum payload, so that
/// moving it costs no more than its references.
struct EarlyResult {
    /// The attempt; 0 when there is no result.
    var number = 0
    var value: ErasedValue?
    var error: (any Error)?
    /// When it arrived.
    var at: Duration = .zero
}

/// The typed side of a retrier: the user's closures, wrapped where the value type is known (see
/// `startCallbackRetrier`), so that the runner itself needs no generic code. Dropped by the runner as soon as the
/// retrier finishes.
@usableFromInline
final class CallbackClient: Sendable {
    /// Calls the operation with a completion that reports to the sink.
    let run: @Sendable (RetryAttempt, any AttemptSink) -> Void
    /// The strategy closure.
    let strategy: @Sendable (any Error) -> RetryStrategy<ContinuousClock>
    /// Emits the final events (reporting the given duplicate completions just before `finished`) and runs the
    /// completion.
    let finish: @Sendable (RetryTermination, ErasedValue?, _ duplicates: [RetryAttempt]) -> Void
    /// Emits an event to the observer; `nil` without one. Only the runner keeps it (not the attempts' records), so that
    /// nothing of the user's is kept once the retrier has finished, even while the operation keeps a completion.
    let observe: (@Sendable (CallbackEvent) -> Void)?

    @usableFromInline
    init(
        run: @escaping @Sendable (RetryAttempt, any AttemptSink) -> Void,
        strategy: @escaping @Sendable (any Error) -> RetryStrategy<ContinuousClock>,
        finish: @escaping @Sendable (RetryTermination, ErasedValue?, _ duplicates: [RetryAttempt]) -> Void,
        observe: (@Sendable (CallbackEvent) -> Void)?
    ) {
        self.run = run
        self.strategy = strategy
        self.finish = finish
        self.observe = observe
    }
}

/// The observer events the runner emits on its own: those that carry no value. `startCallbackRetrier` turns them into
/// `RetryEvent<Value>`; the final events come from ``RetryTermination/events(value:)``.
@usableFromInline
enum CallbackEvent: Sendable {
    case started(RetryAttempt)
    case failed(RetryAttempt, error: any Error, next: RetryNextStep)
    case duplicate(RetryAttempt)

    /// The same event, as the observer receives it.
    @inlinable
    func typed<Value: Sendable>() -> RetryEvent<Value> {
        switch self {
        case .started(let attempt): return .attemptStarted(attempt)
        case .failed(let attempt, let error, let next): return .attemptFailed(attempt, error: error, next: next)
        case .duplicate(let attempt): return .duplicateCompletion(attempt)
        }
    }
}

/// The runner's mutable state.
@usableFromInline
package struct CallbackRunnerState {
    /// The engine: counts attempts, chooses delays, decides when to stop.
    var machine: RetryStateMachine
    /// The user's closures; `nil` once the retrier has finished, so nothing they capture is retained.
    var client: CallbackClient?
    /// The attempt whose completion the runner tracks in `record` (see the top of this file), until its result has
    /// been handled; 0 when there is none.
    var inlineAttempt = 0
    /// The completion of `inlineAttempt`.
    var record = AttemptRecord()
    /// The record of the attempt in flight when it has its own (it has a timer, or there is an observer).
    var detached: DetachedAttempt?
    /// The attempt whose operation is being called right now (0 when none): a result that arrives meanwhile is left in
    /// `earlyResult` for the queue to handle when the operation returns, instead of hopping.
    var callingOperation = 0
    /// A result that arrived while its operation was still being called (`number` 0 when none).
    var earlyResult = EarlyResult()
    /// The one pending timer: the wait before a retry, or the attempt's timeout. Held here (the timer's handler does not
    /// capture it) so that it stays alive until it fires or is cancelled.
    var timer: PendingTimer?
    /// Identifies the timer the runner currently wants. Bumped when a timer is planned and whenever the current one
    /// stops mattering, so that a late or superseded timer's handler does nothing and cannot clobber `timer`.
    var timerEpoch: UInt64 = 0
    /// The result, once the completion has run: what late ``RetryHandle/value`` awaits return.
    var outcome: ErasedOutcome?
    /// Tasks awaiting ``RetryHandle/value``, each resumed exactly once, after the completion and outside the lock.
    var waiters: [CheckedContinuation<ErasedValue, any Error>] = []
    /// Duplicate completions (only kept when there is an observer) not reported yet, by sequence number. The next
    /// `attemptStarted` or `finished` reports them first, as every other runner does; each one's own hop reports it if
    /// nothing else does first (during a wait, or after the retrier finished).
    var duplicates: [(sequence: UInt64, attempt: RetryAttempt)] = []
    /// The sequence number of the last duplicate completion.
    var duplicateSequence: UInt64 = 0

    /// Abandons the attempt in flight, if any: returns its cancel hook to run outside the lock.
    mutating func abandonAttempt() -> (@Sendable () -> Void)? {
        if let detached {
            self.detached = nil
            return detached.record.abandon()
        }
        // The inline attempt stays known, so that its completion reports `isCancelled`.
        return inlineAttempt != 0 ? record.abandon() : nil
    }
}

/// What to do after an event, outside the lock. A flat struct rather than an enum with payloads: creating, moving and
/// destroying one then costs no more than its few references, without the runtime's generic enum witnesses.
struct CallbackStep {
    enum Kind {
        /// Nothing: the event was stale, or the work is done.
        case idle
        /// Emit `attemptStarted`, arm the attempt timer if `duration` (the timeout) is set, start `attempt` with a
        /// completion that reports to `detached`, or to the runner itself if `nil`.
        case run
        /// Ask the strategy about `error` (with `context`) and report the decision.
        case consult
        /// Emit `attemptFailed(attempt, error, next: .retry(after: duration))`, then wait (a timer unless zero).
        case wait
        /// Emit the final events, run the completion, resume awaiting tasks (all in `finish`).
        case finish
    }

    var kind = Kind.idle
    var attempt = RetryAttempt(number: 0, maxAttempts: 0, elapsed: .zero)
    /// `run`: the attempt's timeout, if any; `wait`: the delay.
    var duration: Duration?
    /// The epoch of the timer to arm.
    var epoch: UInt64 = 0
    var context = RetryDecisionContext(retryIndex: 0, previousDelay: nil)
    var error: (any Error)?
    var detached: DetachedAttempt?
    var finish: CallbackFinish?
}

/// How a retrier ended, boxed: taken out of the state once, and keeps ``CallbackStep`` small.
final class CallbackFinish: Sendable {
    let termination: RetryTermination
    let value: ErasedValue?

    init(_ termination: RetryTermination, value: ErasedValue?) {
        self.termination = termination
        self.value = value
    }
}

/// What a transition took out of the state to run outside the lock: the cancel hook of an abandoned attempt and a timer
/// to cancel.
struct CallbackEffects {
    var hook: (@Sendable () -> Void)?
    var stopped: PendingTimer?
}

/// A timer the runner has armed: the wait before a retry, or an attempt's timeout.
///
/// One object per timer, which is also what the timer's handler captures (so the handler needs no closure context of
/// its own), and which holds the scheduler's token without an existential box for the production scheduler. While
/// armed it keeps its runner alive (a retrier keeps itself alive while it waits); cancelling it releases the handler.
final class PendingTimer: @unchecked Sendable {
    // @unchecked Sendable: `token` is set once, before the runner keeps the timer in its state (under its lock), and
    // read only after taking it back out (under the same lock), which orders the two. Everything else is immutable.

    /// The scheduler's handle on the timer.
    enum Token {
        case none
        case dispatch(DispatchTimerScheduler.Timer)
        case custom(any RetryCancellable)
    }

    let runner: CallbackRunner
    /// The runner's `timerEpoch` when it was planned: a timer whose epoch has passed does nothing.
    let epoch: UInt64
    /// The attempt it times out, or 0 for the wait before a retry.
    let attempt: Int
    var token = Token.none

    init(runner: CallbackRunner, epoch: UInt64, attempt: Int) {
        self.runner = runner
        self.epoch = epoch
        self.attempt = attempt
    }

    /// The timer fired (on the runner's queue).
    func fired() {
        runner.timerFired(self)
    }

    /// Calls the timer off. Idempotent; harmless after it fired.
    func cancel() {
        switch token {
        case .none: break
        case .dispatch(let timer): timer.cancel()
        case .custom(let token): token.cancel()
        }
    }
}

/// The runner's scheduler and the origin of its elapsed time.
enum RunnerClock: Sendable {
    /// ``DispatchTimerScheduler``, used directly: `ContinuousClock`'s time in nanoseconds (``ContinuousTime``),
    /// measured from `origin`. The same time as
    /// ``RetryScheduler/now`` (continuous, like the async runner's default clock), without the existential call.
    case dispatch(origin: UInt64)
    /// Any other scheduler, boxed (the existential would make every runner 40 bytes larger).
    case custom(CustomScheduler)
}

/// A scheduler other than the production one, with ``RetryScheduler/now`` when the retrier was created.
final class CustomScheduler: Sendable {
    let scheduler: any RetryScheduler
    let origin: Duration

    init(_ scheduler: any RetryScheduler) {
        self.scheduler = scheduler
        self.origin = scheduler.now
    }
}

/// The engine behind ``RetryHandle``.
///
/// Its mutable state (everything that changes) is behind RetryKit's one lock, a ``Locked`` (state and lock in one
/// allocation); user code never runs while it is held. Everything else is immutable.
@usableFromInline
package final class CallbackRunner: Sendable {
    /// Everything that changes.
    private let state: Locked<CallbackRunnerState>
    /// The queue the operation, strategy, observer and completion run on.
    let queue: DispatchQueue
    /// Where time and work come from, and when the retrier was created: elapsed time is measured from there.
    let clock: RunnerClock
    /// Whether an observer is attached; events are not built otherwise.
    let observes: Bool

    private init(
        configuration: RetryConfiguration, queue: DispatchQueue, scheduler: any RetryScheduler, client: CallbackClient
    ) {
        self.queue = queue
        if type(of: scheduler) == DispatchTimerScheduler.self {
            self.clock = .dispatch(origin: ContinuousTime.nanoseconds())
        } else {
            self.clock = .custom(CustomScheduler(scheduler))
        }
        self.observes = client.observe != nil
        self.state = Locked(CallbackRunnerState(machine: RetryStateMachine(configuration), client: client))
    }

    /// Runs `body` with exclusive access to the runner's state, under its lock.
    @inline(__always)
    func withLock<T>(_ body: (inout CallbackRunnerState) throws -> T) rethrows -> T {
        try state.withLock(body)
    }

    /// Creates a retrier and starts it: its first step runs on the queue.
    @usableFromInline
    static func start(
        configuration: RetryConfiguration, queue: DispatchQueue, scheduler: any RetryScheduler, client: CallbackClient
    ) -> CallbackRunner {
        let runner = CallbackRunner(configuration: configuration, queue: queue, scheduler: scheduler, client: client)
        runner.hop { runner.begin() }
        return runner
    }

    /// Runs `work` on the queue.
    func hop(_ work: @escaping @Sendable () -> Void) {
        switch clock {
        case .dispatch: queue.async(execute: work)
        case .custom(let custom): custom.scheduler.execute(on: queue, work)
        }
    }

    var isFinished: Bool {
        withLock { $0.machine.isFinished }
    }

    /// The result, once the completion has run.
    var outcome: ErasedOutcome? {
        withLock { $0.outcome }
    }

    /// Time since the retrier was created.
    private var elapsed: Duration {
        switch clock {
        case .dispatch(let origin):
            return ContinuousTime.since(origin)
        case .custom(let custom):
            return custom.scheduler.now - custom.origin
        }
    }

    // MARK: - Events

    /// Runs `body` under the lock, then what it took out of the state (outside the lock), and returns its step.
    @inline(__always)
    private func transition(
        _ body: (inout CallbackRunnerState, inout CallbackEffects) -> CallbackStep
    ) -> CallbackStep {
        var effects = CallbackEffects()
        let step = withLock { body(&$0, &effects) }
        effects.hook?()
        effects.stopped?.cancel()
        return step
    }

    /// Handles an event on the queue: its transition, then every step that follows from it.
    @inline(__always)
    private func handle(_ body: (inout CallbackRunnerState, inout CallbackEffects) -> CallbackStep) {
        var client: CallbackClient?
        var effects = CallbackEffects()
        let step = withLock { s in
            client = s.client
            return body(&s, &effects)
        }
        effects.hook?()
        if let client { carryOut(step, client) }
        // A timer that stopped mattering is cancelled once the step has been carried out: it is usually the timer that
        // just fired (cancelling a fired one-shot source only lets Dispatch release it), and the next attempt should
        // not wait for that. The epoch makes it harmless meanwhile.
        effects.stopped?.cancel()
    }

    private func begin() {
        let now = elapsed
        handle { s, effects in apply(s.machine.start(at: now), to: &s, &effects) }
    }

    /// A completion of attempt `number` was called with `result` (from any thread); `detached` is the attempt's own
    /// record, `nil` for an attempt the runner tracks itself. If the call is the first and the attempt is current, the
    /// result is delivered: left for the queue to pick up if the attempt's operation has not returned yet, otherwise
    /// handled after a hop to the queue.
    func complete(_ number: Int, _ result: ErasedOutcome, detached: DetachedAttempt?) -> AttemptRecord.Call {
        let now = elapsed
        var dropped: (@Sendable () -> Void)?  // the attempt's cancel hook, released after unlocking
        let (call, hop): (AttemptRecord.Call, Bool) = withLock { s in
            let call: AttemptRecord.Call
            if let detached {
                call = detached.record.call(dropping: &dropped)
            } else if s.inlineAttempt == number {
                call = s.record.call(dropping: &dropped)
            } else {
                call = .duplicate  // an earlier attempt of the runner's own: it was delivered
            }
            guard case .deliver = call else { return (call, false) }
            if s.callingOperation == number {
                switch result {
                case .success(let value): s.earlyResult = EarlyResult(number: number, value: value, at: now)
                case .failure(let error): s.earlyResult = EarlyResult(number: number, error: error, at: now)
                }
                return (call, false)
            }
            return (call, true)
        }
        withExtendedLifetime(dropped) {}
        if hop {
            self.hop {
                let now = self.elapsed
                self.handle { s, effects in self.resultTransition(number, result, at: now, &s, &effects) }
            }
        }
        return call
    }

    /// Attempt `number`'s operation returned: ends the call and handles a result that arrived during it, if any.
    private func operationReturned(_ number: Int) -> CallbackStep {
        transition { s, effects in
            if s.callingOperation == number { s.callingOperation = 0 }
            guard s.earlyResult.number != 0 else { return CallbackStep() }
            let early = s.earlyResult
            s.earlyResult = EarlyResult()
            let outcome: ErasedOutcome
            if let value = early.value {
                outcome = .success(value)
            } else {
                outcome = .failure(early.error ?? RetryError(.missingResult))  // always set: one of the two is
            }
            return resultTransition(early.number, outcome, at: early.at, &s, &effects)
        }
    }

    /// Whether attempt `number` is still the current one (the observer or the scheduler may have ended it).
    private func isCurrent(_ number: Int) -> Bool {
        withLock { $0.machine.currentAttempt == number }
    }

    /// A timer fired (on the queue): the wait before a retry is over, or an attempt timed out.
    func timerFired(_ timer: PendingTimer) {
        if timer.attempt == 0 {
            waitTimerFired(epoch: timer.epoch)
        } else {
            attemptTimerFired(timer.attempt, epoch: timer.epoch)
        }
    }

    /// The timer of attempt `number` fired (on the queue).
    private func attemptTimerFired(_ number: Int, epoch: UInt64) {
        let now = elapsed
        handle { s, effects in
            guard s.timerEpoch == epoch else { return CallbackStep() }
            let action = s.machine.attemptTimedOut(number, at: now)
            if case .none = action { return CallbackStep() }
            effects.stopped = s.timer.take()
            s.timerEpoch &+= 1
            effects.hook = s.abandonAttempt()
            return apply(action, to: &s, &effects)
        }
    }

    /// The wait before a retry is over (on the queue).
    private func waitTimerFired(epoch: UInt64) {
        let now = elapsed
        handle { s, effects in
            guard s.timerEpoch == epoch else { return CallbackStep() }
            effects.stopped = s.timer.take()
            s.timerEpoch &+= 1
            return apply(s.machine.waitElapsed(at: now), to: &s, &effects)
        }
    }

    /// ``RetryHandle/cancel()``: decided on the calling thread; the completion is delivered on the queue.
    func cancel() {
        let now = elapsed
        var client: CallbackClient?
        let step = transition { s, effects in
            client = s.client
            return apply(s.machine.cancel(at: now), to: &s, &effects)
        }
        guard let finish = step.finish, let client else { return }
        hop { self.deliver(finish, client) }
    }

    /// Registers a task awaiting ``RetryHandle/value``, or resumes it at once if the result is already known.
    func register(_ continuation: CheckedContinuation<ErasedValue, any Error>) {
        let outcome: ErasedOutcome? = withLock { s in
            if let outcome = s.outcome { return outcome }
            s.waiters.append(continuation)
            return nil
        }
        if let outcome { Self.resume(continuation, with: outcome) }
    }

    // MARK: - Transitions (inside the lock)

    /// Feeds the result of attempt `number` to the machine. Inside the lock.
    private func resultTransition(
        _ number: Int, _ result: ErasedOutcome, at now: Duration, _ s: inout CallbackRunnerState,
        _ effects: inout CallbackEffects
    ) -> CallbackStep {
        let action: RetryStateMachine.Action
        var value: ErasedValue?
        switch result {
        case .success(let success):
            value = success
            action = s.machine.attemptSucceeded(number, at: now)
        case .failure(let error):
            action = s.machine.attemptFailed(number, error: error, at: now)
        }
        if case .none = action { return CallbackStep() }  // late: the attempt was cancelled or timed out
        effects.stopped = s.timer.take()
        s.timerEpoch &+= 1
        s.detached = nil
        s.inlineAttempt = 0
        return apply(action, value: value, to: &s, &effects)
    }

    /// Turns the machine's action into a step, updating the runner's state to match. Runs inside the lock and runs no
    /// user code.
    private func apply(
        _ action: consuming RetryStateMachine.Action, value: ErasedValue? = nil, to s: inout CallbackRunnerState,
        _ effects: inout CallbackEffects
    ) -> CallbackStep {
        guard s.client != nil else { return CallbackStep() }
        switch consume action {
        case .none:
            return CallbackStep()
        case .run(let attempt, let timeout):
            var epoch: UInt64 = 0
            if timeout != nil {
                s.timerEpoch &+= 1
                epoch = s.timerEpoch
            }
            var detached: DetachedAttempt?
            if timeout == nil && !observes {
                s.inlineAttempt = attempt.number
                s.record = AttemptRecord()
            } else {
                detached = DetachedAttempt(runner: self)
                s.detached = detached
            }
            s.callingOperation = attempt.number
            return CallbackStep(kind: .run, attempt: attempt, duration: timeout, epoch: epoch, detached: detached)
        case .consultStrategy(let context, let error):
            return CallbackStep(kind: .consult, context: context, error: error)
        case .retry(let delay, let failed, let error):
            var epoch: UInt64 = 0
            if delay > .zero {
                s.timerEpoch &+= 1
                epoch = s.timerEpoch
            }
            return CallbackStep(kind: .wait, attempt: failed, duration: delay, epoch: epoch, error: error)
        case .finish(let termination):
            if let hook = s.abandonAttempt() { effects.hook = hook }
            if let timer = s.timer.take() { effects.stopped = timer }
            s.client = nil
            s.timerEpoch &+= 1
            return CallbackStep(kind: .finish, finish: CallbackFinish(termination, value: value))
        }
    }

    // MARK: - Carrying out (outside the lock, on the queue)

    private func carryOut(_ first: consuming CallbackStep, _ client: CallbackClient) {
        var step = first
        var decidedAt: Duration?  // the time of the last decision: a zero-delay wait ends at that same instant
        while true {
            switch step.kind {
            case .idle:
                return
            case .run:
                let attempt = step.attempt
                let number = attempt.number
                if let observe = client.observe {
                    for duplicate in takeDuplicates() { observe(.duplicate(duplicate)) }
                    observe(.started(attempt))
                }
                let timeout = step.duration
                if let timeout {
                    arm(PendingTimer(runner: self, epoch: step.epoch, attempt: number), after: timeout)
                }
                // The observer (or the scheduler) may have cancelled the retrier meanwhile: then the attempt does not
                // run. Without either, nothing ran since the transition, and a concurrent cancel is a race anyway.
                if !(observes || timeout != nil) || isCurrent(number) {
                    client.run(attempt, step.detached ?? self)
                }
                step = operationReturned(number)
            case .consult:
                let decision = step.context.resolve(client.strategy(step.error ?? RetryError(.missingResult)))
                let now = elapsed
                decidedAt = now
                let observes = observes
                step = transition { s, effects in
                    var action = s.machine.decide(decision, at: now)
                    // Without an observer, nothing happens between deciding a zero-delay retry and starting it.
                    if !observes, case .retry(let delay, _, _) = action, delay == .zero {
                        action = s.machine.waitElapsed(at: now)
                    }
                    return apply(action, to: &s, &effects)
                }
            case .wait:
                let delay = step.duration ?? .zero
                if let observe = client.observe, let error = step.error {
                    observe(.failed(step.attempt, error: error, next: .retry(after: delay)))
                }
                if delay > .zero {
                    arm(PendingTimer(runner: self, epoch: step.epoch, attempt: 0), after: delay)
                    return
                }
                let now = decidedAt ?? elapsed
                step = transition { s, effects in apply(s.machine.waitElapsed(at: now), to: &s, &effects) }
            case .finish:
                if let finish = step.finish { deliver(finish, client) }
                return
            }
        }
    }

    /// Schedules a timer and keeps it in the state, unless the runner stopped wanting it meanwhile (cancelled, or on a
    /// concurrent queue already past it): then it is cancelled at once.
    private func arm(_ timer: PendingTimer, after delay: Duration) {
        switch clock {
        case .dispatch:
            timer.token = .dispatch(DispatchTimerScheduler().schedule(after: delay, on: queue) { timer.fired() })
        case .custom(let custom):
            timer.token = .custom(custom.scheduler.schedule(after: delay, on: queue) { timer.fired() })
        }
        let kept: Bool = withLock { s in
            guard s.timerEpoch == timer.epoch else { return false }
            s.timer = timer
            return true
        }
        if !kept { timer.cancel() }
    }

    /// Emits the final events, runs the completion, then resumes the tasks awaiting the value. On the queue.
    private func deliver(_ finish: CallbackFinish, _ client: CallbackClient) {
        client.finish(finish.termination, finish.value, observes ? takeDuplicates() : [])
        let outcome = ErasedOutcome(finish.termination, value: finish.value)
        let waiters: [CheckedContinuation<ErasedValue, any Error>] = withLock { s in
            s.outcome = outcome
            let waiters = s.waiters
            s.waiters = []
            return waiters
        }
        for waiter in waiters { Self.resume(waiter, with: outcome) }
    }

    /// An attempt's completion was called again (from any thread). The report reaches the observer on the queue: with
    /// the next `attemptStarted` or `finished` if one comes first, otherwise through its own hop. Dropped once the
    /// retrier has finished (the observer is no longer kept then).
    func duplicateCompleted(_ attempt: RetryAttempt) {
        let sequence: UInt64? = withLock { s in
            guard s.client != nil else { return nil }
            s.duplicateSequence &+= 1
            s.duplicates.append((s.duplicateSequence, attempt))
            return s.duplicateSequence
        }
        guard let sequence else { return }
        hop {
            // Only those up to this one: later ones belong after events that are still on their way to the queue.
            let (due, observe): ([RetryAttempt], (@Sendable (CallbackEvent) -> Void)?) = self.withLock { s in
                let due = s.duplicates.prefix { $0.sequence <= sequence }
                s.duplicates.removeFirst(due.count)
                return (due.map(\.attempt), s.client?.observe)
            }
            guard let observe else { return }
            for duplicate in due { observe(.duplicate(duplicate)) }
        }
    }

    /// Takes the duplicate completions not reported yet, for the event about to be emitted.
    private func takeDuplicates() -> [RetryAttempt] {
        withLock { s in
            if s.duplicates.isEmpty { return [] }
            defer { s.duplicates = [] }
            return s.duplicates.map(\.attempt)
        }
    }

    private static func resume(_ continuation: CheckedContinuation<ErasedValue, any Error>, with outcome: ErasedOutcome)
    {
        switch outcome {
        case .success(let value): continuation.resume(returning: value)
        case .failure(let error): continuation.resume(throwing: error)
        }
    }
}

// MARK: - Completions

/// The runner is the sink of the attempts it tracks itself (no timer, no observer).
extension CallbackRunner: AttemptSink {
    @usableFromInline
    package func attemptSucceeded(_ value: ErasedValue, _ attempt: RetryAttempt) {
        _ = complete(attempt.number, .success(value), detached: nil)
    }

    @usableFromInline
    package func attemptFailed(_ error: any Error, _ attempt: RetryAttempt) {
        _ = complete(attempt.number, .failure(error), detached: nil)
    }

    @usableFromInline
    package func setCancelHook(_ hook: @escaping @Sendable () -> Void, _ attempt: RetryAttempt) {
        // An earlier attempt has been delivered: its hook can never run.
        var dropped: (@Sendable () -> Void)?  // a hook this one replaces, released after unlocking
        let runNow = withLock { s in
            s.inlineAttempt == attempt.number ? s.record.register(hook, dropping: &dropped) : false
        }
        withExtendedLifetime(dropped) {}
        if runNow { hook() }
    }

    @usableFromInline
    package func isAbandoned(_ attempt: RetryAttempt) -> Bool {
        withLock { s in s.inlineAttempt == attempt.number && s.record.abandoned }
    }
}

/// The record of one attempt that has a timer, or whose retrier has an observer: see the top of this file.
final class DetachedAttempt: AttemptSink, @unchecked Sendable {
    // @unchecked Sendable: `record` is only accessed while the runner's lock is held.
    let runner: CallbackRunner
    /// Guarded by the runner's lock (which provides exclusivity, so no dynamic checks).
    @exclusivity(unchecked) var record = AttemptRecord()

    init(runner: CallbackRunner) {
        self.runner = runner
    }

    func attemptSucceeded(_ value: ErasedValue, _ attempt: RetryAttempt) {
        completed(attempt, .success(value))
    }

    func attemptFailed(_ error: any Error, _ attempt: RetryAttempt) {
        completed(attempt, .failure(error))
    }

    private func completed(_ attempt: RetryAttempt, _ result: ErasedOutcome) {
        guard case .duplicate = runner.complete(attempt.number, result, detached: self), runner.observes else { return }
        runner.duplicateCompleted(attempt)
    }

    func setCancelHook(_ hook: @escaping @Sendable () -> Void, _ attempt: RetryAttempt) {
        var dropped: (@Sendable () -> Void)?  // a hook this one replaces, released after unlocking
        let runNow = runner.withLock { _ in record.register(hook, dropping: &dropped) }
        withExtendedLifetime(dropped) {}
        if runNow { hook() }
    }

    func isAbandoned(_ attempt: RetryAttempt) -> Bool {
        runner.withLock { _ in record.abandoned }
    }
}

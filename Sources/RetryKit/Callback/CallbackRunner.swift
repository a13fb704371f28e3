import Dispatch

// The completion-handler runner. It carries out the actions of `RetryStateMachine` with a `RetryScheduler`, and keeps
// no decision of its own:
//
// - every input (start, a result, a timer, cancel) is fed to the machine inside the lock, together with the state
//   changes that must be atomic with it (taking the attempt's cancel hook, the pending timer, the user's closures);
// - the resulting `CallbackStep` is carried out after the lock is released, and so is what the transition took out of
//   the state (`CallbackEffects`): user code (operation, strategy, observer, completion, cancel hooks) and scheduler
//   calls never run under the lock;
// - everything except `cancel()` runs on the caller's queue, so observer events come out in order. `cancel()` decides
//   on the calling thread and hops to the queue to deliver the completion.
//
// The machine's actions map onto the queue and one timer: "run attempt n" is a call of the operation on the queue
// (inline, in the loop of `carryOut`), "wait until t" a one-shot timer of the scheduler (none for a zero delay),
// "finish" the completion. A timer is known by its identity: the state keeps the one it wants (`timer`), and a timer
// that fires after it stopped being wanted finds another one there, or none, and does nothing.
//
// Queue hops per attempt match a hand-written recursive retry, or beat it: an operation that calls `done` after it
// returned costs one `execute`; one that calls `done` before returning costs none (the attempt's record keeps the
// result until the operation returns, and the loop goes on from there, so that a long run of synchronous failures
// cannot grow the stack).
//
// Every attempt has one record, a `CallbackAttempt`: the sink of its `AttemptCompletion`s, and only theirs (the runner
// does not keep it), so that when the last copy of `done` is released uncalled, its `deinit` fails the attempt with
// `RetryError.Reason.completionReleased` instead of leaving the retrier waiting forever. A record whose operation
// returned without keeping `done` (and without calling it) is recognised at once, by being uniquely referenced; one
// released later, on any thread, reports through a hop to the queue, like a late result. A record nobody else holds
// any more is reused for the next attempt, so a run of attempts that call back before returning allocates one.
//
// The runner does not depend on the value type: everything typed (the operation, the observer, the completion) sits
// behind the closures of `CallbackClient`, built by the inlinable `startCallbackRetrier` and so specialized in the
// caller's module, and an attempt's `AttemptCompletion<Value>` reports to the runner through the non-generic
// `AttemptSink`, its value boxed in an `ErasedValue`. Generic code that is not specialized (RetryKit is a separate module
// from its callers) looks up type metadata at run time (a few hundred instructions per lookup), and this keeps every
// lookup off the path of a retrier.

/// An attempt's result, or a finished retrier's, with the value type erased. Both payloads are single references, so
/// that moving one around costs a retain (`Result<any Sendable, any Error>` goes through the runtime's generic value
/// witnesses instead).
enum ErasedOutcome: Sendable {
    case success(ErasedValue)
    case failure(any Error)

    /// The outcome a termination delivers: its value on success, otherwise its error.
    init(_ termination: borrowing RetryTermination, value: ErasedValue?) {
        if termination.error == nil, let value {
            self = .success(value)
        } else {
            self = .failure(
                termination.error ?? RetryError(.invalidConfiguration("internal: finished without a value or an error"))
            )
        }
    }
}

/// The typed side of a retrier: the user's closures, wrapped where the value type is known (see
/// `startCallbackRetrier`), so that the runner itself needs no generic code. Dropped by the runner as soon as the
/// retrier finishes. A struct kept in the runner's state, not an object of its own: one allocation less per retrier.
@usableFromInline
struct CallbackClient: Sendable {
    /// Calls the operation with a completion that reports to the sink.
    let run: @Sendable (RetryAttempt, any AttemptSink) -> Void
    /// The strategy closure.
    let strategy: @Sendable (any Error) -> RetryStrategy<ContinuousClock>
    /// Emits the final events (reporting the given duplicate completions just before `finished`) and runs the
    /// completion. Without an observer, the termination carries no attempts (nothing needs them).
    let finish: @Sendable (RetryTermination, ErasedValue?, _ duplicates: [RetryAttempt]) -> Void
    /// Emits an event to the observer; `nil` without one. Only the runner keeps it (not the attempts' records), so that
    /// nothing of the user's is kept once the retrier has finished, even while the operation keeps a completion.
    let observe: (@Sendable (CallbackEvent) -> Void)?

    /// What a finished runner keeps in place of the user's closures: closures that capture nothing.
    static let released = CallbackClient(
        run: { _, _ in }, strategy: { _ in .stop }, finish: { _, _, _ in }, observe: nil)

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

/// The runner's mutable state: the machine, and what carrying out its actions holds on to. (The small fields come last,
/// where they share the padding of the last optional: every waiting retrier keeps one of these.)
@usableFromInline
package struct CallbackRunnerState {
    /// The engine: counts attempts, chooses delays, decides when to stop. The attempt it is running is the current
    /// one; a record whose number is not that one belongs to an attempt that has ended.
    var machine: RetryStateMachine
    /// The user's closures; ``CallbackClient/released`` once the retrier has finished, so nothing they capture is
    /// retained. Not an optional: an optional of this struct is copied and destroyed through the runtime's generic
    /// value witnesses.
    var client: CallbackClient
    /// The current attempt's cancel hook, until it runs or can no longer run.
    var hook: (@Sendable () -> Void)?
    /// The one pending timer: the wait before a retry, or the current attempt's timeout. Held here (the timer's handler
    /// does not capture it) so that it stays alive until it fires or is cancelled; a timer that fires while it is not
    /// this one does nothing.
    var timer: PendingTimer?
    /// Where the retrier is in its life, with what its end needs: one enum of two words, so that the state (which
    /// every waiting retrier keeps) stays in a smaller allocation size class.
    var phase: CallbackPhase

    /// Whether `record`'s attempt is the one the machine is running (in a run of trials: of the current trial, as
    /// the attempts of every trial are numbered from 1).
    @inline(__always)
    func isCurrent(_ record: CallbackAttempt) -> Bool {
        guard machine.currentAttempt == record.number else { return false }
        return record.generation == 0 || machine.currentTrial == record.generation  // 0: a plain retrier's
    }

    /// A run of trials' own state, until the retrier finishes; `nil` for a plain retrier.
    var trials: CallbackTrials? {
        guard case .running(_, let trials) = phase else { return nil }
        return trials
    }

    /// Whether the retrier has not finished yet (`client` is the user's).
    var isLive: Bool {
        if case .running = phase { return true }
        return false
    }

    /// The result, once the completion has run: what late ``RetryHandle/value`` awaits return.
    var outcome: ErasedOutcome? {
        if case .delivered(let outcome) = phase { return outcome }
        return nil
    }

    /// Registers a task awaiting ``RetryHandle/value`` unless the result is known; returns the result if it is.
    mutating func register(_ waiter: CallbackWaiter) -> ErasedOutcome? {
        switch phase {
        case .delivered(let outcome):
            return outcome
        case .running(var waiters, let trials):
            phase = .delivering(waiters: [])  // releases the enum's reference, so that the append does not copy
            waiters.append(waiter)
            phase = .running(waiters: waiters, trials: trials)
        case .finished(var waiters, let value):
            phase = .delivering(waiters: [])
            waiters.append(waiter)
            phase = .finished(waiters: waiters, value: value)
        case .delivering(var waiters):
            phase = .delivering(waiters: [])
            waiters.append(waiter)
            phase = .delivering(waiters: waiters)
        }
        return nil
    }
}

/// A task awaiting ``RetryHandle/value``.
typealias CallbackWaiter = CheckedContinuation<ErasedValue, any Error>

/// Where a retrier is in its life. Tasks awaiting ``RetryHandle/value`` are kept until the completion has run, then
/// each is resumed exactly once, outside the lock.
enum CallbackPhase {
    /// Not finished: `client` is the user's. A run of trials keeps its own state here (not in the client, which is
    /// copied for every input, nor in a field of its own, which every plain retrier would carry); the `.finish` step
    /// takes it out, so that it is released after unlocking.
    case running(waiters: [CallbackWaiter], trials: CallbackTrials?)
    /// The machine finished, and `deliver` has not yet taken how (``RetryStateMachine/termination``) and the
    /// successful attempt's value.
    case finished(waiters: [CallbackWaiter], value: ErasedValue?)
    /// `deliver` is running the completion.
    case delivering(waiters: [CallbackWaiter])
    /// The completion has run, with this result.
    case delivered(ErasedOutcome)
}

/// What to do after an input, outside the lock. An enum whose payloads are small (an idle step is just its tag), so
/// that creating, moving and destroying one costs little more than its references. Sendable, so that a step decided on
/// another thread (a condition change) can be handed over to the queue.
enum CallbackStep: Sendable {
    /// Nothing: the input was stale, or the work is done.
    case idle
    /// Emit `attemptStarted`, arm `timer` for `timeout` (the attempt's timeout) if set, and run the attempt. The timer
    /// is kept in the state already, so that cancelling meanwhile finds it.
    case run(RetryAttempt, timeout: Duration?, timer: PendingTimer?)
    /// Ask the strategy about `error` (with the context) and report the decision.
    case consult(RetryDecisionContext, error: any Error)
    /// Emit `attemptFailed(failed, error, next: .retry(after: delay))`, then wait: arm `timer`, or go on at once for a
    /// zero delay (no timer).
    case wait(failed: RetryAttempt, delay: Duration, error: any Error, timer: PendingTimer?)
    /// Emit the final events, run the completion, resume awaiting tasks (all in `deliver`).
    case finish
    /// What only runs of trials do, boxed: the steps a plain retrier takes stay as they are (in size, and in how
    /// cheaply they are moved and destroyed).
    indirect case trial(CallbackTrialStep)

    var isIdle: Bool {
        if case .idle = self { return true }
        return false
    }

    /// Whether the step finishes the retrier (``finish``, or a run of trials' ``CallbackTrialStep/finish(_:)``).
    var isFinish: Bool {
        switch self {
        case .finish, .trial(.finish): return true
        case .idle, .run, .consult, .wait, .trial: return false
        }
    }

    /// The run of trials a finishing step ends, if any.
    var endedTrials: CallbackTrials? {
        guard case .trial(.finish(let trials)) = self else { return nil }
        return trials
    }
}

/// What to do after an input that only a run of trials takes (see ``CallbackStep/trial(_:)``).
enum CallbackTrialStep: Sendable {
    /// ``CallbackStep/run(_:timeout:timer:)`` in a run of trials: the attempt's record is of trial `generation` (see
    /// ``RetryStateMachine/currentTrial``).
    case run(RetryAttempt, timeout: Duration?, generation: UInt32, timer: PendingTimer?)
    /// A trial was interrupted (its attempt in flight or its wait already cancelled): emit
    /// `attemptFailed(attempt, error: CancellationError(), next: .giveUp(.cancelled))` if an attempt was, then report
    /// ``RetryStateMachine/interrupted(at:)``.
    case interrupted(RetryAttempt?)
    /// A repeating run's success: emit `attemptSucceeded` with the value, hand it to `onValue`, then arm `timer` for
    /// the pause (a zero pause ends in a new block on the queue, so that a run of synchronous successes cannot hold
    /// the queue: see `arm`).
    case repeatAfter(CallbackTrials, RetryAttempt, value: ErasedValue?, delay: Duration, timer: PendingTimer)
    /// ``CallbackStep/finish``, and stop observing the condition: the run's state, taken out of the runner's state
    /// under the lock, is released after unlocking.
    case finish(CallbackTrials)
}

/// What a transition took out of the state to run or release outside the lock: the cancel hook of an abandoned
/// attempt, one that can no longer run, and a timer to cancel.
struct CallbackEffects {
    var hook: (@Sendable () -> Void)?
    var dropped: (@Sendable () -> Void)?
    var stopped: PendingTimer?
}

/// A timer the runner has armed: the wait before a retry, or an attempt's timeout.
///
/// One object per timer, which is also what the timer's handler captures (so the handler needs no closure context of
/// its own), and which holds the scheduler's token without an existential box for the production scheduler. While
/// armed it keeps its runner alive (a retrier keeps itself alive while it waits); cancelling it releases the handler.
final class PendingTimer: @unchecked Sendable {
    // @unchecked Sendable: `token` is set under the runner's lock while the runner's state holds this timer, and read
    // only after taking it back out of the state (under the same lock), which orders the two. Everything else is
    // immutable.

    /// The scheduler's handle on the timer.
    enum Token {
        case none
        /// A `DispatchSourceTimer`, as the class Dispatch implements it with: one word, where the protocol's
        /// existential takes five (and would put every timer, so every waiting retrier, in a larger size class).
        case dispatch(DispatchSource)
        /// Another scheduler's token, boxed: inline, its existential would make every timer (and every waiting
        /// retrier) 24 bytes larger, which crosses an allocation size class.
        case custom(CustomTimerToken)
    }

    let runner: CallbackRunner
    /// The attempt it times out, or 0 for the wait before a retry.
    let attempt: Int
    var token = Token.none

    init(runner: CallbackRunner, attempt: Int) {
        self.runner = runner
        self.attempt = attempt
    }

    /// The timer fired (on the runner's queue).
    func fired() {
        runner.timerFired(self)
    }

    /// Calls the timer off. Idempotent; harmless after it fired, and before it was armed.
    func cancel() {
        switch token {
        case .none: break
        case .dispatch(let timer): timer.cancel()
        case .custom(let token): token.token.cancel()
        }
    }
}

/// The token of a timer from a scheduler other than the production one.
final class CustomTimerToken: Sendable {
    let token: any RetryCancellable

    init(_ token: any RetryCancellable) {
        self.token = token
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

/// What a runner keeps besides its lock: the immutable part, read without the lock, and the state, read and changed
/// only under it.
struct CallbackRunnerStorage {
    /// Everything that changes. First, so that the immutable fields after it never share its first bytes.
    var state: CallbackRunnerState
    /// The queue the operation, strategy, observer and completion run on.
    let queue: DispatchQueue
    /// Where time and work come from, and when the retrier was created: elapsed time is measured from there.
    let clock: RunnerClock
    /// Whether an observer is attached; events are not built otherwise.
    let observes: Bool

}

/// A runner's one allocation: the lock is the buffer's header, the ``CallbackRunnerStorage`` its one element (in the
/// manner of ``Locked``, without a generic class in between, so that the storage is created and destroyed by
/// specialized code).
final class CallbackRunnerBuffer: ManagedBuffer<LockPrimitive.Raw, CallbackRunnerStorage> {
    /// A buffer holding a new runner's storage, its lock initialized.
    static func make(
        configuration: consuming RetryConfiguration, queue: DispatchQueue, clock: consuming RunnerClock,
        client: consuming CallbackClient, trials: CallbackTrials?
    ) -> CallbackRunnerBuffer {
        let buffer = create(minimumCapacity: 1) { _ in LockPrimitive.Raw() }
        // `create` returns an instance of the class it is called on.
        let runner = unsafeDowncast(buffer, to: CallbackRunnerBuffer.self)
        let observes = client.observe != nil
        let machine: RetryStateMachine
        if let trials {
            machine = RetryStateMachine(configuration, trials: trials.trials)
        } else {
            machine = RetryStateMachine(configuration)
        }
        let storage = CallbackRunnerStorage(
            state: CallbackRunnerState(
                machine: machine, client: client, phase: .running(waiters: [], trials: trials)), queue: queue,
            clock: clock, observes: observes)
        runner.withUnsafeMutablePointers { lock, element in
            LockPrimitive.initialize(lock)
            element.initialize(to: storage)
        }
        return runner
    }

    deinit {
        withUnsafeMutablePointers { lock, storage in
            _ = storage.deinitialize(count: 1)
            LockPrimitive.destroy(lock)
        }
    }
}

/// A weak reference to a runner's storage (see ``CallbackRunner/probe``).
package struct CallbackRunnerProbe: @unchecked Sendable {
    // @unchecked Sendable: a weak reference, only ever read (to learn whether the storage is gone).
    private weak var buffer: CallbackRunnerBuffer?

    init(_ buffer: CallbackRunnerBuffer) {
        self.buffer = buffer
    }

    /// The runner's storage while it is alive; `nil` once it has been released.
    package var object: AnyObject? { buffer }
}

/// The engine behind ``RetryHandle``: a reference to its buffer (state and lock in one allocation). User code never
/// runs while the lock is held.
@usableFromInline
package struct CallbackRunner: @unchecked Sendable {
    // @unchecked Sendable: `ManagedBuffer` is not Sendable. The storage's `state` is only accessed while the lock (the
    // header, initialized before the buffer is shared and never moved) is held; its other fields are immutable.
    let buffer: CallbackRunnerBuffer

    /// A runner for `configuration`, its state ready for `begin`.
    private init(
        configuration: consuming RetryConfiguration, queue: DispatchQueue, scheduler: any RetryScheduler,
        client: consuming CallbackClient, trials: CallbackTrials?
    ) {
        let clock: RunnerClock
        if type(of: scheduler) == DispatchTimerScheduler.self {
            clock = .dispatch(origin: ContinuousTime.nanoseconds())
        } else {
            clock = .custom(CustomScheduler(scheduler))
        }
        buffer = CallbackRunnerBuffer.make(
            configuration: configuration, queue: queue, clock: clock, client: client, trials: trials)
    }

    /// A weak reference to the runner's storage, for tests that check that a finished retrier is released.
    package var probe: CallbackRunnerProbe {
        CallbackRunnerProbe(buffer)
    }

    // The immutable fields are read without the lock, from their own bytes (at `MemoryLayout.offset(of:)`, which the
    // optimizer folds into a constant). A critical section's access to `state` is an access to the whole storage
    // (through `pointee`), which the thread sanitizer would see racing with a read of `queue` through `pointee` on
    // another thread, although the two touch different bytes; nothing ever writes these bytes after creation.

    /// The queue the operation, strategy, observer and completion run on.
    var queue: DispatchQueue {
        buffer.withUnsafeMutablePointerToElements { storage in
            guard let offset = MemoryLayout<CallbackRunnerStorage>.offset(of: \.queue) else {
                return storage.pointee.queue
            }
            return UnsafeRawPointer(storage).load(fromByteOffset: offset, as: DispatchQueue.self)
        }
    }

    /// Where time and work come from.
    var clock: RunnerClock {
        buffer.withUnsafeMutablePointerToElements { storage in
            guard let offset = MemoryLayout<CallbackRunnerStorage>.offset(of: \.clock) else {
                return storage.pointee.clock
            }
            return UnsafeRawPointer(storage).load(fromByteOffset: offset, as: RunnerClock.self)
        }
    }

    /// Whether an observer is attached.
    var observes: Bool {
        buffer.withUnsafeMutablePointerToElements { storage in
            guard let offset = MemoryLayout<CallbackRunnerStorage>.offset(of: \.observes) else {
                return storage.pointee.observes
            }
            return UnsafeRawPointer(storage).load(fromByteOffset: offset, as: Bool.self)
        }
    }

    /// Runs `body` with exclusive access to the runner's state, under its lock.
    @inline(__always)
    func withLock<T>(_ body: (inout CallbackRunnerState) throws -> T) rethrows -> T {
        try buffer.withUnsafeMutablePointers { lock, storage in
            LockPrimitive.lock(lock)
            defer { LockPrimitive.unlock(lock) }
            return try body(&storage.pointee.state)
        }
    }

    /// Creates a retrier and starts it: its first step runs on the queue.
    @usableFromInline
    static func start(
        configuration: consuming RetryConfiguration, queue: DispatchQueue, scheduler: any RetryScheduler,
        client: consuming CallbackClient, trials: CallbackTrials? = nil
    ) -> CallbackRunner {
        let runner = CallbackRunner(
            configuration: configuration, queue: queue, scheduler: scheduler, client: client, trials: trials)
        if let trials {
            runner.hop { runner.begin(trials) }
        } else {
            runner.hop { runner.begin() }
        }
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

    // MARK: - Inputs

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

    /// Handles an input on the queue: its transition, then every step that follows from it.
    @inline(__always)
    private func handle(_ body: (inout CallbackRunnerState, inout CallbackEffects) -> CallbackStep) {
        var effects = CallbackEffects()
        // The client is copied before the transition: releasing the state's copy (when the retrier finishes) then
        // releases none of the user's closures under the lock.
        let (step, client) = withLock { s in
            let client = s.client
            return (body(&s, &effects), client)
        }
        effects.hook?()
        if !step.isIdle { carryOut(step, client) }
        // A timer that stopped mattering is cancelled once the step has been carried out: it is usually the timer that
        // just fired (cancelling a fired one-shot source only lets Dispatch release it), and the next attempt should
        // not wait for that. It no longer is the state's timer, so it is harmless meanwhile.
        effects.stopped?.cancel()
    }

    private func begin() {
        let now = elapsed
        handle { s, effects in apply(s.machine.start(at: now), at: now, to: &s, &effects) }
    }

    /// Starts a run of trials: observes its condition, if any, and starts the machine with the condition as it was when
    /// the observation began. A run cancelled before this stops observing at once.
    private func begin(_ trials: CallbackTrials) {
        var snapshot: RetryConditionSnapshot?
        var observation: RetryConditionObservation?
        if let condition = trials.condition {
            (snapshot, observation) = condition.observe { snapshot in self.conditionChanged(snapshot) }
        }
        let now = elapsed
        var stale = observation  // cancelled below unless the run keeps it
        handle { s, effects in
            guard !s.machine.isFinished else { return .idle }  // cancelled before it began
            trials.observation = stale.take()
            let action = snapshot.map { s.machine.start(at: now, condition: $0) } ?? s.machine.start(at: now)
            return apply(action, at: now, to: &s, &effects)
        }
        stale?.cancel()
    }

    /// The condition of a run of trials changed (on the thread that changed it, possibly concurrently with anything
    /// else). The machine decides under the lock; an interrupted attempt's cancel hook and a cancelled timer run here,
    /// after unlocking (as in ``cancel()``), and the rest (events, the next attempt, the completion) after a hop to the
    /// queue.
    func conditionChanged(_ snapshot: RetryConditionSnapshot) {
        let now = elapsed
        var client = CallbackClient.released
        let step = transition { s, effects in
            client = s.client  // copied before the transition: see `handle`
            return apply(s.machine.conditionChanged(snapshot, at: now), at: now, to: &s, &effects)
        }
        if step.isIdle { return }
        let user = client
        hop {
            // Cancelled meanwhile: only the end is left, and `cancel()` hops to deliver it (no event may follow it).
            if !step.isFinish && self.isFinished { return }
            self.carryOut(step, user)
        }
    }

    /// A completion of `record`'s attempt was called with `result` (from any thread). The first call of the current
    /// attempt is its result: kept in the record if the operation has not returned yet (the loop picks it up when it
    /// does), otherwise handled after a hop to the queue. A first call after the attempt ended is ignored, any later
    /// call is a duplicate.
    func complete(_ record: CallbackAttempt, _ result: ErasedOutcome, _ attempt: RetryAttempt) {
        enum Call { case hop, kept, ignored, duplicate }
        var dropped: (@Sendable () -> Void)?  // the attempt's cancel hook, released after unlocking
        let call: Call = withLock { s in
            guard record.state == .pending else { return .duplicate }
            guard s.isCurrent(record) else {
                record.state = .ignored
                return .ignored
            }
            record.state = .called
            dropped = s.hook.take()
            guard record.calling else { return .hop }
            record.early = result
            return .kept
        }
        withExtendedLifetime(dropped) {}
        switch call {
        case .hop:
            let number = record.number
            hop {
                let now = self.elapsed
                self.handle { s, effects in self.resultTransition(number, result, at: now, &s, &effects) }
            }
        case .duplicate:
            if observes { duplicateCompleted(attempt) }
        case .kept, .ignored:
            break
        }
    }

    /// The last copy of `record`'s completion was released before it was called (from any thread): if the attempt is
    /// still current, it fails with ``RetryError/Reason-swift.enum/completionReleased``, after a hop to the queue.
    func released(_ record: CallbackAttempt) {
        let number = record.number
        var dropped: (@Sendable () -> Void)?
        let current: Bool = withLock { s in
            guard s.isCurrent(record) else { return false }
            dropped = s.hook.take()
            return true
        }
        withExtendedLifetime(dropped) {}
        guard current else { return }
        hop {
            let now = self.elapsed
            self.handle { s, effects in
                self.resultTransition(number, .failure(Self.releasedError(number, at: now)), at: now, &s, &effects)
            }
        }
    }

    private static func releasedError(_ number: Int, at now: Duration) -> RetryError {
        RetryError(.completionReleased, attempts: number, elapsed: now)
    }

    /// `record`'s operation returned: handles the result it left, or its completion released uncalled, if any.
    /// `reusable` tells whether nobody else holds the record any more and it is done with, so that the next attempt may
    /// reuse it.
    private func operationReturned(_ record: inout CallbackAttempt, reusable: inout Bool) -> CallbackStep {
        let now = elapsed
        // Nobody else holds the record: the operation let go of its completion without calling it (or was not called).
        // Nobody can take a new reference either, so this stays true.
        let alone = isKnownUniquelyReferenced(&record)
        return transition { s, effects in
            record.calling = false
            // Read under the lock: the completion's last holder may have called it from another thread.
            reusable = alone && record.state != .pending
            if let early = record.early.take() {
                return resultTransition(record.number, early, at: now, &s, &effects)
            }
            guard alone, record.state == .pending else { return .idle }
            reusable = true
            record.state = .ignored
            guard s.isCurrent(record) else { return .idle }
            effects.dropped = s.hook.take()
            return resultTransition(
                record.number, .failure(Self.releasedError(record.number, at: now)), at: now, &s, &effects)
        }
    }

    /// Whether `record`'s attempt is still the current one (the observer or the scheduler may have ended it).
    private func isCurrent(_ record: CallbackAttempt) -> Bool {
        withLock { $0.isCurrent(record) }
    }

    /// A timer fired (on the queue): the wait before a retry is over, or an attempt timed out.
    func timerFired(_ timer: PendingTimer) {
        let now = elapsed
        handle { s, effects in
            guard s.timer === timer else { return .idle }
            effects.stopped = s.timer.take()
            guard timer.attempt != 0 else { return apply(s.machine.waitElapsed(at: now), at: now, to: &s, &effects) }
            let action = s.machine.attemptTimedOut(timer.attempt, at: now)
            if case .none = action { return .idle }
            effects.hook = s.hook.take()
            return apply(action, at: now, to: &s, &effects)
        }
    }

    /// ``RetryHandle/cancel()``: decided on the calling thread; the completion is delivered on the queue.
    func cancel() {
        let now = elapsed
        var client = CallbackClient.released
        let step = transition { s, effects in
            client = s.client  // copied before the transition: see `handle`
            return apply(s.machine.cancel(at: now), at: now, to: &s, &effects)
        }
        guard step.isFinish else { return }
        let user = client
        let trials = step.endedTrials
        hop { self.deliver(user, trials) }
    }

    /// Registers a task awaiting ``RetryHandle/value``, or resumes it at once if the result is already known.
    func register(_ continuation: CallbackWaiter) {
        let outcome = withLock { $0.register(continuation) }
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
            action = s.machine.attemptSucceededRefunding(number, at: now)  // a budget's refund: no user code
        case .failure(let error):
            action = s.machine.attemptFailed(number, error: error, at: now)
        }
        if case .none = action { return .idle }  // late: the attempt was cancelled or timed out
        effects.stopped = s.timer.take()
        return apply(action, value: value, at: now, to: &s, &effects)
    }

    /// Turns the machine's action into a step, updating the runner's state to match. Runs inside the lock and runs no
    /// user code.
    private func apply(
        _ action: consuming RetryStateMachine.Action, value: ErasedValue? = nil, at now: Duration,
        to s: inout CallbackRunnerState, _ effects: inout CallbackEffects
    ) -> CallbackStep {
        guard s.isLive else { return .idle }
        switch consume action {
        case .none, .withdraw:
            // A withdrawal only follows a decision, and the decision's transition pays it at once (`decidePaying`).
            return .idle
        case .run(let attempt, let timeout):
            var timer: PendingTimer?
            if timeout != nil {
                timer = PendingTimer(runner: self, attempt: attempt.number)
                s.timer = timer
            }
            if case .running(_, .some) = s.phase { return trialRun(attempt, timeout: timeout, timer: timer, &s) }
            return .run(attempt, timeout: timeout, timer: timer)
        case .consultStrategy(let context, let error):
            return .consult(context, error: error)
        case .retry(let delay, let failed, let error):
            var timer: PendingTimer?
            if DelayMath.isPositive(delay) {
                timer = PendingTimer(runner: self, attempt: 0)
                s.timer = timer
            }
            return .wait(failed: failed, delay: delay, error: error, timer: timer)
        case .finish:
            // The attempt in flight, if any, is abandoned.
            if let hook = s.hook.take() { effects.hook = hook }
            if let timer = s.timer.take() { effects.stopped = timer }
            s.client = .released
            if case .running(_, .some) = s.phase { return finishTrials(value: value, &s) }
            guard case .running(let waiters, _) = s.phase else { return .idle }  // not reached: checked above
            s.phase = .finished(waiters: waiters, value: value)
            return .finish
        case .awaitCondition:
            if let timer = s.timer.take() { effects.stopped = timer }
            return .idle
        case .interrupt(let attempt):
            return interrupt(attempt, &s, &effects)
        case .repeatAfter(let delay, let succeeded):
            return pause(delay, after: succeeded, value: value, &s)
        }
    }

    // Out of line: only runs of trials take these, and `apply` stays as small as a plain retrier needs it.

    /// ``RetryStateMachine/Action/interrupt(_:)``: takes the attempt in flight (its hook runs after unlocking; its
    /// record is no longer current, so its result is ignored, even once a later trial runs an attempt of the same
    /// number) or the wait's timer.
    @inline(never)
    private func interrupt(
        _ attempt: RetryAttempt?, _ s: inout CallbackRunnerState, _ effects: inout CallbackEffects
    ) -> CallbackStep {
        if let hook = s.hook.take() { effects.hook = hook }
        if let timer = s.timer.take() { effects.stopped = timer }
        return .trial(.interrupted(attempt))
    }

    /// ``RetryStateMachine/Action/finish`` of a run of trials: its state leaves the runner's state with the step, to be
    /// released after unlocking.
    @inline(never)
    private func finishTrials(value: ErasedValue?, _ s: inout CallbackRunnerState) -> CallbackStep {
        guard case .running(let waiters, let trials?) = s.phase else { return .idle }  // not reached: checked
        s.phase = .finished(waiters: waiters, value: value)
        return .trial(.finish(trials))
    }

    /// ``RetryStateMachine/Action/run(_:timeout:)`` in a run of trials: the attempt's record will be of the current
    /// trial.
    @inline(never)
    private func trialRun(
        _ attempt: RetryAttempt, timeout: Duration?, timer: PendingTimer?, _ s: inout CallbackRunnerState
    ) -> CallbackStep {
        .trial(.run(attempt, timeout: timeout, generation: s.machine.currentTrial, timer: timer))
    }

    /// ``RetryStateMachine/Action/repeatAfter(_:succeeded:)``: the pause's timer, kept in the state already.
    @inline(never)
    private func pause(
        _ delay: Duration, after succeeded: RetryAttempt, value: ErasedValue?, _ s: inout CallbackRunnerState
    ) -> CallbackStep {
        guard let trials = s.trials else { return .idle }  // not reached: the machine repeats only with trials
        let timer = PendingTimer(runner: self, attempt: 0)
        s.timer = timer
        return .trial(.repeatAfter(trials, succeeded, value: value, delay: delay, timer: timer))
    }

    // MARK: - Carrying out (outside the lock, on the queue)

    private func carryOut(_ first: consuming CallbackStep, _ client: CallbackClient) {
        var step = first
        var decidedAt: Duration?  // the time of the last decision: a zero-delay wait ends at that same instant
        var spare: CallbackAttempt?  // a record nobody holds any more, for the next attempt
        while true {
            switch consume step {
            case .idle:
                return
            case .run(let attempt, let timeout, let timer):
                step = run(attempt, timeout: timeout, generation: 0, timer: timer, client, spare: &spare)
            case .consult(let context, let error):
                let decision = context.resolve(client.strategy(error))
                let now = elapsed
                decidedAt = now
                let observes = client.observe != nil
                step = transition { s, effects in
                    // A budget's withdrawal, if the machine asks for one, is carried out here: it runs no user code.
                    var action = s.machine.decidePaying(decision, at: now)
                    // Without an observer, nothing happens between deciding a zero-delay retry and starting it.
                    if !observes, case .retry(let delay, _, _) = action, DelayMath.isZero(delay) {
                        action = s.machine.waitElapsed(at: now)
                    }
                    return apply(action, at: now, to: &s, &effects)
                }
            case .wait(let failed, let delay, let error, let timer):
                if let observe = client.observe {
                    observe(.failed(failed, error: error, next: .retry(after: delay)))
                }
                if let timer {
                    arm(timer, after: delay)
                    return
                }
                let now = decidedAt ?? elapsed
                step = transition { s, effects in apply(s.machine.waitElapsed(at: now), at: now, to: &s, &effects) }
            case .finish:
                deliver(client, nil)
                return
            case .trial(let trialStep):
                guard let next = carryOut(trialStep, client) else { return }
                step = next
            }
        }
    }

    /// Carries out ``CallbackStep/run(_:timeout:timer:)`` (for a run of trials, with the record's generation):
    /// returns the step that follows the operation's return. `spare` is a record nobody holds any more, for the next
    /// attempt.
    @inline(__always)
    private func run(
        _ attempt: RetryAttempt, timeout: Duration?, generation: UInt32, timer: PendingTimer?, _ client: CallbackClient,
        spare: inout CallbackAttempt?
    ) -> CallbackStep {
        if let observe = client.observe {
            for duplicate in takeDuplicates() { observe(.duplicate(duplicate)) }
            observe(.started(attempt))
        }
        if let timer, let timeout { arm(timer, after: timeout) }
        var record = spare.take() ?? CallbackAttempt(runner: self)
        record.begin(attempt, generation: generation)
        // The observer (or the scheduler, or a condition: a run of trials, whose trials are numbered from 1) may have
        // ended the attempt meanwhile: then its operation does not run. Without any of them, nothing ran since the
        // transition, and a concurrent cancel is a race anyway.
        if !(client.observe != nil || timer != nil || generation != 0) || isCurrent(record) {
            client.run(attempt, record)
        }
        var reusable = false
        let next = operationReturned(&record, reusable: &reusable)
        if reusable { spare = record }
        return next
    }

    /// Carries out a step only runs of trials take; returns the next step, or `nil` when the work is done. Out of line,
    /// so that `carryOut` stays as small as a plain retrier needs it.
    @inline(never)
    private func carryOut(_ step: CallbackTrialStep, _ client: CallbackClient) -> CallbackStep? {
        switch step {
        case .run(let attempt, let timeout, let generation, let timer):
            // A run of trials reuses no record: the plain loop keeps its spare in registers.
            var spare: CallbackAttempt?
            return run(attempt, timeout: timeout, generation: generation, timer: timer, client, spare: &spare)
        case .interrupted(let attempt):
            return interrupted(attempt, client)
        case .repeatAfter(let trials, let attempt, let value, let delay, let timer):
            if let value, let succeeded = trials.succeeded { succeeded(attempt, value) }
            arm(timer, after: delay)
            return nil
        case .finish(let trials):
            deliver(client, trials)
            return nil
        }
    }

    /// Carries out ``CallbackTrialStep/interrupted(_:)``: reports the interruption to the machine, and the interrupted
    /// attempt to the observer (unless the retrier finished meanwhile: no event may follow `finished`).
    private func interrupted(_ attempt: RetryAttempt?, _ client: CallbackClient) -> CallbackStep {
        let now = elapsed
        var live = false
        let next = transition { s, effects in
            live = s.isLive
            return apply(s.machine.interrupted(at: now), at: now, to: &s, &effects)
        }
        if live, let attempt, let observe = client.observe {
            observe(.failed(attempt, error: CancellationError(), next: .giveUp(.cancelled)))
        }
        return next
    }

    /// Schedules a timer the state keeps, unless the state stopped wanting it meanwhile (cancelled, or on a concurrent
    /// queue already past it): then it is cancelled at once. A zero delay (only a repeating run's pause has one) arms
    /// nothing: the timer fires from a hop to the queue, which yields the queue as well (and finds the state no longer
    /// wanting it, if it was cancelled meanwhile).
    private func arm(_ timer: PendingTimer, after delay: Duration) {
        if DelayMath.isZero(delay) {
            hop { timer.fired() }
            return
        }
        let token: PendingTimer.Token
        switch clock {
        case .dispatch:
            let scheduled = DispatchTimerScheduler().schedule(after: delay, on: queue) { timer.fired() }
            if let source = scheduled.source as? DispatchSource {
                token = .dispatch(source)
            } else {
                token = .custom(CustomTimerToken(scheduled))  // not reached: Dispatch's sources are `DispatchSource`s
            }
        case .custom(let custom):
            token = .custom(CustomTimerToken(custom.scheduler.schedule(after: delay, on: queue) { timer.fired() }))
        }
        let kept: Bool = withLock { s in
            guard s.timer === timer else { return false }
            timer.token = token
            return true
        }
        if !kept {
            switch token {
            case .none: break
            case .dispatch(let timer): timer.cancel()
            case .custom(let token): token.token.cancel()
            }
        }
    }

    /// Emits the final events, runs the completion, then resumes the tasks awaiting the value. On the queue. A run of
    /// trials stops observing its condition first.
    private func deliver(_ client: CallbackClient, _ trials: CallbackTrials?) {
        var value: ErasedValue?
        var duplicates: [RetryAttempt] = []
        if let trials { stopObserving(trials) }  // the condition keeps nothing of the run from here on
        let termination: RetryTermination? = withLock { s in
            guard case .finished(let waiters, let finalValue) = s.phase else { return nil }
            s.phase = .delivering(waiters: waiters)
            value = finalValue
            if s.machine.hasDuplicates { duplicates = s.machine.takeDuplicates() }
            return s.machine.termination(withAttempts: client.observe != nil)  // events need the attempts
        }
        guard let termination else { return }
        client.finish(termination, value, duplicates)
        let outcome = ErasedOutcome(termination, value: value)
        let waiters: [CallbackWaiter] = withLock { s in
            guard case .delivering(let waiters) = s.phase else { return [] }  // not reached: only `deliver` moves on
            s.phase = .delivered(outcome)
            return waiters
        }
        for waiter in waiters { Self.resume(waiter, with: outcome) }
    }

    /// Cancels a run of trials' registration with its condition (once it has finished). Out of line: only runs of
    /// trials have one.
    @inline(never)
    private func stopObserving(_ trials: CallbackTrials) {
        let observation = withLock { _ in trials.observation.take() }
        observation?.cancel()
    }

    /// An attempt's completion was called again (from any thread). The report reaches the observer on the queue: with
    /// the next `attemptStarted` or `finished` if one comes first, otherwise through its own hop. Dropped once the
    /// retrier has finished (the observer is no longer kept then).
    func duplicateCompleted(_ attempt: RetryAttempt) {
        // The machine keeps them (only when there is an observer) and says which are due.
        guard let sequence = withLock({ $0.machine.duplicateCompleted(attempt) }) else { return }
        hop {
            let (due, observe): ([RetryAttempt], (@Sendable (CallbackEvent) -> Void)?) = self.withLock { s in
                (s.machine.takeDuplicates(through: sequence), s.client.observe)
            }
            guard let observe else { return }
            for duplicate in due { observe(.duplicate(duplicate)) }
        }
    }

    /// Takes the duplicate completions not reported yet, for the event about to be emitted.
    private func takeDuplicates() -> [RetryAttempt] {
        withLock { $0.machine.takeDuplicates() }
    }

    private static func resume(_ continuation: CallbackWaiter, with outcome: ErasedOutcome) {
        switch outcome {
        case .success(let value): continuation.resume(returning: value)
        case .failure(let error): continuation.resume(throwing: error)
        }
    }

    // MARK: - An attempt's record, as its completion's sink

    /// `record`'s attempt registers a cancel hook.
    func setCancelHook(_ hook: @escaping @Sendable () -> Void, of record: CallbackAttempt) {
        var dropped: (@Sendable () -> Void)?  // a hook this one replaces, or one that can never run
        let runNow: Bool = withLock { s in
            guard record.state == .pending else {
                dropped = hook  // called: the hook can never run
                return false
            }
            guard s.isCurrent(record) else { return true }  // abandoned, not called: run at once
            dropped = s.hook.take()
            s.hook = hook
            return false
        }
        withExtendedLifetime(dropped) {}
        if runNow { hook() }
    }

    /// Whether `record`'s attempt was abandoned: it ended (cancelled, timed out, or the retrier finished) before its
    /// completion was called.
    func isAbandoned(_ record: CallbackAttempt) -> Bool {
        withLock { s in
            switch record.state {
            case .called: return false
            case .ignored: return true
            case .pending: return !s.isCurrent(record)
            }
        }
    }
}

/// The record of one attempt: the sink of its ``AttemptCompletion``s, held by them alone (and by the runner while it
/// calls the operation). See the top of this file.
final class CallbackAttempt: AttemptSink, @unchecked Sendable {
    // @unchecked Sendable: the mutable fields are set by the runner before the record is handed to an operation (or
    // while nobody else holds it), and otherwise only accessed while the runner's lock is held — except in `deinit`,
    // which runs after every other holder has let go.

    /// Where the completion's calls go.
    enum State {
        /// Not called yet.
        case pending
        /// Called while its attempt was current: that first call was its result.
        case called
        /// Called after its attempt had ended (the call was ignored), or ended without a call: its release is not
        /// reported.
        case ignored
    }

    let runner: CallbackRunner
    /// The attempt's number.
    @exclusivity(unchecked) private(set) var number = 0
    @exclusivity(unchecked) var state = State.pending
    /// The runner is calling the operation: a result that arrives now is kept in `early` for when it returns.
    @exclusivity(unchecked) var calling = false
    /// The trial the attempt belongs to (``RetryStateMachine/currentTrial``; 0 for a plain retrier). Placed where it fills
    /// padding: the record is no larger for it.
    @exclusivity(unchecked) private(set) var generation: UInt32 = 0
    /// A result that arrived while the operation was being called.
    @exclusivity(unchecked) var early: ErasedOutcome?

    init(runner: CallbackRunner) {
        self.runner = runner
    }

    /// Makes this (new, or no longer held) record the record of `attempt` of trial `generation`, about to be called.
    func begin(_ attempt: RetryAttempt, generation: UInt32) {
        number = attempt.number
        self.generation = generation
        state = .pending
        calling = true
        early = nil
    }

    deinit {
        // Every copy of the completion is gone, so nothing can change `state` any more.
        if state == .pending { runner.released(self) }
    }

    func attemptSucceeded(_ value: ErasedValue, _ attempt: RetryAttempt) {
        runner.complete(self, .success(value), attempt)
    }

    func attemptFailed(_ error: any Error, _ attempt: RetryAttempt) {
        runner.complete(self, .failure(error), attempt)
    }

    func setCancelHook(_ hook: @escaping @Sendable () -> Void, _ attempt: RetryAttempt) {
        runner.setCancelHook(hook, of: self)
    }

    func isAbandoned(_ attempt: RetryAttempt) -> Bool {
        runner.isAbandoned(self)
    }
}

import Dispatch

// What a completion-handler retrier keeps: the state behind its lock, the record of each attempt, and its timers.
// `CallbackRunner.swift` has the runner that feeds the machine and carries out its actions.

/// Which attempt something belongs to: its number and its trial (``RetryStateMachine/currentTrial``; 0 for a plain
/// retrier). Attempts are numbered from 1 in every trial of a run of trials, so the number alone is not enough.
struct AttemptID: Equatable, Sendable {
    let number: Int
    let trial: UInt32
}

/// The user's closures of one retrier, as the runner calls them: with the value type erased, so that the runner is not
/// generic (generic code that is not specialized looks up type metadata at run time: a generic runner measured 79,634
/// instructions per retrier against 5,341 for the hand-written recursion, Benchmarks/README.md). The one conforming
/// type, ``TypedCallbackClosures``, holds an entry point's closures typed and converts at its methods.
///
/// Not `Sendable`: the closures may be isolated to the main actor or confined to the retrier's queue, and the runner
/// only calls them in blocks on that queue (see ``CallbackRunner``). They stay in the runner's state until the
/// completion has run, then they are released (on the queue).
@usableFromInline
protocol CallbackUserClosures: AnyObject {
    /// Whether an observer is attached: the runner builds events only then.
    var observes: Bool { get }
    /// Calls the operation for `record`'s attempt, with a completion that reports to `record`.
    func run(_ record: AttemptSink)
    /// The strategy's answer to a failure.
    func strategy(for error: any Error) -> RetryStrategy<ContinuousClock>
    /// Emits `event` to the observer (whose value, if any, is the operation's).
    func observe(_ event: RetryEvent<any Sendable>)
    /// A repeating run's handler of each success (nothing for a run that ends with its first success).
    func handOver(_ value: any Sendable)
    /// The completion.
    func complete(_ result: Result<any Sendable, any Error>, _ summary: RetrySummary)
}

/// An entry point's closures, typed: one object, made in the caller's module, whose methods convert between the
/// runner's erased values and `Value`.
///
/// The conversions are written in the inlinable initializer as closures that capture nothing (no allocation), so that
/// they are specialized for `Value` in the caller's module: the methods of this generic class are compiled once, for
/// any `Value`, and building a `Result<Value, any Error>` there looks up its type metadata on every call (about 1,000
/// instructions per retrier, measured: Benchmarks/README.md).
@usableFromInline
final class TypedCallbackClosures<Value: Sendable>: CallbackUserClosures {
    @usableFromInline let operation: (RetryAttempt, AttemptCompletion<Value>) -> Void
    @usableFromInline let strategy: (any Error) -> RetryStrategy<ContinuousClock>
    @usableFromInline let observer: ((RetryEvent<Value>) -> Void)?
    @usableFromInline let onValue: ((Value) -> Void)?
    @usableFromInline let completion: (Result<Value, any Error>, RetrySummary) -> Void
    /// `observer` called with an erased event.
    @usableFromInline let observeErased: (TypedCallbackClosures, RetryEvent<any Sendable>) -> Void
    /// `onValue` called with an erased value.
    @usableFromInline let handOverErased: (TypedCallbackClosures, any Sendable) -> Void
    /// `completion` called with an erased result.
    @usableFromInline let completeErased: (TypedCallbackClosures, Result<any Sendable, any Error>, RetrySummary) -> Void

    @inlinable
    init(
        operation: @escaping (RetryAttempt, AttemptCompletion<Value>) -> Void,
        strategy: @escaping (any Error) -> RetryStrategy<ContinuousClock>,
        observer: ((RetryEvent<Value>) -> Void)?,
        onValue: ((Value) -> Void)?,
        completion: @escaping (Result<Value, any Error>, RetrySummary) -> Void
    ) {
        self.operation = operation
        self.strategy = strategy
        self.observer = observer
        self.onValue = onValue
        self.completion = completion
        observeErased = { closures, event in closures.observer?(event.typed()) }
        handOverErased = { closures, value in
            if let onValue = closures.onValue, let value = value as? Value { onValue(value) }
        }
        completeErased = { closures, result, summary in closures.completion(result.typed(), summary) }
    }

    @usableFromInline
    var observes: Bool { observer != nil }

    @usableFromInline
    func run(_ record: AttemptSink) {
        operation(record.attempt, AttemptCompletion(sink: record))
    }

    @usableFromInline
    func strategy(for error: any Error) -> RetryStrategy<ContinuousClock> {
        strategy(error)
    }

    @usableFromInline
    func observe(_ event: RetryEvent<any Sendable>) {
        observeErased(self, event)
    }

    @usableFromInline
    func handOver(_ value: any Sendable) {
        handOverErased(self, value)
    }

    @usableFromInline
    func complete(_ result: Result<any Sendable, any Error>, _ summary: RetrySummary) {
        completeErased(self, result, summary)
    }
}

extension RetryEvent where Value == any Sendable {
    /// The same event with the operation's value as `V` (it always is one: only the operation produced it).
    @inlinable
    func typed<V: Sendable>() -> RetryEvent<V> {
        switch self {
        case .attemptStarted(let attempt): return .attemptStarted(attempt)
        case .attemptFailed(let attempt, let error, let next): return .attemptFailed(attempt, error: error, next: next)
        case .attemptSucceeded(let attempt, let value):
            guard let value = value as? V else { return .duplicateCompletion(attempt) }  // not reached
            return .attemptSucceeded(attempt, value)
        case .finished(let summary, let error): return .finished(summary, error: error)
        case .duplicateCompletion(let attempt): return .duplicateCompletion(attempt)
        }
    }
}

extension Result where Success == any Sendable, Failure == any Error {
    /// The same result with the operation's value as `V`.
    @inlinable
    func typed<V: Sendable>() -> Result<V, any Error> {
        switch self {
        case .success(let value):
            guard let value = value as? V else { return .failure(RetryError(.missingResult)) }  // not reached
            return .success(value)
        case .failure(let error): return .failure(error)
        }
    }
}

/// What an attempt's completion reported. A success's value stays in its record (``CallbackAttempt/value``) until the
/// machine accepts it: a value of unknown type (`any Sendable`) in this enum would make every copy and destruction of
/// a report, on the path of every failure too, go through run-time value witnesses (about 1,000 instructions per
/// retrier, measured: Benchmarks/README.md).
enum AttemptReport {
    case succeeded(CallbackAttempt)
    case failed(any Error)
}

/// Everything about a retrier that changes, behind its lock. Only ``CallbackRunner`` touches it.
struct CallbackRunnerState {
    /// The engine: counts attempts, chooses delays, decides when to stop.
    var machine: RetryStateMachine
    /// The user's closures, until the completion runs.
    var user: (any CallbackUserClosures)?
    /// The result, once the completion has run: what late awaits of ``RetryHandle/value`` receive.
    var outcome: Result<any Sendable, any Error>?
    /// The record of the attempt whose operation is being called right now, if any: a result that arrives before the
    /// operation returns waits in ``early`` until it does.
    var calling: CallbackAttempt?
    var early: AttemptReport?
    /// The value of the attempt that succeeded last, until the completion (or a repeating run's `onValue`) takes it.
    var value: (any Sendable)?
    /// The cancel hook of the current attempt, while the attempt is current and its completion was not called.
    var hook: (id: AttemptID, run: @Sendable () -> Void)?
    /// The one timer the retrier may have pending: the current attempt's timeout, or the wait before the next attempt.
    var timer: PendingTimer?
    /// Tasks awaiting ``RetryHandle/value``, resumed once the completion has run.
    var waiters: [@Sendable (Result<any Sendable, any Error>) -> Void] = []
    /// A gated run's registration with its condition, until the run finishes.
    var observation: RetryConditionObservation?
    /// The last registration with the recovery (``RetryStateMachine/Action/acquire``), until the run finishes or
    /// registers again: called off then, if the recovery has not answered it. (An answer the machine no longer waits for
    /// changes nothing.)
    var recoveryWait: RecoveryRegistration?

    init(machine: consuming RetryStateMachine, user: any CallbackUserClosures) {
        self.machine = machine
        self.user = user
    }

    /// The identity of the attempt the machine is running, if it runs one.
    var currentAttempt: AttemptID? {
        guard let number = machine.currentAttempt else { return nil }
        return AttemptID(number: number, trial: machine.currentTrial)
    }

    /// Whether the machine still wants `timer`: an attempt's timeout while that attempt runs, a wait while it waits.
    func wants(_ timer: PendingTimer) -> Bool {
        switch timer.purpose {
        case .wait: return machine.isWaiting
        case .timeout(let id): return currentAttempt == id
        }
    }

    /// Keeps `timer` as the pending timer. A timer still pending is never overwritten: it is returned, to be
    /// cancelled after unlocking (the machine never asks for a second timer while one is wanted, so this returns the
    /// previous timer only if it was no longer wanted anyway).
    mutating func keep(_ timer: PendingTimer) -> PendingTimer? {
        let previous = self.timer.take()
        assert(previous.map { !wants($0) } ?? true, "RetryKit internal: a pending timer would be overwritten")
        self.timer = timer
        return previous
    }

    /// Takes out what the machine no longer wants after an input: the hook of an attempt that is no longer current,
    /// and a timer it no longer waits for. Both are released or cancelled by the caller, after unlocking.
    mutating func takeUnwanted() -> Leftovers {
        var leftovers = Leftovers()
        if let hook, hook.id != currentAttempt { leftovers.hook = self.hook.take()?.run }
        if let timer, !wants(timer) { leftovers.timer = self.timer.take() }
        return leftovers
    }
}

/// What an input took out of the state: a cancel hook to run (its attempt was abandoned) and a timer to cancel.
struct Leftovers {
    var hook: (@Sendable () -> Void)?
    var timer: PendingTimer?

    /// Runs the hook and cancels the timer: after unlocking.
    consuming func discard() {
        hook?()
        timer?.cancel()
    }
}

/// A runner's registration with a recovery whose answer it waits for.
struct RecoveryRegistration {
    let recovery: RecoveryCore
    let ticket: RecoveryTicket

    /// Calls the registration off (after unlocking): the recovery keeps nothing of the runner.
    func cancel() {
        recovery.stopWaiting(ticket)
    }
}

/// A timer the runner has armed, known by its identity: a timer that fires after the state stopped holding it does
/// nothing. The scheduler's handler captures this object alone; while the timer is pending it keeps the runner alive
/// (a waiting retrier keeps itself alive), and the cycle ends when the runner takes the timer out of its state and
/// cancels it, which every path that drops a timer does.
final class PendingTimer: @unchecked Sendable {
    // @unchecked Sendable: `token` is set once, under the runner's lock while the state holds this timer, and read in
    // `cancel()` after the timer was taken out of the state under the same lock, which orders the two.

    enum Purpose: Equatable {
        /// The wait before the next attempt (or a repeating run's pause).
        case wait
        /// The timeout of an attempt.
        case timeout(AttemptID)
    }

    let purpose: Purpose
    let runner: CallbackRunner
    /// The scheduler's handle; `nil` until it is armed. (A zero wait has no timer: it is a hop to the queue.)
    var token: (any RetryCancellable)?

    init(_ purpose: Purpose, of runner: CallbackRunner) {
        self.purpose = purpose
        self.runner = runner
    }

    /// The scheduler's handler (on the runner's queue).
    func fired() {
        runner.timerFired(self)
    }

    /// Calls the timer off. Harmless after it fired and before it was armed.
    func cancel() {
        token?.cancel()
    }
}

/// The record of one attempt, and the sink of its ``AttemptCompletion``s. Held by the completions (and by the runner
/// while it calls the operation): when the last copy of the completion is released uncalled, `deinit` tells the runner,
/// which fails the attempt with ``RetryError/Reason-swift.enum/completionReleased`` if it is still current.
final class CallbackAttempt: AttemptSink, @unchecked Sendable {
    // @unchecked Sendable: `calls` and `value` are only accessed while the runner's lock is held, except in `deinit`,
    // which runs after every other holder has let go. Everything else is immutable.

    /// What became of the completion's first call.
    enum Calls {
        /// Not called yet.
        case none
        /// Called while its attempt was current: that call was the attempt's result.
        case result
        /// Called after its attempt had ended, or the attempt ended without a call: nothing more is reported.
        case ignored
    }

    let runner: CallbackRunner
    let id: AttemptID
    /// Under the runner's lock.
    var calls = Calls.none
    /// The value of the completion's first call, when it succeeded, until the machine accepts it (or the record is
    /// released with it: the attempt had ended meanwhile). Under the runner's lock.
    var value: (any Sendable)?

    init(runner: CallbackRunner, id: AttemptID, attempt: RetryAttempt) {
        self.runner = runner
        self.id = id
        super.init(attempt: attempt)
    }

    deinit {
        if case .none = calls { runner.released(id) }
    }

    override func attemptSucceeded<V: Sendable>(value: V) {
        runner.complete(self, .succeeded(self)) { $0.value = value }
    }

    override func attemptFailed(_ error: any Error) {
        runner.complete(self, .failed(error)) { _ in }
    }

    override func setCancelHook(_ hook: @escaping @Sendable () -> Void) {
        runner.setCancelHook(hook, of: self)
    }

    override var isAbandoned: Bool {
        runner.isAbandoned(self)
    }

    /// The credential the attempt runs with (a run with a recovery), while it is current; `nil` otherwise.
    override var credential: (any Sendable)? {
        runner.credential(of: self)
    }
}

/// A weak reference to a runner (see ``CallbackRetrier/probe``), for tests that check a finished retrier is released.
@usableFromInline
package struct CallbackRunnerProbe: @unchecked Sendable {
    // @unchecked Sendable: a weak reference, only ever read (to learn whether the runner is gone).
    private weak var runner: AnyObject?

    init(_ runner: AnyObject) {
        self.runner = runner
    }

    /// The runner while it is alive; `nil` once it has been released.
    package var object: AnyObject? { runner }
}

/// Where a runner's elapsed time comes from: with the production scheduler, `ContinuousClock`'s time source read
/// directly (what ``DispatchTimerScheduler/now`` reads, without building a `Duration` per reading through the
/// standard library); with any other scheduler (a virtual one in tests), its ``RetryScheduler/now``.
enum RunnerClock {
    /// The production scheduler: nanoseconds of ``ContinuousTime`` since `origin`.
    case continuous(origin: UInt64)
    /// Any other scheduler: its `now` since `origin`.
    case scheduler(origin: Duration)

    init(_ scheduler: any RetryScheduler) {
        if Self.isDispatch(scheduler) {
            self = .continuous(origin: ContinuousTime.nanoseconds())
        } else {
            self = .scheduler(origin: scheduler.now)
        }
    }

    /// The time since the retrier was created.
    @inline(__always)
    func elapsed(_ scheduler: any RetryScheduler) -> Duration {
        switch self {
        case .continuous(let origin): return ContinuousTime.since(origin)
        case .scheduler(let origin): return scheduler.now - origin
        }
    }

    /// Whether `scheduler` is the production scheduler (a metatype comparison: the existential is opened).
    private static func isDispatch<S: RetryScheduler>(_ scheduler: S) -> Bool {
        S.self == DispatchTimerScheduler.self
    }
}

/// What an input came to: the machine's action and, when the action starts an attempt, that attempt's identity and the
/// duplicate completions to report before it (taken in the same lock, so that none is reported twice).
struct Fed {
    var action: RetryStateMachine.Action
    var started: AttemptID?
    var duplicates: [RetryAttempt]

    init(_ action: consuming RetryStateMachine.Action, started: AttemptID? = nil, duplicates: [RetryAttempt] = []) {
        self.action = action
        self.started = started
        self.duplicates = duplicates
    }
}

/// Where the first call of an attempt's completion goes (``CallbackRunner/complete(_:_:_:)``).
enum CompletionRoute {
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
    /// `action` as an input's outcome, with the duplicates to report first when it starts an attempt.
    mutating func fed(_ action: consuming RetryStateMachine.Action) -> Fed {
        guard case .run = action else { return Fed(action) }
        return Fed(action, started: currentAttempt, duplicates: machine.hasDuplicates ? machine.takeDuplicates() : [])
    }

    /// Feeds the result of attempt `id` to the machine; a success's value is kept for the completion (or `onValue`).
    /// A result of an attempt that is no longer current changes nothing.
    mutating func feed(_ report: consuming AttemptReport, of id: AttemptID, at now: Duration)
        -> RetryStateMachine.Action
    {
        guard currentAttempt == id else { return .none }
        switch consume report {
        case .succeeded(let record):
            value = record.value.take()
            return machine.attemptSucceededRefunding(id.number, at: now)  // a budget's refund: no user code
        case .failed(let error):
            return machine.attemptFailed(id.number, error: error, at: now)
        }
    }
}

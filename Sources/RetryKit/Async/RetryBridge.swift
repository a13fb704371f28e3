/// How one attempt of
/// ``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)``
/// ended.
///
/// Not generic: the bridge, its state and its attempts are compiled once in RetryKit, for every value type, where code
/// generic over the value would look its types up at run time on every call (Benchmarks/README.md has the figure).
/// The value travels as `any Sendable`, and the runner, which knows its type, casts it back.
@usableFromInline
enum BridgeOutcome: Sendable {
    /// The completion was called with a value (of the call's value type).
    case success(any Sendable)
    /// The completion was called with an error.
    case failure(any Error)
    /// Every copy of the completion was released uncalled.
    case released
    /// The attempt's timer fired first.
    case timedOut
    /// The task was cancelled first.
    case cancelled
}

/// The state of a ``RetryBridge``: the attempt in flight, how far it has got, and the task waiting for it.
///
/// A plain value, only ever accessed under the bridge's lock. Every input that may end the attempt (its completion,
/// its timer, task cancellation, the release of its completion) goes through ``end(_:)``, so the first one wins and the
/// waiting continuation is handed out exactly once.
@usableFromInline
struct RetryBridgeState: Sendable {
    /// Where the attempt in flight stands.
    enum Progress: Sendable {
        /// Running, and nobody waits for it yet.
        case running
        /// Running, and the runner's task waits for its end: the continuation leaves the state with the input that
        /// ends the attempt, to be resumed after the lock is released.
        case awaited(UnsafeContinuation<BridgeOutcome, Never>)
        /// Ended before the runner waited (a completion called while the operation ran, say): the outcome, until the
        /// runner takes it.
        case ended(BridgeOutcome)
        /// Ended, and the outcome handed to the runner.
        case over
    }

    /// The attempt in flight. A bridge is made with attempt 1 started.
    var attempt = 1
    /// Where it stands.
    var progress = Progress.running
    /// Whether it was abandoned (timed out, or the task was cancelled): its completion's first call is then ignored,
    /// and a cancel hook registered later runs at once.
    var abandoned = false
    /// Its cancel hook, until it runs or can no longer run. An attempt whose completion was released uncalled keeps
    /// it: a cancellation that arrives as its operation returns still runs it.
    var hook: (@Sendable () -> Void)?
    /// Completions called more than once, for the observer (reported before the next `attemptStarted` or `finished`).
    var duplicates: [RetryAttempt] = []

    /// Whether the attempt has ended (its outcome may still be waiting for the runner).
    var hasEnded: Bool {
        switch progress {
        case .running, .awaited: false
        case .ended, .over: true
        }
    }

    /// Ends the attempt with `outcome` unless it has ended already. Returns the waiting continuation, for the caller
    /// to resume with `outcome` once it has unlocked; if nobody waits yet, the outcome is kept for the runner.
    mutating func end(_ outcome: BridgeOutcome) -> UnsafeContinuation<BridgeOutcome, Never>? {
        switch progress {
        case .running:
            progress = .ended(outcome)
            return nil
        case .awaited(let waiter):
            progress = .over
            return waiter
        case .ended, .over:
            return nil
        }
    }

    /// The outcome of an attempt that ended before the runner waited, handed out once.
    mutating func takeOutcome() -> BridgeOutcome? {
        guard case .ended(let outcome) = progress else { return nil }
        progress = .over
        return outcome
    }

    /// Abandons the attempt: returns its cancel hook, to run once the lock is released. `nil` if it was abandoned
    /// already or has no hook (a called completion has let go of it).
    mutating func abandon() -> (@Sendable () -> Void)? {
        guard !abandoned else { return nil }
        abandoned = true
        return hook.take()
    }

    /// The duplicate completions so far, forgotten once taken.
    mutating func takeDuplicates() -> [RetryAttempt] {
        guard !duplicates.isEmpty else { return [] }
        defer { duplicates = [] }
        return duplicates
    }
}

/// The attempts of one
/// ``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)``
/// call, one after the other: where their completions report, and what the call waits on.
///
/// Three things race to end an attempt: its completion, its timer and task cancellation (a fourth, the release of
/// every copy of the completion uncalled, ends it too), and any of them may come before the task waits. The first one
/// ends it (``RetryBridgeState/end(_:)``). An attempt that ended before the task waits (a completion called while the
/// operation ran) costs no continuation, no timer and no cancellation handler.
///
/// The pattern of every method: lock, change the state, take out what must happen next (a continuation to resume, a
/// hook to run, a hook or an outcome to let go of), unlock, then do it. No user code runs under the lock, and nothing
/// that may hold the user's objects (hooks, values, errors) is released there: their `deinit`s may call back into the
/// bridge.
@usableFromInline
struct RetryBridge: Sendable {
    /// The continuation of the task waiting for an attempt. Unchecked, and sound: it is stored only in
    /// ``RetryBridgeState/Progress/awaited(_:)`` and leaves the state with the one input that ends the attempt
    /// (``RetryBridgeState/end(_:)`` moves the state on to `.over`), so it is resumed exactly once.
    typealias Waiter = UnsafeContinuation<BridgeOutcome, Never>

    /// The attempt in flight and the task waiting for it, behind the bridge's lock.
    let state = Locked(RetryBridgeState())

    /// A bridge with attempt 1 started.
    @usableFromInline
    init() {}

    /// Starts attempt `number` (after attempt 1, which a bridge is made with) and returns the duplicate completions
    /// so far (forgotten once taken), for the observer.
    @usableFromInline
    func begin(_ number: Int) -> [RetryAttempt] {
        var previous = RetryBridgeState()
        previous.attempt = number
        state.withLock { swap(&$0, &previous) }
        // `previous` holds the last attempt's leftovers, released here, after unlocking: a hook kept by an attempt
        // whose completion was released uncalled may hold user objects whose `deinit` calls into this bridge.
        return previous.duplicates
    }

    /// Every copy of attempt `number`'s completion was released uncalled: unless the attempt has ended (by its timer
    /// or a cancellation), it fails with ``RetryError/Reason-swift.enum/completionReleased`` instead of waiting
    /// forever.
    func released(_ number: Int) {
        let waiter = state.withLock { s -> Waiter? in s.attempt == number ? s.end(.released) : nil }
        waiter?.resume(returning: .released)
    }

    /// How the current attempt ended, if it has already, with the duplicate completions so far (forgotten once
    /// taken).
    @usableFromInline
    func takeOutcomeAndDuplicates() -> (BridgeOutcome, [RetryAttempt])? {
        state.withLock { s in
            guard let outcome = s.takeOutcome() else { return nil }
            return (outcome, s.takeDuplicates())
        }
    }

    /// Waits for the current attempt to end.
    @usableFromInline
    func wait(isolation: isolated (any Actor)? = #isolation) async -> BridgeOutcome {
        await withUnsafeContinuation(isolation: isolation) { continuation in
            let ready = state.withLock { s -> BridgeOutcome? in
                if let outcome = s.takeOutcome() { return outcome }
                s.progress = .awaited(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// The timer of attempt `number` fired: abandons the attempt (its cancel hook runs) unless it has ended.
    @usableFromInline
    func timeOut(_ number: Int) {
        let (hook, waiter) = state.withLock { s -> ((@Sendable () -> Void)?, Waiter?) in
            guard s.attempt == number, !s.hasEnded else { return (nil, nil) }
            return (s.abandon(), s.end(.timedOut))
        }
        hook?()
        waiter?.resume(returning: .timedOut)
    }

    /// The task was cancelled during an attempt: abandons it (its cancel hook runs) and ends it, unless it has ended.
    @usableFromInline
    func cancel() {
        let (hook, waiter) = state.withLock { s -> ((@Sendable () -> Void)?, Waiter?) in
            (s.abandon(), s.end(.cancelled))
        }
        hook?()
        waiter?.resume(returning: .cancelled)
    }

    /// The duplicate completions so far, forgotten once taken.
    @usableFromInline
    func takeDuplicates() -> [RetryAttempt] {
        state.withLock { s in s.takeDuplicates() }
    }

    /// `attempt`'s completion was called with `outcome`.
    ///
    /// The first call of the attempt in flight delivers its outcome, unless the attempt was abandoned; a first call of
    /// an earlier attempt is ignored (a later attempt can only have begun after it ended, and as it was not called,
    /// it ended by its timer); every later call is a duplicate.
    func complete(_ outcome: BridgeOutcome, by attempt: BridgeAttempt) {
        let (dropped, waiter) = state.withLock { s -> ((@Sendable () -> Void)?, Waiter?) in
            guard case .none = attempt.calls else {
                s.duplicates.append(attempt.attempt)
                return (nil, nil)
            }
            guard s.attempt == attempt.attempt.number, !s.abandoned else {
                attempt.calls = .ignored
                return (nil, nil)
            }
            attempt.calls = .result
            return (s.hook.take(), s.end(outcome))  // the hook can no longer run
        }
        withExtendedLifetime(dropped) {}  // released here, after unlocking (so is `outcome`, if ignored)
        waiter?.resume(returning: outcome)
    }

    /// ``AttemptCompletion/onCancel(_:)`` of `attempt`.
    func setCancelHook(_ hook: @escaping @Sendable () -> Void, of attempt: BridgeAttempt) {
        let (runNow, replaced) = state.withLock { s -> (Bool, (@Sendable () -> Void)?) in
            // A called completion's attempt is over: its hook can never run.
            guard case .none = attempt.calls else { return (false, nil) }
            // A later attempt has begun (so this uncalled one ended by its timer), or this one was abandoned.
            if s.attempt != attempt.attempt.number || s.abandoned { return (true, nil) }
            let replaced = s.hook.take()
            s.hook = hook
            return (false, replaced)
        }
        withExtendedLifetime(replaced) {}  // released here, after unlocking
        if runNow { hook() }
    }

    /// ``AttemptCompletion/isCancelled`` of `attempt`.
    func isAbandoned(_ attempt: BridgeAttempt) -> Bool {
        state.withLock { s in
            if s.attempt == attempt.attempt.number { return s.abandoned }
            // An earlier attempt ended by its result, or else by its timer.
            guard case .result = attempt.calls else { return true }
            return false
        }
    }
}

/// One attempt of a ``RetryBridge``: what its ``AttemptCompletion`` reports to. It forwards every call to the bridge
/// and, when the last copy of the completion is released without having been called, tells the bridge, so that an
/// operation that drops `done` uncalled fails its attempt instead of hanging the call.
@usableFromInline
final class BridgeAttempt: AttemptSink, @unchecked Sendable {
    // @unchecked Sendable: `calls` is only accessed under the bridge's lock, except in `deinit`, which runs after every
    // other reference is gone (the release of the last one orders every earlier write before it). The rest is
    // immutable.

    /// What became of the completion's first call.
    enum Calls {
        /// Not called yet.
        case none
        /// Called while its attempt was in flight: that call was the attempt's outcome.
        case result
        /// Called after the attempt was abandoned: ignored.
        case ignored
    }

    let bridge: RetryBridge
    /// Under the bridge's lock.
    var calls = Calls.none

    @usableFromInline
    init(_ bridge: RetryBridge, attempt: RetryAttempt) {
        self.bridge = bridge
        super.init(attempt: attempt)
    }

    deinit {
        // A called completion has ended its attempt, or was ignored: nothing to tell, and no lock to take.
        if case .none = calls { bridge.released(attempt.number) }
    }

    @usableFromInline
    override func attemptSucceeded<V: Sendable>(value: V) {
        // Of the call's value type: only its `AttemptCompletion<Value>` reports to this attempt; the runner casts it
        // back.
        bridge.complete(.success(value), by: self)
    }

    @usableFromInline
    override func attemptFailed(_ error: any Error) {
        bridge.complete(.failure(error), by: self)
    }

    override func setCancelHook(_ hook: @escaping @Sendable () -> Void) {
        bridge.setCancelHook(hook, of: self)
    }

    override var isAbandoned: Bool {
        bridge.isAbandoned(self)
    }
}

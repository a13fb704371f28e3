/// Retries a completion-handler operation from async code and returns its value.
///
/// This is the bridge for code that is async at the call site but still calls a completion-handler API. It is the
/// retrying counterpart of `withCheckedThrowingContinuation`: instead of a continuation, each attempt receives an
/// ``AttemptCompletion`` to call with its result.
///
/// ```swift
/// let user = try await withRetry(maxAttempts: 5, clock: clock) { attempt, done in
///     legacyLoad(id) { result in done(result) }            // or done(value, error)
/// } strategy: { _ in
///     .backoff(.exponential(a: .milliseconds(100), b: 2).jitter())
/// }
/// ```
///
/// ## Why a separate name
///
/// The name follows `withCheckedThrowingContinuation` and `withTaskCancellationHandler`: a `with…` function that
/// hands your closure a handle to complete and suspends until it is completed. It is deliberately not another
/// `retry` overload: the async `retry` overloads take closures of zero or one parameter and the completion-handler
/// `retry` takes a queue and a completion, so a closure `{ attempt, done in … }` or a typing mistake inside it could
/// otherwise send the type checker through every overload and produce ambiguity or misleading diagnostics. With its
/// own base name, `withRetry` can never be ambiguous with any `retry`, whatever closures are passed.
///
/// ## How it runs
///
/// The same engine and the same sequence as every RetryKit runner, carried out in the caller's isolation (see
/// ``retry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)``).
/// `operation` is called synchronously in the caller's isolation to *start* the work; it must not block. Its
/// ``AttemptCompletion`` may be called from any thread, once; later calls are ignored and reported to `observer` as
/// ``RetryEvent/duplicateCompletion(_:)`` (before the next `attemptStarted` or `finished`; duplicates that arrive
/// after the retrier finished are dropped). A result that arrives after its attempt was cancelled or timed out is
/// ignored.
///
/// An attempt whose completion is called before `operation` returns does not suspend at all. Otherwise the task
/// suspends in a continuation, kept in locked state and handed out exactly once, to whichever comes first: the
/// attempt's completion, its timeout, or task cancellation. It is resumed after the lock is released.
///
/// ## Cancellation
///
/// Task cancellation is checked before every attempt; a task cancelled before the call runs no attempt. Cancelling
/// the task while an attempt is in flight abandons the attempt at once: its cancel hook
/// (``AttemptCompletion/onCancel(_:)``) runs on the cancelling thread, the attempt's late result is ignored and
/// `withRetry` throws `CancellationError` without waiting for the work. A cancellation that arrives while `operation`
/// is still starting the attempt is taken as soon as it returns (the hook then runs in the caller's task), unless the
/// attempt has completed by then. A wait between attempts ends at once. A per-attempt or total timeout
/// abandons the attempt the same way (the cancel hook runs) before the retrier goes on.
///
/// - Parameters:
///   - maxAttempts: The most attempts, including the first. `3` by default; below 1 throws ``RetryError``
///     (``RetryError/Reason-swift.enum/invalidConfiguration(_:)``) without running an attempt.
///   - totalTimeout: The time allowed for all attempts and waits together, or `nil` for no limit. `nil` by default.
///     Longer than ``BackoffStrategy/saturationLimit`` (about 31.7 years) counts as that limit.
///   - attemptTimeout: The time one attempt may take before it is abandoned and counts as failed with
///     ``RetryError/Reason-swift.enum/attemptTimedOut``, or `nil`. `nil` by default. Longer than the saturation limit
///     counts as that limit.
///   - budget: A ``RetryBudget`` shared with other retriers that every retry pays into; when it refuses, the run
///     finishes with ``RetryError`` `.budgetExhausted` carrying the last error. A success refunds its retry. `nil` by
///     default.
///   - tolerance: The tolerance passed to the clock for each sleep. `nil` by default.
///   - clock: The clock that measures waits and timeouts (`C.Duration == Duration`).
///   - isolation: The actor `operation`, `strategy` and `observer` run on; inherited from the caller.
///   - operation: Starts one attempt and calls its completion once with the result.
///   - strategy: What to do after a failed attempt that still has attempts left. `.backoff(.none)` by default.
///   - observer: Receives every event of the run, in the caller's isolation. Ignores them by default. (On a
///     `ContinuousClock`, a call without `observer` runs an overload that builds no event at all:
///     ``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:isolation:operation:strategy:)``.)
/// - Returns: The value of the first attempt that succeeds.
/// - Throws: The operation's own last error (attempts exhausted, or ``RetryStrategy/stop``), `CancellationError`,
///   ``RetryError`` (deadline exceeded, invalid configuration, or ``RetryError/Reason-swift.enum/missingResult`` as
///   the last error when an attempt completed with neither value nor error), or an error other than cancellation
///   thrown by the clock's `sleep`.
@inlinable
@inline(__always)
public func withRetry<Value: Sendable, C: Clock>(
    maxAttempts: Int = 3,
    totalTimeout: Duration? = nil,
    attemptTimeout: Duration? = nil,
    budget: RetryBudget? = nil,
    tolerance: Duration? = nil,
    clock: C,
    isolation: isolated (any Actor)? = #isolation,
    operation: (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
    strategy: (any Error) -> RetryStrategy<C> = { _ in .backoff(.none) },
    observer: (RetryEvent<Value>) -> Void = { _ in }
) async throws -> Value where C.Duration == Duration {
    try await runWithRetry(
        maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout, budget: budget,
        tolerance: tolerance, clock: clock, isolation: isolation, operation: operation, strategy: strategy,
        observer: observer, observed: true)
}

/// Retries a completion-handler operation from async code, measuring time on a `ContinuousClock`, without observing
/// its events: a call without `observer` runs this overload.
///
/// The same as the overload with an `observer` that ignores every event
/// (``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:isolation:operation:strategy:observer:)``),
/// whose parameters, result and errors it shares, except that it builds no event at all, so that a call costs less.
@inlinable
@inline(__always)
public func withRetry<Value: Sendable>(
    maxAttempts: Int = 3, totalTimeout: Duration? = nil, attemptTimeout: Duration? = nil, budget: RetryBudget? = nil,
    tolerance: Duration? = nil, isolation: isolated (any Actor)? = #isolation,
    operation: (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
    strategy: (any Error) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) }
) async throws -> Value {
    try await runWithRetry(
        maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout, budget: budget,
        tolerance: tolerance, clock: ContinuousClock(), isolation: isolation, operation: operation, strategy: strategy,
        observer: { _ in }, observed: false)
}

/// Every ``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)``
/// overload; `observed` is `false` when `observer` ignores every event: then the duplicate completions are not
/// collected for it and the machine builds no termination for the last events.
@inlinable
@inline(__always)
func runWithRetry<Value: Sendable, C: Clock>(
    maxAttempts: Int, totalTimeout: Duration?, attemptTimeout: Duration?, budget: RetryBudget?, tolerance: Duration?,
    clock: C, isolation: isolated (any Actor)?,
    operation: (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
    strategy: (any Error) -> RetryStrategy<C>, observer: (RetryEvent<Value>) -> Void, observed: Bool
) async throws -> Value where C.Duration == Duration {
    // Inlined into the caller (with the runner), so that it runs specialized for `Value` and `C`; the attempts go
    // through one non-generic `RetryBridge` per call.
    // Whether attempts have a timer: with either timeout (the machine gives every attempt the rest of the total).
    let timed = totalTimeout != nil || attemptTimeout != nil
    let bridge = RetryBridge(
        valueSize: MemoryLayout<Value>.size, valueAlignment: MemoryLayout<Value>.alignment, timed: timed)
    // The sink of the attempt that has just started, made with its `attemptStarted` event (which takes the duplicates
    // so far in the same step), until the attempt runs.
    var startedSink: (any AttemptSink)?
    // The duplicate completions taken with the last attempt's outcome when it ended while its operation ran
    // (`ended`), for the next `attemptStarted` or `finished`. Until then only another thread can call a completion,
    // unordered with the call's end: `finished` then takes no other look at the bridge (such a duplicate is dropped,
    // as one arriving after the end is).
    var settled = (duplicates: [RetryAttempt](), ended: true)
    return try await runObservedRetry(
        configuration: RetryConfiguration(
            maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout, budget: budget),
        tolerance: tolerance, clock: clock, isolation: isolation,
        runAttempt: { attempt, timeout in
            // Only an attempt with a timeout reads the clock, as it starts (its deadline); one branch each, so that
            // an attempt without one has no `C.Instant?` at all unless it waits.
            if let timeout {
                let deadline = clock.now.advanced(by: timeout)
                return await runBridgedAttempt(
                    attempt, timed: true, bridge: bridge, startedSink: &startedSink, settled: &settled,
                    isolation: isolation, operation: operation,
                    wait: {
                        await waitForBridgedAttempt(
                            bridge, attempt.number, deadline: deadline, tolerance: tolerance, clock: clock,
                            isolation: isolation)
                    })
            }
            return await runBridgedAttempt(
                attempt, timed: false, bridge: bridge, startedSink: &startedSink, settled: &settled,
                isolation: isolation, operation: operation,
                wait: {
                    await waitForBridgedAttempt(
                        bridge, attempt.number, deadline: nil as C.Instant?, tolerance: tolerance, clock: clock,
                        isolation: isolation)
                })
        },
        strategy: strategy,
        observer: { event in
            if observed, case .finished = event {
                for attempt in settled.duplicates {
                    observer(.duplicateCompletion(attempt))
                }
                if !settled.ended {
                    for attempt in bridge.takeDuplicates() {
                        observer(.duplicateCompletion(attempt))
                    }
                }
            }
            observer(event)
        },
        willStart: { attempt in
            guard observed else { return }  // the attempt's sink is made as it runs, without the duplicates
            let started = bridge.begin(attempt.number, timed: timed)
            startedSink = started.sink
            for attempt in settled.duplicates {
                observer(.duplicateCompletion(attempt))
            }
            settled.duplicates = []
            for attempt in started.duplicates {
                observer(.duplicateCompletion(attempt))
            }
        },
        reportsTermination: observed)
}

/// Retries a completion-handler operation from async code, measuring time on a `ContinuousClock`.
///
/// The same as
/// ``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)``
/// with `clock: ContinuousClock()`.
///
/// ```swift
/// let user = try await withRetry { attempt, done in
///     legacyLoad(id) { user, error in done(user, error) }
/// }
/// ```
///
/// - Parameters:
///   - maxAttempts: The most attempts, including the first. `3` by default.
///   - totalTimeout: The time allowed for all attempts and waits together, or `nil`. `nil` by default.
///   - attemptTimeout: The time one attempt may take, or `nil`. `nil` by default.
///   - budget: A ``RetryBudget`` shared with other retriers that every retry pays into; when it refuses, the run
///     finishes with ``RetryError`` `.budgetExhausted` carrying the last error. A success refunds its retry. `nil` by
///     default.
///   - tolerance: The tolerance passed to the clock for each sleep. `nil` by default.
///   - isolation: The actor `operation`, `strategy` and `observer` run on; inherited from the caller.
///   - operation: Starts one attempt and calls its completion once with the result.
///   - strategy: What to do after a failed attempt that still has attempts left. `.backoff(.none)` by default.
///   - observer: Receives every event of the run. (A call without one runs
///     ``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:isolation:operation:strategy:)``, which
///     builds no event at all.)
/// - Returns: The value of the first attempt that succeeds.
/// - Throws: See
///   ``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)``.
@inlinable
@inline(__always)
public func withRetry<Value: Sendable>(
    maxAttempts: Int = 3,
    totalTimeout: Duration? = nil,
    attemptTimeout: Duration? = nil,
    budget: RetryBudget? = nil,
    tolerance: Duration? = nil,
    isolation: isolated (any Actor)? = #isolation,
    operation: (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
    strategy: (any Error) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) },
    observer: (RetryEvent<Value>) -> Void
) async throws -> Value {
    try await withRetry(
        maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout, budget: budget,
        tolerance: tolerance,
        clock: ContinuousClock(), isolation: isolation, operation: operation, strategy: strategy, observer: observer)
}

/// Runs `attempt` of a ``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)``
/// call on `bridge` and waits for it to end, with `wait` if it has not ended once its operation has returned; `timed`
/// if it has a timeout. `settled` receives the duplicate completions taken with the outcome if the attempt ended while
/// its operation ran (`ended`).
///
/// (`wait` holds the attempt's deadline, if it has one: a `C.Instant?` is a resilient type for a `ContinuousClock`, which
/// every copy, test and destroy goes through value witnesses for, so an attempt that does not wait has none at all.)
@inlinable
@inline(__always)
func runBridgedAttempt<Value: Sendable>(
    _ attempt: RetryAttempt, timed: Bool, bridge: RetryBridge, startedSink: inout (any AttemptSink)?,
    settled: inout (duplicates: [RetryAttempt], ended: Bool), isolation: isolated (any Actor)?,
    operation: (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
    wait: () async -> BridgeOutcome
) async -> AsyncAttemptOutcome<Value> {
    // The sink is held by the completion alone (no local keeps it): when the operation lets go of every copy
    // uncalled, the attempt fails at once (see `BridgeCompletionToken`).
    operation(
        attempt,
        AttemptCompletion(
            sink: startedSink.take() ?? bridge.begin(attempt.number, timed: timed).sink,
            attempt: attempt))
    // No wait at all for an attempt that has already ended (completed synchronously), and no timer and no
    // cancellation handler: a cancellation that arrived while the operation was starting the attempt is
    // taken when the handler is installed, as the wait begins, or here if the operation let go of its
    // completion uncalled (the attempt is abandoned: its cancel hook runs).
    let outcome: BridgeOutcome
    if let (ended, duplicates) = bridge.takeOutcomeAndDuplicates() {
        settled = (duplicates, ended: true)
        if case .released = ended, Task.isCancelled { bridge.cancel() }
        outcome = ended
    } else {
        settled.ended = false
        outcome = await wait()
    }
    switch outcome {
    case .success:
        // Stored by a completion of this call, so a `Value`; taken once, with the outcome that says it is there.
        return .succeeded(bridge.valueSlot().assumingMemoryBound(to: Value.self).move())
    case .boxed(let value):
        // Always a `Value`: only this call's completions report to the bridge.
        guard let value = value.value(as: Value.self) else { return .failed(RetryError(.missingResult)) }
        return .succeeded(value)
    case .failure(let error): return .failed(error)
    case .released: return .failed(RetryError(.completionReleased))
    case .timedOut: return .timedOut
    case .cancelled: return .cancelled
    }
}

/// Waits for attempt `number` of `bridge` to end: by its completion, its timer (at `deadline`, if it has one) or
/// task cancellation, whichever comes first. Only an attempt that did not end while its operation ran waits here.
@inlinable
func waitForBridgedAttempt<C: Clock>(
    _ bridge: RetryBridge, _ number: Int, deadline: C.Instant?, tolerance: Duration?, clock: C,
    isolation: isolated (any Actor)?
) async -> BridgeOutcome where C.Duration == Duration {
    await withTaskCancellationHandler(
        operation: {
            guard let deadline else { return await bridge.wait() }
            // The bridge ends the attempt with whichever comes first, its completion or its timer: the timer only
            // tells it, and the wait reports.
            let outcome = await AsyncRetry.racingTimer(
                until: deadline, tolerance: tolerance, clock: clock, isolation: isolation,
                attempt: { await bridge.wait() },
                timedOut: {
                    bridge.timeOut(number)
                    return nil
                })
            return outcome ?? .cancelled
        },
        onCancel: { bridge.cancel() },
        isolation: isolation)
}

/// How one attempt of
/// ``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)``
/// ended.
@usableFromInline
enum BridgeOutcome: Sendable {
    /// The completion was called with a value, which is in the bridge's value slot (``RetryBridge/valueSlot()``).
    case success
    /// The completion was called with a value, boxed (a sink that keeps values in place never gets one, unless the
    /// completion is used in a way RetryKit does not).
    case boxed(ErasedValue)
    /// The completion was called with an error.
    case failure(any Error)
    /// Every copy of the completion was released uncalled.
    case released
    /// The attempt's timer fired first.
    case timedOut
    /// The task was cancelled first.
    case cancelled
}

/// An attempt that has just started on a ``RetryBridge``: the sink for its completion, and the duplicate completions
/// reported until then.
@usableFromInline
struct BridgeAttemptStart {
    @usableFromInline let sink: any AttemptSink
    @usableFromInline let duplicates: [RetryAttempt]
}

/// The state of a ``RetryBridge``: the attempt in flight and the task waiting for it.
@usableFromInline
struct RetryBridgeState {
    /// The attempt in flight (1 from the start: a bridge is made with its first attempt started).
    var attempt = 0
    /// Its completion, when the bridge tracks it itself (an attempt without timeout can only be abandoned by the end of
    /// the call, so every earlier attempt has necessarily been delivered, as in the callback runner).
    var record = AttemptRecord()
    /// Its own record instead, for an attempt with a timeout (abandoned while the call goes on, its late first call
    /// must be ignored and later ones reported).
    var timed: TimedBridgeAttempt?
    /// Whether the attempt has ended: by its result, its timeout or cancellation, whichever came first.
    var ended = false
    /// How it ended, until the runner takes it (it may end before anyone waits).
    var outcome: BridgeOutcome?
    /// The task waiting for the end, resumed exactly once, outside the lock.
    var waiter: UnsafeContinuation<BridgeOutcome, Never>?
    /// Completions called more than once, for the observer (reported before the next `attemptStarted` or `finished`).
    var duplicates: [RetryAttempt] = []

    /// Ends the attempt with `outcome` unless it has ended already; returns the waiter to resume with it.
    ///
    /// An ended attempt's own record is let go: nothing can happen to the attempt through the bridge any more (the
    /// completion keeps the record for its own calls).
    mutating func end(_ outcome: BridgeOutcome) -> UnsafeContinuation<BridgeOutcome, Never>? {
        guard !ended else { return nil }
        ended = true
        timed = nil
        if let waiter = self.waiter {
            self.waiter = nil
            return waiter
        }
        self.outcome = outcome
        return nil
    }

    /// The duplicate completions so far, forgotten once taken.
    mutating func takeDuplicates() -> [RetryAttempt] {
        guard !duplicates.isEmpty else { return [] }
        defer { duplicates = [] }
        return duplicates
    }

    /// Abandons the attempt in flight: returns its cancel hook to run outside the lock.
    mutating func abandon() -> (@Sendable () -> Void)? {
        if let timed { return timed.record.abandon() }
        return attempt != 0 ? record.abandon() : nil
    }
}

/// The attempts of one
/// ``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)`` call,
/// one after the other: where their completions report, and what the call waits on.
///
/// Three things race to end an attempt: its completion, its timer and task cancellation, and any of them may come
/// before the task waits. The first one ends it (`RetryBridgeState.end`); the waiting continuation lives in the locked
/// state and leaves it exactly once, to be resumed after the lock is released. An attempt that ended before the task
/// waits (a completion called synchronously) costs no continuation, no timer and no cancellation handler at all.
///
/// Not generic, and one allocation per call (``RetryBridgeStorage``: the state, its lock and a slot for the value, so
/// that a success is not boxed; this is a value over it), plus one per attempt: the attempt's
/// ``BridgeCompletionToken``.
@usableFromInline
struct RetryBridge: @unchecked Sendable {
    // @unchecked Sendable: the state is only accessed under the lock; the slot as `valueSlot()` says.
    /// The attempt in flight and the task waiting for it, behind the bridge's lock, and the value slot.
    private let storage: RetryBridgeStorage

    /// A bridge for one call whose values take `valueSize` bytes aligned to `valueAlignment`, and whose attempts have
    /// a timeout if `timed`. It is ready for attempt 1 (see ``begin(_:timed:)``).
    @usableFromInline
    init(valueSize: Int, valueAlignment: Int, timed: Bool) {
        let capacity = RetryBridgeStorage.capacity(tailSize: valueSize, tailAlignment: valueAlignment)
        // `create` returns an instance of the class it is called on.
        storage = unsafeDowncast(
            RetryBridgeStorage.create(minimumCapacity: capacity) { _ in LockPrimitive.Raw() },
            to: RetryBridgeStorage.self)
        storage.initialize(
            RetryBridgeState(attempt: 1, timed: timed ? TimedBridgeAttempt() : nil), fields: valueAlignment)
    }

    /// Runs `body` with exclusive access to the bridge's state, under its lock.
    @inline(__always)
    func withLock<T>(_ body: (inout RetryBridgeState) throws -> T) rethrows -> T {
        try storage.withLock(body)
    }

    /// The slot a successful attempt's value is stored in (uninitialized memory otherwise): initialized under the
    /// lock by the delivering completion, and moved out by the runner once it has taken the ``BridgeOutcome/success``
    /// outcome (after the lock that stored it: nothing else touches it then).
    @usableFromInline
    func valueSlot() -> UnsafeMutableRawPointer {
        storage.tail(alignment: storage.field(\.self))
    }

    /// Starts attempt `number`; `timed` if it has a timeout. Returns the sink for its completion, and the duplicate
    /// completions so far (forgotten once taken), for the observer.
    @usableFromInline
    func begin(_ number: Int, timed: Bool) -> BridgeAttemptStart {
        if number == 1 {
            // The bridge was made with attempt 1 started, and no duplicates can precede it. Nothing else has the
            // bridge yet (no completion, timer or cancellation handler): its state is read without the lock.
            let record = storage.withUnsharedState { $0.timed }
            return BridgeAttemptStart(sink: BridgeCompletionToken(self, attempt: 1, timed: record), duplicates: [])
        }
        let record = timed ? TimedBridgeAttempt() : nil
        let duplicates = withLock { s in
            s.attempt = number
            s.record = AttemptRecord()
            s.timed = record
            s.ended = false
            s.outcome = nil
            return s.takeDuplicates()
        }
        return BridgeAttemptStart(
            sink: BridgeCompletionToken(self, attempt: number, timed: record), duplicates: duplicates)
    }

    /// Every copy of attempt `number`'s completion was released uncalled: if the attempt has not ended (no timeout,
    /// no cancel), it fails with ``RetryError/Reason-swift.enum/completionReleased`` instead of waiting forever.
    func released(_ number: Int) {
        let waiter: UnsafeContinuation<BridgeOutcome, Never>? = withLock { s in
            guard s.attempt == number, !s.ended else { return nil }
            return s.end(.released)
        }
        waiter?.resume(returning: .released)
    }

    /// How the current attempt ended, if it has already.
    @usableFromInline
    func takeOutcome() -> BridgeOutcome? {
        withLock { s in s.outcome.take() }
    }

    /// How the current attempt ended, if it has already, with the duplicate completions so far (forgotten once
    /// taken).
    @usableFromInline
    func takeOutcomeAndDuplicates() -> (BridgeOutcome, [RetryAttempt])? {
        withLock { s in
            guard let outcome = s.outcome.take() else { return nil }
            return (outcome, s.takeDuplicates())
        }
    }

    /// Waits for the current attempt to end.
    @usableFromInline
    func wait(isolation: isolated (any Actor)? = #isolation) async -> BridgeOutcome {
        await withUnsafeContinuation(isolation: isolation) { continuation in
            let ready: BridgeOutcome? = withLock { s in
                if let outcome = s.outcome.take() { return outcome }
                s.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// The timer of attempt `number` fired: abandons the attempt (its cancel hook runs) unless it has ended.
    @usableFromInline
    func timeOut(_ number: Int) {
        let (hook, waiter): ((@Sendable () -> Void)?, UnsafeContinuation<BridgeOutcome, Never>?) = withLock { s in
            guard s.attempt == number, !s.ended else { return (nil, nil) }
            return (s.abandon(), s.end(.timedOut))
        }
        hook?()
        waiter?.resume(returning: .timedOut)
    }

    /// The task was cancelled during an attempt: abandons it (its cancel hook runs) and ends it, unless it has ended.
    @usableFromInline
    func cancel() {
        let (hook, waiter): ((@Sendable () -> Void)?, UnsafeContinuation<BridgeOutcome, Never>?) = withLock { s in
            (s.abandon(), s.end(.cancelled))
        }
        hook?()
        waiter?.resume(returning: .cancelled)
    }

    /// The duplicate completions so far, forgotten once taken.
    @usableFromInline
    func takeDuplicates() -> [RetryAttempt] {
        withLock { s in s.takeDuplicates() }
    }

    /// A completion of `attempt` was called with `outcome`, through `token`; `store` puts its value in the slot, if it
    /// has one (it runs under the lock, only if this call delivers the attempt's result).
    func complete(
        _ attempt: RetryAttempt, _ outcome: BridgeOutcome, token: BridgeCompletionToken,
        store: (UnsafeMutableRawPointer) -> Void = { _ in }
    ) {
        var dropped: (@Sendable () -> Void)?  // the attempt's cancel hook, released after unlocking
        let slot = valueSlot()
        let waiter: UnsafeContinuation<BridgeOutcome, Never>? = withLock { s in
            token.called = true
            let call: AttemptRecord.Call
            if let timed = token.timed {
                call = timed.record.call(dropping: &dropped)
            } else if s.attempt == attempt.number && s.timed == nil {
                call = s.record.call(dropping: &dropped)
            } else {
                call = .duplicate  // an earlier attempt tracked here: it was delivered
            }
            switch call {
            case .deliver:
                // The slot is filled only with the result that ends the attempt: then the runner takes it.
                guard !s.ended else { return nil }
                store(slot)
                return s.end(outcome)
            case .duplicate: s.duplicates.append(attempt)
            case .ignore: break
            }
            return nil
        }
        withExtendedLifetime(dropped) {}
        waiter?.resume(returning: outcome)
    }

    /// ``AttemptCompletion/onCancel(_:)`` of `attempt`, through `token`.
    func setCancelHook(_ hook: @escaping @Sendable () -> Void, _ attempt: RetryAttempt, token: BridgeCompletionToken) {
        var dropped: (@Sendable () -> Void)?  // a hook this one replaces, released after unlocking
        let runNow = withLock { s in
            if let timed = token.timed { return timed.record.register(hook, dropping: &dropped) }
            // An earlier attempt has been delivered: its hook can never run.
            return s.attempt == attempt.number && s.timed == nil ? s.record.register(hook, dropping: &dropped) : false
        }
        withExtendedLifetime(dropped) {}
        if runNow { hook() }
    }

    /// ``AttemptCompletion/isCancelled`` of `attempt`, through `token`.
    func isAbandoned(_ attempt: RetryAttempt, token: BridgeCompletionToken) -> Bool {
        withLock { s in
            if let timed = token.timed { return timed.record.abandoned }
            return s.attempt == attempt.number && s.timed == nil && s.record.abandoned
        }
    }
}

/// What an attempt's completion reports to: one per attempt. It forwards every call to its bridge and, when the last
/// copy of the completion is released without having been called, tells the bridge, so that an operation that drops
/// `done` uncalled fails its attempt instead of hanging the call.
@usableFromInline
final class BridgeCompletionToken: AttemptSink, @unchecked Sendable {
    // @unchecked Sendable: `called` is written under the bridge's lock, and read in `deinit` only.
    let bridge: RetryBridge
    let attempt: Int
    /// The attempt's own record, when it has a timeout (see ``RetryBridgeState/timed``).
    let timed: TimedBridgeAttempt?
    /// Whether the completion has been called. Written under the bridge's lock; read without it in `deinit`, when no
    /// other reference is left (the release of the last reference orders every earlier write before it).
    @exclusivity(unchecked) var called = false

    init(_ bridge: RetryBridge, attempt: Int, timed: TimedBridgeAttempt?) {
        self.bridge = bridge
        self.attempt = attempt
        self.timed = timed
    }

    deinit {
        // A called completion has ended its attempt, or been ignored: nothing to tell, and no lock to take.
        if !called { bridge.released(attempt) }
    }

    @usableFromInline
    func attemptSucceeded(_ attempt: RetryAttempt, storingWith store: (UnsafeMutableRawPointer) -> Void) -> Bool {
        bridge.complete(attempt, .success, token: self, store: store)
        return true
    }

    @usableFromInline
    func attemptSucceeded(_ value: ErasedValue, _ attempt: RetryAttempt) {
        bridge.complete(attempt, .boxed(value), token: self)
    }

    @usableFromInline
    func attemptFailed(_ error: any Error, _ attempt: RetryAttempt) {
        bridge.complete(attempt, .failure(error), token: self)
    }

    @usableFromInline
    func setCancelHook(_ hook: @escaping @Sendable () -> Void, _ attempt: RetryAttempt) {
        bridge.setCancelHook(hook, attempt, token: self)
    }

    @usableFromInline
    func isAbandoned(_ attempt: RetryAttempt) -> Bool {
        bridge.isAbandoned(attempt, token: self)
    }
}

/// The record of one attempt with a timeout, guarded by its bridge's lock.
@usableFromInline
final class TimedBridgeAttempt: @unchecked Sendable {
    // @unchecked Sendable: `record` is only accessed while the bridge's lock is held.
    /// Guarded by the bridge's lock (which provides exclusivity, so no dynamic checks).
    @exclusivity(unchecked) var record = AttemptRecord()

    init() {}
}

/// The one allocation of a ``RetryBridge``: its state and lock, the values' alignment as the one field, and the slot for
/// a successful attempt's value as the tail.
final class RetryBridgeStorage: LockedBuffer<RetryBridgeState, Int> {
    deinit { tearDown() }
}

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
    // through one `RetryBridge` per call.
    let bridge = RetryBridge()
    // The last attempt begun on the bridge: by its `attemptStarted` event (which takes the duplicates so far in the
    // same step) when the events are observed, otherwise as it runs. A bridge is made with attempt 1 begun.
    var begun = 1
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
                    attempt, bridge: bridge, begun: &begun, settled: &settled,
                    isolation: isolation, operation: operation,
                    wait: {
                        await waitForBridgedAttempt(
                            bridge, attempt.number, deadline: deadline, tolerance: tolerance, clock: clock,
                            isolation: isolation)
                    })
            }
            return await runBridgedAttempt(
                attempt, bridge: bridge, begun: &begun, settled: &settled,
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
            guard observed else { return }  // the attempt begins as it runs, and its duplicates are not collected
            let duplicates = attempt.number > begun ? bridge.begin(attempt.number) : []
            begun = attempt.number
            for attempt in settled.duplicates {
                observer(.duplicateCompletion(attempt))
            }
            settled.duplicates = []
            for attempt in duplicates {
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
/// call on `bridge` and waits for it to end, with `wait` if it has not ended once its operation has returned. `begun`
/// is the last attempt begun on the bridge. `settled` receives the duplicate completions taken with the outcome if
/// the attempt ended while its operation ran (`ended`).
///
/// (`wait` holds the attempt's deadline, if it has one: a `C.Instant?` is a resilient type for a `ContinuousClock`, which
/// every copy, test and destroy goes through value witnesses for, so an attempt that does not wait has none at all.)
@inlinable
@inline(__always)
func runBridgedAttempt<Value: Sendable>(
    _ attempt: RetryAttempt, bridge: RetryBridge, begun: inout Int,
    settled: inout (duplicates: [RetryAttempt], ended: Bool), isolation: isolated (any Actor)?,
    operation: (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
    wait: () async -> BridgeOutcome
) async -> AsyncAttemptOutcome<Value> {
    if attempt.number > begun {
        _ = bridge.begin(attempt.number)  // not observed: its duplicates go nowhere
        begun = attempt.number
    }
    // The attempt is held by the completion alone (no local keeps it): when the operation lets go of every copy
    // uncalled, the attempt fails at once (see `BridgeAttempt`).
    operation(attempt, AttemptCompletion(sink: BridgeAttempt(bridge, attempt: attempt)))
    // No wait at all for an attempt that has already ended (completed while its operation ran), and no timer and no
    // cancellation handler: a cancellation that arrived while the operation was starting the attempt is taken when
    // the handler is installed, as the wait begins, or here if the operation let go of its completion uncalled (the
    // attempt is abandoned: its cancel hook runs).
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
    case .success(let value):
        // Always a `Value`: only this call's completions report to the bridge.
        guard let value = value as? Value else { return .failed(RetryError(.missingResult)) }
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

/// Retries an async operation with time limits and an observer: the async counterpart of the completion-handler
/// `retry`, with the same limits and the same events.
///
/// Use this overload when you need more than the basic
/// ``retry(maxAttempts:budget:tolerance:clock:isolation:operation:strategy:)`` (source-compatible with the async `retry`
/// library): a total deadline, a per-attempt timeout,
/// events for logging and metrics, or the attempt number inside the operation.
///
/// Its operation always takes the attempt, `{ attempt in … }`, whichever options a call names: adding or removing
/// `totalTimeout:`, `attemptTimeout:` or `observer:` never changes the closure a call accepts. Naming one of them on a
/// call whose operation takes no attempt (`{ try await … }`, the basic overload's shape) does not compile, and the
/// compiler says to write `{ attempt in … }`.
///
/// ```swift
/// let user = try await retry(maxAttempts: 5, totalTimeout: .seconds(10), attemptTimeout: .seconds(2), clock: clock) {
///     attempt in
///     try await api.fetchUser(id)
/// } strategy: { error in
///     error is AuthError ? .stop : .backoff(.exponential(a: .milliseconds(100), b: 2).max(.seconds(5)).jitter())
/// } observer: { event in
///     log.record(event)
/// }
/// ```
///
/// ## How it runs
///
/// Exactly as the basic overload: attempt 1 at once; after a failure with attempts left, `strategy`
/// decides; a zero delay does not suspend; the last attempt's own error is rethrown when attempts run out, the failed
/// attempt's own error on ``RetryStrategy/stop``. In addition:
///
/// - **Total timeout**: measured on `clock` from the call. A wait that would end at or after it is not started: the
///   retrier gives up at once with ``RetryError`` (``RetryError/Reason-swift.enum/deadlineExceeded``, keeping the
///   last error). An attempt still running when it expires is cancelled and the retrier gives up the same way.
/// - **Per-attempt timeout**: an attempt still running after `attemptTimeout` is cancelled and counts as a failure
///   with ``RetryError`` (``RetryError/Reason-swift.enum/attemptTimedOut``), which `strategy` sees like any error.
///
/// With a timeout, the attempt runs in a child task that races a sleep on `clock`; the loser is cancelled. Because
/// cancellation is cooperative, the retrier goes on only once the timed-out attempt has returned: an operation that
/// ignores cancellation delays the retrier until it does. Without a timeout the operation is called directly.
///
/// ## Events
///
/// `observer` receives, in order and in the caller's isolation: `attemptStarted`, then `attemptFailed` (with the
/// next delay, or the reason for giving up) or `attemptSucceeded`, and `finished` last: the same sequence the
/// completion-handler runner emits for the same configuration. A task cancelled during an attempt or a wait goes
/// straight to `finished` with `CancellationError`.
///
/// ## Cancellation
///
/// As in the basic overload: checked before every attempt and when an attempt fails; a wait ends at once.
/// A cancelled task throws `CancellationError`.
///
/// - Parameters:
///   - maxAttempts: The most attempts, including the first. `3` by default; below 1 throws ``RetryError``
///     (``RetryError/Reason-swift.enum/invalidConfiguration(_:)``) without running an attempt.
///   - totalTimeout: The time allowed for all attempts and waits together, or `nil` for no limit. `nil` by default.
///     Negative throws ``RetryError`` (invalid configuration); longer than ``BackoffStrategy/saturationLimit``
///     (about 31.7 years) counts as that limit.
///   - attemptTimeout: The time one attempt may take, or `nil` for no limit. `nil` by default. Zero or negative
///     throws ``RetryError`` (invalid configuration); longer than the saturation limit counts as that limit.
///   - budget: A ``RetryBudget`` shared with other retriers that every retry pays into; when it refuses, the run
///     finishes with ``RetryError`` `.budgetExhausted` carrying the last error. A success refunds its retry. `nil` by
///     default.
///   - tolerance: The tolerance passed to the clock for each sleep. `nil` by default.
///   - clock: The clock that measures waits and timeouts (`C.Duration == Duration`).
///   - isolation: The actor `strategy` and `observer` run on; inherited from the caller.
///   - operation: The work to try; it receives the attempt (number, attempts allowed, elapsed time). It is
///     `@Sendable` because a timeout runs it in a child task.
///   - strategy: What to do after a failed attempt that still has attempts left. `.backoff(.none)` by default.
///   - observer: Receives every event of the run. Ignores them by default.
/// - Returns: The value of the first attempt that succeeds.
/// - Throws: The operation's own last error (attempts exhausted, or ``RetryStrategy/stop``), `CancellationError`, or
///   ``RetryError`` (deadline exceeded, invalid configuration), or an error other than cancellation thrown by the
///   clock's `sleep`.
public func retry<R: Sendable, C: Clock>(
    maxAttempts: Int = 3,
    totalTimeout: Duration? = nil,
    attemptTimeout: Duration? = nil,
    budget: RetryBudget? = nil,
    tolerance: Duration? = nil,
    clock: C,
    isolation: isolated (any Actor)? = #isolation,
    operation: @escaping @Sendable (RetryAttempt) async throws -> R,
    strategy: (any Error) -> RetryStrategy<C> = { _ in .backoff(.none) },
    observer: (RetryEvent<R>) -> Void = { _ in }
) async throws -> R where C.Duration == Duration {
    try await retry(
        configuration: RetryConfiguration(
            maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout, budget: budget),
        tolerance: tolerance, clock: clock, isolation: isolation, operation: operation, strategy: strategy,
        observer: observer)
}

/// Runs an async retrier for a whole configuration (limits and budget): the one entry point behind the observed async
/// `retry` overloads, policies and the HTTP layer.
package func retry<R: Sendable, C: Clock>(
    configuration: RetryConfiguration,
    tolerance: Duration?,
    clock: C,
    isolation: isolated (any Actor)?,
    operation: @escaping @Sendable (RetryAttempt) async throws -> R,
    strategy: (any Error) -> RetryStrategy<C>,
    observer: (RetryEvent<R>) -> Void
) async throws -> R where C.Duration == Duration {
    try await runObservedRetry(
        configuration: configuration, tolerance: tolerance, clock: clock, isolation: isolation,
        runAttempt: { attempt, timeout in
            await AsyncRetry.runAttempt(
                attempt, timeout: timeout, tolerance: tolerance, clock: clock, isolation: isolation,
                operation: operation, conditions: nil, conditionChanged: { false })
        },
        strategy: strategy,
        observer: observer)
}

extension AsyncRetry {
    /// Runs one attempt of `operation`, the observed async runner's way: called directly when nothing races it;
    /// otherwise in a child task racing its timer (when it has a `timeout`) and the changes of a gated run's condition
    /// (when `conditions` is given: each change signalled goes to `conditionChanged`, and `true`, the machine's
    /// interruption, ends the attempt with ``AsyncAttemptOutcome/interrupted``, its task cancelled and its result
    /// dropped).
    static func runAttempt<R: Sendable, C: Clock>(
        _ attempt: RetryAttempt, timeout: Duration?, tolerance: Duration?, clock: C, isolation: isolated (any Actor)?,
        operation: @escaping @Sendable (RetryAttempt) async throws -> R,
        conditions: RetryConditionInbox?, conditionChanged: () -> Bool
    ) async -> AsyncAttemptOutcome<R> where C.Duration == Duration {
        guard timeout != nil || conditions != nil else {
            do {
                return .succeeded(try await operation(attempt))
            } catch {
                return .failed(error)
            }
        }
        var deadline: C.Instant?
        if let timeout { deadline = clock.now.advanced(by: timeout) }
        var signal: (@Sendable () async -> Bool)?
        if let conditions { signal = { await conditions.wait() } }
        let outcome = await racing(
            { () async -> AsyncAttemptOutcome<R>? in
                do {
                    return .succeeded(try await operation(attempt))
                } catch {
                    return .failed(error)
                }
            },
            until: deadline, tolerance: tolerance, clock: clock, isolation: isolation, timedOut: { .timedOut },
            signal: signal,
            signalled: { conditionChanged() ? .interrupted : nil })
        return outcome ?? .cancelled
    }
}

/// Retries an async operation with time limits and an observer, measuring time on a `ContinuousClock`.
///
/// The same as
/// ``retry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)``
/// with `clock: ContinuousClock()`.
///
/// - Parameters:
///   - maxAttempts: The most attempts, including the first. `3` by default.
///   - totalTimeout: The time allowed for all attempts and waits together, or `nil`. `nil` by default.
///   - attemptTimeout: The time one attempt may take, or `nil`. `nil` by default.
///   - budget: A ``RetryBudget`` shared with other retriers that every retry pays into; when it refuses, the run
///     finishes with ``RetryError`` `.budgetExhausted` carrying the last error. A success refunds its retry. `nil` by
///     default.
///   - tolerance: The tolerance passed to the clock for each sleep. `nil` by default.
///   - isolation: The actor `strategy` and `observer` run on; inherited from the caller.
///   - operation: The work to try; it receives the attempt.
///   - strategy: What to do after a failed attempt that still has attempts left. `.backoff(.none)` by default.
///   - observer: Receives every event of the run. Ignores them by default.
/// - Returns: The value of the first attempt that succeeds.
/// - Throws: See
///   ``retry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)``.
public func retry<R: Sendable>(
    maxAttempts: Int = 3,
    totalTimeout: Duration? = nil,
    attemptTimeout: Duration? = nil,
    budget: RetryBudget? = nil,
    tolerance: Duration? = nil,
    isolation: isolated (any Actor)? = #isolation,
    operation: @escaping @Sendable (RetryAttempt) async throws -> R,
    strategy: (any Error) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) },
    observer: (RetryEvent<R>) -> Void = { _ in }
) async throws -> R {
    try await retry(
        maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout, budget: budget,
        tolerance: tolerance,
        clock: ContinuousClock(), isolation: isolation, operation: operation, strategy: strategy, observer: observer)
}

// MARK: - Adding an option never changes the closure a call takes
//
// An operation written for the async retry library, `{ try await … }`, takes no attempt and may be non-`Sendable`. The
// time limits and the observer belong to the overload whose operation receives its `RetryAttempt` and is `@Sendable` (a
// timeout runs it in a child task). Without the unavailable overloads below, adding `attemptTimeout:` to a working call
// would silently switch it to that overload and fail far from the cause ("contextual closure type expects 1 argument",
// a `Sendable` error inside the closure); with them, the call keeps its closure and is rejected with a message that
// says what to write. They are never chosen for a call that compiles otherwise: the compiler only picks an unavailable
// declaration when no available one fits. Every option has a default, so one overload per clock shape catches any
// combination of `totalTimeout:`, `attemptTimeout:` and `observer:`; two, because a generic clock parameter cannot
// default to `ContinuousClock()` while `tolerance` and `strategy` name its type.

/// Unavailable: `totalTimeout:`, `attemptTimeout:` and `observer:` need an operation that receives its attempt.
///
/// Write the operation as `{ attempt in … }` (a `@Sendable` closure) to use
/// ``retry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)``;
/// its `strategy` receives `any Error`.
@available(
    *, unavailable,
    message:
        "totalTimeout:, attemptTimeout: and observer: need an operation that receives its attempt: write '{ attempt in ... }' (a @Sendable closure; strategy then receives 'any Error'; the clock must use Swift.Duration)"
)
public func retry<R: Sendable, E, C>(
    maxAttempts: Int = 3,
    totalTimeout: Duration? = nil,
    attemptTimeout: Duration? = nil,
    budget: RetryBudget? = nil,
    tolerance: C.Duration? = nil,
    clock: C,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws(E) -> sending R,
    strategy: (E) -> RetryStrategy<C> = { _ in .backoff(.none) },
    observer: (RetryEvent<R>) -> Void = { _ in }
) async throws -> sending R where C: Clock, E: Error {
    try await retry(
        maxAttempts: maxAttempts, budget: budget, tolerance: tolerance, clock: clock, isolation: isolation,
        operation: operation, strategy: strategy)
}

/// Unavailable: `totalTimeout:`, `attemptTimeout:` and `observer:` need an operation that receives its attempt.
///
/// Write the operation as `{ attempt in … }` (a `@Sendable` closure) to use
/// ``retry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:isolation:operation:strategy:observer:)``; its
/// `strategy` receives `any Error`.
@available(
    *, unavailable,
    message:
        "totalTimeout:, attemptTimeout: and observer: need an operation that receives its attempt: write '{ attempt in ... }' (a @Sendable closure; strategy then receives 'any Error')"
)
public func retry<R: Sendable, E>(
    maxAttempts: Int = 3,
    totalTimeout: Duration? = nil,
    attemptTimeout: Duration? = nil,
    budget: RetryBudget? = nil,
    tolerance: ContinuousClock.Duration? = nil,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws(E) -> sending R,
    strategy: (E) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) },
    observer: (RetryEvent<R>) -> Void = { _ in }
) async throws -> sending R where E: Error {
    try await retry(
        maxAttempts: maxAttempts, budget: budget, tolerance: tolerance, isolation: isolation, operation: operation,
        strategy: strategy)
}

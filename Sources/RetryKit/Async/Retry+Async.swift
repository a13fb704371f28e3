/// Runs an async operation and retries it when it throws, waiting between attempts as the strategy says.
///
/// This is the async entry point. It is source-compatible with the async retry library RetryKit replaces: the same
/// name, parameters, defaults and behaviour, for any `Clock`, so existing call sites (generic ones included) compile
/// unchanged; Migration.md lists the few differences in behaviour.
///
/// ```swift
/// let (data, response) = try await retry(maxAttempts: 5, clock: clock) {
///     try await URLSession.shared.data(from: url)
/// } strategy: { _ in
///     .backoff(.exponential(a: .milliseconds(100), b: 2).max(.seconds(5)).jitter())
/// }
/// ```
///
/// ## How it runs
///
/// Attempt 1 runs at once. When an attempt throws and attempts are left, `strategy` is asked what to do with the
/// error: ``RetryStrategy/backoff(_:)`` waits the strategy's delay for this retry
/// (``BackoffStrategy/delay(forRetry:previous:)`` with the 0-based retry index), ``RetryStrategy/retryAfter(_:)``
/// waits exactly the given delay, ``RetryStrategy/stop`` gives up. The strategy is only consulted *between* attempts:
/// after the last attempt fails, its error is rethrown without asking. Attempts are counted and delays chosen by the
/// same engine as every other RetryKit runner.
///
/// - A zero delay (``BackoffStrategy/none``, the default) neither reads the clock nor suspends.
/// - Waits use `clock.sleep(for:tolerance:)`.
/// - Everything runs in the caller's isolation (`#isolation`): `operation` and `strategy` may touch the caller's
///   actor-isolated state without `await`, and `operation` may return a non-`Sendable` value.
///
/// ## Time limits and events
///
/// This overload takes the async retry library's options, plus `budget:`. `totalTimeout:`, `attemptTimeout:` and
/// `observer:` belong to
/// ``retry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)``,
/// whose operation receives its ``RetryAttempt`` and is `@Sendable` (a timeout runs it in a child task). Adding one of
/// them to a call of this overload never switches the call to that closure shape behind your back: the call is rejected
/// with a message that says to write the operation as `{ attempt in … }`.
///
/// ## Cancellation
///
/// Task cancellation is checked before every attempt: a task that is already cancelled when `retry` is called runs no
/// attempt. Cancellation during a wait ends the wait at once. If the task is cancelled when an attempt throws, the
/// strategy is not consulted, nor when an attempt throws `CancellationError` itself (a cancellation from inside the
/// work is not a transient fault). In all these cases `retry` throws `CancellationError`. An attempt that is running
/// when the task is cancelled is not interrupted (cancellation is cooperative); if it still succeeds, its value is
/// returned.
///
/// - Parameters:
///   - maxAttempts: The most attempts, including the first. `3` by default. A value below 1 runs no attempt and
///     throws ``RetryError`` with reason ``RetryError/Reason-swift.enum/invalidConfiguration(_:)`` (it does not trap).
///   - budget: A ``RetryBudget`` shared with other retriers that every retry pays into; when it refuses, `retry` throws
///     ``RetryError`` with reason ``RetryError/Reason-swift.enum/budgetExhausted`` carrying the last error. A success
///     refunds its retry. `nil` by default.
///   - tolerance: The tolerance passed to the clock for each wait. `nil` by default.
///   - clock: The clock that measures the waits: any `Clock`. With `Swift.Duration` (`ContinuousClock`,
///     `SuspendingClock`, RetryKitTesting's `VirtualClock` and `InstantClock`) every strategy is available and delays
///     saturate; with another duration type, the strategies the async retry library offered for any clock
///     (``BackoffStrategy/none``, ``BackoffStrategy/constant(_:)``, ``BackoffStrategy/linear(a:b:)``,
///     ``BackoffStrategy/min(_:)``, ``BackoffStrategy/max(_:)``, ``BackoffStrategy/init(duration:)``) and
///     ``RetryStrategy/retryAfter(_:)`` sleep for exactly the value they compute.
///   - isolation: The actor the operation and the strategy run on; inherited from the caller.
///   - operation: The work to try. Its thrown error type `E` is what `strategy` receives.
///   - strategy: What to do after a failed attempt that still has attempts left. `.backoff(.none)` (retry at once)
///     by default.
/// - Returns: The value of the first attempt that succeeds.
/// - Throws: The last attempt's own error when the attempts run out, the failed attempt's own error when `strategy`
///   returns ``RetryStrategy/stop``, `CancellationError` when the task is cancelled, ``RetryError`` for an invalid
///   configuration, or any error other than cancellation that the clock throws from `sleep`.
@inlinable
@inline(__always)
public func retry<R, E, C>(
    maxAttempts: Int = 3,
    budget: RetryBudget? = nil,
    tolerance: C.Duration? = nil,
    clock: C,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws(E) -> sending R,
    strategy: (E) -> RetryStrategy<C> = { _ in .backoff(.none) }
) async throws -> sending R where C: Clock, E: Error {
    // Always inlined (with the async runner): as a call of its own, this async function would cost an async frame and
    // an executor hop after every attempt, about twice the cost of everything else it does.
    // Without a budget, time is not observable through this overload (no deadline, no events), so the runner is fed a
    // constant `now`, observes nothing, and keeps no machine until the first attempt fails: the fast path reads no
    // clock at all. With a budget, a refused retry's error tells how long the attempts took: that run reads the clock.
    var machine = AsyncRetryHeapMachine(maxAttempts: maxAttempts, budget: budget)
    if budget != nil {
        return try await runBudgetedAsyncRetry(
            machine: &machine, tolerance: tolerance, clock: clock, isolation: isolation, operation: operation,
            strategy: strategy)
    }
    return try await runAsyncRetry(
        machine: &machine, observed: false,
        tolerance: tolerance, clock: clock, isolation: isolation, now: { DelayMath.zero },
        runAttempt: { (_: Int) async throws(E) -> sending R in try await operation() },
        strategy: strategy, observe: { _, _ in })
}

/// Runs an async operation and retries it when it throws, measuring waits on a `ContinuousClock`.
///
/// The same as ``retry(maxAttempts:budget:tolerance:clock:isolation:operation:strategy:)`` with
/// `clock: ContinuousClock()`. The two overloads exist because Swift cannot yet give a generic clock parameter a
/// concrete default value.
///
/// ```swift
/// let (data, response) = try await retry {
///     try await URLSession.shared.data(from: url)
/// }
/// ```
///
/// - Parameters:
///   - maxAttempts: The most attempts, including the first. `3` by default; below 1 throws ``RetryError``.
///   - budget: A ``RetryBudget`` every retry pays into. `nil` by default.
///   - tolerance: The tolerance passed to the clock for each wait. `nil` by default.
///   - isolation: The actor the operation and the strategy run on; inherited from the caller.
///   - operation: The work to try.
///   - strategy: What to do after a failed attempt that still has attempts left. `.backoff(.none)` by default.
/// - Returns: The value of the first attempt that succeeds.
/// - Throws: See ``retry(maxAttempts:budget:tolerance:clock:isolation:operation:strategy:)``.
@inlinable
@inline(__always)
public func retry<R, E>(
    maxAttempts: Int = 3,
    budget: RetryBudget? = nil,
    tolerance: ContinuousClock.Duration? = nil,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws(E) -> sending R,
    strategy: (E) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) }
) async throws -> sending R where E: Error {
    try await retry(
        maxAttempts: maxAttempts, budget: budget, tolerance: tolerance, clock: ContinuousClock(), isolation: isolation,
        operation: operation, strategy: strategy)
}

/// The basic `retry` with a budget: the same run, fed the time since the call (a clock whose duration is not
/// `Swift.Duration` reports zero). Not inlined into `retry`, so that the call without a budget keeps its small frame
/// and reads no clock.
@inlinable
@inline(never)
func runBudgetedAsyncRetry<R, E, C>(
    machine: inout AsyncRetryHeapMachine,
    tolerance: C.Duration?,
    clock: C,
    isolation: isolated (any Actor)?,
    operation: () async throws(E) -> sending R,
    strategy: (E) -> RetryStrategy<C>
) async throws -> sending R where C: Clock, E: Error {
    let start = clock.now
    return try await runAsyncRetry(
        machine: &machine, observed: false,
        tolerance: tolerance, clock: clock, isolation: isolation,
        now: { AsyncRetry.elapsed(start.duration(to: clock.now)) },
        runAttempt: { (_: Int) async throws(E) -> sending R in try await operation() },
        strategy: strategy, observe: { _, _ in })
}

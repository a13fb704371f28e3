/// Runs an async operation and retries it when it throws, waiting between attempts as the strategy says.
///
/// This is the async entry point. It is source-compatible with the async retry library RetryKit replaces: the same
/// name, parameters, defaults and behaviour, so existing call sites compile unchanged.
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
/// ## Cancellation
///
/// Task cancellation is checked before every attempt: a task that is already cancelled when `retry` is called runs no
/// attempt. Cancellation during a wait ends the wait at once. If the task is cancelled when an attempt throws, the
/// strategy is not consulted. In all these cases `retry` throws `CancellationError`. An attempt that is running when
/// the task is cancelled is not interrupted (cancellation is cooperative); if it still succeeds, its value is
/// returned.
///
/// - Parameters:
///   - maxAttempts: The most attempts, including the first. `3` by default. A value below 1 runs no attempt and
///     throws ``RetryError`` with reason ``RetryError/Reason-swift.enum/invalidConfiguration(_:)`` (it does not trap).
///   - tolerance: The tolerance passed to the clock for each wait. `nil` by default.
///   - clock: The clock that measures the waits. It must use `Swift.Duration` (`C.Duration == Duration`), as
///     `ContinuousClock`, `SuspendingClock` and RetryKitTesting's `TestClock` and `ImmediateClock` do.
///   - isolation: The actor the operation and the strategy run on; inherited from the caller.
///   - operation: The work to try. Its thrown error type `E` is what `strategy` receives.
///   - strategy: What to do after a failed attempt that still has attempts left. `.backoff(.none)` (retry at once)
///     by default.
/// - Returns: The value of the first attempt that succeeds.
/// - Throws: The last attempt's own error when the attempts run out, the failed attempt's own error when `strategy`
///   returns ``RetryStrategy/stop``, `CancellationError` when the task is cancelled, ``RetryError`` for an invalid
///   configuration, or any error other than cancellation that the clock throws from `sleep`.
@inlinable
public func retry<R, E, C>(
    maxAttempts: Int = 3,
    tolerance: C.Duration? = nil,
    clock: C,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws(E) -> sending R,
    strategy: (E) -> RetryStrategy<C> = { _ in .backoff(.none) }
) async throws -> sending R where C: Clock, E: Error, C.Duration == Duration {
    // Time is not observable through this overload (no deadline, no events), so the state machine is fed a constant
    // `now` and the clock is only touched to sleep: the fast path reads no clock at all.
    // Cancellation is checked before the machine is asked for each attempt (here and after each wait), so that a
    // cancelled task reports the attempts that really ran.
    var machine = RetryStateMachine(RetryConfiguration(maxAttempts: maxAttempts))
    var action = Task.isCancelled ? machine.cancel(at: .zero) : machine.start(at: .zero)
    var failure: E?
    while true {
        switch action {
        case .run(let attempt, _):
            do throws(E) {
                let value = try await operation()
                _ = machine.attemptSucceeded(attempt.number, at: .zero)
                return value
            } catch {
                if Task.isCancelled {
                    action = machine.cancel(at: .zero)
                } else {
                    failure = error
                    action = machine.attemptFailed(attempt.number, error: error, at: .zero)
                }
            }
        case .consultStrategy(let context, _):
            // `failure` is always set here: the machine only asks after `attemptFailed`.
            guard let error = failure else { throw AsyncRetry.inconsistency() }
            failure = nil
            action = machine.decide(context.resolve(strategy(error)), at: .zero)
        case .retry(let delay, _, _):
            if delay > .zero {
                do {
                    try await clock.sleep(for: delay, tolerance: tolerance)
                } catch {
                    _ = machine.cancel(at: .zero)
                    throw AsyncRetry.sleepError(error)
                }
            }
            action = Task.isCancelled ? machine.cancel(at: .zero) : machine.waitElapsed(at: .zero)
        case .finish(let termination):
            throw termination.error ?? AsyncRetry.inconsistency()
        case .none:
            throw AsyncRetry.inconsistency()
        }
    }
}

/// Runs an async operation and retries it when it throws, measuring waits on a `ContinuousClock`.
///
/// The same as ``retry(maxAttempts:tolerance:clock:isolation:operation:strategy:)`` with
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
///   - tolerance: The tolerance passed to the clock for each wait. `nil` by default.
///   - isolation: The actor the operation and the strategy run on; inherited from the caller.
///   - operation: The work to try.
///   - strategy: What to do after a failed attempt that still has attempts left. `.backoff(.none)` by default.
/// - Returns: The value of the first attempt that succeeds.
/// - Throws: See ``retry(maxAttempts:tolerance:clock:isolation:operation:strategy:)``.
@inlinable
public func retry<R, E>(
    maxAttempts: Int = 3,
    tolerance: ContinuousClock.Duration? = nil,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws(E) -> sending R,
    strategy: (E) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) }
) async throws -> sending R where E: Error {
    try await retry(
        maxAttempts: maxAttempts, tolerance: tolerance, clock: ContinuousClock(), isolation: isolation,
        operation: operation, strategy: strategy)
}

/// Helpers shared by the async runners.
@usableFromInline
enum AsyncRetry {
    /// The error a runner throws if the state machine ever answers out of sequence. Unreachable by construction; it
    /// exists so that no path can trap.
    @usableFromInline
    static func inconsistency() -> RetryError {
        RetryError(.invalidConfiguration("internal inconsistency in the async retry runner"))
    }

    /// The error a wait ends with when the clock's `sleep` throws: `CancellationError` when the task was cancelled
    /// (whatever the clock threw), otherwise the clock's own error.
    @usableFromInline
    static func sleepError(_ error: any Error) -> any Error {
        if error is CancellationError || Task.isCancelled { return CancellationError() }
        return error
    }
}

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
/// ``retry(maxAttempts:totalTimeout:attemptTimeout:tolerance:clock:isolation:operation:strategy:observer:)``).
/// `operation` is called synchronously in the caller's isolation to *start* the work; it must not block. Its
/// ``AttemptCompletion`` may be called from any thread, once; later calls are ignored and reported to `observer` as
/// ``RetryEvent/duplicateCompletion(_:)`` (before the next `attemptStarted` or `finished`; duplicates that arrive
/// after the retrier finished are dropped). A result that arrives after its attempt was cancelled or timed out is
/// ignored.
///
/// Each attempt suspends in `withCheckedThrowingContinuation`. The continuation is kept in locked state and handed
/// out exactly once, to whichever comes first: the attempt's completion, its timeout, or task cancellation. It is
/// resumed after the lock is released.
///
/// ## Cancellation
///
/// Task cancellation is checked before every attempt; a task cancelled before the call runs no attempt. Cancelling
/// the task while an attempt is in flight abandons the attempt at once: its cancel hook
/// (``AttemptCompletion/onCancel(_:)``) runs on the cancelling thread, the attempt's late result is ignored and
/// `withRetry` throws `CancellationError` without waiting for the work. A cancellation that arrives before the
/// attempt started waiting is remembered. A wait between attempts ends at once. A per-attempt or total timeout
/// abandons the attempt the same way (the cancel hook runs) before the retrier goes on.
///
/// - Parameters:
///   - maxAttempts: The most attempts, including the first. `3` by default; below 1 throws ``RetryError``
///     (``RetryError/Reason-swift.enum/invalidConfiguration(_:)``) without running an attempt.
///   - totalTimeout: The time allowed for all attempts and waits together, or `nil` for no limit. `nil` by default.
///   - attemptTimeout: The time one attempt may take before it is abandoned and counts as failed with
///     ``RetryError/Reason-swift.enum/attemptTimedOut``, or `nil`. `nil` by default.
///   - tolerance: The tolerance passed to the clock for each sleep. `nil` by default.
///   - clock: The clock that measures waits and timeouts (`C.Duration == Duration`).
///   - isolation: The actor `operation`, `strategy` and `observer` run on; inherited from the caller.
///   - operation: Starts one attempt and calls its completion once with the result.
///   - strategy: What to do after a failed attempt that still has attempts left. `.backoff(.none)` by default.
///   - observer: Receives every event of the run, in the caller's isolation. Ignores them by default.
/// - Returns: The value of the first attempt that succeeds.
/// - Throws: The operation's own last error (attempts exhausted, or ``RetryStrategy/stop``), `CancellationError`,
///   ``RetryError`` (deadline exceeded, invalid configuration, or ``RetryError/Reason-swift.enum/missingResult`` as
///   the last error when an attempt completed with neither value nor error), or an error other than cancellation
///   thrown by the clock's `sleep`.
public func withRetry<Value: Sendable, C: Clock>(
    maxAttempts: Int = 3,
    totalTimeout: Duration? = nil,
    attemptTimeout: Duration? = nil,
    tolerance: Duration? = nil,
    clock: C,
    isolation: isolated (any Actor)? = #isolation,
    operation: (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
    strategy: (any Error) -> RetryStrategy<C> = { _ in .backoff(.none) },
    observer: (RetryEvent<Value>) -> Void = { _ in }
) async throws -> Value where C.Duration == Duration {
    let configuration = RetryConfiguration(
        maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout)
    let duplicates = Locked<[RetryAttempt]>([])
    return try await runObservedRetry(
        configuration: configuration, tolerance: tolerance, clock: clock, isolation: isolation,
        runAttempt: { attempt, deadline in
            let pending = PendingAttempt<Value>()
            let slot = AttemptSlot<Value>(
                onResult: { pending.finish(.completed($0)) },
                onDuplicate: { duplicates.withLock { $0.append(attempt) } })
            let outcome: PendingAttempt<Value>.Outcome
            do {
                outcome = try await withTaskCancellationHandler(
                    operation: {
                        operation(attempt, AttemptCompletion(slot))
                        // No timer for an attempt that has already ended (completed synchronously or cancelled).
                        guard let deadline, !pending.hasEnded else { return try await pending.wait() }
                        return try await withThrowingTaskGroup(of: Void.self, isolation: isolation) { group in
                            group.addTask {
                                do {
                                    try await clock.sleep(until: deadline, tolerance: tolerance)
                                } catch {
                                    return  // the attempt completed first, or the task was cancelled
                                }
                                if Task.isCancelled { return }
                                slot.abandon()
                                pending.finish(.timedOut)
                            }
                            defer { group.cancelAll() }
                            return try await pending.wait()
                        }
                    },
                    onCancel: {
                        slot.abandon()
                        pending.cancel()
                    },
                    isolation: isolation)
            } catch {
                return .cancelled
            }
            switch outcome {
            case .completed(.success(let value)): return .succeeded(value)
            case .completed(.failure(let error)): return .failed(error)
            case .timedOut: return .timedOut
            }
        },
        strategy: strategy,
        observer: { event in
            switch event {
            case .attemptStarted, .finished:
                let late = duplicates.withLock { list in
                    defer { list.removeAll() }
                    return list
                }
                for attempt in late {
                    observer(.duplicateCompletion(attempt))
                }
            default:
                break
            }
            observer(event)
        })
}

/// Retries a completion-handler operation from async code, measuring time on a `ContinuousClock`.
///
/// The same as
/// ``withRetry(maxAttempts:totalTimeout:attemptTimeout:tolerance:clock:isolation:operation:strategy:observer:)``
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
///   - tolerance: The tolerance passed to the clock for each sleep. `nil` by default.
///   - isolation: The actor `operation`, `strategy` and `observer` run on; inherited from the caller.
///   - operation: Starts one attempt and calls its completion once with the result.
///   - strategy: What to do after a failed attempt that still has attempts left. `.backoff(.none)` by default.
///   - observer: Receives every event of the run. Ignores them by default.
/// - Returns: The value of the first attempt that succeeds.
/// - Throws: See
///   ``withRetry(maxAttempts:totalTimeout:attemptTimeout:tolerance:clock:isolation:operation:strategy:observer:)``.
public func withRetry<Value: Sendable>(
    maxAttempts: Int = 3,
    totalTimeout: Duration? = nil,
    attemptTimeout: Duration? = nil,
    tolerance: Duration? = nil,
    isolation: isolated (any Actor)? = #isolation,
    operation: (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
    strategy: (any Error) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) },
    observer: (RetryEvent<Value>) -> Void = { _ in }
) async throws -> Value {
    try await withRetry(
        maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout, tolerance: tolerance,
        clock: ContinuousClock(), isolation: isolation, operation: operation, strategy: strategy, observer: observer)
}

/// One attempt of
/// ``withRetry(maxAttempts:totalTimeout:attemptTimeout:tolerance:clock:isolation:operation:strategy:observer:)``
/// waiting for its outcome.
///
/// Three things race to end the attempt: its completion (``finish(_:)`` with a result), its timer (``finish(_:)``
/// with `.timedOut`) and task cancellation (``cancel()``), and any of them may come before the task has registered
/// its continuation in ``wait()``. The continuation lives in the locked state and leaves it exactly once, when the
/// state moves to `.done`; it is resumed after the lock is released. Whatever arrives before the continuation is
/// remembered and delivered as soon as it is registered.
final class PendingAttempt<Value: Sendable>: Sendable {
    /// How the attempt ended, unless the task was cancelled.
    enum Outcome: Sendable {
        case completed(Result<Value, any Error>)
        case timedOut
    }

    private enum State {
        /// Nothing has happened yet and no one waits.
        case idle
        /// The outcome arrived before the continuation.
        case early(Outcome)
        /// Cancellation arrived before the continuation.
        case cancelledEarly
        /// The task waits for the outcome.
        case waiting(CheckedContinuation<Outcome, any Error>)
        /// The continuation has been handed out (or was never needed); everything else is ignored.
        case done
    }

    private enum Resumption {
        case deliver(Outcome)
        case cancel
    }

    private let state = Locked(State.idle)

    /// Whether the attempt has already ended, before anyone waited for it.
    var hasEnded: Bool {
        state.withLock { state in
            switch state {
            case .idle, .waiting: return false
            case .early, .cancelledEarly, .done: return true
            }
        }
    }

    /// Suspends until the attempt ends; throws `CancellationError` if the task was cancelled first.
    func wait(isolation: isolated (any Actor)? = #isolation) async throws -> Outcome {
        try await withCheckedThrowingContinuation(isolation: isolation) { continuation in
            let resumption: Resumption? = state.withLock { state in
                switch state {
                case .idle:
                    state = .waiting(continuation)
                    return nil
                case .early(let outcome):
                    state = .done
                    return .deliver(outcome)
                case .cancelledEarly, .waiting, .done:
                    // `.waiting` and `.done` cannot happen (one wait per attempt); ending the wait keeps the
                    // continuation from leaking if they ever did.
                    state = .done
                    return .cancel
                }
            }
            switch resumption {
            case .deliver(let outcome): continuation.resume(returning: outcome)
            case .cancel: continuation.resume(throwing: CancellationError())
            case nil: break
            }
        }
    }

    /// Ends the attempt with `outcome`, unless it has already ended.
    func finish(_ outcome: Outcome) {
        let continuation: CheckedContinuation<Outcome, any Error>? = state.withLock { state in
            switch state {
            case .idle:
                state = .early(outcome)
                return nil
            case .waiting(let continuation):
                state = .done
                return continuation
            case .early, .cancelledEarly, .done:
                return nil
            }
        }
        continuation?.resume(returning: outcome)
    }

    /// Ends the attempt with `CancellationError`, unless it has already ended.
    func cancel() {
        let continuation: CheckedContinuation<Outcome, any Error>? = state.withLock { state in
            switch state {
            case .idle:
                state = .cancelledEarly
                return nil
            case .waiting(let continuation):
                state = .done
                return continuation
            case .early, .cancelledEarly, .done:
                return nil
            }
        }
        continuation?.resume(throwing: CancellationError())
    }
}

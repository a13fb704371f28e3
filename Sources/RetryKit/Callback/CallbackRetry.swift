import Dispatch

/// Retries a completion-handler operation with backoff, calling `completion` with the result and a summary.
///
/// This is the completion-handler face of RetryKit, for code that would otherwise hand-write a recursive
/// `requestWithRetry`. The operation receives the attempt (its number, the retries left, the time elapsed) and a
/// completion to call once, in the `Result` style or the `(Value?, Error?)` style (for an operation that is already
/// `async`, use `retryTask(…, on:)`, whose closure takes no completion):
///
/// ```swift
/// let handle = retry(maxAttempts: 5, on: .main) { attempt, done in
///     let task = legacyLoad(id) { value, error in done(value, error) }
///     done.onCancel { task.cancel() }
/// } strategy: { error in
///     error is AuthError ? .stop : .backoff(.exponential(a: .milliseconds(100), b: 2).max(.seconds(5)).jitter())
/// } completion: { result, summary in
///     print("\(summary.attempts) attempt(s):", result)
/// }
/// ```
///
/// After a failed attempt the strategy decides: `.backoff(…)` waits the backoff's delay for that retry (x = 0 before
/// the second attempt), `.retryAfter(d)` waits exactly `d`, `.stop` gives up. Each wait is a one-shot timer of the
/// scheduler (a `DispatchSourceTimer` in production); a zero delay arms no timer and the next attempt starts at once.
///
/// ## Queue
///
/// The operation, the strategy, the observer and the completion all run on `queue`; the operation may call its
/// completion from any thread. Use a serial queue (such as `.main`) to get the observer's events in order: on a
/// concurrent queue the guarantees below still hold, but callbacks may run concurrently and events may interleave.
/// (With `VirtualScheduler` everything runs on the thread that advances it instead.)
///
/// A completion called after the operation returned hops to `queue` once, like a hand-written retry would. A completion
/// called before the operation returns (a cached or invalid request failing at once) is handled as soon as the
/// operation returns, without another hop; a long run of such attempts does not grow the stack.
///
/// ## Guarantees
///
/// - `completion` runs **exactly once, on `queue`**, however the retrier ends (`summary.reason` in brackets):
///   - an attempt succeeds: `.success(value)` (`.succeeded`);
///   - the last allowed attempt fails: the operation's last error (`.exhausted`);
///   - the strategy returns `.stop`: the error of that attempt (`.stopped`);
///   - `totalTimeout` expires, or the next wait would end after it: ``RetryError`` `.deadlineExceeded`
///     (`.deadlineExceeded`);
///   - the configuration is invalid (`maxAttempts < 1`, a negative `totalTimeout`, a non-positive `attemptTimeout`):
///     ``RetryError`` `.invalidConfiguration`, and no attempt runs (`.invalidConfiguration`);
///   - ``RetryHandle/cancel()``, or cancelling a task awaiting ``RetryHandle/value``: `CancellationError`
///     (`.cancelled`).
/// - **Cancel** during a wait cancels the timer and completes promptly; during an attempt it runs the attempt's cancel
///   hook (``AttemptCompletion/onCancel(_:)``) and completes at once, ignoring the attempt's late result; after the
///   retrier finished it does nothing.
/// - An operation that calls its completion **twice** never causes a second completion: the extra call is reported
///   to the observer as ``RetryEvent/duplicateCompletion(_:)`` on `queue`, before the next `attemptStarted` or
///   `finished` (as every RetryKit runner reports it); an extra call made after the retrier finished is dropped, since
///   the observer is no longer kept then.
/// - An attempt that does not complete within `attemptTimeout` fails with ``RetryError`` `.attemptTimedOut` (its cancel
///   hook runs) and the strategy decides as for any failure; its late completion is ignored.
/// - **Nothing is retained** after the retrier finishes: the operation, strategy, observer and completion are released
///   and the pending timer is cancelled and released, even while the returned handle is kept or the operation keeps
///   its completion.
/// - RetryKit **holds no lock while user code runs**: operation, strategy, observer, completion and cancel hooks may
///   call back into the handle.
///
/// - Parameters:
///   - maxAttempts: The most attempts, including the first. Must be at least 1. `3` by default.
///   - totalTimeout: A deadline across all attempts and waits, measured from this call: the retrier gives up when it
///     passes (an attempt still running then is abandoned) or as soon as a wait would end after it. `nil` (no
///     deadline) by default.
///   - attemptTimeout: How long one attempt may take before it fails with ``RetryError`` `.attemptTimedOut`. `nil` (no
///     limit) by default. Either timeout, if longer than ``BackoffStrategy/saturationLimit`` (about 31.7 years),
///     counts as that limit.
///   - budget: A ``RetryBudget`` shared with other retriers that every retry pays into; when it refuses, the run
///     finishes with ``RetryError`` `.budgetExhausted` carrying the last error. A success refunds its retry. `nil` by
///     default.
///   - queue: The queue the operation, strategy, observer and completion run on.
///   - scheduler: Where time, hops and timers come from. ``RetryScheduler/dispatch`` by default; pass a
///     `VirtualScheduler` to test on virtual time.
///   - operation: One attempt. Call the completion once, from any thread.
///   - strategy: What to do after a failed attempt that has attempts left. `.backoff(.none)` (retry at once) by
///     default.
///   - observer: Receives ``RetryEvent``s on `queue`, in order: attempt started, attempt failed (with the next delay or
///     the reason for giving up), attempt succeeded, finished. `nil` by default.
///   - completion: The result, and a ``RetrySummary`` that says how the retrier ended and how many attempts ran.
/// - Returns: A handle to cancel the retrier or await its result. Keeping it is optional.
@inlinable
@discardableResult
public func retry<Value: Sendable>(
    maxAttempts: Int = 3,
    totalTimeout: Duration? = nil,
    attemptTimeout: Duration? = nil,
    budget: RetryBudget? = nil,
    on queue: DispatchQueue,
    scheduler: any RetryScheduler = .dispatch,
    operation: @escaping @Sendable (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
    strategy: @escaping @Sendable (any Error) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) },
    observer: (@Sendable (RetryEvent<Value>) -> Void)? = nil,
    completion: @escaping @Sendable (Result<Value, any Error>, RetrySummary) -> Void
) -> RetryHandle<Value> {
    startCallbackRetrier(
        configuration: RetryConfiguration(
            maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout, budget: budget),
        on: queue, scheduler: scheduler, operation: operation, strategy: strategy, observer: observer,
        completion: completion)
}

/// Starts a completion-handler retrier for a whole configuration (limits and budget): the one entry point behind every
/// public callback `retry`, policies and the HTTP layer.
@inlinable
@discardableResult
package func retry<Value: Sendable>(
    configuration: RetryConfiguration,
    on queue: DispatchQueue,
    scheduler: any RetryScheduler,
    operation: @escaping @Sendable (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
    strategy: @escaping @Sendable (any Error) -> RetryStrategy<ContinuousClock>,
    observer: (@Sendable (RetryEvent<Value>) -> Void)?,
    completion: @escaping @Sendable (Result<Value, any Error>, RetrySummary) -> Void
) -> RetryHandle<Value> {
    startCallbackRetrier(
        configuration: configuration, on: queue, scheduler: scheduler, operation: operation, strategy: strategy,
        observer: observer, completion: completion)
}

/// Starts a completion-handler retrier: the one place that builds one. With `trials`, a run of trials (a gated or
/// repeating policy) in the same runner.
///
/// Inlinable, like the public entry points, so that it is specialized in the caller's module for the caller's `Value`:
/// the closures it gives the non-generic ``CallbackRunner`` are then specialized code, and neither creating the
/// retrier nor any attempt looks up generic metadata at run time.
@inlinable
func startCallbackRetrier<Value: Sendable>(
    configuration: RetryConfiguration,
    on queue: DispatchQueue,
    scheduler: any RetryScheduler,
    operation: @escaping @Sendable (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
    strategy: @escaping @Sendable (any Error) -> RetryStrategy<ContinuousClock>,
    observer: (@Sendable (RetryEvent<Value>) -> Void)?,
    completion: @escaping @Sendable (Result<Value, any Error>, RetrySummary) -> Void,
    trials: CallbackTrials? = nil
) -> RetryHandle<Value> {
    // Every closure below captures one object, the same one, which is then the closure's context: one allocation
    // for all of them (each closure capturing the user's closures itself would allocate a context of its own).
    let user: CallbackUserClosures<Value>
    if let observer {
        user = ObservedCallbackUserClosures(operation: operation, observer: observer, completion: completion)
    } else {
        user = CallbackUserClosures(operation: operation, completion: completion)
    }
    var observe: (@Sendable (CallbackEvent) -> Void)?
    if observer != nil {
        observe = { event in user.observer?(event.typed()) }
    }
    let client = CallbackClient(
        run: { attempt, sink in user.operation(attempt, AttemptCompletion(sink: sink, attempt: attempt)) },
        strategy: strategy,
        finish: { termination, value, duplicates in
            let value = value?.value(as: Value.self)  // always a `Value` if set: only this operation produced it
            if let observer = user.observer {
                termination.forEachEvent(value: value) { event in
                    if case .finished = event {
                        for attempt in duplicates { observer(.duplicateCompletion(attempt)) }
                    }
                    observer(event)
                }
            }
            user.completion(termination.result(value: value), termination.summary)
        },
        observe: observe)
    let runner = CallbackRunner.start(
        configuration: configuration, queue: queue, scheduler: scheduler, client: client, trials: trials)
    return RetryHandle(runner: runner)
}

/// The user's closures of a completion-handler retrier, in one object that the closures of its ``CallbackClient``
/// capture (see `startCallbackRetrier`). Without an observer: one with an observer is an
/// ``ObservedCallbackUserClosures``, so that every retrier without one keeps a smaller object (a smaller malloc size
/// class: 16 bytes less per waiting retrier).
@usableFromInline
class CallbackUserClosures<Value: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: immutable (not `final`, for the subclass with an observer).
    @usableFromInline
    let operation: @Sendable (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void
    @usableFromInline
    let completion: @Sendable (Result<Value, any Error>, RetrySummary) -> Void

    /// The observer; `nil` here.
    @usableFromInline
    var observer: (@Sendable (RetryEvent<Value>) -> Void)? { nil }

    @usableFromInline
    init(
        operation: @escaping @Sendable (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
        completion: @escaping @Sendable (Result<Value, any Error>, RetrySummary) -> Void
    ) {
        self.operation = operation
        self.completion = completion
    }
}

/// ``CallbackUserClosures`` with an observer.
@usableFromInline
final class ObservedCallbackUserClosures<Value: Sendable>: CallbackUserClosures<Value>, @unchecked Sendable {
    // @unchecked Sendable: immutable.
    @usableFromInline
    let observerClosure: @Sendable (RetryEvent<Value>) -> Void

    @usableFromInline
    override var observer: (@Sendable (RetryEvent<Value>) -> Void)? { observerClosure }

    @usableFromInline
    init(
        operation: @escaping @Sendable (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
        observer: @escaping @Sendable (RetryEvent<Value>) -> Void,
        completion: @escaping @Sendable (Result<Value, any Error>, RetrySummary) -> Void
    ) {
        observerClosure = observer
        super.init(operation: operation, completion: completion)
    }
}

// MARK: - Async operations retried from callback code

/// Retries an `async` operation from completion-handler code, calling `completion` with the result and a summary.
///
/// A bridge for migrating one call site at a time: the operation is already `async`, its caller still uses
/// callbacks. Each attempt runs in a new `Task`; the retrier, its strategy, events and completion are exactly those of
/// the completion-handler `retry` (it is the same runner), with the same queue and guarantees.
///
/// Its name differs from the completion-handler `retry(…, on:, operation:, …)` on purpose: a closure written as a
/// trailing closure loses its argument label, so with one name a completion-handler operation that forgets its `done`
/// parameter (`{ attempt in legacyLoad { … } }`) would compile as an `async` operation returning `Void` and succeed at
/// once. With two names, `retry(…, on:)` accepts only `{ attempt, done in … }` and `retryTask(…, on:)` only
/// `{ attempt in … }`; any other closure is a compile-time error.
///
/// ```swift
/// let handle = retryTask(maxAttempts: 4, on: .main) { attempt in
///     try await api.load(id)
/// } strategy: { _ in
///     .backoff(.exponential(a: .milliseconds(200), b: 2).jitter())
/// } completion: { result, summary in
///     render(result)
/// }
/// handle.cancel()   // cancels the Task of the attempt in flight
/// ```
///
/// ``RetryHandle/cancel()``, a per-attempt timeout and a total deadline that expires during an attempt all cancel the
/// attempt's `Task` (through its cancel hook); whatever the task returns afterwards is ignored.
///
/// - Parameters:
///   - maxAttempts: The most attempts, including the first. Must be at least 1. `3` by default.
///   - totalTimeout: A deadline across all attempts and waits. `nil` by default.
///   - attemptTimeout: How long one attempt may take; its task is then cancelled. `nil` by default.
///   - budget: A ``RetryBudget`` shared with other retriers that every retry pays into; when it refuses, the run
///     finishes with ``RetryError`` `.budgetExhausted` carrying the last error. A success refunds its retry. `nil` by
///     default.
///   - queue: The queue the strategy, observer and completion run on (the operation runs in its own task).
///   - scheduler: Where time, hops and timers come from. ``RetryScheduler/dispatch`` by default.
///   - operation: One attempt, run in a new `Task`.
///   - strategy: What to do after a failed attempt. `.backoff(.none)` by default.
///   - observer: Receives ``RetryEvent``s on `queue`, in order. `nil` by default.
///   - completion: The result and a ``RetrySummary``; runs exactly once, on `queue`.
/// - Returns: A handle to cancel the retrier or await its result.
@discardableResult
public func retryTask<Value: Sendable>(
    maxAttempts: Int = 3,
    totalTimeout: Duration? = nil,
    attemptTimeout: Duration? = nil,
    budget: RetryBudget? = nil,
    on queue: DispatchQueue,
    scheduler: any RetryScheduler = .dispatch,
    operation: @escaping @Sendable (_ attempt: RetryAttempt) async throws -> Value,
    strategy: @escaping @Sendable (any Error) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) },
    observer: (@Sendable (RetryEvent<Value>) -> Void)? = nil,
    completion: @escaping @Sendable (Result<Value, any Error>, RetrySummary) -> Void
) -> RetryHandle<Value> {
    retry(
        maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout, budget: budget, on: queue,
        scheduler: scheduler, operation: taskAttempt(operation), strategy: strategy, observer: observer,
        completion: completion)
}

/// Adapts an `async` operation to a completion-handler attempt: runs it in a `Task` whose cancellation is the
/// attempt's cancel hook.
package func taskAttempt<Value: Sendable>(
    _ operation: @escaping @Sendable (RetryAttempt) async throws -> Value
) -> @Sendable (RetryAttempt, AttemptCompletion<Value>) -> Void {
    { attempt, done in
        let task = Task {
            do {
                done(.success(try await operation(attempt)))
            } catch {
                done(.failure(error))
            }
        }
        done.onCancel { task.cancel() }
    }
}

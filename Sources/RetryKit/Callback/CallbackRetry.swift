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
/// scheduler (a `DispatchSourceTimer` in production); a zero delay arms no timer: the next attempt starts in the next
/// block on the queue.
///
/// ## Queue and isolation
///
/// The operation, the strategy, the observer and the completion all run on `queue`; the operation may call its
/// completion from any thread. They are not `@Sendable`: they stay in the caller's isolation (`isolation`, the
/// caller's actor by default). Called on the main actor, they run on the main queue, the main actor's own, so they may
/// capture a main-actor view model and a plain-class client and touch main-actor state; `queue` must then be `.main`
/// (another queue finishes the retrier with ``RetryError`` `.invalidConfiguration`, on the main queue). Called from
/// nonisolated code, they run on `queue`: code that shares state with them runs on `queue` too (start the retrier from
/// a block on it). From another actor, use ``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:isolation:operation:strategy:observer:)``
/// or the async `retry`: the retrier finishes with ``RetryError`` `.invalidConfiguration`, delivered on that actor.
///
/// Use a serial queue (such as `.main`) to get the observer's events in order: on a concurrent queue the guarantees
/// below still hold, but callbacks may run concurrently and events may interleave. (With `VirtualScheduler` everything
/// runs on the thread that advances it instead.)
///
/// Every attempt, the first and each retry, also after a zero delay, starts in a block of its own on `queue`, never
/// inside the previous attempt's completion: a run of failures never holds the queue, and work enqueued between two
/// attempts (a `cancel()` among it) runs before the next one. A completion called after the operation returned hops to
/// `queue` once, like a hand-written retry would; one called before the operation returns (a cached or invalid request
/// failing at once) is handled when the operation returns, without a hop of its own.
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
///   - queue: The queue the operation, strategy, observer and completion run on: `.main` from the main actor.
///   - scheduler: Where time, hops and timers come from. ``RetryScheduler/dispatch`` by default; pass a
///     `VirtualScheduler` to test on virtual time.
///   - isolation: The caller's actor, inherited (`#isolation`): on the main actor every closure runs on the main
///     queue; from nonisolated code, on `queue`; another actor gets ``RetryError`` `.invalidConfiguration`.
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
    isolation: isolated (any Actor)? = #isolation,
    operation: @escaping (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
    strategy: @escaping (any Error) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) },
    observer: ((RetryEvent<Value>) -> Void)? = nil,
    completion: @escaping (Result<Value, any Error>, RetrySummary) -> Void
) -> RetryHandle<Value> {
    startCallbackRetrier(
        configuration: RetryConfiguration(
            maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout, budget: budget),
        on: queue, scheduler: scheduler, isolation: isolation, operation: operation, strategy: strategy,
        observer: observer, completion: completion)
}

/// Starts a completion-handler retrier for a whole configuration (limits and budget), with `trials` for a run of
/// trials (a gated or repeating policy): the one place that builds a completion-handler retrier, behind every public
/// callback `retry`, the policies and the HTTP layer.
///
/// Where the user's closures run is decided here, once, from the caller's isolation
/// (``callbackPlacement(queue:isolation:)``): a main-actor caller's closures run on the main queue, a nonisolated
/// caller's on `queue`. A caller isolated to another actor gets the invalid-configuration error, delivered on that
/// actor.
@inlinable
@discardableResult
package func startCallbackRetrier<Value: Sendable>(
    configuration: consuming RetryConfiguration,
    on queue: DispatchQueue,
    scheduler: any RetryScheduler,
    isolation: isolated (any Actor)? = #isolation,
    operation: @escaping (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
    strategy: @escaping (any Error) -> RetryStrategy<ContinuousClock>,
    observer: ((RetryEvent<Value>) -> Void)?,
    onValue: ((Value) -> Void)? = nil,
    completion: @escaping (Result<Value, any Error>, RetrySummary) -> Void,
    trials: (RetryStateMachine.Trials, condition: RetryCondition?)? = nil
) -> RetryHandle<Value> {
    let user = TypedCallbackClosures(
        operation: operation, strategy: strategy, observer: observer, onValue: onValue, completion: completion)
    return RetryHandle(
        retrier: startCallbackRunner(
            configuration: configuration, queue: queue, scheduler: scheduler, isolation: isolation, user: user,
            trials: trials))
}

/// The part of ``startCallbackRetrier(configuration:on:scheduler:isolation:operation:strategy:observer:onValue:completion:trials:)``
/// that does not depend on the value type.
@usableFromInline
func startCallbackRunner(
    configuration: consuming RetryConfiguration, queue: DispatchQueue, scheduler: any RetryScheduler,
    isolation: (any Actor)?, user: any CallbackUserClosures,
    trials: consuming (RetryStateMachine.Trials, condition: RetryCondition?)?
) -> any CallbackRetrier {
    // The configuration and the machine are moved, never copied: each copy of them retains their references.
    let placement = callbackPlacement(queue: queue, isolation: isolation)
    configuration.placementProblem = placement.problem
    var machine: RetryStateMachine
    var condition: RetryCondition?
    if let (trials, trialCondition) = consume trials {
        machine = RetryStateMachine(consume configuration, trials: trials)
        condition = trialCondition
    } else {
        machine = RetryStateMachine(consume configuration)
    }
    if let actor = placement.otherActor {
        return RejectedRetrier(machine: consume machine, user: user, actor: actor)
    }
    let runner = CallbackRunner(
        machine: consume machine, user: user, condition: condition.take(), queue: placement.queue,
        scheduler: scheduler)
    runner.start()
    return runner
}

/// Where a completion-handler retrier started with `queue` from `isolation` runs its user's closures, and what is
/// wrong with that, if anything.
///
/// - From nonisolated code: on `queue`. The closures are not `@Sendable`: code that shares state with them must run on
///   `queue` too (call `retry(on: queue)` from a block on `queue`), as it would with a hand-written recursion.
/// - From the main actor: on the main queue, the main actor's executor, so that main-actor closures (a view model's,
///   or any code of a module whose default isolation is the main actor) run where the compiler assumed they do. A
///   queue other than `.main` is a problem: the retrier finishes with an invalid configuration, on the main queue.
/// - From any other actor: its closures cannot run on a `DispatchQueue`. A problem: the retrier finishes with an invalid
///   configuration, delivered on that actor (use `withRetry` or the async `retry` from actor code).
package func callbackPlacement(
    queue: DispatchQueue, isolation: (any Actor)?
) -> (queue: DispatchQueue, problem: String?, otherActor: (any Actor)?) {
    guard let isolation else { return (queue, nil, nil) }
    if isolation === MainActor.shared {
        if isMainQueue(queue) { return (queue, nil, nil) }
        return (
            .main,
            "a completion-handler retrier started on the main actor runs its closures on the main queue: pass "
                + "`on: .main` (got \(queue.label)), or start it from nonisolated code",
            nil
        )
    }
    return (
        queue,
        "a completion-handler retrier cannot run the closures of actor \(type(of: isolation)) on a DispatchQueue: "
            + "use withRetry or the async retry from actor code",
        isolation
    )
}

/// Whether `queue` is the main queue. Not `===`: on Linux, every `DispatchQueue.main` is a new object wrapping the same
/// queue. A queue that only targets the main queue is not the main queue (its blocks are not the main actor's jobs).
func isMainQueue(_ queue: DispatchQueue) -> Bool {
    queue === DispatchQueue.main || queue.getSpecific(key: mainQueueMarker.key) == mainQueueMarker.value
}

/// A value set once on the main queue (``isMainQueue(_:)``), the first time a retrier asks.
private let mainQueueMarker: MainQueueMarker = {
    let marker = MainQueueMarker()
    DispatchQueue.main.setSpecific(key: marker.key, value: marker.value)
    return marker
}()

private struct MainQueueMarker: @unchecked Sendable {
    // @unchecked Sendable: `DispatchSpecificKey` is not marked Sendable; this one is created once, never changed, and
    // only passed to `getSpecific`/`setSpecific`, which are thread-safe.
    let key = DispatchSpecificKey<UInt32>()
    let value: UInt32 = 0x5254_4B4D
}

/// The retrier of a caller isolated to an actor other than the main actor: finished before it started, its completion
/// (and observer's `finished`) delivered on that actor.
final class RejectedRetrier: CallbackRetrier {
    private let result: Result<any Sendable, any Error>

    init(machine: consuming RetryStateMachine, user: any CallbackUserClosures, actor: any Actor) {
        _ = machine.start(at: .zero)  // finishes at once: the configuration has a placement problem
        let termination =
            machine.termination
            ?? RetryTermination(
                summary: RetrySummary(reason: .invalidConfiguration, attempts: 0, elapsed: .zero),
                error: RetryError(.invalidConfiguration("internal: no termination")), failedAttempt: nil,
                succeededAttempt: nil)
        let result = termination.result(value: nil as (any Sendable)?)
        self.result = result
        // The closures are isolated to `actor`: they are called there, and only there.
        let closures = ActorConfined(user)
        Task {
            await Self.deliver(on: actor, closures, termination, result)
        }
    }

    private static func deliver(
        on actor: isolated any Actor, _ closures: ActorConfined<any CallbackUserClosures>,
        _ termination: RetryTermination, _ result: Result<any Sendable, any Error>
    ) {
        if closures.value.observes { closures.value.observe(.finished(termination.summary, error: termination.error)) }
        closures.value.complete(result, termination.summary)
    }

    func cancel() {}
    var isFinished: Bool { true }
    func awaitResult(_ waiter: @escaping @Sendable (Result<any Sendable, any Error>) -> Void) { waiter(result) }
    var probe: CallbackRunnerProbe { CallbackRunnerProbe(self) }
}

/// A value isolated to an actor, carried to it: sound only because it is used on that actor alone (see
/// ``RejectedRetrier``).
struct ActorConfined<T>: @unchecked Sendable {
    // @unchecked Sendable: the value crosses to its actor once and is used there alone.
    let value: T
    init(_ value: T) { self.value = value }
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
///   - isolation: The caller's actor, inherited (`#isolation`): on the main actor every closure runs on the main
///     queue; from nonisolated code, on `queue`; another actor gets ``RetryError`` `.invalidConfiguration`.
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
    isolation: isolated (any Actor)? = #isolation,
    @_inheritActorContext operation: @escaping @Sendable (_ attempt: RetryAttempt) async throws -> Value,
    strategy: @escaping (any Error) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) },
    observer: ((RetryEvent<Value>) -> Void)? = nil,
    completion: @escaping (Result<Value, any Error>, RetrySummary) -> Void
) -> RetryHandle<Value> {
    startCallbackRetrier(
        configuration: RetryConfiguration(
            maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout, budget: budget),
        on: queue, scheduler: scheduler, isolation: isolation, operation: taskAttempt(operation), strategy: strategy,
        observer: observer, completion: completion)
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

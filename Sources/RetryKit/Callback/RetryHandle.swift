import Dispatch

/// A running completion-handler retrier: cancel it, ask whether it has finished, or await its result.
///
/// The completion-handler `retry(…, on: queue, …)` functions return one. Keeping it is optional: a retrier keeps
/// itself alive while it waits or while its operation holds the attempt's completion, and releases everything it
/// captured once it finishes.
///
/// ```swift
/// let handle = retry(on: .main) { attempt, done in
///     legacyLoad(id) { value, error in done(value, error) }
/// } completion: { result in
///     show(result)
/// }
/// …
/// handle.cancel()                        // from any thread
/// let value = try await handle.value     // or await it from async code
/// ```
///
/// All members are thread-safe.
public final class RetryHandle<Value: Sendable>: Sendable {
    /// The queue the operation, strategy, observer and completion run on.
    let queue: DispatchQueue
    /// Where time and work come from.
    let scheduler: any RetryScheduler
    /// ``RetryScheduler/now`` when the retrier was created: elapsed time is measured from here.
    let origin: Duration
    /// Everything that changes, behind RetryKit's one lock. User code never runs while it is held.
    let state: Locked<RunnerState>

    init(configuration: RetryConfiguration, queue: DispatchQueue, scheduler: any RetryScheduler, callbacks: Callbacks) {
        self.queue = queue
        self.scheduler = scheduler
        self.origin = scheduler.now
        self.state = Locked(RunnerState(machine: RetryStateMachine(configuration), callbacks: callbacks))
    }

    /// Cancels the retrier.
    ///
    /// What happens depends on where the retrier is:
    ///
    /// - **Waiting before a retry:** the timer is cancelled and the completion runs promptly on the retrier's queue
    ///   with `CancellationError`. No further attempt starts.
    /// - **Running an attempt:** the attempt's cancel hook (``AttemptCompletion/onCancel(_:)``) runs at once on the
    ///   calling thread, the per-attempt timer (if any) is cancelled, and the completion runs at once on the queue with
    ///   `CancellationError`. The attempt's late result is ignored.
    /// - **Not started yet:** no attempt runs; the completion receives `CancellationError`.
    /// - **Finished:** nothing happens. The completion never runs twice.
    ///
    /// Observers see ``RetryEvent/finished(_:error:)`` with ``RetryFinishReason/cancelled`` and no result for the
    /// attempt in flight. Idempotent; safe from any thread, including from inside the retrier's own callbacks.
    public func cancel() {
        cancelRetrier()
    }

    /// Whether the retrier has finished: no attempt will start any more.
    ///
    /// Becomes `true` the moment the outcome is decided (for example as soon as ``cancel()`` returns); the completion
    /// then runs, or is already on its way to the retrier's queue.
    public var isFinished: Bool {
        state.withLock { $0.machine.isFinished }
    }

    /// The retrier's result, awaited from async code: the value on success, otherwise the error the completion
    /// receives.
    ///
    /// Returns after the completion handler has run on the retrier's queue, with the same result. Any number of tasks
    /// may await it; awaiting a retrier that has already finished returns at once.
    ///
    /// Cancelling an awaiting task cancels the retrier (as ``cancel()`` does: the pending timer, or the attempt in
    /// flight through its cancel hook), and the await throws `CancellationError` unless the retrier had already
    /// finished. A cancellation that arrives before the await is registered is not lost: the retrier is cancelled
    /// first and the await then returns its `CancellationError`. Cancelling one awaiting task cancels the retrier for
    /// every awaiter.
    public var value: Value {
        get async throws {
            if let outcome = state.withLock({ $0.outcome }) {
                return try outcome.get()
            }
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                    self.register(continuation)
                }
            } onCancel: {
                self.cancel()
            }
        }
    }
}

extension RetryHandle {
    /// The user's closures, dropped by the runner as soon as the retrier finishes.
    final class Callbacks: Sendable {
        let operation: @Sendable (RetryAttempt, AttemptCompletion<Value>) -> Void
        let strategy: @Sendable (any Error) -> RetryStrategy<ContinuousClock>
        let observer: (@Sendable (RetryEvent<Value>) -> Void)?
        let completion: @Sendable (Result<Value, any Error>, RetrySummary) -> Void

        init(
            operation: @escaping @Sendable (RetryAttempt, AttemptCompletion<Value>) -> Void,
            strategy: @escaping @Sendable (any Error) -> RetryStrategy<ContinuousClock>,
            observer: (@Sendable (RetryEvent<Value>) -> Void)?,
            completion: @escaping @Sendable (Result<Value, any Error>, RetrySummary) -> Void
        ) {
            self.operation = operation
            self.strategy = strategy
            self.observer = observer
            self.completion = completion
        }
    }

    /// The runner's mutable state.
    struct RunnerState {
        /// The engine: counts attempts, chooses delays, decides when to stop.
        var machine: RetryStateMachine
        /// The user's closures; `nil` once the retrier has finished, so nothing they capture is retained.
        var callbacks: Callbacks?
        /// The completion handed to the attempt in flight, to abandon on cancel or timeout.
        var slot: AttemptSlot<Value>?
        /// The one pending timer: the wait before a retry, or the attempt's timeout. Held here (the timer's handler
        /// does not capture it) so that it stays alive until it fires or is cancelled.
        var timer: (any RetryCancellable)?
        /// Identifies the timer the runner currently wants. Bumped when a timer is planned and whenever the current
        /// one stops mattering, so a late or superseded timer's handler does nothing and cannot clobber `timer`.
        var timerEpoch: UInt64 = 0
        /// The result, once the completion has run; what late ``RetryHandle/value`` awaits return.
        var outcome: Result<Value, any Error>?
        /// Tasks awaiting ``RetryHandle/value``, each resumed exactly once, after the completion and outside the lock.
        var waiters: [CheckedContinuation<Value, any Error>] = []

        init(machine: RetryStateMachine, callbacks: Callbacks) {
            self.machine = machine
            self.callbacks = callbacks
        }
    }
}

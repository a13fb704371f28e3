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
    /// The engine. (`package` so that tests can check it is released.)
    package let runner: any CallbackRetrier

    @usableFromInline
    init(retrier: any CallbackRetrier) {
        self.runner = retrier
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
    /// - **Not started yet:** no attempt runs; the completion receives `CancellationError`. (The same holds for an
    ///   attempt whose `attemptStarted` event was emitted but whose operation had not been called yet.)
    /// - **Finished:** nothing happens. The completion never runs twice.
    ///
    /// Observers see ``RetryEvent/finished(_:error:)`` with ``RetryError/Reason-swift.enum/cancelled`` and no result for the
    /// attempt in flight. Idempotent; safe from any thread, including from inside the retrier's own callbacks.
    public func cancel() {
        runner.cancel()
    }

    /// Whether the retrier has finished: no attempt will start any more.
    ///
    /// Becomes `true` the moment the outcome is decided (for example as soon as ``cancel()`` returns); the completion
    /// then runs, or is already on its way to the retrier's queue.
    public var isFinished: Bool {
        runner.isFinished
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
            let runner = self.runner
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                    // Always a `Value` on success: only this retrier's operation produced it. (A repetition's handle,
                    // of `Never`, only ever gets its error.)
                    runner.awaitResult { result in continuation.resume(with: result.typed()) }
                }
            } onCancel: {
                runner.cancel()
            }
        }
    }
}

/// A completion-handler run that async code can cancel and await: a ``RetryHandle``, or a type that wraps one
/// (RetryKitHTTP's `HTTPRetryTask`). ``awaitCallbackRun(isolation:observer:start:)`` awaits it.
package protocol AwaitedCallbackRun: Sendable {
    /// What the run gives when it succeeds.
    associatedtype Value: Sendable

    /// Cancels the run: idempotent, safe from any thread; nothing happens once the run has finished.
    func cancel()

    /// The run's outcome, awaited: the value, or the error its completion received.
    var value: Value { get async throws }
}

extension RetryHandle: AwaitedCallbackRun {}

/// Awaits a completion-handler run from async code: the one place where an async entry point whose run needs the
/// completion-handler runner (a run with a recovery) starts it, forwards its events, ties it to the awaiting task's
/// cancellation and awaits its outcome.
///
/// ```swift
/// return try await awaitCallbackRun(observer: observer) { events in
///     startCallbackRetrier(
///         configuration: configuration, on: DispatchQueue(label: "…"), scheduler: .dispatch, isolation: nil,
///         operation: operation, strategy: strategy,
///         observer: { @Sendable event in events.yield(event) },
///         completion: { @Sendable _, _ in events.finish() })
/// }
/// ```
///
/// `start` is called once, at once, in the caller's isolation. It starts the run (on a queue of the run's own, not
/// isolated to the caller) and returns it; the run must yield its events to `events` in order and call
/// `events.finish()` in its completion, after its last event (a run that delivers its events elsewhere itself, on its
/// own queue, needs none of this: ``RetryHandle/value`` already cancels its run when the awaiting task is cancelled).
///
/// - **Events**: `observer` runs in the caller's isolation (`isolation`), never on the run's queue: one event at a
///   time, in the order the run yielded them, each at most once. Unless the awaiting task is cancelled, it receives
///   every event the run yielded, all of them before this returns. Once the awaiting task is cancelled, it may miss
///   the events the run yields from then on (the run's `finished` event, typically).
/// - **Cancellation**: cancelling the awaiting task while this forwards events or awaits the outcome calls
///   `run.cancel()` at once, on the thread that cancels the task; a task cancelled earlier (before this is called, or
///   while `start` runs) cancels the run as soon as `start` has returned. This then ends as `run.value` does for a
///   cancelled run: with `CancellationError`, unless the run had already finished (then with its outcome).
/// - **Outcome**: `run.value`, returned or thrown unchanged.
///
/// - Parameters:
///   - isolation: The actor `observer` runs on; inherited from the caller.
///   - observer: Receives the events the run yields to `events`.
///   - start: Starts the run, handing its events to `events` and finishing `events` in its completion.
/// - Returns: The run's value.
package func awaitCallbackRun<Run: AwaitedCallbackRun, Event: Sendable>(
    isolation: isolated (any Actor)? = #isolation,
    observer: (Event) -> Void,
    start: (_ events: AsyncStream<Event>.Continuation) -> Run
) async throws -> Run.Value {
    let (stream, events) = AsyncStream.makeStream(of: Event.self)
    let run = start(events)
    return try await withTaskCancellationHandler {
        // Ends when the run's completion finishes the stream, or at once when the task is cancelled.
        for await event in stream { observer(event) }
        return try await run.value
    } onCancel: {
        run.cancel()
    }
}

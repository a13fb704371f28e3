extension RetryEvent {
    /// Creates an `AsyncStream` of events and the observer that feeds it, to pass as the `observer` of any retrier.
    ///
    /// ```swift
    /// let (events, observer) = RetryEvent<User>.makeStream()
    /// let handle = policy.execute(on: .main, operation: load, observer: observer) { result in show(result) }
    /// for await event in events {                // every event, even those emitted before this loop started
    ///     log(event)
    /// }                                          // ends after `finished`
    /// ```
    ///
    /// The stream is created before the retrier starts and buffers without limit, so no event is lost, whenever the
    /// first `next()` comes. It finishes after the ``finished(_:error:)`` event, or when the retrier releases the
    /// observer without one (a repeating sequence whose iterator was dropped). Events that come after `finished`
    /// (a late ``duplicateCompletion(_:)``) are dropped. The stream has one consumer; iterating it from several tasks
    /// splits the events between them.
    ///
    /// - Returns: The stream, and the observer to hand to one retrier, policy run or repeater.
    public static func makeStream() -> (
        events: AsyncStream<RetryEvent<Value>>, observer: @Sendable (RetryEvent<Value>) -> Void
    ) {
        let (stream, continuation) = AsyncStream.makeStream(of: RetryEvent<Value>.self, bufferingPolicy: .unbounded)
        let feeder = EventStreamFeeder(continuation)
        return (stream, { event in feeder.yield(event) })
    }
}

/// Feeds an event stream and finishes it after `finished`, or when the retrier releases its observer.
private final class EventStreamFeeder<Value: Sendable>: Sendable {
    let continuation: AsyncStream<RetryEvent<Value>>.Continuation

    init(_ continuation: AsyncStream<RetryEvent<Value>>.Continuation) {
        self.continuation = continuation
    }

    deinit {
        continuation.finish()
    }

    func yield(_ event: RetryEvent<Value>) {
        continuation.yield(event)
        if case .finished = event { continuation.finish() }
    }
}

/// What the trials of one policy run have reported so far: attempts (as each trial's summary counts them), the last
/// attempt error, and the last trial's summary. Used by runs that consist of several trials (conditions, repeats).
final class TrialLedger: Sendable {
    private struct State {
        var attempts = 0
        var lastError: (any Error)?
        var lastSummary: RetrySummary?
        /// The attempt of the current trial that has started and not reported a result.
        var inFlight: RetryAttempt?
        /// Whether the current trial is being abandoned because the condition closed.
        var interrupted = false
    }

    private let state = Locked(State())

    /// Records what `event` tells about the run.
    func record<Value>(_ event: RetryEvent<Value>) {
        switch event {
        case .attemptFailed(_, let error, _):
            state.withLock { $0.lastError = error }
        case .finished(let summary, _):
            state.withLock { s in
                let (sum, overflow) = s.attempts.addingReportingOverflow(summary.attempts)
                s.attempts = overflow ? .max : sum
                s.lastSummary = summary
            }
        case .attemptStarted, .attemptSucceeded, .duplicateCompletion:
            break
        }
    }

    /// The attempts of every trial that has finished.
    var attempts: Int { state.withLock { $0.attempts } }
    /// The error of the last failed attempt, if any.
    var lastError: (any Error)? { state.withLock { $0.lastError } }
    /// The summary of the last trial that finished.
    var lastSummary: RetrySummary? { state.withLock { $0.lastSummary } }

    /// Marks the current trial as abandoned because the condition closed (see ``observer(forwardingTo:)``).
    func interruptTrial() {
        state.withLock { $0.interrupted = true }
    }

    /// The observer for one trial: records every event and forwards all but `finished` (the run reports its own).
    ///
    /// When a trial abandoned by ``interruptTrial()`` finishes cancelled with an attempt in flight, it forwards
    /// `attemptFailed(attempt, error: CancellationError(), next: .giveUp(.cancelled))` for that attempt first, as
    /// SwiftRetrier reports an interruption. That error is not recorded as the run's last error.
    func observer<Value>(
        forwardingTo observer: (@Sendable (RetryEvent<Value>) -> Void)?
    ) -> @Sendable (RetryEvent<Value>) -> Void {
        { event in
            self.record(event)
            let interrupted: RetryAttempt? = self.state.withLock { s in
                switch event {
                case .attemptStarted(let attempt):
                    s.inFlight = attempt
                case .attemptFailed, .attemptSucceeded:
                    s.inFlight = nil
                case .finished(let summary, _):
                    defer {
                        s.inFlight = nil
                        s.interrupted = false
                    }
                    return s.interrupted && summary.reason == .cancelled ? s.inFlight : nil
                case .duplicateCompletion:
                    break
                }
                return nil
            }
            if let interrupted {
                observer?(.attemptFailed(interrupted, error: CancellationError(), next: .giveUp(.cancelled)))
            }
            if case .finished = event { return }
            observer?(event)
        }
    }

    /// The error of a run whose condition ended while it was waiting.
    func conditionEndedError() -> RetryError {
        state.withLock { RetryError(.conditionEnded, lastError: $0.lastError, attempts: $0.attempts) }
    }
}

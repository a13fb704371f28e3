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

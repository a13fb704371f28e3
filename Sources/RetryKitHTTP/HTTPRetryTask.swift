import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A running retrying request of `URLSession`'s `dataTask(with:retryPolicy:queue:isolation:observer:completionHandler:)`: cancel
/// it, ask whether it has finished, or await its outcome.
///
/// ```swift
/// let task = session.dataTask(with: request, retryPolicy: policy) { data, response, error, summary in … }
/// …
/// task.cancel()                                  // from any thread
/// let (data, response) = try await task.value    // or await it from async code
/// ```
///
/// Keeping it is optional: the request runs to its end either way. All members are thread-safe.
public final class HTTPRetryTask: Sendable {
    /// The retrier that runs the attempts.
    private let handle: RetryHandle<URLSession.RetryResponse>
    /// What the completion handler received, for ``value``.
    private let outcome: HTTPRequestOutcome

    init(handle: RetryHandle<URLSession.RetryResponse>, outcome: HTTPRequestOutcome) {
        self.handle = handle
        self.outcome = outcome
    }

    /// Cancels the request: the wait before the next attempt, or the attempt in flight.
    ///
    /// The completion handler runs promptly on the request's queue with `URLError.cancelled`; it does not wait for
    /// URLSession to report the cancelled data task (which is cancelled afterwards, and whose late result is ignored).
    /// Idempotent, from any thread; nothing happens after the request has finished.
    public func cancel() {
        handle.cancel()
    }

    /// Whether the request has finished: no attempt will start any more.
    ///
    /// Becomes `true` the moment the outcome is decided (for example as soon as ``cancel()`` returns); the completion
    /// handler then runs, or is already on its way to the request's queue.
    public var isFinished: Bool {
        handle.isFinished
    }

    /// The request's outcome, awaited from async code: what the completion handler receives.
    ///
    /// - **Returns** the body and the response the completion handler receives: the first response that does not fail
    ///   its attempt, or the **last response** when the retrier gives up on a failing one (a 503 after the last retry
    ///   is returned, not thrown), as `data(for:retryPolicy:)` and `HTTPRetryPolicy.run` do.
    /// - **Throws** the error the completion handler receives (a `URLError` for a transport failure, with the
    ///   give-up's `RetryError` under ``HTTPRetryPolicy/giveUpErrorKey``; `URLError.cancelled` after ``cancel()``; a
    ///   `RetryError` when an authenticator's recovery cannot give a credential).
    ///
    /// Returns after the completion handler has run. Any number of tasks may await it. Cancelling an awaiting task
    /// cancels the request (as ``cancel()`` does) and the await throws `CancellationError` at once, unless the request
    /// had already finished.
    public var value: URLSession.RetryResponse {
        get async throws {
            let waiter = outcome.newWaiter()
            let handle = self.handle
            let outcome = self.outcome
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    outcome.wait(waiter, continuation)
                }
            } onCancel: {
                handle.cancel()
                outcome.cancelWait(waiter)
            }
        }
    }
}

/// `data(for:retryPolicy:)` with an authenticator awaits its request's task with `awaitCallbackRun`.
extension HTTPRetryTask: AwaitedCallbackRun {}

/// The outcome of a retrying request once its completion handler has run, and the tasks awaiting it.
final class HTTPRequestOutcome: Sendable {
    typealias Continuation = CheckedContinuation<URLSession.RetryResponse, any Error>

    private enum Waiter {
        case waiting(Continuation)
        /// The awaiting task was cancelled before it started waiting.
        case cancelled
    }

    private struct State {
        var result: Result<URLSession.RetryResponse, any Error>?
        var waiters: [Int: Waiter] = [:]
        var nextWaiter = 0
    }

    private let state = Locked(State())

    /// Records the outcome and resumes every waiting task with it. Only the first call counts.
    func deliver(_ result: Result<URLSession.RetryResponse, any Error>) {
        let waiting: [Continuation] = state.withLock { state in
            guard state.result == nil else { return [] }
            state.result = result
            defer { state.waiters = [:] }
            return state.waiters.values.compactMap { waiter in
                if case .waiting(let continuation) = waiter { return continuation }
                return nil
            }
        }
        for continuation in waiting {
            continuation.resume(with: result)
        }
    }

    /// A number for one awaiting task.
    func newWaiter() -> Int {
        state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
    }

    /// Resumes `continuation` with the outcome once there is one (at once if there is), or with `CancellationError` if
    /// `waiter` was cancelled.
    func wait(_ waiter: Int, _ continuation: Continuation) {
        let now: Result<URLSession.RetryResponse, any Error>? = state.withLock { state in
            if let result = state.result { return result }
            if case .cancelled = state.waiters[waiter] {
                state.waiters[waiter] = nil
                return .failure(CancellationError())
            }
            state.waiters[waiter] = .waiting(continuation)
            return nil
        }
        if let now { continuation.resume(with: now) }
    }

    /// Ends the wait of `waiter` with `CancellationError`, unless the outcome is already there.
    func cancelWait(_ waiter: Int) {
        let continuation: Continuation? = state.withLock { state in
            guard state.result == nil else { return nil }
            if case .waiting(let continuation) = state.waiters[waiter] {
                state.waiters[waiter] = nil
                return continuation
            }
            state.waiters[waiter] = .cancelled
            return nil
        }
        continuation?.resume(throwing: CancellationError())
    }
}

import Dispatch
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Retrying requests: ``dataTask(with:retryPolicy:queue:isolation:observer:completionHandler:)`` for completion-handler code and
/// ``data(for:retryPolicy:isolation:observer:)`` for async code, both driven by an ``HTTPRetryPolicy``.
///
/// Both require the `retryPolicy:` argument: a call that does not name it is always Foundation's own, which never
/// retries.
extension URLSession {
    /// What one successful attempt of a retrying request produced: the body and the response, as URLSession returns
    /// them. It is the value type of the `RetryEvent`s a retrying request reports to its observer.
    public typealias RetryResponse = (data: Data, response: URLResponse)

    /// Sends `request`, retrying it as `retryPolicy` says, and calls `completionHandler` once with the final outcome in
    /// URLSession's `(Data?, URLResponse?, Error?)` shape plus a summary of the attempts.
    ///
    /// The retrying counterpart of `dataTask(with:completionHandler:)`, in the shape of a hand-written recursive
    /// `requestWithRetry`. The request starts at once (there is no `resume()`); keep the returned task to cancel it.
    ///
    /// ```swift
    /// var policy = HTTPRetryPolicy()
    /// policy.attemptTimeout = .milliseconds(800)
    /// session.dataTask(with: request, retryPolicy: policy) { data, response, error, summary in
    ///     let retriesLeft = policy.maxAttempts - summary.attempts
    ///     if let error { return show("\(error.localizedDescription) with \(retriesLeft) retries left") }
    ///     let status = (response as? HTTPURLResponse)?.statusCode
    ///     …
    /// }
    /// ```
    ///
    /// ## What is retried
    ///
    /// Each attempt is a `URLSessionDataTask` for `request`. A response whose status the policy treats as a failure
    /// (see ``HTTPRetryPolicy``: 503, 429, …) and a transport error
    /// fail the attempt, and the policy decides whether and when to retry; no `validate()` step is needed. Any other
    /// response (2xx, 404, …) ends the request at once. RetryKit counts the attempts (``HTTPRetryPolicy/maxAttempts``)
    /// and computes the delays, enforces ``HTTPRetryPolicy/attemptTimeout`` and ``HTTPRetryPolicy/totalTimeout``, and
    /// charges ``HTTPRetryPolicy/budget``.
    ///
    /// ## What the completion handler receives
    ///
    /// Exactly once, on `queue`:
    ///
    /// - **A response** `(data, response, nil)`: the first response that does not fail its attempt, or the **last
    ///   response** when the retrier gives up on a failing one: attempts exhausted, the policy stops (a `POST` without
    ///   an `Idempotency-Key`, a `Retry-After` beyond ``HTTPRetryPolicy/maxRetryAfter``), the next wait would end
    ///   after the total timeout, or the budget refuses the retry. The caller sees the server's 503 with its body, not
    ///   an invented error.
    /// - **A transport error** `(nil, nil, error)`: the `URLError` of the last attempt (`cannotConnectToHost`,
    ///   `networkConnectionLost`, …) when the retrier gives up on one. An attempt that RetryKit timed out counts as
    ///   `URLError.timedOut` (its `NSUnderlyingErrorKey` is RetryKit's `RetryError`).
    /// - When the total timeout expires **during** an attempt, that attempt is cancelled and the caller gets the
    ///   outcome of the attempt before it (a response or a `URLError`, as above), or `URLError.timedOut` if it was the
    ///   first.
    /// - **Cancellation** `(nil, nil, URLError.cancelled)` after `cancel()` on the returned task, as URLSession itself
    ///   reports a cancelled task, so existing `code == .cancelled` checks keep working; `summary.reason` is
    ///   `RetryError.Reason.cancelled`.
    /// - An invalid policy (a non-positive ``HTTPRetryPolicy/attemptTimeout``, a negative
    ///   ``HTTPRetryPolicy/totalTimeout``) gives RetryKit's `RetryError` and sends nothing.
    /// - With an authenticator (``HTTPRetryPolicy/authenticated(by:)``), a recovery that cannot give a credential gives
    ///   `(nil, nil, RetryError)`: reason `.recoveryFailed` (its `lastError` is the refresh's error) or
    ///   `.recoveryLimitExceeded` (its `lastError` is the 401's ``HTTPStatusError``), never the 401 response.
    ///
    /// Every way to run a policy ends a give-up on a failing response this same way: `try await task.value` on the
    /// returned ``HTTPRetryTask``, ``data(for:retryPolicy:isolation:observer:)`` and
    /// ``HTTPRetryPolicy/run(method:url:requestHeader:statusCode:responseHeader:classify:isolation:observer:operation:)``
    /// all return the last response; only the observer sees it as an ``HTTPStatusError``.
    ///
    /// The summary says how the retrier ended (`summary.reason`) and how many attempts ran (`summary.attempts`);
    /// `retryPolicy.maxAttempts - summary.attempts` is the "retries left" of a hand-written
    /// recursive `requestWithRetry`.
    ///
    /// ## Authentication
    ///
    /// With an ``HTTPAuthenticator`` (``HTTPRetryPolicy/authenticated(by:)``), each attempt sends `request` with the
    /// credential the authenticator's recovery gives it (an attempt that would start while a refresh runs waits for
    /// it), and a response in its ``HTTPAuthenticator/failureStatusCodes`` fails the attempt and waits for the one
    /// refresh every waiting request shares, then retries at once. The refresh runs on `queue` (in a block of its
    /// own) for the request that starts it. Cancelling a request that waits for a refresh completes it at once with
    /// `URLError.cancelled`; the refresh goes on for the others.
    ///
    /// ## Cancellation and timeouts
    ///
    /// The in-flight `URLSessionDataTask` is cancelled when the retrier is cancelled, when the attempt times out and
    /// when the total timeout expires during it; its late result is ignored. Cancelling during a wait cancels the timer
    /// and completes at once; cancelling during an attempt completes at once too, without waiting for URLSession to
    /// report the cancelled data task (on a loaded Linux machine that report took up to 0.7 s, Benchmarks/README.md).
    ///
    /// A request cancelled by anyone else (its session was invalidated, say) fails with `URLError.cancelled` and is
    /// never retried.
    ///
    /// RetryKit creates, resumes and cancels the data tasks of a session on one serial queue (one of four it shares
    /// among all sessions), never on `queue`: on Linux these URLSession calls can block their thread while the session
    /// is busy, and made from many queues they would block many threads.
    ///
    /// On Linux, use a session without a URL cache (`configuration.urlCache = nil`) when attempts may be cancelled:
    /// swift-corelibs-foundation traps when a task of a session with a `URLCache` is cancelled right after it started
    /// (README, "Platforms").
    ///
    /// - Parameters:
    ///   - request: The request to send; every attempt sends it unchanged, but for the credential of the policy's
    ///     authenticator, if it has one.
    ///   - retryPolicy: Which failures to retry, how long to wait, and the limits; pass `HTTPRetryPolicy()` for the
    ///     defaults. It has no default value, so that this method is never called by mistake: Foundation's
    ///     `dataTask(with:completionHandler:)` with a four-parameter closure does not compile instead of retrying.
    ///   - queue: The queue `observer` and `completionHandler` run on (the policy's decisions run there too). `nil`
    ///     (the default) gives the request a serial queue of its own.
    ///   - isolation: The caller's actor, inherited (`#isolation`): on the main actor every closure runs on the main
    ///     queue; from nonisolated code, on `queue`; another actor gets `RetryError` `.invalidConfiguration`.
    ///   - observer: Receives the retrier's `RetryEvent`s in order, on `queue`: attempts started, failed (with the
    ///     chosen delay or the reason for giving up) and succeeded, then `finished`. Failed attempts carry RetryKit's
    ///     own errors: an ``HTTPStatusError`` for a failing response, `RetryError` for a RetryKit timeout. `nil` by
    ///     default.
    ///   - completionHandler: The outcome and a `RetrySummary`; called exactly once, on `queue`.
    /// - Returns: The running request's ``HTTPRetryTask``: `cancel()` cancels the data task in flight or the wait before
    ///   the next attempt (idempotent, from any thread; nothing after the request finished), `isFinished` says whether
    ///   it has ended, and `try await task.value` gives what `completionHandler` receives (the last response of a
    ///   give-up too, not an error). Keeping it is optional: the request runs to its end either way, and releases
    ///   everything it captured once it has called `completionHandler`.
    @discardableResult
    public func dataTask(
        with request: URLRequest,
        retryPolicy: HTTPRetryPolicy,
        queue: DispatchQueue? = nil,
        isolation: isolated (any Actor)? = #isolation,
        observer: ((RetryEvent<RetryResponse>) -> Void)? = nil,
        completionHandler: @escaping (Data?, URLResponse?, (any Error)?, RetrySummary) -> Void
    ) -> HTTPRetryTask {
        // On the main actor, the main queue (where its closures must run); elsewhere a serial queue of the request's own.
        let queue =
            queue
            ?? (isolation === MainActor.shared
                ? DispatchQueue.main : DispatchQueue(label: "org.retrykit.http.dataTask", target: .global()))
        return startRetrying(
            request, policy: retryPolicy, on: queue, isolation: isolation, observer: observer,
            completionHandler: completionHandler)
    }

    /// Starts the completion-handler retrier of ``dataTask(with:retryPolicy:queue:isolation:observer:completionHandler:)``
    /// on `queue`.
    func startRetrying(
        _ request: URLRequest, policy: HTTPRetryPolicy, on queue: DispatchQueue, isolation: isolated (any Actor)?,
        observer: ((RetryEvent<RetryResponse>) -> Void)?,
        completionHandler: @escaping (Data?, URLResponse?, (any Error)?, RetrySummary) -> Void
    ) -> HTTPRetryTask {
        let url = request.url
        let calls = URLSessionCalls.queue(for: self)
        let outcome = HTTPRequestOutcome()
        let authentication = policy.authentication
        let handle = startCallbackRetrier(
            configuration: policy.configuration(),
            on: queue,
            scheduler: DispatchTimerScheduler(),
            isolation: isolation,
            operation: { [self] _, done in
                // With an authenticator, the credential the recovery gave this attempt.
                let request = authentication?.applied(done.credential, to: request) ?? request
                // URLSession's calls can block their thread for long under load (see `URLSessionCalls`): made on the
                // session's queue, they hold neither the request's queue nor its cancellation.
                calls.async { [self] in
                    guard !done.isCancelled else { return }
                    let task = attemptTask(for: request, policy: policy) { done($0) }
                    task.resume()
                    // Runs at once if the attempt was abandoned meanwhile. The retrier completes without waiting for
                    // it: the data task is cancelled on the session's queue afterwards, its late result is ignored.
                    done.onCancel { calls.async { task.cancel() } }
                }
            },
            strategy: policy.strategy(for: request),
            observer: observer,
            completion: { result, summary in
                switch HTTPRetryOutcome(result, url: url, cancellation: .urlError, summary: summary) {
                case .response(let data, let response):
                    completionHandler(data, response, nil, summary)
                    outcome.deliver(.success((data, response)))
                case .failure(let error):
                    completionHandler(nil, nil, error, summary)
                    outcome.deliver(.failure(error))
                }
            })
        return HTTPRetryTask(handle: handle, outcome: outcome)
    }

    /// Sends `request`, retrying it as `retryPolicy` says, and returns the final response.
    ///
    /// The retrying counterpart of `data(for:)`:
    ///
    /// ```swift
    /// var policy = HTTPRetryPolicy()
    /// policy.totalTimeout = .seconds(10)
    /// let (data, response) = try await session.data(for: request, retryPolicy: policy)
    /// ```
    ///
    /// Attempts, decisions and limits are those of
    /// ``dataTask(with:retryPolicy:queue:isolation:observer:completionHandler:)``; see there. The outcome:
    ///
    /// - **Returns** the first response that does not fail its attempt, or the **last response** when the retrier
    ///   gives up on a failing one (attempts exhausted, the policy stops, the total timeout or the budget refuses the
    ///   next retry): a 503 after the last retry is returned, not thrown.
    /// - **Throws** the last attempt's `URLError` when the retrier gives up on a transport error (`URLError.timedOut`
    ///   for an attempt RetryKit timed out), `CancellationError` when the calling task is cancelled, or RetryKit's
    ///   `RetryError` for an invalid policy, and, with an authenticator, when its recovery cannot give a credential
    ///   (`.recoveryFailed`, `.recoveryLimitExceeded`: the same error the completion handler receives).
    ///
    /// With an authenticator (``HTTPRetryPolicy/authenticated(by:)``) the request runs on the completion-handler
    /// runner of ``dataTask(with:retryPolicy:queue:isolation:observer:completionHandler:)`` (a recovery needs it), on
    /// a serial queue of its own, and this call awaits it: the policy's decisions and the refresh run on that queue,
    /// and the events reach `observer` on the caller's isolation, in order, each shortly after it happened, all of them
    /// before this returns (unless the calling task is cancelled). Cancelling the calling task while the request waits
    /// for a refresh throws `CancellationError` at once; the refresh goes on for the others.
    ///
    /// Cancelling the calling task cancels the in-flight `URLSessionDataTask` (or the wait) and throws
    /// `CancellationError` at once, without waiting for URLSession to report the cancelled data task. A per-attempt
    /// timeout cancels the attempt's data task.
    /// On Linux, the session should have no URL cache for that (see
    /// ``dataTask(with:retryPolicy:queue:isolation:observer:completionHandler:)``).
    ///
    /// - Parameters:
    ///   - request: The request to send; every attempt sends it unchanged, but for the credential of the policy's
    ///     authenticator, if it has one.
    ///   - retryPolicy: Which failures to retry, how long to wait, and the limits.
    ///   - isolation: The actor the policy's decisions and `observer` run on (with an authenticator, `observer` only);
    ///     inherited from the caller.
    ///   - observer: Receives the retrier's `RetryEvent`s in order, with RetryKit's own errors (an
    ///     ``HTTPStatusError`` for a failing response). Ignores them by default.
    /// - Returns: The body and the response of the final attempt.
    public func data(
        for request: URLRequest,
        retryPolicy: HTTPRetryPolicy,
        isolation: isolated (any Actor)? = #isolation,
        observer: (RetryEvent<RetryResponse>) -> Void = { _ in }
    ) async throws -> (Data, URLResponse) {
        let policy = retryPolicy
        if policy.authentication != nil {
            return try await authenticatedData(for: request, policy: policy, observer: observer)
        }
        let strategy = policy.strategy(for: request)
        var summary: RetrySummary?
        do {
            let value = try await retry(
                configuration: policy.configuration(),
                tolerance: nil,
                clock: ContinuousClock(),
                isolation: isolation,
                operation: { [self] _ in try await attempt(request, policy: policy) },
                strategy: strategy,
                observer: { event in
                    if case .finished(let finished, _) = event { summary = finished }
                    observer(event)
                })
            return (value.data, value.response)
        } catch {
            switch HTTPRetryOutcome(
                .failure(error), url: request.url, cancellation: .cancellationError, summary: summary)
            {
            case .response(let data, let response): return (data, response)
            case .failure(let error): throw error
            }
        }
    }

    /// ``data(for:retryPolicy:isolation:observer:)`` with an authenticator: the retrier of
    /// ``dataTask(with:retryPolicy:queue:isolation:observer:completionHandler:)`` (a recovery needs the
    /// completion-handler runner), on a serial queue of its own, awaited. Its events reach `observer` in order on the
    /// caller's isolation, each after the retrier reported it; all of them before this returns, unless the calling task
    /// is cancelled.
    private func authenticatedData(
        for request: URLRequest, policy: HTTPRetryPolicy, isolation: isolated (any Actor)? = #isolation,
        observer: (RetryEvent<RetryResponse>) -> Void
    ) async throws -> (Data, URLResponse) {
        do {
            return try await awaitCallbackRun(observer: observer) { events in
                startRetrying(
                    request, policy: policy, on: DispatchQueue(label: "org.retrykit.http.data", target: .global()),
                    isolation: nil, observer: { @Sendable event in events.yield(event) },
                    completionHandler: { @Sendable _, _, _, _ in events.finish() })
            }
        } catch let error as URLError where error.code == .cancelled && Task.isCancelled {
            throw CancellationError()  // the completion handler's form of this task's own cancellation
        }
    }

    // MARK: - One attempt

    /// A data task (not resumed) for one attempt of `request`, whose completion reports the attempt's result: a
    /// response the policy treats as a failure becomes an ``HTTPStatusError``.
    func attemptTask(
        for request: URLRequest, policy: HTTPRetryPolicy,
        completion: @escaping @Sendable (Result<RetryResponse, any Error>) -> Void
    ) -> URLSessionDataTask {
        dataTask(with: request) { data, response, error in
            completion(
                Self.attemptResult(data: data, response: response, error: error, request: request, policy: policy))
        }
    }

    /// One attempt as an `async` call: the data task is cancelled when the calling task is.
    ///
    /// A cancelled attempt throws `CancellationError` at once: it does not wait for URLSession to report the cancelled
    /// data task. The data task is created, resumed and cancelled on the session's queue (see `URLSessionCalls`), never
    /// on a thread of the cooperative pool, where a blocking URLSession call would hold one of its few threads.
    func attempt(_ request: URLRequest, policy: HTTPRetryPolicy) async throws -> RetryResponse {
        let state = Locked(AttemptTaskState())
        let calls = URLSessionCalls.queue(for: self)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<RetryResponse, any Error>) in
                guard state.withLock({ $0.wait(continuation) }) else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                calls.async { [self] in
                    guard !state.withLock(\.isCancelled) else { return }
                    let task = attemptTask(for: request, policy: policy) { result in
                        state.withLock { $0.takeContinuation() }?.resume(with: result)
                    }
                    task.resume()
                    if !state.withLock({ $0.run(task) }) { task.cancel() }
                }
            }
        } onCancel: {
            let (continuation, task) = state.withLock { $0.cancel() }
            continuation?.resume(throwing: CancellationError())
            if let task { calls.async { task.cancel() } }
        }
    }

    /// The result of one attempt from what the data task delivered.
    static func attemptResult(
        data: Data?, response: URLResponse?, error: (any Error)?, request: URLRequest, policy: HTTPRetryPolicy
    ) -> Result<RetryResponse, any Error> {
        if let error { return .failure(error) }
        guard let response else { return .failure(URLError(.badServerResponse)) }
        let body = data ?? Data()
        guard let http = response as? HTTPURLResponse,
            policy.treatsAsFailure(http, for: request, now: Date())
        else { return .success((body, response)) }
        return .failure(HTTPStatusError(response: http, data: body))
    }
}

/// The async attempt's continuation and data task, shared with its cancellation handler. Whoever takes the
/// continuation first (the data task's completion or the cancellation) resumes it.
private struct AttemptTaskState {
    private var continuation: CheckedContinuation<URLSession.RetryResponse, any Error>?
    private var task: URLSessionDataTask?
    private(set) var isCancelled = false

    /// Keeps `continuation` for the data task's completion; `false` if the attempt was already cancelled.
    mutating func wait(_ continuation: CheckedContinuation<URLSession.RetryResponse, any Error>) -> Bool {
        guard !isCancelled else { return false }
        self.continuation = continuation
        return true
    }

    /// Keeps the running `task` for the cancellation; `false` if the attempt was cancelled meanwhile.
    mutating func run(_ task: URLSessionDataTask) -> Bool {
        guard !isCancelled else { return false }
        self.task = task
        return true
    }

    /// The continuation, if nobody has taken it yet.
    mutating func takeContinuation() -> CheckedContinuation<URLSession.RetryResponse, any Error>? {
        defer { continuation = nil }
        return continuation
    }

    /// Marks the attempt cancelled; returns the continuation to resume (if not yet resumed) and the task to cancel.
    mutating func cancel() -> (CheckedContinuation<URLSession.RetryResponse, any Error>?, URLSessionDataTask?) {
        isCancelled = true
        defer { task = nil }
        return (takeContinuation(), task)
    }
}

// MARK: - From the retrier's outcome to the caller's

/// What the caller of a retrying URLSession method gets: a response, or an error.
enum HTTPRetryOutcome {
    /// How cancellation reaches the caller.
    enum Cancellation {
        /// `URLError.cancelled`, as URLSession reports a cancelled task (completion-handler style).
        case urlError
        /// `CancellationError`, as a cancelled task expects (async style).
        case cancellationError
    }

    case response(Data, URLResponse)
    case failure(any Error)

    /// The caller's outcome for the retrier's `result`: a failing response the retrier gave up on is returned as the
    /// response; RetryKit's timeouts become `URLError.timedOut`; a deadline or a refused retry gives the last
    /// attempt's outcome.
    ///
    /// A `URLError` the retrier gave up on carries the give-up's `RetryError` (its reason, the attempts, the time) in
    /// its `userInfo` under ``HTTPRetryPolicy/giveUpErrorKey``.
    init(
        _ result: Result<URLSession.RetryResponse, any Error>, url: URL?, cancellation: Cancellation,
        summary: RetrySummary?
    ) {
        switch result {
        case .success(let value):
            self = .response(value.data, value.response)
        case .failure(let error):
            let outcome = Self.surfacing(error, url: url, cancellation: cancellation)
            guard case .failure(let surfaced) = outcome, let summary, let urlError = surfaced as? URLError,
                summary.reason != .cancelled
            else {
                self = outcome
                return
            }
            var userInfo = urlError.userInfo
            userInfo[HTTPRetryPolicy.giveUpErrorKey] = RetryError(
                summary.reason, lastError: error, attempts: summary.attempts, elapsed: summary.elapsed)
            self = .failure(URLError(urlError.code, userInfo: userInfo))
        }
    }

    private static func surfacing(_ error: any Error, url: URL?, cancellation: Cancellation) -> HTTPRetryOutcome {
        if let status = error as? HTTPStatusError, let response = status.urlResponse {
            return .response(status.data, response)
        }
        if error is CancellationError {
            switch cancellation {
            case .urlError: return .failure(urlError(.cancelled, url: url, underlying: nil))
            case .cancellationError: return .failure(error)
            }
        }
        guard let retryError = error as? RetryError else { return .failure(error) }
        switch retryError.reason {
        case .attemptTimedOut:
            return .failure(urlError(.timedOut, url: url, underlying: retryError))
        case .deadlineExceeded, .budgetExhausted:
            if let last = retryError.lastError {
                return surfacing(last, url: url, cancellation: cancellation)
            }
            if retryError.reason == .deadlineExceeded {
                return .failure(urlError(.timedOut, url: url, underlying: retryError))
            }
            return .failure(retryError)
        default:
            return .failure(retryError)
        }
    }

    private static func urlError(_ code: URLError.Code, url: URL?, underlying: (any Error)?) -> URLError {
        var userInfo: [String: Any] = [:]
        if let url {
            userInfo[NSURLErrorFailingURLErrorKey] = url
        }
        if let underlying { userInfo[NSUnderlyingErrorKey] = underlying }
        return URLError(code, userInfo: userInfo)
    }
}

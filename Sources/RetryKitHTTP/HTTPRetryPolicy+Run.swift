import Dispatch
import Foundation

/// Retrying the requests of any HTTP client.
extension HTTPRetryPolicy {
    /// Runs `operation` until it returns a response that does not fail its attempt, retrying as the policy says: the
    /// async retrier for any HTTP client, as the URLSession methods are for URLSession.
    ///
    /// The client supplies plain values: the request's method and headers, each response's status and headers, and a
    /// classification of its errors. An AsyncHTTPClient adapter, for example (the nested package `Examples/` has it
    /// whole; `HTTPRequestMethod` is qualified because NIOHTTP1 has one too):
    ///
    /// ```swift
    /// let response = try await policy.run(
    ///     method: RetryKitHTTP.HTTPRequestMethod(rawValue: request.method.rawValue),
    ///     requestHeader: { request.headers.first(name: $0) },
    ///     statusCode: { Int($0.status.code) }, responseHeader: { $0.headers.first(name: $1) },
    ///     classify: { $0 is HTTPClientError ? .networkConnectionLost : TransportFailure(classifying: $0) }
    /// ) { _ in try await client.execute(request, timeout: .seconds(10)) }
    /// ```
    ///
    /// Attempts, decisions and limits are those of URLSession's `data(for:retryPolicy:)`:
    ///
    /// - **Returns** the first response that does not fail its attempt (see ``HTTPRetryPolicy``, "Which responses fail
    ///   their attempt"), or the **last response** when the retrier gives up on a failing one (attempts exhausted, the
    ///   policy stops, the total timeout or the budget refuses the next retry): a 503 after the last retry is returned,
    ///   not thrown.
    /// - **Throws** a `RetryError` when the retrier gives up on an error: its `reason` says why (the summary's reason:
    ///   `.exhausted`, `.stopped(.transportFailureNotRetryable)`, `.deadlineExceeded`, `.budgetExhausted`, …), its
    ///   `lastError` is the client's error; `CancellationError` when the calling task is cancelled.
    ///
    /// A transport error that `classify` calls ``TransportFailure/timedOut`` costs the budget's `timeoutRetryCost`.
    ///
    /// With an authenticator (``authenticated(by:)``) this runs as
    /// ``run(authenticatedBy:method:url:requestHeader:statusCode:responseHeader:classify:isolation:observer:operation:)``
    /// does, without handing the credential to `operation`: use that one, whose operation receives it.
    ///
    /// - Parameters:
    ///   - method: The request's method.
    ///   - url: The request's URL, for custom decisions; `nil` by default.
    ///   - requestHeader: Looks a request header up by name, case-insensitively (for `Idempotency-Key`).
    ///   - statusCode: The status code of a response.
    ///   - responseHeader: Looks a header of a response up by name, case-insensitively (for `Retry-After`).
    ///   - classify: The transport failure an error of `operation` stands for, or `nil` if it is none (never retried);
    ///     ``TransportFailure/init(classifying:)`` by default.
    ///   - isolation: The actor the policy's decisions and `observer` run on; inherited from the caller.
    ///   - observer: Receives the retrier's `RetryEvent`s in order; a failing response arrives as an
    ///     ``HTTPStatusError`` whose `response` is the client's.
    ///   - operation: Sends the request once; cancelled with the calling task or by RetryKit's attempt timeout.
    /// - Returns: The response of the final attempt.
    public func run<Response: Sendable>(
        method: HTTPRequestMethod,
        url: URL? = nil,
        requestHeader: @escaping @Sendable (String) -> String? = { _ in nil },
        statusCode: @escaping @Sendable (Response) -> Int,
        responseHeader: @escaping @Sendable (Response, String) -> String?,
        classify: @escaping @Sendable (any Error) -> TransportFailure? = { TransportFailure(classifying: $0) },
        isolation: isolated (any Actor)? = #isolation,
        observer: (RetryEvent<Response>) -> Void = { _ in },
        operation: @escaping @Sendable (_ attempt: RetryAttempt) async throws -> Response
    ) async throws -> Response {
        if authentication != nil {
            return try await runRecovering(
                method: method, url: url, requestHeader: requestHeader, statusCode: statusCode,
                responseHeader: responseHeader, classify: classify, observer: observer,
                operation: { _, attempt in try await operation(attempt) })
        }
        let policy = self
        let strategy = strategy(method: method, url: url, requestHeader: requestHeader, classify: classify)
        var summary: RetrySummary?
        do {
            return try await retry(
                configuration: configuration(classify: classify),
                tolerance: nil,
                clock: ContinuousClock(),
                isolation: isolation,
                operation: { number in
                    let response = try await operation(number)
                    let failure = HTTPStatusError(
                        statusCode: statusCode(response), response: response,
                        header: { responseHeader(response, $0) })
                    let context = HTTPRetryContext(
                        method: method, url: url, requestHeader: requestHeader, error: failure, classify: classify,
                        now: Date())
                    if policy.treatsAsFailure(context) { throw failure }
                    return response
                },
                strategy: strategy,
                observer: { event in
                    if case .finished(let finished, _) = event { summary = finished }
                    observer(event)
                })
        } catch {
            return try Self.giveUp(error, summary: summary, as: Response.self)
        }
    }

    /// What a run that ended with `error` returns or throws: the last failing response, or a `RetryError` whose reason
    /// is the summary's.
    private static func giveUp<Response>(_ error: any Error, summary: RetrySummary?, as type: Response.Type) throws
        -> Response
    {
        if let response = Self.lastResponse(in: error, as: Response.self) { return response }
        guard let summary, summary.reason != .cancelled, (error as? RetryError)?.reason != summary.reason else {
            throw error
        }
        throw RetryError(summary.reason, lastError: error, attempts: summary.attempts, elapsed: summary.elapsed)
    }

    /// Runs `operation` with the credential `authenticator` gives each attempt, until it returns a response that does
    /// not fail its attempt: ``run(method:url:requestHeader:statusCode:responseHeader:classify:isolation:observer:operation:)``
    /// for a client that authenticates with an ``HTTPAuthenticator``.
    ///
    /// ```swift
    /// let response = try await policy.run(
    ///     authenticatedBy: authenticator,
    ///     method: .get,
    ///     statusCode: { Int($0.status.code) }, responseHeader: { $0.headers.first(name: $1) }
    /// ) { token, _ in
    ///     var request = HTTPClientRequest(url: "https://api.example.com/items")
    ///     request.headers.add(name: "Authorization", value: "Bearer \(token.access)")
    ///     return try await client.execute(request, timeout: .seconds(10))
    /// }
    /// ```
    ///
    /// A generic client has no `URLRequest`, so the operation applies the credential itself; the authenticator's
    /// `apply` is not used here. A response with a status in the authenticator's
    /// ``HTTPAuthenticator/failureStatusCodes`` fails its attempt and is answered by its recovery (one refresh for every
    /// waiting run, then a retry at once with the new credential). The run goes on the completion-handler runner (a
    /// recovery needs it), on a serial queue of its own: the policy's decisions run there, each attempt runs in a new
    /// `Task`, and the events reach `observer` on the caller's isolation, in order, all before this returns unless the
    /// calling task is cancelled.
    ///
    /// - **Returns** the first response that does not fail its attempt, or the last response when the retrier gives up
    ///   on a failing one (a 401 on the last attempt too), as the other `run`.
    /// - **Throws** `RetryError` with `RetryError.Reason.recoveryFailed` (its `lastError` the refresh's error) or
    ///   `RetryError.Reason.recoveryLimitExceeded` when the recovery cannot give a credential; otherwise as the other
    ///   `run`. Cancelling the calling task cancels the attempt's task, or the wait for a refresh, and throws
    ///   `CancellationError` at once.
    ///
    /// - Parameters:
    ///   - authenticator: The authenticator whose recovery gives the credentials; it replaces any the policy has.
    ///   - method: The request's method.
    ///   - url: The request's URL, for custom decisions; `nil` by default.
    ///   - requestHeader: Looks a request header up by name, case-insensitively (for `Idempotency-Key`).
    ///   - statusCode: The status code of a response.
    ///   - responseHeader: Looks a header of a response up by name, case-insensitively (for `Retry-After`).
    ///   - classify: The transport failure an error of `operation` stands for, or `nil` if it is none;
    ///     ``TransportFailure/init(classifying:)`` by default.
    ///   - isolation: The actor `observer` runs on; inherited from the caller.
    ///   - observer: Receives the retrier's `RetryEvent`s in order; a failing response arrives as an
    ///     ``HTTPStatusError`` whose `response` is the client's.
    ///   - operation: Sends the request once with the credential; run in a new `Task`, cancelled with the calling task
    ///     or by RetryKit's attempt timeout.
    /// - Returns: The response of the final attempt.
    public func run<Credential: Sendable, Response: Sendable>(
        authenticatedBy authenticator: HTTPAuthenticator<Credential>,
        method: HTTPRequestMethod,
        url: URL? = nil,
        requestHeader: @escaping @Sendable (String) -> String? = { _ in nil },
        statusCode: @escaping @Sendable (Response) -> Int,
        responseHeader: @escaping @Sendable (Response, String) -> String?,
        classify: @escaping @Sendable (any Error) -> TransportFailure? = { TransportFailure(classifying: $0) },
        isolation: isolated (any Actor)? = #isolation,
        observer: (RetryEvent<Response>) -> Void = { _ in },
        operation: @escaping @Sendable (_ credential: Credential, _ attempt: RetryAttempt) async throws -> Response
    ) async throws -> Response {
        try await authenticated(by: authenticator).runRecovering(
            method: method, url: url, requestHeader: requestHeader, statusCode: statusCode,
            responseHeader: responseHeader, classify: classify, observer: observer,
            operation: { credential, attempt in
                // Always a `Credential`: the recovery only holds the authenticator's credentials.
                guard let credential = credential as? Credential else {
                    throw RetryError(.invalidConfiguration("internal: an attempt without a credential"))
                }
                return try await operation(credential, attempt)
            })
    }

    /// A run with the policy's authenticator, on the completion-handler runner (see
    /// ``run(authenticatedBy:method:url:requestHeader:statusCode:responseHeader:classify:isolation:observer:operation:)``).
    private func runRecovering<Response: Sendable>(
        method: HTTPRequestMethod, url: URL?, requestHeader: @escaping @Sendable (String) -> String?,
        statusCode: @escaping @Sendable (Response) -> Int,
        responseHeader: @escaping @Sendable (Response, String) -> String?,
        classify: @escaping @Sendable (any Error) -> TransportFailure?,
        isolation: isolated (any Actor)? = #isolation,
        observer: (RetryEvent<Response>) -> Void,
        operation: @escaping @Sendable (_ credential: (any Sendable)?, _ attempt: RetryAttempt) async throws -> Response
    ) async throws -> Response {
        let policy = self
        let summary = Locked<RetrySummary?>(nil)
        do {
            return try await awaitCallbackRun(observer: observer) { events in
                startCallbackRetrier(
                    configuration: configuration(classify: classify),
                    on: DispatchQueue(label: "org.retrykit.http.run", target: .global()),
                    scheduler: .dispatch,
                    isolation: nil,
                    operation: { @Sendable attempt, done in
                        let credential = done.credential
                        taskAttempt { attempt in
                            let response = try await operation(credential, attempt)
                            let failure = HTTPStatusError(
                                statusCode: statusCode(response), response: response,
                                header: { responseHeader(response, $0) })
                            let context = HTTPRetryContext(
                                method: method, url: url, requestHeader: requestHeader, error: failure,
                                classify: classify, now: Date())
                            if policy.treatsAsFailure(context) { throw failure }
                            return response
                        }(attempt, done)
                    },
                    strategy: strategy(method: method, url: url, requestHeader: requestHeader, classify: classify),
                    observer: { @Sendable event in events.yield(event) },
                    completion: { @Sendable _, ended in
                        summary.withLock { $0 = ended }
                        events.finish()
                    })
            }
        } catch {
            return try Self.giveUp(error, summary: summary.withLock { $0 }, as: Response.self)
        }
    }

    /// The failing response the retrier gave up on, if `error` is one (or a deadline or budget refusal after one).
    static func lastResponse<Response>(in error: any Error, as type: Response.Type) -> Response? {
        if let status = error as? HTTPStatusError { return status.response as? Response }
        guard let retryError = error as? RetryError,
            retryError.reason == .deadlineExceeded || retryError.reason == .budgetExhausted,
            let last = retryError.lastError as? HTTPStatusError
        else { return nil }
        return last.response as? Response
    }
}

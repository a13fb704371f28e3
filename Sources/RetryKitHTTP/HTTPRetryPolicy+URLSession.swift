import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// URLSession's types as the plain values the policy decides from.
extension HTTPRetryPolicy {
    /// The strategy for an attempt of `request` that ended with `response`: ``decision(for:)`` with the request's
    /// method and headers and the response's status and headers.
    ///
    /// - Parameters:
    ///   - request: The request; its method, URL and `Idempotency-Key` header are read.
    ///   - response: The response; its status and `Retry-After` header are read.
    ///   - now: The current time, for `Retry-After` dates.
    package func decision(for request: URLRequest, response: HTTPURLResponse, now: Date) -> RetryStrategy<
        ContinuousClock
    > {
        decision(for: request, error: HTTPStatusError(response: response), now: now)
    }

    /// The strategy for an attempt of `request` that failed with `error`: an ``HTTPStatusError`` is decided as its
    /// response, any other error as its ``TransportFailure`` (``TransportFailure/init(classifying:)``).
    package func decision(for request: URLRequest, error: any Error, now: Date) -> RetryStrategy<ContinuousClock> {
        decision(for: HTTPRetryContext(request, error: error, now: now))
    }

    /// Whether `response` fails its attempt (see ``treatsAsFailure(_:)``).
    ///
    /// - Parameters:
    ///   - response: The response of the attempt.
    ///   - request: The request; its method and `Idempotency-Key` header are read.
    ///   - now: The current time, for `Retry-After` dates.
    package func treatsAsFailure(_ response: HTTPURLResponse, for request: URLRequest, now: Date) -> Bool {
        treatsAsFailure(HTTPRetryContext(request, error: HTTPStatusError(response: response), now: now))
    }

    /// The policy as a RetryKit strategy closure for `request`: give it to a runner together with ``maxAttempts``.
    ///
    /// Retryable responses reach the closure as ``HTTPStatusError``s; every other failure as its error.
    ///
    /// - Parameters:
    ///   - request: The request being retried.
    ///   - now: The clock for `Retry-After` dates; the system time by default.
    public func strategy(
        for request: URLRequest, now: @escaping @Sendable () -> Date = { Date() }
    ) -> @Sendable (any Error) -> RetryStrategy<ContinuousClock> {
        strategy(
            method: HTTPRequestMethod(rawValue: request.httpMethod ?? "GET"), url: request.url,
            requestHeader: { request.value(forHTTPHeaderField: $0) }, now: now)
    }
}

extension HTTPRetryContext {
    /// The context of an attempt of `request` that failed with `error`; a request without a method is a `GET`.
    init(_ request: URLRequest, error: any Error, now: Date) {
        self.init(
            method: HTTPRequestMethod(rawValue: request.httpMethod ?? "GET"), url: request.url,
            requestHeader: { request.value(forHTTPHeaderField: $0) }, error: error,
            classify: { TransportFailure(classifying: $0) }, now: now)
    }
}

import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A response whose status code the retry policy treats as a failed attempt, carried as an error so that a retrier's
/// strategy closure `(any Error) -> RetryStrategy` can see it.
///
/// The HTTP layer turns a retryable status (503, for example) into this error for the retrier. When the retrier gives
/// up, the caller gets the last ``response`` and ``data`` back instead of an invented error: no `validate()` step is
/// needed and no response is lost.
///
/// ```swift
/// let strategy = policy.strategy(for: request)
/// strategy(HTTPStatusError(response: response, data: data))   // .backoff(…), .retryAfter(…) or .stop
/// ```
public struct HTTPStatusError: Error, Sendable, CustomStringConvertible {
    /// The response that failed the attempt.
    public let response: HTTPURLResponse
    /// The response body (possibly empty).
    public let data: Data

    /// Wraps a response and its body.
    public init(response: HTTPURLResponse, data: Data = Data()) {
        self.response = response
        self.data = data
    }

    /// The response's status code.
    public var statusCode: Int { response.statusCode }

    public var description: String {
        let url = response.url?.absoluteString ?? "unknown URL"
        return "HTTPStatusError(\(response.statusCode) from \(url), \(data.count) byte body)"
    }
}

import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A response whose status code the retry policy treats as a failed attempt, carried as an error so that a retrier's
/// strategy closure `(any Error) -> RetryStrategy` can see it.
///
/// The HTTP adapters turn a retryable status (503, for example) into this error for the retrier. When the retrier gives
/// up, the caller gets the last response back instead of an invented error: no `validate()` step is needed and no
/// response is lost.
///
/// ```swift
/// let strategy = policy.strategy(for: request)
/// strategy(HTTPStatusError(response: response, data: data))   // .backoff(…), .retryAfter(…) or .stop
/// ```
public struct HTTPStatusError: Error, Sendable, CustomStringConvertible {
    /// The response's status code.
    public let statusCode: Int
    /// The response as the HTTP client returned it: an `HTTPURLResponse` from URLSession, an `HTTPClientResponse` from
    /// AsyncHTTPClient, …
    public let response: any Sendable
    /// The response body, when the client delivers it apart from the response (URLSession); empty otherwise.
    public let data: Data

    let header: @Sendable (String) -> String?

    /// Wraps a URLSession response and its body.
    public init(response: HTTPURLResponse, data: Data = Data()) {
        self.statusCode = response.statusCode
        self.response = response
        self.data = data
        self.header = { response.value(forHTTPHeaderField: $0) }
    }

    /// Wraps the response of any HTTP client.
    ///
    /// - Parameters:
    ///   - statusCode: The response's status code.
    ///   - response: The response as the client returned it; handed back to the caller when the retrier gives up.
    ///   - header: Looks a response header up by name, case-insensitively (for `Retry-After`).
    public init(statusCode: Int, response: any Sendable, header: @escaping @Sendable (String) -> String?) {
        self.statusCode = statusCode
        self.response = response
        self.data = Data()
        self.header = header
    }

    /// The value of the response header `name`, if the response has it.
    public func value(forHeader name: String) -> String? { header(name) }

    /// The response as a URLSession `HTTPURLResponse`, if it is one.
    var urlResponse: HTTPURLResponse? { response as? HTTPURLResponse }

    public var description: String {
        let url = urlResponse?.url?.absoluteString ?? "unknown URL"
        return "HTTPStatusError(\(statusCode) from \(url), \(data.count) byte body)"
    }
}

import Foundation
import RetryKitHTTP

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The kind of a `RetryStrategy`, comparable in `#expect`.
enum StrategyKind: Equatable, CustomStringConvertible {
    case backoff
    case retryAfter(Duration)
    case stop

    init(_ strategy: RetryStrategy<ContinuousClock>) {
        switch strategy {
        case .backoff: self = .backoff
        case .retryAfter(let delay): self = .retryAfter(delay)
        case .stop: self = .stop
        }
    }

    var description: String {
        switch self {
        case .backoff: "backoff"
        case .retryAfter(let d): "retryAfter(\(d))"
        case .stop: "stop"
        }
    }
}

/// The backoff strategy inside `strategy`, if it is one.
func backoffStrategy(_ strategy: RetryStrategy<ContinuousClock>) -> BackoffStrategy<ContinuousClock>? {
    if case .backoff(let backoff) = strategy { return backoff }
    return nil
}

func makeRequest(
    _ method: String = "GET", url: URL = URL(fileURLWithPath: "/"), headers: [String: String] = [:]
) -> URLRequest {
    var request = URLRequest(url: url)
    request.httpMethod = method
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    return request
}

func makeResponse(_ status: Int, headers: [String: String] = [:]) -> HTTPURLResponse {
    let url = URL(fileURLWithPath: "/")
    guard
        let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)
    else { fatalError("test setup: HTTPURLResponse rejected status \(status)") }
    return response
}

/// A fresh ephemeral session without a URL cache; invalidate it with `finishTasksAndInvalidate()` when done.
///
/// Without the cache because swift-corelibs-foundation traps ("Trying to access a behaviour for a task that in not in
/// the registry") when a task of a session with a `URLCache` is cancelled right after `resume()`: the cache lookup runs
/// on a background queue, unordered with the cancel (README, "Platforms").
func makeSession(timeout: TimeInterval = 15, connectionsPerHost: Int = 8) -> URLSession {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = nil
    configuration.timeoutIntervalForRequest = timeout
    configuration.httpMaximumConnectionsPerHost = connectionsPerHost
    configuration.connectionProxyDictionary = [:]
    return URLSession(configuration: configuration)
}

/// The outcome of one plain URLSession request.
enum Fetched {
    case response(HTTPURLResponse, Data)
    case failure(any Error)

    var status: Int? {
        if case .response(let response, _) = self { return response.statusCode }
        return nil
    }

    var body: String? {
        if case .response(_, let data) = self { return String(decoding: data, as: UTF8.self) }
        return nil
    }

    /// The URLError code of a failure, from a `URLError` or an `NSError` in `NSURLErrorDomain`.
    var urlErrorCode: URLError.Code? {
        guard case .failure(let error) = self else { return nil }
        if let urlError = error as? URLError { return urlError.code }
        let nsError = error as NSError
        return nsError.domain == NSURLErrorDomain ? URLError.Code(rawValue: nsError.code) : nil
    }
}

func fetch(_ request: URLRequest, in session: URLSession) async -> Fetched {
    do {
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else { return .failure(URLError(.badServerResponse)) }
        return .response(http, data)
    } catch {
        return .failure(error)
    }
}

func fetch(_ url: URL, in session: URLSession, timeout: TimeInterval? = nil) async -> Fetched {
    var request = URLRequest(url: url)
    if let timeout { request.timeoutInterval = timeout }
    return await fetch(request, in: session)
}

/// Polls `condition` every 5 ms until it holds or `limit` passes; returns whether it held.
func eventually(within limit: Duration = .seconds(60), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}

/// The bound of the tests that check that something ends promptly where a wrong library would wait 45 s or more (a
/// backoff, a `Retry-After`, a session's request timeout): far above the milliseconds it takes, so that a machine
/// stalled by load does not fail them, and well below the wrong case.
let promptBound: Duration = .seconds(30)

/// Runs `body` on a thread of its own and suspends until it returns: for blocking work (a blocking socket read), so
/// that it never holds a thread of Swift's cooperative pool.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

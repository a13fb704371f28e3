import Foundation
import RetryKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Requests that are never answered, served by a `URLProtocol` instead of a socket: a test awaits the moment
/// URLSession starts loading one and the moment it stops loading it (its data task was cancelled), without polling.
///
/// Each instance has a host of its own, so that tests that run at the same time never share one.
final class StalledRequests: Sendable {
    /// `stalled-<uuid>.invalid`: a name that never resolves, in case a request ever reached the network.
    let host = "stalled-\(UUID().uuidString.lowercased()).invalid"
    /// Opens when URLSession starts loading a request to ``host``.
    let started = AsyncGate()
    /// Opens when URLSession stops loading it: its data task was cancelled.
    let stopped = AsyncGate()

    /// A URL on ``host``.
    var url: URL? { URL(string: "http://\(host)/items") }

    /// A session without a URL cache whose requests to ``host`` stall; ``close(_:)`` it when done.
    func session() -> URLSession {
        StalledURLProtocol.registered.withLock { $0[host] = self }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.protocolClasses = [StalledURLProtocol.self]
        return URLSession(configuration: configuration)
    }

    /// Invalidates `session` and forgets ``host``.
    func close(_ session: URLSession) {
        session.invalidateAndCancel()
        StalledURLProtocol.registered.withLock { $0[host] = nil }
    }
}

/// The protocol behind ``StalledRequests``: it never answers, and reports its start and stop.
final class StalledURLProtocol: URLProtocol {
    /// The live ``StalledRequests`` by host.
    static let registered = Locked<[String: StalledRequests]>([:])

    private static func stalled(_ request: URLRequest) -> StalledRequests? {
        guard let host = request.url?.host else { return nil }
        return registered.withLock { $0[host] }
    }

    override class func canInit(with request: URLRequest) -> Bool {
        stalled(request) != nil
    }

    override class func canonicalRequest(for request: URLRequest) -> URLRequest {
        request
    }

    override func startLoading() {
        Self.stalled(request)?.started.open()
    }

    override func stopLoading() {
        Self.stalled(request)?.stopped.open()
    }
}

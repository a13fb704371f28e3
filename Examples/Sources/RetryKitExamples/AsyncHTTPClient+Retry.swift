import AsyncHTTPClient
import Foundation
import NIOCore
import RetryKitHTTP

extension HTTPClient {
    /// Executes `request`, retrying it as `policy` says; a failing response the retrier gave up on is returned.
    func execute(_ request: HTTPClientRequest, retryPolicy policy: HTTPRetryPolicy, timeout: TimeAmount)
        async throws -> HTTPClientResponse
    {
        try await policy.run(
            method: RetryKitHTTP.HTTPRequestMethod(rawValue: request.method.rawValue), url: URL(string: request.url),
            requestHeader: { request.headers.first(name: $0) }, statusCode: { Int($0.status.code) },
            responseHeader: { $0.headers.first(name: $1) },
            classify: { [.connectTimeout, .readTimeout].contains($0 as? HTTPClientError) ? .timedOut
                : $0 as? HTTPClientError == .remoteConnectionClosed ? .networkConnectionLost : nil }
        ) { _ in try await self.execute(request, timeout: timeout) }
    }
}

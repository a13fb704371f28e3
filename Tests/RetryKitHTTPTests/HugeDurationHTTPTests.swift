import Foundation
import RetryKitHTTP
import RetryKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Timeouts far beyond what a clock instant can hold are clamped to `BackoffStrategy.saturationLimit` by the state
/// machine, so the HTTP layer's async API runs them (it trapped with "Not enough bits to represent the passed value").
@Suite(.timeLimit(.minutes(3))) struct HugeDurationHTTPTests {
    @Test(arguments: [Duration.seconds(Int64.max), .nanoseconds(Int64.max)])
    func asyncRequestWithHugeTimeoutsSucceeds(huge: Duration) async throws {
        let server = try ScriptedHTTPServer(scripts: ["/ok": [.respond(200, body: "ok")]])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        var policy = HTTPRetryPolicy()
        policy.totalTimeout = huge
        policy.attemptTimeout = huge
        policy.maxRetryAfter = huge
        let (data, response) = try await session.data(for: makeRequest(url: server.url("/ok")), retryPolicy: policy)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self) == "ok")
    }

    /// A scripted delay beyond `Int64` seconds waits "forever" (the poll timeout saturates); it trapped in the server's
    /// thread before.
    @Test func scriptedServerDelayBeyondInt64SecondsDoesNotTrap() async throws {
        let huge = Duration.seconds(Int64.max) + .seconds(Int64.max)
        let server = try ScriptedHTTPServer(scripts: ["/slow": [.respond(200, body: "late", after: huge)]])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let request = Task { await fetch(server.url("/slow"), in: session) }
        #expect(await eventually { server.requestCount(to: "/slow") == 1 }, "the server received the request")
        request.cancel()  // the response waits "forever": the client gives up
        #expect(await request.value.status == nil)
    }
}

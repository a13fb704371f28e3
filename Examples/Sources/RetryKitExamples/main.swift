// retrykit-examples: checks the examples of this package against a loopback ScriptedHTTPServer (127.0.0.1).
//
//     swift run retrykit-examples
//
// Prints one line per check and "N passed, N failed"; exits with status 1 if a check failed.

import AsyncHTTPClient
import Foundation
import Logging
import Metrics
import MetricsTestKit
import RetryKit
import RetryKitHTTP
import RetryKitTesting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Every message logged, so that the checks can read them.
final class Messages: @unchecked Sendable {  // every access holds the lock
    private let lock = NSLock()
    private var messages: [String] = []

    func append(_ message: String) { lock.withLock { messages.append(message) } }
    func contains(prefix: String) -> Bool { lock.withLock { messages.contains { $0.hasPrefix(prefix) } } }
}

/// A log handler that keeps every message in ``Messages``.
struct RecordingLogHandler: LogHandler {
    static let messages = Messages()
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .debug

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        Self.messages.append("\(event.level) \(event.message)")
    }
}

var passed = 0
var failed = 0

@MainActor func check(_ condition: Bool, _ what: String) {
    if condition {
        passed += 1
        print("ok: \(what)")
    } else {
        failed += 1
        print("FAILED: \(what)")
    }
}

let metrics = TestMetrics()
MetricsSystem.bootstrap(metrics)
let logger = Logger(label: "retrykit-examples") { _ in RecordingLogHandler() }

let server = try ScriptedHTTPServer(scripts: [
    "/flaky": [.respond(503), .respond(503), .respond(200, body: "ok")],
    "/limited": [.respond(429, headers: ["Retry-After": "0"]), .respond(200, body: "ok")],
    "/orders": [.respond(503, body: "busy")],
])
let client = HTTPClient(eventLoopGroupProvider: .singleton)
var policy = HTTPRetryPolicy(exponentialBackoffScale: 0.01)  // waits of 10 ms, 20 ms, … (with full jitter)
policy.totalTimeout = .seconds(10)

@MainActor func send(_ path: String, post: Bool = false) async throws -> HTTPClientResponse {
    var request = HTTPClientRequest(url: server.url(path).absoluteString)
    request.method = post ? .POST : .GET
    return try await client.execute(request, retryPolicy: policy, timeout: .seconds(5))
}

do {
    // The AsyncHTTPClient adapter: retries 503 until the 200, waits for Retry-After, and returns a response it gave
    // up on (a POST is not retried) instead of throwing.
    let flaky = try await send("/flaky")
    check(flaky.status == .ok && server.requestCount(to: "/flaky") == 3, "AsyncHTTPClient: 503, 503, then 200")
    let limited = try await send("/limited")
    check(limited.status == .ok && server.requestCount(to: "/limited") == 2, "AsyncHTTPClient: 429 with Retry-After")
    let orders = try await send("/orders", post: true)
    check(
        orders.status == .serviceUnavailable && server.requestCount(to: "/orders") == 1,
        "AsyncHTTPClient: a POST without an Idempotency-Key is not retried; the 503 is returned")

    // swift-log and swift-metrics, fed from the events of one request.
    let request = HTTPClientRequest(url: server.url("/flaky").absoluteString)
    server.script("/flaky", [.respond(503), .respond(200, body: "ok")])
    let response = try await policy.run(
        method: .get, statusCode: { Int($0.status.code) }, responseHeader: { $0.headers.first(name: $1) },
        observer: { event in
            logger.log(event, "GET /flaky")
            record(event, "flaky")
        }
    ) { _ in try await client.execute(request, timeout: .seconds(5)) }
    check(response.status == .ok, "events: the request succeeded on its second attempt")
    let messages = RecordingLogHandler.messages
    check(
        messages.contains(prefix: "warning GET /flaky attempt 1/3 failed: HTTPStatusError(503"),
        "swift-log: the failed attempt is a warning")
    check(messages.contains(prefix: "debug GET /flaky: finished"), "swift-log: the end is logged")
    check((try? metrics.expectCounter("flaky_attempts").totalValue) == 2, "swift-metrics: 2 attempts counted")
    check((try? metrics.expectTimer("flaky_waits").values.count) == 1, "swift-metrics: 1 wait timed")
    check(
        (try? metrics.expectCounter("flaky_finished", [("reason", "succeeded")]).totalValue) == 1,
        "swift-metrics: finished counted by reason")

    // A give-up is logged as an error and counted with its reason.
    var post = HTTPClientRequest(url: server.url("/orders").absoluteString)
    post.method = .POST
    let sendPost = post
    _ = try await policy.run(
        method: .post, statusCode: { Int($0.status.code) }, responseHeader: { $0.headers.first(name: $1) },
        observer: { event in
            logger.log(event, "POST /orders")
            record(event, "orders")
        }
    ) { _ in try await client.execute(sendPost, timeout: .seconds(5)) }
    check(
        RecordingLogHandler.messages.contains(prefix: "error POST /orders gave up"),
        "swift-log: a give-up is an error")
    check(
        (try? metrics.expectCounter("orders_finished", [("reason", "stopped(methodNotIdempotent)")]).totalValue)
            == 1,
        "swift-metrics: the give-up counted with its reason")
} catch {
    check(false, "unexpected error: \(error)")
}

try await client.shutdown().get()
server.stop()
print("\(passed) passed, \(failed) failed")
exit(failed == 0 ? 0 : 1)

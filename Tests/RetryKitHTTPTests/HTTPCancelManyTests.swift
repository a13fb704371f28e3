import Dispatch
import Foundation
import RetryKitHTTP
import RetryKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Many concurrent requests, each cancelled at a random moment while it hangs, waits between 503s or waits out a
/// `Retry-After`: every one completes exactly once, with the cancellation, and none deadlocks.
///
/// The small-size guard of the cancel-under-load benchmark (`Benchmarks/Sources/HTTPCancelLoad`), which measures how
/// fast. Real-time bounds here are wide (30 s, where a request that waited for its retries would take 20 s and more,
/// and a deadlock forever): a loaded machine may be slow, but must not be wrong. No test here blocks a thread of the
/// cooperative pool: the waits are async, and the blocking calls (stopping the server, invalidating the session) run
/// on a Dispatch queue.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct HTTPCancelManyTests {
    static let count = 60
    static let paths = ["/hang", "/503", "/503-retry-after"]

    static func makeServer() throws -> ScriptedHTTPServer {
        try ScriptedHTTPServer(scripts: [
            "/hang": [.neverAnswer],
            "/503": [.respond(503)],
            "/503-retry-after": [.respond(503, headers: ["Retry-After": "1"])],
        ])
    }

    /// Retries that outlast every cancel: 20 retries, 0.5 s · 2ˣ or `Retry-After: 1`, no jitter.
    static var policy: HTTPRetryPolicy {
        var policy = HTTPRetryPolicy(retryLimit: 20)
        policy.jitter = .none
        return policy
    }

    /// When each request is cancelled, seeded: 0–300 ms after the start.
    static func cancelDelays() -> [Duration] {
        var generator = SeededRandomNumberGenerator(seed: 26)
        return (0..<count).map { _ in .milliseconds(Int.random(in: 0..<300, using: &generator)) }
    }

    @Test func completionHandlersRunOnceEachWithTheCancellation() async throws {
        let server = try Self.makeServer()
        let session = makeSession(timeout: 60, connectionsPerHost: 16)
        let delays = Self.cancelDelays()
        let completions = Locked<[[Retried]]>(Array(repeating: [], count: Self.count))
        let cancelledAt = Locked<[ContinuousClock.Instant?]>(Array(repeating: nil, count: Self.count))

        for index in 0..<Self.count {
            let request = makeRequest(url: server.url(Self.paths[index % Self.paths.count]))
            let task = session.dataTask(with: request, retryPolicy: Self.policy) { data, response, error, summary in
                let retried = Retried(data: data, response: response, error: error, summary: summary)
                completions.withLock { $0[index].append(retried) }
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + delays[index].seconds) {
                cancelledAt.withLock { $0[index] = .now }
                task.cancel()
                task.cancel()  // idempotent
            }
        }

        let allCompleted = await eventually(within: .seconds(60)) {
            completions.withLock { $0.allSatisfy { !$0.isEmpty } }
        }
        #expect(allCompleted)
        try await Task.sleep(for: .milliseconds(200))  // room for a second call, which must not come
        let outcomes = completions.withLock { $0 }
        let cancels = cancelledAt.withLock { $0 }
        for index in 0..<Self.count {
            #expect(outcomes[index].count == 1, "request \(index): \(outcomes[index].count) completions")
            guard let outcome = outcomes[index].first, let cancelled = cancels[index] else { continue }
            #expect(outcome.urlErrorCode == .cancelled, "request \(index)")
            #expect(outcome.summary?.reason == .cancelled, "request \(index)")
            #expect(outcome.at - cancelled < .seconds(30), "request \(index)")
        }
        await tearDown(server, session)
    }

    @Test func asyncRequestsEndOnceEachWithCancellationError() async throws {
        let server = try Self.makeServer()
        let session = makeSession(timeout: 60, connectionsPerHost: 16)
        let delays = Self.cancelDelays()
        let cancelledAt = Locked<[ContinuousClock.Instant?]>(Array(repeating: nil, count: Self.count))

        var tasks: [Task<Retried, Never>] = []
        for index in 0..<Self.count {
            let request = makeRequest(url: server.url(Self.paths[index % Self.paths.count]))
            let task = Task { await send(request, policy: Self.policy, style: .async, in: session) }
            tasks.append(task)
            DispatchQueue.global().asyncAfter(deadline: .now() + delays[index].seconds) {
                cancelledAt.withLock { $0[index] = .now }
                task.cancel()
            }
        }

        for (index, task) in tasks.enumerated() {
            let outcome = await task.value
            #expect(outcome.error is CancellationError, "request \(index): \(String(describing: outcome.error))")
            if let cancelled = cancelledAt.withLock({ $0[index] }) {
                #expect(outcome.at - cancelled < .seconds(30), "request \(index)")
            }
        }
        await tearDown(server, session)
    }

    @Test func awaitingTheReturnedTaskGivesTheCancellation() async throws {
        let server = try Self.makeServer()
        let session = makeSession(timeout: 60, connectionsPerHost: 16)
        let calls = Locked(0)
        let task = session.dataTask(with: makeRequest(url: server.url("/hang")), retryPolicy: Self.policy) {
            _, _, _, _ in calls.withLock { $0 += 1 }
        }
        #expect(await eventually { server.requestCount(to: "/hang") == 1 })
        let waiter = Task { try await task.value }
        task.cancel()
        let error = await #expect(throws: URLError.self) { try await waiter.value }
        #expect(error?.code == .cancelled)
        #expect(calls.withLock { $0 } == 1)  // the completion handler ran before the await returned
        await tearDown(server, session)
    }
}

extension Duration {
    /// The duration in seconds, for `DispatchTime` arithmetic.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

/// Stops `server` and cancels `session`'s tasks on a Dispatch queue, not on the cooperative pool: both calls may block
/// their thread for a while.
func tearDown(_ server: ScriptedHTTPServer, _ session: URLSession) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().async {
            session.invalidateAndCancel()
            server.stop()
            continuation.resume()
        }
    }
}

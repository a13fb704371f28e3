// Runs the declarations Migration.md shows (the types in Generated*.swift) and checks they do what the guide says.
// The snippets written as tests in the Markdown run on their own; these cover the ones written as plain code.

import Dispatch
import Foundation
import RetryKit
import RetryKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What the `requestWithRetry` completion of section 1 received.
private struct LegacyOutcome: Sendable {
    let status: Int?
    let error: (any Error)?
    let retriesLeft: Int
}

@Suite("Migration.md, section 1: requestWithRetry", .timeLimit(.minutes(3)))
struct RequestWithRetryMigrationTests {
    private func run(
        _ request: @escaping @Sendable (@escaping @Sendable (Data?, URLResponse?, (any Error)?, Int) -> Void) -> Void
    ) async -> LegacyOutcome {
        await withCheckedContinuation { continuation in
            request { _, response, error, retriesLeft in
                let status = (response as? HTTPURLResponse)?.statusCode
                continuation.resume(returning: LegacyOutcome(status: status, error: error, retriesLeft: retriesLeft))
            }
        }
    }

    @Test("the recursive version retries a 404 at once, three times")
    func recursiveRetries404() async throws {
        let server = try ScriptedHTTPServer(scripts: ["/missing": [.respond(404)]])
        defer { server.stop() }
        let client = RecursiveForecastClient.ForecastClient()
        let request = URLRequest(url: server.url("/missing"))
        let outcome = await run { client.requestWithRetry(request, completion: $0) }
        #expect(outcome.status == 404)
        #expect(outcome.retriesLeft == 0)
        #expect(server.requestCount(to: "/missing") == 4)
    }

    @Test("step 1 keeps the signature: 503 is retried, retries left are reported")
    func step1RetriesServerErrors() async throws {
        let server = try ScriptedHTTPServer(scripts: ["/forecast": [.respond(503), .respond(200, body: "sunny")]])
        defer { server.stop() }
        let client = ForecastClientStep1.ForecastClient()
        let request = URLRequest(url: server.url("/forecast"))
        let outcome = await run { client.requestWithRetry(request, completion: $0) }
        #expect(outcome.status == 200)
        #expect(outcome.error == nil)
        #expect(outcome.retriesLeft == 2)
        #expect(server.requestCount(to: "/forecast") == 2)
    }

    @Test("step 1 does not retry a 404: it is the final answer")
    func step1DoesNotRetry404() async throws {
        let server = try ScriptedHTTPServer(scripts: ["/missing": [.respond(404)]])
        defer { server.stop() }
        let client = ForecastClientStep1.ForecastClient()
        let request = URLRequest(url: server.url("/missing"))
        let outcome = await run { client.requestWithRetry(request, completion: $0) }
        #expect(outcome.status == 404)
        #expect(outcome.retriesLeft == 3)
        #expect(server.requestCount(to: "/missing") == 1)
    }

    @Test("step 2: cancel during an attempt completes once with CancellationError")
    func step2Cancel() async throws {
        let server = try ScriptedHTTPServer(scripts: ["/slow": [.neverAnswer]])
        defer { server.stop() }
        let client = ForecastClientStep2.ForecastClient()
        let summaries = Recorder<RetrySummary>()
        let handle = client.request(URLRequest(url: server.url("/slow"))) { result, summary in
            summaries.append(summary)
        }
        handle.cancel()
        await #expect(throws: CancellationError.self) { try await handle.value }
        #expect(summaries.values.map(\.reason) == [.cancelled])
    }
}

@Suite("Migration.md, section 2: one call site at a time", .timeLimit(.minutes(3)))
struct OneCallSiteAtATimeTests {
    @Test("the callback store, awaited through its handle")
    func callbackStore() async throws {
        let api = FlakyProfileAPI(failures: 1)
        let store = ProfileStoreToday.ProfileStore(api: api)
        let profile = try await store.profile(id: 7) { _ in }.value
        #expect(profile == Profile(id: 7, name: "Ada"))
        #expect(api.callCount == 2)
    }

    @Test("withRetry around the callback API")
    func withRetryBridge() async throws {
        let api = FlakyProfileAPI(failures: 1)
        let store = ProfileStoreToday.ProfileStore(api: api)
        let profile = try await ProfileStoreToday.ProfileStoreWithRetry().profile(store: store, id: 7)
        #expect(profile.id == 7)
        #expect(api.callCount == 2)
    }

    @Test("the callback store calling the async API")
    func callbackStoreAsyncAPI() async throws {
        let api = FlakyProfileAPI(failures: 1)
        let store = ProfileStoreAsyncAPI.ProfileStore(api: api)
        let results = Recorder<Int>()
        let handle = store.profile(id: 7) { result in results.append((try? result.get().id) ?? -1) }
        let profile = try await handle.value
        #expect(profile.id == 7)
        #expect(results.values == [7])
        #expect(api.callCount == 2)
    }

    @Test("async all the way; an API that keeps failing ends with its own error after 4 attempts")
    func asyncStore() async throws {
        let api = FlakyProfileAPI(failures: 1)
        let profile = try await ProfileStoreAsync.ProfileStore(api: api).profile(id: 7)
        #expect(profile.id == 7)
        #expect(api.callCount == 2)

        let failing = FlakyProfileAPI(failures: .max)
        let store = ProfileStoreAsync.ProfileStore(api: failing)
        await #expect(throws: ServerBusy.self) { try await store.profile(id: 7) }
        #expect(failing.callCount == 4)
    }
}

// MARK: - Fakes

/// An error the fakes fail with.
struct ServerBusy: Error, Equatable {}

/// A fake ``ProfileAPI`` that fails its first `failures` calls (in both styles together) with ``ServerBusy``.
final class FlakyProfileAPI: ProfileAPI {
    private let calls = Locked(0)
    private let failures: Int

    init(failures: Int) {
        self.failures = failures
    }

    /// How many calls were made.
    var callCount: Int { calls.withLock { $0 } }

    private func next(id: Int) -> Result<Profile, any Error> {
        let call = calls.withLock { count in
            count += 1
            return count
        }
        return call <= failures ? .failure(ServerBusy()) : .success(Profile(id: id, name: "Ada"))
    }

    func load(id: Int, completion: @escaping @Sendable (Profile?, (any Error)?) -> Void) {
        let result = next(id: id)
        DispatchQueue.global().async {
            switch result {
            case .success(let profile): completion(profile, nil)
            case .failure(let error): completion(nil, error)
            }
        }
    }

    func profile(id: Int) async throws -> Profile {
        try next(id: id).get()
    }
}

import Foundation
import RetryKitTesting
import Testing

@testable import ItemsApp

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Runs the view model on the main actor, as an app does, and checks the main-actor state it ends with.
@MainActor
@Suite("Items view model", .serialized, .timeLimit(.minutes(2)))
struct ItemsViewModelTests {
    static func session() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil  // see README, "Platforms": Linux's URL cache and cancelled tasks
        return URLSession(configuration: configuration)
    }

    func model(failures: Int = 2) -> ItemsViewModel {
        ItemsViewModel(
            client: LegacyClient(failures: failures), api: ItemsAPI(failures: failures), session: Self.session())
    }

    /// Waits, yielding the main actor, until `condition` holds (at most 60 s: only a failing test waits that long).
    func eventually(_ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition() {
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return true
    }

    @Test func tryAgainRetriesTheLegacyClientOnTheMainQueue() async {
        let model = model()
        model.retry()
        #expect(await eventually { !model.text.isEmpty })
        #expect(model.text == "item 7")
        #expect(model.client.calls == 3)
        #expect(model.retriesLeft == 1, "attempt 3 of 4")
        #expect(model.log.count == 7, "3 started, 2 failed, 1 succeeded, finished: \(model.log)")
    }

    @Test func aPlanRetriesTheLegacyClient() async {
        let model = model()
        model.loadWithPlan(7)
        #expect(await eventually { !model.text.isEmpty })
        #expect(model.text == "item 7")
    }

    @Test func aRepeatingPlanPollsUntilCancelled() async {
        let model = model(failures: 1)
        model.startPolling(3)
        #expect(await eventually { !model.text.isEmpty })
        #expect(model.feed == ["item 3", "item 3", "item 3"])
        #expect(model.text == "polling ended: cancelled")
    }

    @Test func anAsyncOperationFromCallbackCode() async {
        let model = model()
        model.loadFromAPI(7)
        #expect(await eventually { !model.text.isEmpty })
        #expect(model.text == "item 7")
    }

    @Test func anAsyncOperationWithAPlan() async {
        let model = model()
        model.loadFromAPIWithPlan(7)
        #expect(await eventually { !model.text.isEmpty })
        #expect(model.text == "item 7")
    }

    @Test func aDataTaskAgainstTheScriptedServer() async throws {
        let server = try ScriptedHTTPServer(scripts: [
            "/item": [.respond(503), .respond(503), .respond(200, body: "ok")]
        ])
        defer { server.stop() }
        let model = model()
        model.download(server.url("/item"))
        #expect(await eventually { !model.text.isEmpty })
        #expect(model.text == "200: ok")
        #expect(server.requestCount(to: "/item") == 3)
    }

    // The signed-in calls below await the handles the view model returns (each returns after its completion ran):
    // they neither sleep nor poll, and every retry after a refresh waits no delay.

    @Test func anExpiredTokenIsRefreshedOnceForTheCallsThatShareIt() async throws {
        let model = model(failures: 0)
        model.client.expireToken()
        let first = model.loadSignedIn(1)
        let second = model.loadSignedIn(2)
        #expect(try await first.value == "item 1")
        #expect(try await second.value == "item 2")
        #expect(model.client.refreshes == 1, "one refresh for both calls")
        #expect(model.tokens.credential == "token-2")
        #expect(model.recoveries >= 1, "the first call to fail waited for the refresh and retried")
        #expect(model.log.count == model.recoveries, "the observer saw each recovery: \(model.log)")
        #expect(model.signedIn == [1: "item 1", 2: "item 2"])
        #expect(model.completionsOnMainQueue == [true, true])
    }

    @Test func anAsyncCallWithTheSharedToken() async throws {
        let model = model(failures: 0)
        model.client.expireToken()
        #expect(try await model.loadSignedInAsync(3).value == "item 3")
        #expect(model.client.refreshes == 1)
        #expect(model.recoveries == 1)
        #expect(model.log == ["3: token expired, refreshing"])
        #expect(model.client.calls == 2, "the expired token, then the new one")
        // The refreshed token is shared: the next call, callback or async, uses it without a refresh.
        #expect(try await model.loadSignedIn(4).value == "item 4")
        #expect(try await model.loadSignedInAsync(5).value == "item 5")
        #expect(model.client.refreshes == 1)
        #expect(model.client.calls == 4)
        #expect(model.signedIn == [3: "item 3", 4: "item 4", 5: "item 5"])
        #expect(model.completionsOnMainQueue == [true, true, true])
    }

    @Test func anAuthenticatedDataTaskRefreshesOnceForBothRequests() async throws {
        let server = try ScriptedHTTPServer(scripts: ["/item": [.respond(200, body: "ok")]])
        defer { server.stop() }
        let token = server.requireBearerToken(on: ["/item"], refreshPath: "/auth/refresh")
        server.expireToken()
        let model = model()
        model.signIn(token: token, refreshURL: server.url("/auth/refresh"))
        let first = try #require(model.downloadSignedIn(server.url("/item")))
        let second = try #require(model.downloadSignedIn(server.url("/item")))
        for task in [first, second] {
            let (data, response) = try await task.value
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(String(decoding: data, as: UTF8.self) == "ok")
        }
        #expect(server.tokenRefreshes == 1, "one refresh for both requests")
        #expect(server.requestCount(to: "/auth/refresh") == 1)
        let sent = server.requests(to: "/item").map {
            $0.headers.first { $0.name.lowercased() == "authorization" }?.value
        }
        #expect(sent.filter { $0 == "Bearer token-2" }.count == 2, "each retried once with the new token: \(sent)")
        #expect(model.recoveries >= 1)
        #expect(model.text == "200: ok")
        #expect(model.completionsOnMainQueue == [true, true])
    }

    @Test func theBridges() async throws {
        let model = model(failures: 1)
        let value = try await model.loadAsync(5)
        #expect(value == "item 5")
        #expect(model.text == "item 5", "the completion ran before the awaited value returned")
    }

    @Test func cancellingEndsTheRetrierOnTheMainQueue() async {
        let model = model(failures: 100)
        model.load(1)
        model.cancel()
        #expect(await eventually { !model.text.isEmpty })
        #expect(model.text == "failed after 0 attempts")
    }
}

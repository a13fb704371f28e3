import Dispatch
import Foundation
import RetryKit
import RetryKitHTTP
import RetryKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The refresh endpoint answered something else than a token.
struct RefreshRejected: Error, Equatable {
    let status: Int
}

/// An async gate: `wait()` suspends until `open()` (at once after it). Never blocks a thread.
final class AsyncGate: Sendable {
    private let state = Locked<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let open = state.withLock { state in
                if !state.open { state.waiters.append(continuation) }
                return state.open
            }
            if open { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    var isOpen: Bool { state.withLock(\.open) }
}

/// HTTP authentication against the scripted server's bearer tokens, through every HTTP entry point: URLSession's
/// `dataTask(with:retryPolicy:…)` and `data(for:retryPolicy:…)`, and `HTTPRetryPolicy.run(authenticatedBy:…)` with a
/// fake client.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct HTTPAuthenticatorTests {
    static let itemsPath = "/items"
    static let refreshPath = "/auth/refresh"

    /// A server whose `/items` needs the current token (`token-1` issued, then expired) and answers "items".
    static func expiredTokenServer() throws -> ScriptedHTTPServer {
        let server = try ScriptedHTTPServer()
        server.script(itemsPath, [.respond(200, body: "items")])
        server.requireBearerToken(on: [itemsPath], refreshPath: refreshPath)
        server.expireToken()
        return server
    }

    /// A token from the server's refresh endpoint, after `gate` opens (if any).
    static func refreshedToken(from server: ScriptedHTTPServer, gate: AsyncGate? = nil) async throws -> String {
        await gate?.wait()
        var request = URLRequest(url: server.url(refreshPath))
        request.httpMethod = "POST"
        let (data, response) = try await plainSession.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard status == 200 else { throw RefreshRejected(status: status) }
        return String(decoding: data, as: UTF8.self)
    }

    /// The session of the refreshes: not the one under test, so that a refresh never queues behind its requests.
    static let plainSession = makeSession()

    /// An authenticator for the server's bearer tokens that starts with `token-1`.
    static func authenticator(
        _ server: ScriptedHTTPServer, gate: AsyncGate? = nil, window: RecoveryWindow = RecoveryWindow()
    ) -> HTTPAuthenticator<String> {
        HTTPAuthenticator<String>(
            credential: "token-1", window: window,
            apply: { token, request in request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") },
            refresh: { _ in try await refreshedToken(from: server, gate: gate) })
    }

    static func policy(_ authenticator: HTTPAuthenticator<String>) -> HTTPRetryPolicy {
        millisecondPolicy(retryLimit: 2).authenticated(by: authenticator)
    }

    /// The `Authorization` header of every request the server received for `/items`.
    static func tokensSent(_ server: ScriptedHTTPServer) -> [String?] {
        server.requests(to: itemsPath).map { request in
            request.headers.first { $0.name.lowercased() == "authorization" }?.value
        }
    }

    /// `count` requests to `/items`, half with `dataTask` and half with `data(for:)`, all at once.
    static func sendMixed(
        _ count: Int, policy: HTTPRetryPolicy, server: ScriptedHTTPServer, session: URLSession
    ) async -> [(RequestStyle, Retried)] {
        let request = makeRequest(url: server.url(itemsPath))
        return await withTaskGroup(of: (RequestStyle, Retried).self) { group in
            for index in 0..<count {
                let style: RequestStyle = index.isMultiple(of: 2) ? .completionHandler : .async
                group.addTask { (style, await send(request, policy: policy, style: style, in: session)) }
            }
            var results: [(RequestStyle, Retried)] = []
            for await result in group { results.append(result) }
            return results
        }
    }

    @Test func hundredRequestsInBothStylesShareOneRefreshAndRetryWithTheNewToken() async throws {
        let server = try Self.expiredTokenServer()
        let session = makeSession(connectionsPerHost: 16)
        let authenticator = Self.authenticator(server)

        let results = await Self.sendMixed(100, policy: Self.policy(authenticator), server: server, session: session)

        #expect(results.count == 100)
        for (style, retried) in results {
            #expect(retried.status == 200, "\(style): \(retried.error.map { "\($0)" } ?? "")")
            #expect(retried.body == "items", "\(style)")
            if let summary = retried.summary {
                #expect(summary.attempts <= 2)
                #expect(summary.recoveries <= 1)
            }
        }
        #expect(results.filter { $0.0 == .async }.count == 50)
        #expect(server.tokenRefreshes == 1, "exactly one refresh")
        #expect(authenticator.recovery.refreshes == 1)
        #expect(authenticator.recovery.credential == "token-2")
        #expect(server.requestCount(to: Self.refreshPath) == 1)
        let sent = Self.tokensSent(server)
        #expect(sent.filter { $0 == "Bearer token-2" }.count == 100, "every request succeeded once, with the new token")
        #expect(sent.allSatisfy { $0 == "Bearer token-1" || $0 == "Bearer token-2" }, "\(sent)")
        // A request sends the new token only after the refresh: every retry after a 401 carries it.
        #expect(sent.count - 100 == sent.filter { $0 == "Bearer token-1" }.count)
        await tearDown(server, session)
    }

    @Test func aFailingRefreshFailsEveryWaitingRequestWithItsError() async throws {
        let server = try Self.expiredTokenServer()
        server.failRefreshes(with: .respond(500, body: "auth server down"))
        let session = makeSession(connectionsPerHost: 16)
        let gate = AsyncGate()
        let authenticator = Self.authenticator(server, gate: gate)
        let count = 10

        // The refresh waits until every request waits for it, so that all of them get its answer.
        let opener = Task {
            _ = await eventuallyAsync { authenticator.recovery.core.waitingCount == count }
            gate.open()
        }
        let results = await Self.sendMixed(
            count, policy: Self.policy(authenticator), server: server, session: session)
        await opener.value

        for (style, retried) in results {
            let error = retried.error as? RetryError
            #expect(error?.reason == .recoveryFailed, "\(style): \(String(describing: retried.error))")
            #expect(error?.lastError as? RefreshRejected == RefreshRejected(status: 500), "\(style)")
            #expect(retried.response == nil, "\(style): a recovery's give-up is an error, not the 401")
            if let summary = retried.summary {
                #expect(summary.reason == .recoveryFailed)
                // 1: its 401 asked for the refresh; 0: it was about to send its first request when the refresh had
                // started, and waited instead of sending the token being replaced (a slow machine, a sanitizer).
                #expect(summary.attempts <= 1)
            }
        }
        #expect(authenticator.recovery.refreshes == 1, "no second refresh")
        #expect(server.requestCount(to: Self.refreshPath) == 1)
        #expect((1...count).contains(server.requestCount(to: Self.itemsPath)), "no request after the failed refresh")
        await tearDown(server, session)
    }

    @Test func aRequestCancelledWhileWaitingForTheRefreshEndsAtOnceAndTheOthersSucceed() async throws {
        let server = try Self.expiredTokenServer()
        let session = makeSession(connectionsPerHost: 16)
        let gate = AsyncGate()
        let authenticator = Self.authenticator(server, gate: gate)
        let policy = Self.policy(authenticator)
        let request = makeRequest(url: server.url(Self.itemsPath))
        let others = 8

        // One of each style to cancel, started first.
        let cancelledCallback = Locked<Retried?>(nil)
        let callbackDone = AsyncGate()
        let callbackTask = session.dataTask(with: request, retryPolicy: policy) { data, response, error, summary in
            cancelledCallback.withLock {
                $0 = Retried(data: data, response: response, error: error, summary: summary)
            }
            callbackDone.open()
        }
        let asyncTask = Task { await send(request, policy: policy, style: .async, in: session) }
        let rest = Task { await Self.sendMixed(others, policy: policy, server: server, session: session) }

        #expect(await eventuallyAsync { authenticator.recovery.core.waitingCount == others + 2 })
        callbackTask.cancel()
        asyncTask.cancel()
        await callbackDone.wait()
        let asyncResult = await asyncTask.value
        #expect(!gate.isOpen, "both ended while the refresh still ran")
        #expect(cancelledCallback.withLock { $0?.urlErrorCode } == .cancelled)
        #expect(cancelledCallback.withLock { $0?.summary?.reason } == .cancelled)
        #expect(asyncResult.error is CancellationError, "\(String(describing: asyncResult.error))")

        gate.open()
        for (style, retried) in await rest.value {
            #expect(retried.status == 200, "\(style): \(String(describing: retried.error))")
        }
        #expect(server.tokenRefreshes == 1)
        #expect(Self.tokensSent(server).filter { $0 == "Bearer token-2" }.count == others)
        await tearDown(server, session)
    }

    @Test func aRequestStartedDuringTheRefreshWaitsAndSendsOnlyTheNewToken() async throws {
        let server = try Self.expiredTokenServer()
        let session = makeSession()
        let gate = AsyncGate()
        let authenticator = Self.authenticator(server, gate: gate)
        let policy = Self.policy(authenticator)
        let request = makeRequest(url: server.url(Self.itemsPath))

        let first = Task { await send(request, policy: policy, style: .async, in: session) }
        #expect(await eventuallyAsync { authenticator.recovery.core.waitingCount == 1 })
        let later = (
            Task { await send(request, policy: policy, style: .completionHandler, in: session) },
            Task { await send(request, policy: policy, style: .async, in: session) }
        )
        #expect(await eventuallyAsync { authenticator.recovery.core.waitingCount == 3 })
        gate.open()

        #expect(await first.value.status == 200)
        #expect(await later.0.value.status == 200)
        #expect(await later.1.value.status == 200)
        #expect(Self.tokensSent(server) == ["Bearer token-1", "Bearer token-2", "Bearer token-2", "Bearer token-2"])
        #expect(server.tokenRefreshes == 1)
        await tearDown(server, session)
    }

    @Test func aRefreshWindowThatIsUsedUpGivesTheNamedErrorInEveryForm() async throws {
        let server = try Self.expiredTokenServer()
        let session = makeSession()
        let authenticator = Self.authenticator(server, window: RecoveryWindow(maximumRefreshes: 0))
        let policy = Self.policy(authenticator)
        let request = makeRequest(url: server.url(Self.itemsPath))

        for style in RequestStyle.allCases {
            let retried = await send(request, policy: policy, style: style, in: session)
            let error = retried.error as? RetryError
            #expect(error?.reason == .recoveryLimitExceeded, "\(style): \(String(describing: retried.error))")
            #expect((error?.lastError as? HTTPStatusError)?.statusCode == 401, "\(style)")
        }
        let client = FakeAuthClient(validToken: "token-2")
        do {
            _ = try await FakeAuthClient.run(client, policy: millisecondPolicy(), authenticator: authenticator)
            Issue.record("run(authenticatedBy:) returned")
        } catch let error as RetryError {
            #expect(error.reason == .recoveryLimitExceeded)
            #expect((error.lastError as? HTTPStatusError)?.statusCode == 401)
        }
        #expect(server.tokenRefreshes == 0)
        await tearDown(server, session)
    }

    /// One answer per give-up: a recovery's give-up ends the same way in the four forms (the completion handler, `try
    /// await task.value`, `data(for:)`, `policy.run`): a `RetryError` with the recovery's reason, no response.
    @Test(arguments: [RetryError.Reason.recoveryFailed, .recoveryLimitExceeded])
    func everyFormEndsARecoveryGiveUpWithTheSameRetryError(reason: RetryError.Reason) async throws {
        let server = try Self.expiredTokenServer()
        server.failRefreshes(with: .respond(500))
        let session = makeSession()
        let window = reason == .recoveryLimitExceeded ? RecoveryWindow(maximumRefreshes: 0) : RecoveryWindow()
        let policy = Self.policy(Self.authenticator(server, window: window))
        let request = makeRequest(url: server.url(Self.itemsPath))

        let expected =
            reason == .recoveryFailed
            ? "RetryError(recovery failed after 1 attempt; last error: RefreshRejected(status: 500))"
            : "RetryError(recovery refreshed too often after 1 attempt; last error: HTTPStatusError(401 from "
        for form in GiveUpAgreementTests.Form.allCases {
            let ending = await GiveUpAgreementTests.end(form, request, policy, session)
            #expect(ending.status == nil && ending.body == nil, "\(form): \(ending)")
            // The same error in every form, but for the time it took.
            let error = (ending.error ?? "").replacingOccurrences(
                of: #" in [0-9.e-]+ seconds"#, with: "", options: .regularExpression)
            #expect(error.hasPrefix(expected), "\(form): \(error)")
        }
        await tearDown(server, session)
    }

    @Test func aFourOhOneOnTheLastAttemptIsReturnedAsTheResponse() async throws {
        let server = try Self.expiredTokenServer()
        let session = makeSession()
        let authenticator = Self.authenticator(server)
        let policy = millisecondPolicy(retryLimit: 0).authenticated(by: authenticator)
        let request = makeRequest(url: server.url(Self.itemsPath))

        for style in RequestStyle.allCases {
            let retried = await send(request, policy: policy, style: style, in: session)
            #expect(retried.status == 401, "\(style): \(String(describing: retried.error))")
            #expect(retried.error == nil, "\(style)")
        }
        #expect(server.tokenRefreshes == 0)
        await tearDown(server, session)
    }

    @Test func withoutAnAuthenticatorA401IsAnOrdinaryResponse() async throws {
        let server = try Self.expiredTokenServer()
        let session = makeSession()
        let request = makeRequest(url: server.url(Self.itemsPath))
        for style in RequestStyle.allCases {
            let retried = await send(request, policy: millisecondPolicy(), style: style, in: session)
            #expect(retried.status == 401, "\(style)")
        }
        #expect(server.requestCount(to: Self.itemsPath) == 2)
        #expect(Self.tokensSent(server) == [nil, nil])
        await tearDown(server, session)
    }

    // MARK: - run(authenticatedBy:…) with a fake client

    @Test func runWithAFakeClientRefreshesOnceForConcurrentRunsAndPassesTheCredential() async throws {
        let client = FakeAuthClient(validToken: "token-2")
        let refreshes = Locked(0)
        let authenticator = HTTPAuthenticator<String>(
            credential: "token-1",
            apply: { _, _ in Issue.record("a generic client's run does not apply to a URLRequest") },
            refresh: { _ in
                refreshes.withLock { $0 += 1 }
                return "token-2"
            })
        let policy = millisecondPolicy()

        let responses = await withTaskGroup(of: FakeAuthClient.Response?.self) { group in
            for _ in 0..<20 {
                group.addTask { try? await FakeAuthClient.run(client, policy: policy, authenticator: authenticator) }
            }
            var responses: [FakeAuthClient.Response?] = []
            for await response in group { responses.append(response) }
            return responses
        }

        #expect(responses.count == 20)
        #expect(responses.allSatisfy { $0?.status == 200 })
        #expect(refreshes.withLock { $0 } == 1)
        let tokens = client.tokensSeen
        #expect(tokens.filter { $0 == "token-2" }.count == 20)
        #expect(tokens.allSatisfy { $0 == "token-1" || $0 == "token-2" })
    }

    @Test func runWithAFakeClientReportsEventsOnTheCallersIsolationAndThrowsAFailedRefresh() async throws {
        let client = FakeAuthClient(validToken: "token-2")
        let authenticator = HTTPAuthenticator<String>(
            credential: "token-1", apply: { _, _ in },
            refresh: { _, completion in completion(.failure(RefreshRejected(status: 503))) })
        var events: [String] = []  // mutated by the observer on this task's isolation: no lock needed
        do {
            _ = try await millisecondPolicy().run(
                authenticatedBy: authenticator, method: .get,
                statusCode: { $0.status }, responseHeader: { _, _ in nil },
                observer: { event in
                    switch event {
                    case .attemptStarted(let attempt): events.append("start \(attempt.number)")
                    case .attemptFailed(_, _, let next): events.append("fail \(next)")
                    case .attemptSucceeded: events.append("ok")
                    case .finished(let summary, _): events.append("finished \(summary.reason)")
                    default: break
                    }
                }
            ) { token, _ in await client.send(token: token) }
            Issue.record("the run returned")
        } catch let error as RetryError {
            #expect(error.reason == .recoveryFailed)
            #expect(error.lastError as? RefreshRejected == RefreshRejected(status: 503))
        }
        #expect(events == ["start 1", "fail recover", "finished recoveryFailed"])
    }

    @Test func cancellingARunThatWaitsForTheRefreshThrowsCancellationErrorAtOnce() async throws {
        let client = FakeAuthClient(validToken: "token-2")
        let gate = AsyncGate()
        let authenticator = HTTPAuthenticator<String>(
            credential: "token-1", apply: { _, _ in },
            refresh: { _ in
                await gate.wait()
                return "token-2"
            })
        let policy = millisecondPolicy()
        let waiting = Task { try await FakeAuthClient.run(client, policy: policy, authenticator: authenticator) }
        let other = Task { try await FakeAuthClient.run(client, policy: policy, authenticator: authenticator) }
        #expect(await eventuallyAsync { authenticator.recovery.core.waitingCount == 2 })
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(!gate.isOpen)
        gate.open()
        #expect(try await other.value.status == 200)
        #expect(authenticator.recovery.refreshes == 1)
    }

    // MARK: - Cancelling the awaiting task cancels the run

    /// `data(for:retryPolicy:)` with an authenticator awaits its run with `awaitCallbackRun`.
    @Test func cancellingTheTaskThatAwaitsAnAuthenticatedDataForCancelsItsDataTask() async throws {
        let stalled = StalledRequests()
        let session = stalled.session()
        let authenticator = HTTPAuthenticator<String>(
            credential: "token-1",
            apply: { token, request in request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") },
            refresh: { _ in "token-2" })
        let request = makeRequest(url: try #require(stalled.url))
        let task = Task { try await session.data(for: request, retryPolicy: Self.policy(authenticator)) }
        await stalled.started.wait()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        await stalled.stopped.wait()  // the run was cancelled, and its data task with it
        #expect(authenticator.recovery.refreshes == 0)
        stalled.close(session)
    }

    /// `run(authenticatedBy:…)` awaits its run with `awaitCallbackRun`.
    @Test func cancellingTheTaskThatAwaitsRunAuthenticatedByCancelsTheAttemptInFlight() async throws {
        let attempt = (started: AsyncGate(), cancelled: AsyncGate())
        let authenticator = HTTPAuthenticator<String>(
            credential: "token-1", apply: { _, _ in }, refresh: { _ in "token-2" })
        let task = Task {
            try await millisecondPolicy().run(
                authenticatedBy: authenticator, method: .get, statusCode: { (_: FakeAuthClient.Response) in 200 },
                responseHeader: { _, _ in nil }
            ) { _, _ in
                // Lasts until the attempt's task is cancelled.
                await withTaskCancellationHandler {
                    attempt.started.open()
                    await attempt.cancelled.wait()
                } onCancel: {
                    attempt.cancelled.open()
                }
                throw CancellationError()
            }
        }
        await attempt.started.wait()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        await attempt.cancelled.wait()  // the run was cancelled, and the attempt's task with it
        #expect(authenticator.recovery.refreshes == 0)
    }
}

/// A client that is not URLSession: it answers 401 unless it gets the valid token, and records every token.
final class FakeAuthClient: Sendable {
    struct Response: Sendable {
        let status: Int
    }

    let validToken: String
    private let seen = Locked<[String]>([])

    init(validToken: String) {
        self.validToken = validToken
    }

    var tokensSeen: [String] { seen.withLock { $0 } }

    func send(token: String) async -> Response {
        seen.withLock { $0.append(token) }
        return Response(status: token == validToken ? 200 : 401)
    }

    static func run(_ client: FakeAuthClient, policy: HTTPRetryPolicy, authenticator: HTTPAuthenticator<String>)
        async throws -> Response
    {
        try await policy.run(
            authenticatedBy: authenticator, method: .get, statusCode: { $0.status }, responseHeader: { _, _ in nil }
        ) { token, _ in await client.send(token: token) }
    }
}

import Dispatch
import Foundation
import RetryKit
import RetryKitHTTP

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A legacy client, as apps have them: a plain class with mutable state (not `Sendable`), completion handlers, called
/// back on a queue of its own.
final class LegacyClient {
    enum LegacyError: Error { case unavailable, unauthorized }

    /// How many calls fail before one succeeds.
    private var failuresLeft: Int
    /// How many calls were made.
    private(set) var calls = 0
    /// The token the server accepts now (`nil` after `expireToken()` until a refresh); `token-1` to begin with.
    private var validToken: String? = "token-1"
    private var tokensIssued = 1
    /// How many times the token was refreshed.
    private(set) var refreshes = 0

    init(failures: Int) {
        failuresLeft = failures
    }

    func load(_ id: Int, completion: @escaping @Sendable (Result<String, any Error>) -> Void) {
        calls += 1
        let fails = failuresLeft > 0
        if fails { failuresLeft -= 1 }
        DispatchQueue.global().async {
            completion(fails ? .failure(LegacyError.unavailable) : .success("item \(id)"))
        }
    }

    /// A signed-in call: fails with `unauthorized` unless `token` is the one the server accepts now.
    func load(_ id: Int, token: String, completion: @escaping @Sendable (Result<String, any Error>) -> Void) {
        calls += 1
        let accepted = token == validToken
        DispatchQueue.global().async {
            completion(accepted ? .success("item \(id)") : .failure(LegacyError.unauthorized))
        }
    }

    /// Issues a new token (the old one stops working).
    func refreshToken(_ old: String?, completion: @escaping @Sendable (Result<String, any Error>) -> Void) {
        refreshes += 1
        tokensIssued += 1
        let token = "token-\(tokensIssued)"
        validToken = token
        DispatchQueue.global().async { completion(.success(token)) }
    }

    /// The server's side of an expiry: every token is rejected until the next refresh.
    func expireToken() {
        validToken = nil
    }
}

/// An async API beside it (the half of the app that moved to async/await already).
struct ItemsAPI: Sendable {
    let failures: Int

    func fetch(_ id: Int, attempt: Int) async throws -> String {
        if attempt <= failures { throw LegacyClient.LegacyError.unavailable }
        return "item \(id)"
    }
}

/// Tells whether code runs on the main queue, the main actor's executor. (`Thread.isMainThread` cannot: once the main
/// thread calls `dispatchMain()`, as a test runner does, the main queue runs on other threads.)
@MainActor
enum MainQueue {
    private static let key = DispatchSpecificKey<Bool>()

    static func mark() {
        DispatchQueue.main.setSpecific(key: key, value: true)
    }

    /// Whether the caller runs on the main queue (after `mark()`).
    static var isCurrent: Bool {
        DispatchQueue.getSpecific(key: key) == true
    }
}

/// A screen's view model: main-actor state, a plain-class client, and a "Try again" button.
@MainActor
final class ItemsViewModel {
    let client: LegacyClient
    let api: ItemsAPI
    let session: URLSession
    private(set) var text = ""
    private(set) var retriesLeft: Int?
    private(set) var log: [String] = []
    private(set) var feed: [String] = []
    /// The signed-in calls' results, by id.
    private(set) var signedIn: [Int: String] = [:]
    /// Whether each completion of a signed-in call ran on the main queue, in the order they ran.
    private(set) var completionsOnMainQueue: [Bool] = []
    /// The recoveries (retries after a refresh) the signed-in calls' summaries counted.
    private(set) var recoveries = 0
    private var handle: RetryHandle<String>?
    private var polling: RetryHandle<Never>?
    /// The HTTP API's bearer token (`signIn(token:refreshURL:)`).
    private var authenticator: HTTPAuthenticator<String>?

    /// The legacy client's token, shared by every signed-in call: a call that finds it expired waits for the one
    /// refresh that serves every such call, then retries at once with the new token.
    private(set) lazy var tokens = RetryRecovery<String>(
        credential: "token-1",
        when: { error in
            if case .unauthorized? = error as? LegacyClient.LegacyError { return true }
            return false
        },
        refresh: { [weak self] old, completion in
            // The client lives on the main actor with the view model; the refresh may be asked for from anywhere.
            Task { @MainActor in
                guard let self else { return completion(.failure(CancellationError())) }
                self.client.refreshToken(old, completion: completion)
            }
        })

    init(client: LegacyClient, api: ItemsAPI, session: URLSession) {
        self.client = client
        self.api = api
        self.session = session
        MainQueue.mark()
    }

    /// The "Try again" action. Inside this type, `retry` is this method: RetryKit's function is `RetryKit.retry`.
    func retry() {
        load(7)
    }

    /// `retry(on:)`: the legacy client, with the retries left shown as it goes.
    func load(_ id: Int) {
        handle = RetryKit.retry(maxAttempts: 4, on: .main) { attempt, done in
            self.retriesLeft = attempt.retriesLeft
            self.client.load(id) { result in done(result) }
        } strategy: { _ in
            .backoff(.constant(.milliseconds(5)))
        } observer: { event in
            self.log.append("\(event)")
        } completion: { result, summary in
            self.text = (try? result.get()) ?? "failed after \(summary.attempts) attempts"
        }
    }

    /// A plan's `execute(on:)`.
    func loadWithPlan(_ id: Int) {
        handle = RetryPlan.constantDelay(.milliseconds(5)).giveUpAfter(maxAttempts: 4).execute(on: .main) {
            attempt, done in
            self.client.load(id) { done($0) }
        } completion: { result, _ in
            self.text = (try? result.get()) ?? "failed"
        }
    }

    /// A repeating plan: polls until cancelled, handing each value to the screen.
    func startPolling(_ id: Int) {
        polling = RetryPlan.noDelay.repeating(withDelay: .milliseconds(5)).execute(on: .main) { attempt, done in
            self.client.load(id) { done($0) }
        } onValue: { (value: String) in
            self.feed.append(value)
            if self.feed.count == 3 { self.polling?.cancel() }
        } completion: { error in
            self.text = "polling ended: \(error is CancellationError ? "cancelled" : "\(error)")"
        }
    }

    /// `retryTask(on:)`: an async operation from callback code.
    func loadFromAPI(_ id: Int) {
        handle = retryTask(maxAttempts: 4, on: .main) { attempt in
            try await self.api.fetch(id, attempt: attempt.number)
        } completion: { result, _ in
            self.text = (try? result.get()) ?? "failed"
        }
    }

    /// A plan's `executeTask(on:)`.
    func loadFromAPIWithPlan(_ id: Int) {
        handle = RetryPlan.noDelay.executeTask(on: .main) { attempt in
            try await self.api.fetch(id, attempt: attempt.number)
        } completion: { result, _ in
            self.text = (try? result.get()) ?? "failed"
        }
    }

    /// `URLSession.dataTask(with:retryPolicy:)`.
    func download(_ url: URL) {
        var policy = HTTPRetryPolicy.alamofireCompatible
        policy.retryLimit = 2
        session.dataTask(with: URLRequest(url: url), retryPolicy: policy, queue: .main) { data, response, error, _ in
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            self.text = error.map { "error: \($0)" } ?? "\(status): \(String(decoding: data ?? Data(), as: UTF8.self))"
        }
    }

    /// A recovering plan's `execute(on:)`: the legacy client's signed-in call, with the shared token.
    @discardableResult
    func loadSignedIn(_ id: Int) -> RetryHandle<String> {
        RetryPlan.noDelay.giveUpAfter(maxAttempts: 3).recovering(with: tokens).execute(on: .main) {
            token, attempt, done in
            self.client.load(id, token: token) { done($0) }
        } observer: { event in
            if case .attemptFailed(_, _, next: .recover) = event { self.log.append("\(id): token expired, refreshing") }
        } completion: { result, summary in
            self.signedInCompleted(id, result, summary)
        }
    }

    /// A recovering plan's `executeTask(on:)`: the app's async wrapper of the signed-in call, with the shared token.
    @discardableResult
    func loadSignedInAsync(_ id: Int) -> RetryHandle<String> {
        RetryPlan.noDelay.giveUpAfter(maxAttempts: 3).recovering(with: tokens).executeTask(on: .main) {
            token, attempt in
            try await self.fetch(id, token: token)
        } observer: { event in
            if case .attemptFailed(_, _, next: .recover) = event { self.log.append("\(id): token expired, refreshing") }
        } completion: { result, summary in
            self.signedInCompleted(id, result, summary)
        }
    }

    /// The legacy client's signed-in call, as the half of the app that moved to async/await wraps it.
    func fetch(_ id: Int, token: String) async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            client.load(id, token: token) { continuation.resume(with: $0) }
        }
    }

    private func signedInCompleted(_ id: Int, _ result: Result<String, any Error>, _ summary: RetrySummary) {
        completionsOnMainQueue.append(MainQueue.isCurrent)
        recoveries += summary.recoveries
        signedIn[id] = (try? result.get()) ?? "failed: \(result)"
    }

    /// Signs in to the HTTP API: a bearer token, refreshed by a `POST` to `refreshURL` (Alamofire's refresh shape),
    /// once for every request that got a 401 with it.
    func signIn(token: String, refreshURL: URL) {
        let session = self.session
        authenticator = HTTPAuthenticator<String>(
            credential: token,
            apply: { token, request in request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") },
            refresh: { _, completion in
                var request = URLRequest(url: refreshURL)
                request.httpMethod = "POST"
                session.dataTask(with: request) { data, response, error in
                    guard let data, (response as? HTTPURLResponse)?.statusCode == 200 else {
                        return completion(.failure(error ?? URLError(.userAuthenticationRequired)))
                    }
                    completion(.success(String(decoding: data, as: UTF8.self)))
                }.resume()
            })
    }

    /// `URLSession.dataTask(with:retryPolicy:)` with an authenticated policy; its queue is the main queue, from the
    /// caller's isolation. `nil` before `signIn(token:refreshURL:)`.
    @discardableResult
    func downloadSignedIn(_ url: URL) -> HTTPRetryTask? {
        guard let authenticator else { return nil }
        let policy = HTTPRetryPolicy.alamofireCompatible.authenticated(by: authenticator)
        return session.dataTask(with: URLRequest(url: url), retryPolicy: policy) { data, response, error, summary in
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            self.completionsOnMainQueue.append(MainQueue.isCurrent)
            self.recoveries += summary.recoveries
            self.text = error.map { "error: \($0)" } ?? "\(status): \(String(decoding: data ?? Data(), as: UTF8.self))"
        }
    }

    /// The bridges: `withRetry` (async code, legacy operation) and `handle.value` (a callback retrier awaited).
    func loadAsync(_ id: Int) async throws -> String {
        let first = try await withRetry(maxAttempts: 4) { attempt, done in
            self.client.load(id) { done($0) }
        }
        load(id)
        guard let handle else { return first }
        return try await handle.value
    }

    func cancel() {
        handle?.cancel()
        polling?.cancel()
    }
}

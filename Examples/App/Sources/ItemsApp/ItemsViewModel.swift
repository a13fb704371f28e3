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
    enum LegacyError: Error { case unavailable }

    /// How many calls fail before one succeeds.
    private var failuresLeft: Int
    /// How many calls were made.
    private(set) var calls = 0

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
}

/// An async API beside it (the half of the app that moved to async/await already).
struct ItemsAPI: Sendable {
    let failures: Int

    func fetch(_ id: Int, attempt: Int) async throws -> String {
        if attempt <= failures { throw LegacyClient.LegacyError.unavailable }
        return "item \(id)"
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
    private var handle: RetryHandle<String>?
    private var polling: RetryHandle<Never>?

    init(client: LegacyClient, api: ItemsAPI, session: URLSession) {
        self.client = client
        self.api = api
        self.session = session
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

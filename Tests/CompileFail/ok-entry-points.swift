// Control: the right spelling of every call the trap files get wrong compiles, so that their rejection is the trap's,
// not a broken set-up (a missing module, wrong flags). It also pins that a Foundation call that names no RetryKit label
// still means Foundation's own.
import Dispatch
import Foundation
import RetryKit
import RetryKitHTTP

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

func legacyLoad(_ completion: @escaping @Sendable (Int?, (any Error)?) -> Void) {
    completion(1, nil)
}

func load() async throws -> Int { 1 }

func callbackStyle(queue: DispatchQueue, budget: RetryBudget) {
    retry(maxAttempts: 3, on: queue) { _, done in
        legacyLoad { value, error in done(value, error) }
    } completion: { result, _ in
        print(result)
    }
    retry(
        maxAttempts: 3, totalTimeout: .seconds(10), attemptTimeout: .seconds(1), budget: budget, on: queue,
        scheduler: .dispatch
    ) { _, done in
        legacyLoad { value, error in done(value, error) }
    } strategy: { _ in
        .backoff(.constant(.milliseconds(10)))
    } observer: { event in
        print(event)
    } completion: { result, summary in
        print(result, summary.attempts)
    }
    retryTask(maxAttempts: 3, on: queue) { _ in
        try await load()
    } completion: { result, _ in
        print(result)
    }
    retryTask(
        maxAttempts: 3, totalTimeout: .seconds(10), attemptTimeout: .seconds(1), budget: budget, on: queue,
        scheduler: .dispatch
    ) { attempt in
        try await load() + attempt.number
    } strategy: { _ in
        .backoff(.none)
    } observer: { event in
        print(event)
    } completion: { result, summary in
        print(result, summary.attempts)
    }
}

func policyStyle(queue: DispatchQueue) {
    let policy = RetryPlan.noDelay.giveUpAfter(maxAttempts: 3)
    policy.execute(on: queue) { _, done in
        legacyLoad { value, error in done(value, error) }
    } completion: { (result: Result<Int, any Error>, _) in
        print(result)
    }
    policy.executeTask(on: queue) { _ in
        try await load()
    } completion: { result, summary in
        print(result, summary)
    }
    policy.repeating(withDelay: .seconds(30)).execute(on: queue) { _, done in
        legacyLoad { value, error in done(value, error) }
    } onValue: { (value: Int) in
        print(value)
    }
    policy.repeating(withDelay: .seconds(30)).executeTask(on: queue) { _ in
        try await load()
    } onValue: { value in
        print(value)
    }
}

func urlSession(_ session: URLSession, _ request: URLRequest) async throws {
    // Foundation's own calls: no RetryKit label, so Foundation's types.
    let plain: URLSessionDataTask = session.dataTask(with: request) { data, response, error in
        print(data as Any, response as Any, error as Any)
    }
    plain.resume()
    let (data, response): (Data, URLResponse) = try await session.data(for: request)
    print(data, response)
    // RetryKit's, which name `retryPolicy:`.
    let retrying: HTTPRetryTask = session.dataTask(
        with: request, retryPolicy: HTTPRetryPolicy()
    ) {
        data, response, error, summary in
        print(data as Any, response as Any, error as Any, summary)
    }
    retrying.cancel()
    _ = try await session.data(for: request, retryPolicy: HTTPRetryPolicy())
}

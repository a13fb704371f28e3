// expect-error: expects 2 arguments, but 1 was used in closure body
// Adding optional parameters never changes the closure shape a callback `retry` accepts: with every one of them, a
// closure without `done` is still rejected.
import Dispatch
import RetryKit

func legacyLoad(_ completion: @escaping @Sendable (Int?, (any Error)?) -> Void) {
    completion(1, nil)
}

func load(queue: DispatchQueue, budget: RetryBudget) {
    retry(
        maxAttempts: 3, totalTimeout: .seconds(10), attemptTimeout: .seconds(1), budget: budget, on: queue,
        scheduler: .dispatch
    ) { _ in
        legacyLoad { value, error in print(value as Any, error as Any) }
    } strategy: { _ in
        .backoff(.none)
    } observer: { event in
        print(event)
    } completion: { result in
        print(result)
    }
}

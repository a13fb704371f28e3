// expect-error: retry(on:) takes `{ attempt, done in … }`, which calls `done` with the result
// The same trap with the closure passed by its label, `operation:`.
import Dispatch
import RetryKit

func legacyLoad(_ completion: @escaping @Sendable (Int?, (any Error)?) -> Void) {
    completion(1, nil)
}

func load(queue: DispatchQueue) {
    retry(
        maxAttempts: 3, on: queue,
        operation: { _ in legacyLoad { value, error in print(value as Any, error as Any) } },
        completion: { result, summary in print(result, summary) })
}

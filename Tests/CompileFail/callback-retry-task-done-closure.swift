// expect-error: an operation that calls `done` runs with retry(on:)
// The reverse: a completion-handler operation (with `done`) given to `retryTask`, the `async`-operation bridge.
import Dispatch
import RetryKit

func legacyLoad(_ completion: @escaping @Sendable (Int?, (any Error)?) -> Void) {
    completion(1, nil)
}

func load(queue: DispatchQueue) {
    retryTask(maxAttempts: 3, on: queue) { _, done in
        legacyLoad { value, error in done(value, error) }
    } completion: { (result: Result<Int, any Error>, _) in
        print(result)
    }
}

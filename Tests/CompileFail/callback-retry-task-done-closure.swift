// expect-error: expects 1 argument, but 2 were used in closure body
// The reverse: a completion-handler operation (with `done`) given to `retryTask`, the `async`-operation bridge.
import Dispatch
import RetryKit

func legacyLoad(_ completion: @escaping @Sendable (Int?, (any Error)?) -> Void) {
    completion(1, nil)
}

func load(queue: DispatchQueue) {
    retryTask(maxAttempts: 3, on: queue) { _, done in
        legacyLoad { value, error in done(value, error) }
    } completion: { (result: Result<Int, any Error>) in
        print(result)
    }
}

// expect-error: expects 2 arguments, but 1 was used in closure body
// A completion-handler operation that forgets its `done` parameter. With one name for both closure shapes it
// compiled as an `async` operation returning `Void` and reported success at once, whatever `legacyLoad` did.
import Dispatch
import RetryKit

func legacyLoad(_ completion: @escaping @Sendable (Int?, (any Error)?) -> Void) {
    completion(1, nil)
}

func load(queue: DispatchQueue) {
    retry(maxAttempts: 3, on: queue) { _ in
        legacyLoad { value, error in print(value as Any, error as Any) }
    } completion: { result in
        print(result)
    }
}

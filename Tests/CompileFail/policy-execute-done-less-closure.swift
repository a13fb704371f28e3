// expect-error: expects 2 arguments, but 1 was used in closure body
// A policy's completion-handler `execute(on:)` with an operation that forgets `done`: `executeTask(on:)` is the one
// for `async` operations.
import Dispatch
import RetryKit

func legacyLoad(_ completion: @escaping @Sendable (Int?, (any Error)?) -> Void) {
    completion(1, nil)
}

func load(queue: DispatchQueue) {
    let policy = RetryPlan.noDelay.giveUpAfter(maxAttempts: 3)
    policy.execute(on: queue) { _ in
        legacyLoad { value, error in print(value as Any, error as Any) }
    } completion: { result in
        print(result)
    }
}

// expect-error: an operation that calls `done` runs with execute(on:)
// A completion-handler operation given to a plan's `executeTask(on:)`: it must be `execute(on:)`.
import Dispatch
import RetryKit

func legacyLoad(_ completion: @escaping @Sendable (Int?, (any Error)?) -> Void) {
    completion(1, nil)
}

func start(queue: DispatchQueue) {
    RetryPlan.noDelay.executeTask(on: queue) { _, done in
        legacyLoad { value, error in done(value, error) }
    } completion: { (result: Result<Int, any Error>, _) in
        print(result)
    }
}

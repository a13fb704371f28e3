// expect-error: expects 2 arguments, but 1 was used in closure body
// A repeating policy's completion-handler `execute(on:)` with an operation that forgets `done`.
import Dispatch
import RetryKit

func legacyLoad(_ completion: @escaping @Sendable (Int?, (any Error)?) -> Void) {
    completion(1, nil)
}

func poll(queue: DispatchQueue) {
    RetryPlan.noDelay.repeating(withDelay: .seconds(30)).execute(on: queue) { _ in
        legacyLoad { value, error in print(value as Any, error as Any) }
    } onValue: { value in
        print(value)
    }
}

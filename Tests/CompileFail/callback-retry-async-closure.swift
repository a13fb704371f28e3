// expect-error: an async `{ attempt in try await … }` runs with retryTask(on:)
// An `async` operation given to the completion-handler `retry`: it must be `retryTask`.
import Dispatch
import RetryKit

func load() async throws -> Int { 1 }

func start(queue: DispatchQueue) {
    retry(maxAttempts: 3, on: queue) { _ in
        try await load()
    } completion: { result, _ in
        print(result)
    }
}

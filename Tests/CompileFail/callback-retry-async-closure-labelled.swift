// expect-error: an async `{ attempt in try await … }` runs with retryTask(on:)
// An `async` operation passed with the completion-handler style's label `operation:`: it must be `retryTask`.
import Dispatch
import RetryKit

func load() async throws -> Int { 1 }

func start(queue: DispatchQueue) {
    retry(
        maxAttempts: 3, on: queue, operation: { _ in try await load() },
        completion: { result, summary in print(result, summary) })
}

// expect-error: an async `{ attempt in try await … }` runs with executeTask(on:)
// An `async` operation given to a plan's completion-handler `execute(on:)`: it must be `executeTask(on:)`.
import Dispatch
import RetryKit

func load() async throws -> Int { 1 }

func start(queue: DispatchQueue) {
    RetryPlan.noDelay.execute(on: queue) { _ in
        try await load()
    } completion: { result, _ in
        print(result)
    }
}

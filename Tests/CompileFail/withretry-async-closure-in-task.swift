// expect-error: withRetry's operation calls `done`
// An `async` operation given to `withRetry` inside an unannotated `Task` (the compiler used to fail to produce a
// diagnostic): withRetry is for completion-handler operations; an async one runs with the async `retry`.
import RetryKit

func load() async throws -> Int { 1 }

func start() {
    Task {
        let value = try await withRetry {
            try await load()
        }
        print(value)
    }
}

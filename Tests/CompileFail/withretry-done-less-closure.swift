// expect-error: expects 2 arguments, but 1 was used in closure body
// The bridge from async code to a completion-handler operation: an operation that forgets `done` is rejected, not run
// as an `async` operation (that is the async `retry`).
import RetryKit

func legacyLoad(_ completion: @escaping @Sendable (Int?, (any Error)?) -> Void) {
    completion(1, nil)
}

func load() async throws {
    let _: Int = try await withRetry(maxAttempts: 3) { _ in
        legacyLoad { value, error in print(value as Any, error as Any) }
    }
}

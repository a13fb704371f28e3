// expect-error: need an operation that receives its attempt
// Adding `totalTimeout:` to a call written for the async retry library (default clock) is rejected with what to write
// instead, rather than switching the closure shape the call accepts.
import RetryKit

func load() async throws -> Int { 42 }

func addingATotalTimeout() async throws -> Int {
    try await retry(maxAttempts: 5, totalTimeout: .seconds(10)) {
        try await load()
    } strategy: { _ in
        .backoff(.constant(.seconds(1)))
    }
}

// expect-error: withRetry's operation calls `done`
// The same with an attempt parameter.
import RetryKit

func load(_ attempt: Int) async throws -> Int { attempt }

func start() async throws -> Int {
    try await withRetry(maxAttempts: 3) { attempt in
        try await load(attempt.number)
    }
}

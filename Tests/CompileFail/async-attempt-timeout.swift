// expect-error: need an operation that receives its attempt
// Adding `attemptTimeout:` to a call written for the async retry library does not switch it to the overload whose
// operation takes its attempt (another closure shape, @Sendable): it is rejected, with what to write instead.
import RetryKit

func load() async throws -> Int { 42 }

func addingAnAttemptTimeout() async throws -> Int {
    try await retry(maxAttempts: 3, attemptTimeout: .seconds(2), clock: ContinuousClock()) {
        try await load()
    }
}

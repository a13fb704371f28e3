// expect-error: need an operation that receives its attempt
// Every option at once on a call written for the async retry library whose value is not Sendable (default clock):
// rejected with what to write instead, like any one of them.
import RetryKit

final class Page {
    var lines: [String] = []
}

func addingEveryOption(budget: RetryBudget) async throws -> Page {
    try await retry(
        maxAttempts: 3, totalTimeout: .seconds(10), attemptTimeout: .seconds(1), budget: budget,
        tolerance: .milliseconds(5)
    ) {
        Page()
    } strategy: { _ in
        .backoff(.none)
    } observer: { event in
        print(event)
    }
}

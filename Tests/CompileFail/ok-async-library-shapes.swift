// Control: with the unavailable overloads that catch `totalTimeout:`, `attemptTimeout:` and `observer:` on a call
// written for the async retry library (every option defaulted), every call of that library's shape still compiles and
// is not ambiguous: default and generic clocks, typed throws, values that are not Sendable, non-Sendable captures.
import RetryKit

struct LoadError: Error {}

final class Page {
    var lines: [String] = []
}

func load() async throws -> Int { 42 }

func defaultClock() async throws -> Int {
    try await retry {
        try await load()
    }
}

func discardedResult() async throws {
    _ = try await retry(maxAttempts: 2) { try await load() }
}

func typedThrows(budget: RetryBudget) async throws -> Int {
    try await retry(maxAttempts: 3, budget: budget, tolerance: .milliseconds(5)) { () throws(LoadError) -> Int in
        throw LoadError()
    } strategy: { (_: LoadError) in
        .backoff(.constant(.seconds(1)))
    }
}

func nonSendableValue() async throws -> Page {
    let page = Page()
    return try await retry(maxAttempts: 2) {
        page.lines.append("tried")
        return page
    }
}

func genericClock<C: Clock>(clock: C, pause: C.Duration) async throws -> Page {
    try await retry(maxAttempts: 3, tolerance: nil, clock: clock) {
        Page()
    } strategy: { _ in
        .backoff(.constant(pause))
    }
}

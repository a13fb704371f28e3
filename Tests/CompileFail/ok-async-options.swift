// Control: the spellings the async-* trap files point to compile. The library's shape takes its own options and
// `budget:` on any clock; the time limits and the observer compile with an operation that receives its attempt.
import RetryKit

func load() async throws -> Int { 42 }

func libraryShape<C: Clock>(clock: C, pause: C.Duration, budget: RetryBudget) async throws -> Int {
    try await retry(maxAttempts: 3, budget: budget, tolerance: nil, clock: clock) {
        try await load()
    } strategy: { _ in
        .backoff(.constant(pause))
    }
}

func withOptions(clock: SuspendingClock) async throws -> Int {
    try await retry(
        maxAttempts: 3, totalTimeout: .seconds(10), attemptTimeout: .seconds(2), clock: clock
    ) { attempt in
        try await load()
    } strategy: { _ in
        .backoff(.exponential(a: .milliseconds(100), b: 2).jitter())
    } observer: { event in
        print(event)
    }
}

func withOptionsOnTheDefaultClock() async throws -> Int {
    try await retry(totalTimeout: .seconds(10)) { _ in
        try await load()
    }
}

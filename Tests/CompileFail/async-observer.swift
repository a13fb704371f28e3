// expect-error: need an operation that receives its attempt
// Adding `observer:` to a call written for the async retry library, whose operation captures non-Sendable state, is
// rejected with what to write instead (not a Sendable error inside the closure).
import RetryKit

final class Counter {
    var calls = 0
}

func addingAnObserver(clock: SuspendingClock) async throws -> Int {
    let counter = Counter()
    return try await retry(maxAttempts: 3, clock: clock) {
        counter.calls += 1
        return counter.calls
    } strategy: { _ in
        .backoff(.none)
    } observer: { event in
        print(event)
    }
}

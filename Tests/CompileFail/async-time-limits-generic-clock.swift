// expect-error: need an operation that receives its attempt
// Both time limits on a call written for the async retry library over a generic clock, whose strategy uses the
// clock's own duration type, with a value that is not Sendable: rejected with what to write instead.
import RetryKit

final class Page {
    var lines: [String] = []
}

func addingTimeLimits<C: Clock>(clock: C, pause: C.Duration) async throws -> Page {
    try await retry(totalTimeout: .seconds(10), attemptTimeout: .seconds(1), tolerance: nil, clock: clock) {
        Page()
    } strategy: { _ in
        .backoff(.constant(pause))
    }
}

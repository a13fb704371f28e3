// The attempt loop of the async retry library RetryKit's async API is source-compatible with (its documentation is
// `../shared/seeds/000_*`), written here from that documented behaviour, as the baseline of the "async fail-twice"
// instruction count. Its own module, so that the workload calls it as a dependency's unspecialized generic function,
// as an app calls that library.
//
// Documented behaviour reproduced: up to `maxAttempts` attempts; between two attempts the strategy is asked with the
// error; `.backoff(b)` sleeps `b`'s duration for the 0-based retry index on the clock (also when it is zero: that
// library suspends on the clock for `.none` too), `.stop` rethrows the error; the last attempt's error is rethrown
// without asking the strategy.

/// A delay per 0-based retry index.
public struct SeedStyleBackoff<C: Clock>: Sendable {
    /// The delay before retry `x` (0-based).
    public let duration: @Sendable (_ x: Int) -> C.Duration

    /// A backoff from its delay function.
    public init(duration: @escaping @Sendable (_ x: Int) -> C.Duration) {
        self.duration = duration
    }

    /// No delay: a zero-duration sleep between attempts.
    public static var none: Self { Self { _ in .zero } }
}

/// What to do after a failed attempt.
public enum SeedStyleStrategy<C: Clock>: Sendable {
    /// Sleep the backoff's delay, then try again.
    case backoff(SeedStyleBackoff<C>)
    /// Rethrow the error.
    case stop
}

/// The documented loop, on any clock. `maxAttempts` below 1 is treated as 1 (that library traps instead).
public func seedStyleRetry<R, E: Error, C: Clock>(
    maxAttempts: Int = 3,
    tolerance: C.Duration? = nil,
    clock: C,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws(E) -> sending R,
    strategy: (E) -> SeedStyleStrategy<C> = { _ in .backoff(.none) }
) async throws -> R {
    var retryIndex = 0
    while retryIndex < maxAttempts - 1 {
        do {
            return try await operation()
        } catch {
            switch strategy(error) {
            case .backoff(let backoff):
                try await clock.sleep(for: backoff.duration(retryIndex), tolerance: tolerance)
            case .stop:
                throw error
            }
        }
        retryIndex += 1
    }
    return try await operation()
}

/// The documented loop on `ContinuousClock`, the default of that library's second overload.
public func seedStyleRetry<R, E: Error>(
    maxAttempts: Int = 3,
    tolerance: ContinuousClock.Duration? = nil,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws(E) -> sending R,
    strategy: (E) -> SeedStyleStrategy<ContinuousClock> = { _ in .backoff(.none) }
) async throws -> R {
    try await seedStyleRetry(
        maxAttempts: maxAttempts, tolerance: tolerance, clock: ContinuousClock(), isolation: isolation,
        operation: operation, strategy: strategy)
}

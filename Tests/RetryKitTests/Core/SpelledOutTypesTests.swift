import RetryKit
import Testing

// Code written against the seed's API, with its types spelled out, must compile unchanged.

private struct TooManyRequests: Error {
    let retryAfter: Double
}

/// The seed's default strategy parameter, generic over the clock.
private func defaultStrategy<E: Error, C: Clock>(for clock: C) -> (E) -> RetryStrategy<C> where C.Duration == Duration {
    { _ in .backoff(.none) }
}

/// A backoff written against any clock, as generic library code would.
private func standardBackoff<C: Clock>(_: C.Type) -> BackoffStrategy<C> where C.Duration == Duration {
    .exponential(a: .milliseconds(100), b: 2).min(.milliseconds(50)).max(.seconds(5))
}

@Suite("Core: spelled-out types from the seed")
struct SpelledOutTypesTests {
    @Test("RetryStrategy<ContinuousClock> and BackoffStrategy<SuspendingClock> spelled out")
    func spelledOut() {
        let strategy: RetryStrategy<ContinuousClock> = .backoff(.constant(.seconds(2)))
        let suspending: BackoffStrategy<SuspendingClock> = .exponential(a: .milliseconds(100), b: 2).jitter()
        let continuous: BackoffStrategy<ContinuousClock> = .linear(a: .seconds(1), b: .zero).max(.seconds(3))
        let stop: RetryStrategy<SuspendingClock> = .stop
        let hint: RetryStrategy<SuspendingClock> = .retryAfter(.seconds(30))

        let context = RetryDecisionContext(retryIndex: 4, previousDelay: nil)
        #expect(context.resolve(strategy) == .retry(after: .seconds(2)))
        #expect(context.resolve(stop) == .stop)
        #expect(context.resolve(hint) == .retryAfterHint(.seconds(30)))
        #expect(suspending.delay(forRetry: 4) < .milliseconds(1600))
        #expect(continuous.delay(forRetry: 4) == .seconds(3))

        let sendable: [any Sendable] = [strategy, suspending, continuous]
        #expect(sendable.count == 3)
    }

    @Test("the seed's strategy closures compile and resolve as written")
    func seedClosures() {
        let byDefault: (any Error) -> RetryStrategy<ContinuousClock> = defaultStrategy(for: ContinuousClock())
        let custom: (any Error) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.constant(.seconds(2))) }
        let serverHint: (any Error) -> RetryStrategy<ContinuousClock> = { error in
            if let error = error as? TooManyRequests {
                return .backoff(.constant(.seconds(error.retryAfter)))
            } else {
                return .stop
            }
        }
        let context = RetryDecisionContext(retryIndex: 0, previousDelay: nil)
        #expect(context.resolve(byDefault(TestError(1))) == .retry(after: .zero))
        #expect(context.resolve(custom(TestError(1))) == .retry(after: .seconds(2)))
        #expect(context.resolve(serverHint(TooManyRequests(retryAfter: 1.5))) == .retry(after: .milliseconds(1500)))
        #expect(context.resolve(serverHint(TestError(1))) == .stop)
    }

    @Test("generic code over the clock works for both standard clocks")
    func genericOverClock() {
        let continuous = standardBackoff(ContinuousClock.self)
        let suspending = standardBackoff(SuspendingClock.self)
        for x in 0...8 {
            #expect(continuous.delay(forRetry: x) == suspending.delay(forRetry: x))
        }
        #expect(continuous.delay(forRetry: 0) == .milliseconds(100))
        #expect(continuous.delay(forRetry: 8) == .seconds(5))
    }
}

import RetryKitHTTP
import Testing

@Test func httpModuleReexportsCore() {
    #expect(BackoffStrategy<ContinuousClock>.constant(.seconds(1)).delay(forRetry: 0) == .seconds(1))
}

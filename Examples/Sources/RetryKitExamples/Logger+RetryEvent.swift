import Logging
import RetryKit

extension Logger {
    /// Logs one of a retrier's events: failures as warnings, a give-up as an error, the rest at debug level.
    func log<Value>(_ event: RetryEvent<Value>, _ name: String) {
        switch event {
        case .attemptFailed(let attempt, let error, let next): warning("\(name) \(attempt) failed: \(error); \(next)")
        case .finished(let summary, let error?): self.error("\(name) gave up (\(summary.reason)): \(error)")
        default: debug("\(name): \(event)")
        }
    }
}

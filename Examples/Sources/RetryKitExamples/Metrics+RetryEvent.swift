import Metrics
import RetryKit

/// Counts a retrier's attempts and retries, times its waits, and counts how it finished by reason.
func record<Value>(_ event: RetryEvent<Value>, _ name: String) {
    switch event {
    case .attemptStarted: Counter(label: "\(name)_attempts").increment()
    case .attemptFailed(_, _, .retry(let wait)): Timer(label: "\(name)_waits").recordNanoseconds(wait.nanoseconds)
    case .finished(let summary, _): Counter(label: "\(name)_finished", dimensions: [("reason", "\(summary.reason)")]).increment()
    default: break
    }
}

extension Duration {
    /// The whole nanoseconds (RetryKit's waits are at most 10⁹ s: no overflow).
    fileprivate var nanoseconds: Int64 { components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000 }
}

import Foundation
import RetryKit
import RetryKitHTTP

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Prints a readable per-attempt timeline from a retrier's events: attempt, outcome, chosen delay and actual wait.
final class Timeline: Sendable {
    private struct State {
        var failedAt: ContinuousClock.Instant?
        var chosenDelay: Duration?
    }

    private let start = ContinuousClock.now
    private let state = Locked(State())
    private let describe: @Sendable (any Error) -> String

    init(describe: @escaping @Sendable (any Error) -> String = Timeline.describe) {
        self.describe = describe
    }

    /// The observer to pass to a retrier.
    func observe<Value: Sendable>(_ event: RetryEvent<Value>) {
        let now = ContinuousClock.now
        switch event {
        case .attemptStarted(let attempt):
            let (failedAt, chosen) = state.withLock { s in
                defer { s.failedAt = nil }
                return (s.failedAt, s.chosenDelay)
            }
            var line = "  \(Self.pad("attempt \(attempt.number)", 11)) started at \(Self.ms(start.duration(to: now)))"
            if let failedAt, let chosen {
                let waited = failedAt.duration(to: now)
                line += "  (chosen delay \(Self.ms(chosen)), actual wait \(Self.ms(waited)))"
            }
            print(line)
        case .attemptFailed(let attempt, let error, let next):
            let outcome: String
            switch next {
            case .retry(let delay):
                state.withLock { s in
                    s.failedAt = now
                    s.chosenDelay = delay
                }
                outcome = "→ retry in \(Self.ms(delay))"
            case .giveUp(let reason):
                outcome = "→ give up (\(reason))"
            case .recover:
                outcome = "→ recover, then retry"
            }
            print("  \(Self.pad("attempt \(attempt.number)", 11)) failed: \(describe(error)) \(outcome)")
        case .attemptSucceeded(let attempt, let value):
            print("  \(Self.pad("attempt \(attempt.number)", 11)) succeeded: \(Self.describe(value: value))")
        case .finished(let summary, let error):
            let ending = error.map { "failed with \(describe($0))" } ?? "succeeded"
            print(
                "  finished: \(ending) after \(summary.attempts) attempt\(summary.attempts == 1 ? "" : "s") "
                    + "in \(Self.ms(start.duration(to: now)))")
        case .duplicateCompletion(let attempt):
            print("  attempt \(attempt.number) called its completion twice (ignored)")
        }
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as DemoHTTPError: return "HTTP \(error.status)"
        case is CancellationError: return "CancellationError"
        case let error as URLError: return "URLError(\(error.code.rawValue))"
        case let error as RetryError: return error.description
        default: return String(describing: error)
        }
    }

    static func describe(value: some Sendable) -> String {
        if let (data, response) = value as? URLSession.RetryResponse {
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            return "HTTP \(status), \(data.count) bytes"
        }
        return "\(value)"
    }

    static func ms(_ d: Duration) -> String {
        let parts = d.components
        let millis = Double(parts.seconds) * 1_000 + Double(parts.attoseconds) / 1e15
        return "\(Int64(millis.rounded())) ms"  // Int64: a 32-bit Int ends at 24.8 days of milliseconds
    }

    static func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s : s + String(repeating: " ", count: width - s.count)
    }
}

/// The error the demo's legacy client reports for a non-2xx status.
struct DemoHTTPError: Error {
    let status: Int
}

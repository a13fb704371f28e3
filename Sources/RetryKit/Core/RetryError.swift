/// Why a retrier finished with an error of RetryKit's own rather than the operation's.
///
/// When attempts run out or the strategy says ``RetryStrategy/stop``, a retrier finishes with the operation's own last
/// error, unchanged; cancellation finishes with `CancellationError`. Every other way to give up is a `RetryError`,
/// which keeps the last error of the operation, if there was one.
public struct RetryError: Error, Sendable, CustomStringConvertible {
    /// The reason a retrier gave up.
    public enum Reason: Sendable, Equatable {
        /// The configuration cannot run: for example `maxAttempts < 1` or a negative timeout. No attempt ran.
        case invalidConfiguration(String)
        /// The total timeout expired, or the next wait would have ended after it.
        case deadlineExceeded
        /// One attempt did not complete within the per-attempt timeout. Delivered to the strategy like any failure.
        case attemptTimedOut
        /// A shared ``RetryBudget`` refused the retry.
        case budgetExhausted
        /// The condition gating the retrier ended while it was false.
        case conditionEnded
        /// The operation called its completion with neither a value nor an error.
        case missingResult
    }

    /// Why the retrier gave up.
    public let reason: Reason
    /// The error of the last attempt that failed, if one did.
    ///
    /// When the total deadline cuts an attempt short, that attempt has no error of its own: `lastError` is then the
    /// error of the attempt before it (for example the HTTP response the HTTP layer hands back), or a
    /// ``Reason-swift.enum/attemptTimedOut`` error if no attempt had failed yet.
    public let lastError: (any Error)?
    /// How many attempts ran.
    public let attempts: Int

    /// Creates an error; runners and adapters use this, applications rarely need to.
    public init(_ reason: Reason, lastError: (any Error)? = nil, attempts: Int = 0) {
        self.reason = reason
        self.lastError = lastError
        self.attempts = attempts
    }

    public var description: String {
        let what: String
        switch reason {
        case .invalidConfiguration(let message): what = "invalid retry configuration: \(message)"
        case .deadlineExceeded: what = "retry deadline exceeded"
        case .attemptTimedOut: what = "attempt timed out"
        case .budgetExhausted: what = "retry budget exhausted"
        case .conditionEnded: what = "retry condition ended while false"
        case .missingResult: what = "the operation completed with neither a value nor an error"
        }
        let last = lastError.map { "; last error: \($0)" } ?? ""
        return "RetryError(\(what) after \(attempts) attempt\(attempts == 1 ? "" : "s")\(last))"
    }
}

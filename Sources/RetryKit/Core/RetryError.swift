import Foundation  // LocalizedError

/// Why a retrier gave up, or why RetryKit failed an attempt itself.
///
/// When attempts run out or the strategy says ``RetryStrategy/stop``, a retrier finishes with the operation's own last
/// error, unchanged; cancellation finishes with `CancellationError`. Every other way to give up is a `RetryError`,
/// which keeps the last error of the operation, if there was one, how many attempts ran and how long they took.
///
/// Its ``description`` is for logs and its `localizedDescription` (``errorDescription``) for people:
///
/// ```
/// RetryError(retry deadline exceeded after 3 attempts in 2.5 seconds; last error: Timeout())
/// The total timeout expired. 3 attempts ran in 2.5 seconds. Last error: Timeout().
/// ```
public struct RetryError: Error, Sendable, CustomStringConvertible, LocalizedError {
    /// How a retrier finished, or why RetryKit failed an attempt: the one enum that events and errors share.
    ///
    /// A ``RetrySummary``'s ``RetrySummary/reason`` says how every retrier ended; a `RetryError` says why
    /// RetryKit gave up or failed an attempt. A summary's reason is never ``attemptTimedOut``, ``missingResult`` or
    /// ``completionReleased`` (those fail one attempt). The runners never throw a `RetryError` for ``succeeded``,
    /// ``exhausted``, ``stopped(_:)`` or ``cancelled`` (those end with the value, the operation's own error or
    /// `CancellationError`); an adapter may wrap any give-up in one to carry its reason, as the HTTP layer does for a
    /// `URLError`.
    ///
    /// Every case has an ``explanation`` for people; ``description`` is the case's name, for logs and tests.
    ///
    /// Equality compares the kind of reason, and for ``stopped(_:)`` the stop reason's
    /// ``RetryStopReason/name``: an ``invalidConfiguration(_:)`` message or a stop reason's explanation are for people
    /// and do not take part, so `summary.reason == .invalidConfiguration` holds for every invalid configuration.
    public enum Reason: Sendable, Hashable, CustomStringConvertible {
        /// An attempt succeeded.
        case succeeded
        /// The last allowed attempt failed; the retrier finished with that attempt's error.
        case exhausted
        /// The strategy returned ``RetryStrategy/stop(because:)``; the retrier finished with the attempt's error.
        ///
        /// A plain ``RetryStrategy/stop`` gives ``RetryStopReason/unspecified``, which ``stopped`` stands for.
        case stopped(RetryStopReason)
        /// The total timeout expired, or the next wait would have ended after it.
        case deadlineExceeded
        /// The retrier was cancelled; it finished with `CancellationError`.
        case cancelled
        /// The configuration cannot run: for example `maxAttempts < 1` or a negative timeout. No attempt ran.
        case invalidConfiguration(String)
        /// A shared ``RetryBudget`` refused the retry.
        case budgetExhausted
        /// The condition gating the retrier ended while it was false.
        case conditionEnded
        /// The shared ``RetryRecovery`` failed: its refresh ended with an error (the `RetryError`'s
        /// ``RetryError/lastError``), so every retrier that waited for it gives up with that error.
        case recoveryFailed
        /// The shared ``RetryRecovery`` refused to refresh again: its ``RecoveryWindow`` already allows no more refreshes
        /// in its interval (a credential that fails at once after every refresh would otherwise refresh in a loop). The
        /// `RetryError`'s ``RetryError/lastError`` is the attempt's error that asked for the refresh.
        case recoveryLimitExceeded
        /// One attempt did not complete within the per-attempt timeout. Delivered to the strategy like any failure.
        case attemptTimedOut
        /// The operation called its completion with neither a value nor an error. Delivered to the strategy like any
        /// failure.
        case missingResult
        /// The operation released its completion handler (every copy of the attempt's ``AttemptCompletion``) without
        /// calling it, so the attempt could never end. Delivered to the strategy like any failure.
        ///
        /// Detected at run time by the completion-handler runner: typically an operation closure that forgets to call
        /// `done` on one of its paths. An attempt that was cancelled or timed out first is not reported again.
        case completionReleased

        /// ``stopped(_:)`` with ``RetryStopReason/unspecified``: what a plain ``RetryStrategy/stop`` gives.
        public static var stopped: Self { .stopped(.unspecified) }

        /// Any ``invalidConfiguration(_:)``, for comparisons: `summary.reason == .invalidConfiguration`.
        public static var invalidConfiguration: Self { .invalidConfiguration("") }

        /// What happened, in words for people, in lower case and without a full stop (for example "the total timeout
        /// expired"), so that it fits into a sentence.
        public var explanation: String {
            switch self {
            case .succeeded: return "an attempt succeeded"
            case .exhausted: return "every allowed attempt failed"
            case .stopped(let stop): return stop.explanation
            case .deadlineExceeded: return "the total timeout expired"
            case .cancelled: return "the retrier was cancelled"
            case .invalidConfiguration(let message): return "the retry configuration is invalid: \(message)"
            case .budgetExhausted: return "the shared retry budget refused another retry"
            case .conditionEnded: return "the retry condition ended while it was false"
            case .recoveryFailed: return "the shared recovery failed to refresh the credential"
            case .recoveryLimitExceeded: return "the shared recovery refreshed too often within its window"
            case .attemptTimedOut: return "an attempt did not complete within the per-attempt timeout"
            case .missingResult: return "the operation completed with neither a value nor an error"
            case .completionReleased: return "the operation released its completion handler without calling it"
            }
        }

        /// The case's name: `deadlineExceeded`, `invalidConfiguration` (the message is in ``explanation``), `stopped` for
        /// ``RetryStopReason/unspecified`` and `stopped(statusNotRetryable)` with the stop reason's name otherwise.
        public var description: String {
            switch self {
            case .succeeded: return "succeeded"
            case .exhausted: return "exhausted"
            case .stopped(let stop): return stop == .unspecified ? "stopped" : "stopped(\(stop.name))"
            case .deadlineExceeded: return "deadlineExceeded"
            case .cancelled: return "cancelled"
            case .invalidConfiguration: return "invalidConfiguration"
            case .budgetExhausted: return "budgetExhausted"
            case .conditionEnded: return "conditionEnded"
            case .recoveryFailed: return "recoveryFailed"
            case .recoveryLimitExceeded: return "recoveryLimitExceeded"
            case .attemptTimedOut: return "attemptTimedOut"
            case .missingResult: return "missingResult"
            case .completionReleased: return "completionReleased"
            }
        }

        public static func == (lhs: Self, rhs: Self) -> Bool {
            switch (lhs, rhs) {
            case (.stopped(let a), .stopped(let b)): return a == b
            case (.invalidConfiguration, .invalidConfiguration): return true
            default: return lhs.kind == rhs.kind
            }
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(kind)
            if case .stopped(let stop) = self { hasher.combine(stop) }
        }

        /// The case without its payload.
        private var kind: Int {
            switch self {
            case .succeeded: return 0
            case .exhausted: return 1
            case .stopped: return 2
            case .deadlineExceeded: return 3
            case .cancelled: return 4
            case .invalidConfiguration: return 5
            case .budgetExhausted: return 6
            case .conditionEnded: return 7
            case .attemptTimedOut: return 8
            case .missingResult: return 9
            case .completionReleased: return 10
            case .recoveryFailed: return 11
            case .recoveryLimitExceeded: return 12
            }
        }
    }

    /// Why the retrier gave up.
    public let reason: Reason
    /// The error of the last attempt that failed, if one did.
    ///
    /// When the total deadline cuts an attempt short, that attempt has no error of its own: `lastError` is then the
    /// error of the attempt before it (for example the HTTP response the HTTP layer hands back), or a
    /// ``Reason-swift.enum/attemptTimedOut`` error if no attempt had failed yet.
    public let lastError: (any Error)?
    /// How many attempts ran (0 if none did).
    public let attempts: Int
    /// Time from the start of the retrier to this error, on the runner's clock or scheduler; `nil` if not known.
    public let elapsed: Duration?

    /// Creates an error; runners and adapters use this, applications rarely need to.
    public init(_ reason: Reason, lastError: (any Error)? = nil, attempts: Int = 0, elapsed: Duration? = nil) {
        self.reason = reason
        self.lastError = lastError
        self.attempts = attempts
        self.elapsed = elapsed
    }

    /// A one-line form for logs and tests:
    /// `RetryError(retry deadline exceeded after 3 attempts in 2.5 seconds; last error: Timeout())`.
    ///
    /// The elapsed time appears when it is known, the last error when there is one.
    public var description: String {
        let what: String
        switch reason {
        case .succeeded: what = "succeeded"
        case .exhausted: what = "attempts exhausted"
        case .stopped(let stop): what = stop == .unspecified ? "stopped" : "stopped: \(stop.explanation)"
        case .deadlineExceeded: what = "retry deadline exceeded"
        case .cancelled: what = "cancelled"
        case .invalidConfiguration(let message): what = "invalid retry configuration: \(message)"
        case .attemptTimedOut: what = "attempt timed out"
        case .budgetExhausted: what = "retry budget exhausted"
        case .conditionEnded: what = "retry condition ended while false"
        case .recoveryFailed: what = "recovery failed"
        case .recoveryLimitExceeded: what = "recovery refreshed too often"
        case .missingResult: what = "the operation completed with neither a value nor an error"
        case .completionReleased: what = "the operation released its completion handler without calling it"
        }
        let time = elapsed.map { " in \($0)" } ?? ""
        let last = lastError.map { "; last error: \($0)" } ?? ""
        return "RetryError(\(what) after \(attempts) attempt\(attempts == 1 ? "" : "s")\(time)\(last))"
    }

    /// What happened, for people: the reason, the attempts that ran and how long they took, and the last error.
    ///
    /// `The total timeout expired. 3 attempts ran in 2.5 seconds. Last error: Timeout().` The last error appears as
    /// its own `errorDescription` if it is a `LocalizedError` that has one, otherwise as Swift prints it.
    public var errorDescription: String? {
        var text = Self.sentence(reason.explanation) + " "
        switch attempts {
        case ...0: text += "No attempt ran"
        case 1: text += "1 attempt ran"
        default: text += "\(attempts) attempts ran"
        }
        if let elapsed, attempts > 0 { text += " in \(elapsed)" }
        text += "."
        if let lastError {
            let last = (lastError as? any LocalizedError)?.errorDescription ?? String(describing: lastError)
            text += " Last error: " + Self.sentence(last)
        }
        return text
    }

    /// The reason alone, for people: ``Reason-swift.enum/explanation`` as a sentence.
    public var failureReason: String? { Self.sentence(reason.explanation) }

    /// `text` with its first letter capitalized and a full stop at the end, unless it ends with punctuation already.
    private static func sentence(_ text: String) -> String {
        guard let first = text.first else { return text }
        let ended = text.last.map { ".!?".contains($0) } ?? false
        return first.uppercased() + text.dropFirst() + (ended ? "" : ".")
    }
}

/// Why a strategy stopped retrying: a name for programs and an explanation for people.
///
/// A plain ``RetryStrategy/stop`` stops for ``unspecified``; say why with ``RetryStrategy/stop(because:)``, and the
/// retrier's summary reports ``RetryError/Reason-swift.enum/stopped(_:)`` with it. The set is open: define your own as
/// static members, as the HTTP layer does for a status that is not retryable:
///
/// ```swift
/// extension RetryStopReason {
///     static let notAuthorized = RetryStopReason("notAuthorized", explanation: "the server refused the credentials")
/// }
/// // strategy: { error in error is AuthError ? .stop(because: .notAuthorized) : .backoff(.constant(.seconds(1))) }
/// ```
///
/// Two stop reasons are equal when their names are: the explanation may carry details, such as a status code.
public struct RetryStopReason: Sendable, Hashable, CustomStringConvertible {
    /// A short, stable identifier, for example `"statusNotRetryable"`; what programs compare.
    public let name: String
    /// Why the strategy stopped, in words for people, in lower case and without a full stop, so that it fits into a
    /// sentence: for example "status 404 is not retryable".
    public let explanation: String

    /// A stop reason.
    ///
    /// - Parameters:
    ///   - name: A short, stable identifier; stop reasons with the same name are equal.
    ///   - explanation: Why the strategy stopped, in words for people.
    public init(_ name: String, explanation: String) {
        self.name = name
        self.explanation = explanation
    }

    /// The strategy returned a plain ``RetryStrategy/stop`` without saying why.
    public static let unspecified = RetryStopReason("unspecified", explanation: "the retry strategy chose to stop")

    /// The ``name``.
    public var description: String { name }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.name == rhs.name }

    public func hash(into hasher: inout Hasher) { hasher.combine(name) }
}

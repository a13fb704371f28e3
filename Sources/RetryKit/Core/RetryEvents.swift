/// One attempt of a retrier, as seen by the operation and by observers.
public struct RetryAttempt: Sendable, Hashable, CustomStringConvertible {
    /// The attempt's number, starting at 1.
    public let number: Int
    /// The most attempts the retrier makes (`Int.max` when unlimited).
    public let maxAttempts: Int
    /// Time since the retrier started, when this attempt started.
    public let elapsed: Duration

    /// Creates an attempt description; runners create these, tests may too.
    public init(number: Int, maxAttempts: Int, elapsed: Duration) {
        self.number = number
        self.maxAttempts = maxAttempts
        self.elapsed = elapsed
    }

    /// How many retries remain if this attempt fails: `maxAttempts − number` (the "retries left" of a hand-written
    /// recursive `requestWithRetry`).
    public var retriesLeft: Int { maxAttempts - number }

    public var description: String { "attempt \(number)/\(maxAttempts == .max ? "∞" : String(maxAttempts))" }
}

/// What a finished retrier reports: how it ended, how many attempts ran and how long it took.
public struct RetrySummary: Sendable, Hashable {
    /// How the retrier finished: ``RetryError/Reason-swift.enum/succeeded``, ``RetryError/Reason-swift.enum/exhausted``,
    /// ``RetryError/Reason-swift.enum/stopped(_:)`` (with the strategy's ``RetryStopReason``),
    /// ``RetryError/Reason-swift.enum/deadlineExceeded``, ``RetryError/Reason-swift.enum/cancelled``,
    /// ``RetryError/Reason-swift.enum/invalidConfiguration(_:)``, ``RetryError/Reason-swift.enum/budgetExhausted`` or
    /// ``RetryError/Reason-swift.enum/conditionEnded``: the enum errors use too.
    public let reason: RetryError.Reason
    /// How many attempts ran (0 if none did).
    public let attempts: Int
    /// Time from the start of the retrier to its end, on the runner's clock or scheduler.
    public let elapsed: Duration
    /// How many times the retrier waited for its shared ``RetryRecovery`` after a failure it recognises
    /// (``RetryNextStep/recover``); 0 without a recovery.
    public let recoveries: Int
    /// How long the retrier waited for its ``RetryRecovery`` in total: for a refresh after a failure, and for a
    /// credential before an attempt (one that another retrier's refresh was replacing, or one that needed a refresh
    /// before use). Zero without a recovery, and when every credential was ready at once.
    public let recoveryWait: Duration

    /// Creates a summary; runners create these.
    public init(
        reason: RetryError.Reason, attempts: Int, elapsed: Duration, recoveries: Int = 0,
        recoveryWait: Duration = .zero
    ) {
        self.reason = reason
        self.attempts = attempts
        self.elapsed = elapsed
        self.recoveries = recoveries
        self.recoveryWait = recoveryWait
    }
}

/// What a retrier does next after a failed attempt.
public enum RetryNextStep: Sendable, Hashable {
    /// Wait this long, then run the next attempt.
    case retry(after: Duration)
    /// Give up: the retrier finishes for this reason.
    case giveUp(RetryError.Reason)
    /// Wait for the shared ``RetryRecovery`` (the failure is one it recognises, such as an expired credential), then
    /// retry at once with the credential it gives: a refresh, or a newer credential already there.
    case recover
}

/// An event of a running retrier, delivered in order to observers.
///
/// For one run, observers see `attemptStarted`, then either `attemptSucceeded` or `attemptFailed` for that attempt,
/// and so on, and `finished` last. A cancelled retrier reports no result for the attempt in flight; it goes straight
/// to `finished`. The one exception to this order is `duplicateCompletion`: it reports a misbehaving operation when
/// the extra call happens, which can be after `finished`.
public enum RetryEvent<Value: Sendable>: Sendable {
    /// An attempt is about to run.
    case attemptStarted(RetryAttempt)
    /// An attempt failed; `next` says whether and when the retrier retries.
    case attemptFailed(RetryAttempt, error: any Error, next: RetryNextStep)
    /// An attempt succeeded with this value.
    case attemptSucceeded(RetryAttempt, Value)
    /// The retrier finished; `error` is `nil` on success.
    case finished(RetrySummary, error: (any Error)?)
    /// An operation called its completion more than once for this attempt; the extra call was ignored.
    case duplicateCompletion(RetryAttempt)
}

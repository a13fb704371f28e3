/// Why ``HTTPRetryPolicy`` stops retrying a request: the stop reasons its decisions give
/// (`RetryStrategy.stop(because:)`), which the retrier's summary and `finished` event report as
/// `RetryError.Reason.stopped(_:)`.
///
/// The other ways an HTTP retrier gives up are the core's own reasons: `RetryError.Reason.exhausted` (attempts
/// exhausted), `.deadlineExceeded` (``HTTPRetryPolicy/totalTimeout``) and `.budgetExhausted`
/// (``HTTPRetryPolicy/budget``).
///
/// Compare by name: `summary.reason == .stopped(.statusNotRetryable)`.
extension RetryStopReason {
    /// The response's status is neither in ``HTTPRetryPolicy/retryableHTTPStatusCodes`` nor a usable
    /// `Retry-After` answer (a 429 without a hint, say).
    public static let statusNotRetryable = RetryStopReason(
        "statusNotRetryable", explanation: "the response's status is not retryable")
    /// The request's method is not in ``HTTPRetryPolicy/retryableHTTPMethods`` and the request has no
    /// `Idempotency-Key` (or the policy ignores it).
    public static let methodNotIdempotent = RetryStopReason(
        "methodNotIdempotent", explanation: "the method is not idempotent and the request has no idempotency key")
    /// The server's `Retry-After` asks for a longer wait than ``HTTPRetryPolicy/maxRetryAfter``.
    public static let retryAfterBeyondCap = RetryStopReason(
        "retryAfterBeyondCap", explanation: "the server's Retry-After is beyond the policy's cap")
    /// The transport failure is not in ``HTTPRetryPolicy/retryableTransportFailures``.
    public static let transportFailureNotRetryable = RetryStopReason(
        "transportFailureNotRetryable", explanation: "the transport failure is not retryable")
    /// The attempt failed with an error that is neither a response nor a transport failure.
    public static let notATransportFailure = RetryStopReason(
        "notATransportFailure", explanation: "the error is neither a failing response nor a transport failure")
    /// The request was cancelled (``TransportFailure/cancelled``): never retried.
    public static let requestCancelled = RetryStopReason(
        "requestCancelled", explanation: "the request was cancelled")

    static func statusNotRetryable(_ status: Int) -> RetryStopReason {
        RetryStopReason(statusNotRetryable.name, explanation: "status \(status) is not retryable")
    }

    static func methodNotIdempotent(_ method: HTTPRequestMethod) -> RetryStopReason {
        RetryStopReason(
            methodNotIdempotent.name, explanation: "\(method) is not idempotent and the request has no idempotency key")
    }

    static func retryAfterBeyondCap(_ hint: Duration, cap: Duration) -> RetryStopReason {
        RetryStopReason(
            retryAfterBeyondCap.name, explanation: "the server's Retry-After of \(hint) is beyond the cap of \(cap)")
    }

    static func transportFailureNotRetryable(_ failure: TransportFailure) -> RetryStopReason {
        RetryStopReason(transportFailureNotRetryable.name, explanation: "transport failure \(failure) is not retryable")
    }
}

extension HTTPRetryPolicy {
    /// The `userInfo` key under which a `URLError` that a retrying URLSession request gave up on carries the give-up
    /// as a `RetryError`: its `reason` says why (`.exhausted`, `.stopped(.transportFailureNotRetryable)`,
    /// `.deadlineExceeded`, `.budgetExhausted`, …), with the attempts that ran and the time they took.
    ///
    /// ```swift
    /// let giveUp = urlError.userInfo[HTTPRetryPolicy.giveUpErrorKey] as? RetryError
    /// print(giveUp?.localizedDescription ?? "not retried")
    /// ```
    public static let giveUpErrorKey = "RetryKitHTTP.giveUp"
}

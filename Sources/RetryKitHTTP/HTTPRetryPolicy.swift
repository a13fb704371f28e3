import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Which failed HTTP attempts to retry and how long to wait: Alamofire's `RetryPolicy` parameters and defaults, plus
/// `Retry-After`, jitter, a delay cap and idempotency rules.
///
/// The policy is a value. It decides from plain values any HTTP client can supply (``HTTPRetryContext``: the method,
/// the status, header lookups, a ``TransportFailure``); URLSession support (and ``run(method:url:requestHeader:statusCode:responseHeader:classify:isolation:observer:operation:)``
/// for any other client) adapts a client's types to them. It decides; it does not count attempts or compute delays. For each failed attempt it picks a
/// `RetryStrategy`: `RetryStrategy.backoff` with ``backoff``, `RetryStrategy.retryAfter` with the
/// server's hint, or `RetryStrategy.stop`. RetryKit's core counts attempts (``maxAttempts`` = ``retryLimit`` + 1)
/// and turns the strategy into a delay.
///
/// ```swift
/// var policy = HTTPRetryPolicy()                  // Alamofire's defaults, with jitter, a cap and Retry-After
/// policy.retryLimit = 4
/// policy.attemptTimeout = .milliseconds(500)       // enforced by RetryKit, also below a second on Linux
/// let endpointPolicy = policy.adding(statusCodes: [409])
///
/// // Drives URLSession in both styles:
/// let (data, response) = try await session.data(for: request, retryPolicy: endpointPolicy)
/// session.dataTask(with: request, retryPolicy: endpointPolicy) { data, response, error, summary in … }
///
/// // Plugs into any RetryKit runner as its strategy closure:
/// let strategy = endpointPolicy.strategy(for: request)    // @Sendable (any Error) -> RetryStrategy<ContinuousClock>
/// ```
///
/// ## How a failed attempt is decided
///
/// 1. **Cancellation is never retried**: `CancellationError`, `URLError.cancelled` (also as an `NSError` in
///    `NSURLErrorDomain`) → `RetryStrategy.stop`, whatever the sets and custom decisions say.
/// 2. **The method must be safe to repeat** (RFC 9110 §9.2.2): it is in ``retryableHTTPMethods``, or the request has
///    an `Idempotency-Key` header (when ``retryRequestsWithIdempotencyKey``), or ``retryNonIdempotentRequests`` is
///    set. Otherwise → `RetryStrategy.stop`.
/// 3. **A response** (a status code and a header lookup; from URLSession, an ``HTTPStatusError``):
///    - a status in ``retryAfterStatusCodes`` (429, 503) with a valid `Retry-After` (both forms, see ``RetryAfter``)
///      → `RetryStrategy.retryAfter` with that delay if it is at most ``maxRetryAfter`` (the retrier then waits
///      up to 10% longer, see ``retryAfterSpread``, so that clients given the same hint do not return together); a longer
///      hint → `RetryStrategy.stop` at once, so the caller gets the response now instead of after a pointless
///      sleep. (A hint that ends after the retrier's total deadline also gives up at once: the core checks that.)
///    - otherwise a status in ``retryableHTTPStatusCodes`` → `RetryStrategy.backoff` with ``backoff``;
///    - anything else → `RetryStrategy.stop`. So 429 without a usable hint is not retried, as in Alamofire.
/// 4. **A transport failure** in ``retryableTransportFailures`` → `RetryStrategy.backoff`. URLSession's errors are
///    classified by their `URLError` code (``TransportFailure/init(classifying:)``); a RetryKit per-attempt timeout
///    (`RetryError.Reason.attemptTimedOut`) counts as ``TransportFailure/timedOut``. Any other error →
///    `RetryStrategy.stop`.
/// 5. **Custom decisions** added with ``deciding(_:)`` run last, in the order added, each receiving the previous
///    proposal; they can override anything except step 1.
///
/// ## Which responses fail their attempt
///
/// The adapters (URLSession's methods,
/// ``run(method:url:requestHeader:statusCode:responseHeader:classify:isolation:observer:operation:)``) fail an attempt
/// whose response has a status in ``retryableHTTPStatusCodes`` or ``retryAfterStatusCodes``, or a status the policy
/// (custom decisions included) would retry, as it might retry a 409 for one endpoint; the retrier sees it as an
/// ``HTTPStatusError``. Any other response (200, 404, …) is the attempt's successful result: it is final and never
/// retried. A failing response may still not be retried (a `POST` without an `Idempotency-Key`, a `Retry-After` beyond
/// ``maxRetryAfter``): the retrier then stops, and the adapters hand that response to the caller.
///
/// With the default parameters, these decisions equal Alamofire's for every method, status code and URL error code, except that a
/// non-idempotent request with an `Idempotency-Key` is retried and 429/503 with a `Retry-After` wait as asked (or give
/// up if asked to wait too long). ``alamofireCompatible`` removes those differences and the jitter and cap, for teams
/// that need Alamofire's exact behaviour while migrating.
public struct HTTPRetryPolicy: Sendable {
    /// A decision added with ``deciding(_:)``: given the attempt's context and the policy's proposal, the strategy to
    /// use. It runs on the runner's queue or task, never while RetryKit holds a lock; keep it pure, since it may be
    /// asked more than once about the same attempt.
    typealias Decision =
        @Sendable (_ context: HTTPRetryContext, _ proposed: RetryStrategy<ContinuousClock>)
        -> RetryStrategy<ContinuousClock>

    // MARK: Alamofire's parameters

    /// How many times a request may be retried after its first attempt (Alamofire's meaning). RetryKit runs at most
    /// ``maxAttempts`` = `retryLimit + 1` attempts.
    public var retryLimit: UInt
    /// The growth factor of the backoff, `scale·baseⁿ`. Alamofire requires at least 2; RetryKit accepts any value:
    /// 1 gives a constant delay, 0 gives `scale` then zero.
    public var exponentialBackoffBase: UInt
    /// The first backoff delay, in seconds. NaN or negative counts as zero; infinity saturates.
    public var exponentialBackoffScale: Double
    /// The methods that may be retried without further evidence that repeating them is safe.
    public var retryableHTTPMethods: Set<HTTPRequestMethod>
    /// The status codes that are retried with the backoff.
    public var retryableHTTPStatusCodes: Set<Int>
    /// The transport failures that are retried with the backoff (Alamofire's `retryableURLErrorCodes`, by name).
    /// ``TransportFailure/cancelled`` is never retried, even if added.
    public var retryableTransportFailures: Set<TransportFailure>

    // MARK: Beyond Alamofire

    /// The status codes whose `Retry-After` header is honoured: the retry waits as long as the server asks, spread
    /// by ``retryAfterSpread``. By default 429 Too Many Requests (RFC 6585) and 503 Service Unavailable
    /// (RFC 9110 §15.6.4).
    public var retryAfterStatusCodes: Set<Int>
    /// The longest `Retry-After` the policy waits for; a longer hint gives up at once with the response. Negative
    /// counts as zero.
    ///
    /// 60 seconds by default: a server asking for longer is usually in a state a user should hear about now rather
    /// than after a silent minute.
    public var maxRetryAfter: Duration
    /// The cap on each backoff delay, applied before jitter; `nil` for no cap (delays then saturate at
    /// `BackoffStrategy.saturationLimit`).
    ///
    /// 30 seconds by default. With the default retry limit the delays (0.5 s, 1 s) never reach it; it keeps a raised
    /// ``retryLimit`` from growing waits without bound.
    public var maxDelay: Duration?
    /// How backoff delays are spread: a `RetryJitter`, the choice `RetryPlan` uses too. `.full` by default.
    ///
    /// Alamofire waits exactly `scale·baseⁿ`, so every client that failed at the same moment (a server restart, a
    /// network blip) retries at the same moment again. Full jitter spreads those retries over the whole interval; in
    /// the published contention simulation it needed the fewest calls and finished close to the fastest of the
    /// strategies compared (equal jitter kept half the delay fixed and was slower; decorrelated jitter used more
    /// calls). The cap applies before the jitter, so at the cap delays stay spread over `[0, cap)` instead of piling
    /// up at exactly the cap.
    public var jitter: RetryJitter
    /// How the retries after a `Retry-After` hint are spread: never before the hinted time, never past
    /// ``maxRetryAfter``. ``defaultRetryAfterSpread`` (up to 10% later) by default.
    public var retryAfterSpread: RetryAfterSpread
    /// Whether a request with a method outside ``retryableHTTPMethods`` is retried when it carries a non-empty
    /// `Idempotency-Key` header, the IETF signal that the server deduplicates repeats. `true` by default.
    public var retryRequestsWithIdempotencyKey: Bool
    /// Whether requests are retried whatever their method. Set this only if every endpoint the policy is used with
    /// can safely receive the same request twice.
    public var retryNonIdempotentRequests: Bool

    // MARK: Limits enforced by RetryKit

    /// How long one attempt may take, enforced by RetryKit; `nil` (no limit beyond the request's own
    /// `timeoutInterval`) by default.
    ///
    /// When it expires the attempt's request is cancelled and the attempt fails with `RetryError`
    /// (`RetryError.Reason.attemptTimedOut`), which the policy decides as `URLError.timedOut`. Use this rather than
    /// `URLRequest.timeoutInterval` for short limits: URLSession on Linux truncates `timeoutInterval` to whole seconds
    /// (0.5 fails at once). Must be positive; longer than `BackoffStrategy.saturationLimit` (about 31.7 years)
    /// counts as that limit.
    public var attemptTimeout: Duration?
    /// The time allowed for all attempts and waits together, measured from the start of the request; `nil` (no limit)
    /// by default.
    ///
    /// A retry whose wait would end after it (a long `Retry-After`, say) is not started: the caller gets the last
    /// response or error at once. An attempt still running when it expires is cancelled. Must not be negative; longer
    /// than `BackoffStrategy.saturationLimit` (about 31.7 years) counts as that limit.
    public var totalTimeout: Duration?
    /// A budget shared with other policies and retriers that must pay for every retry; `nil` (no budget) by default.
    ///
    /// Share one `RetryBudget` between every policy that calls the same service, so that an outage does not multiply
    /// its load by the retry limit. A refused retry gives up at once with the last response or error.
    public var budget: RetryBudget?

    var decisions: [Decision] = []
    /// The authenticator given to ``authenticated(by:)``, its credential's type erased; `nil` for none.
    var authentication: HTTPAuthentication?

    /// A policy with Alamofire's parameter names and defaults, plus RetryKit's defaults for the rest.
    ///
    /// Every parameter defaults to the matching `default…` constant, as in Alamofire. The other properties start with
    /// the defaults their documentation gives: ``retryNonIdempotentRequests`` `false`,
    /// ``retryRequestsWithIdempotencyKey`` `true`, and ``attemptTimeout``, ``totalTimeout`` and ``budget`` `nil`.
    public init(
        retryLimit: UInt = defaultRetryLimit,
        exponentialBackoffBase: UInt = defaultExponentialBackoffBase,
        exponentialBackoffScale: Double = defaultExponentialBackoffScale,
        retryableHTTPMethods: Set<HTTPRequestMethod> = defaultRetryableHTTPMethods,
        retryableHTTPStatusCodes: Set<Int> = defaultRetryableHTTPStatusCodes,
        retryableTransportFailures: Set<TransportFailure> = defaultRetryableTransportFailures
    ) {
        self.retryLimit = retryLimit
        self.exponentialBackoffBase = exponentialBackoffBase
        self.exponentialBackoffScale = exponentialBackoffScale
        self.retryableHTTPMethods = retryableHTTPMethods
        self.retryableHTTPStatusCodes = retryableHTTPStatusCodes
        self.retryableTransportFailures = retryableTransportFailures
        self.retryAfterStatusCodes = Self.defaultRetryAfterStatusCodes
        self.maxRetryAfter = Self.defaultMaxRetryAfter
        self.maxDelay = Self.defaultMaxDelay
        self.jitter = Self.defaultJitter
        self.retryAfterSpread = Self.defaultRetryAfterSpread
        self.retryRequestsWithIdempotencyKey = true
        self.retryNonIdempotentRequests = false
        self.attemptTimeout = nil
        self.totalTimeout = nil
        self.budget = nil
    }

    /// Alamofire's `RetryPolicy` exactly: the same decisions and the same delays, `scale·baseⁿ` seconds with no
    /// jitter and no cap (0.5 s, 1 s, 2 s, … with the defaults), no `Retry-After`, and no retry of non-idempotent
    /// methods because of an `Idempotency-Key`.
    ///
    /// For migrating teams whose tests or servers depend on Alamofire's timing. Cancellation is still never retried,
    /// which Alamofire's defaults also do not do.
    public static var alamofireCompatible: HTTPRetryPolicy {
        var policy = HTTPRetryPolicy()
        policy.jitter = .none
        policy.maxDelay = nil
        policy.retryAfterStatusCodes = []
        policy.retryAfterSpread = .none
        policy.retryRequestsWithIdempotencyKey = false
        return policy
    }

    /// The number of attempts, first one included, that ``retryLimit`` allows: `retryLimit + 1`, saturating at
    /// `Int.max`. Give this to the runner.
    public var maxAttempts: Int {
        retryLimit >= UInt(Int.max) ? Int.max : Int(retryLimit) + 1
    }

    /// The limits and budget of a retrier running this policy. A transport's own timeout (what `classify` calls
    /// ``TransportFailure/timedOut``: `URLError.timedOut` by default) costs the budget's `timeoutRetryCost`, like
    /// RetryKit's attempt timeout.
    func configuration(
        classify: @escaping @Sendable (any Error) -> TransportFailure? = { TransportFailure(classifying: $0) }
    ) -> RetryConfiguration {
        var configuration = RetryConfiguration(
            maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout, budget: budget,
            isTimeout: { !($0 is HTTPStatusError) && classify($0) == .timedOut })
        configuration.recovery = authentication?.recovery
        return configuration
    }

    /// The backoff the policy uses for retryable statuses and errors:
    /// `.exponential(scale: exponentialBackoffScale, base: exponentialBackoffBase)`, then `.max(maxDelay)` if set,
    /// then the ``jitter``.
    ///
    /// With the defaults, the wait before retry `n` (0-based) is uniform in `[0, min(0.5·2ⁿ, 30) s)`.
    public var backoff: BackoffStrategy<ContinuousClock> {
        let curve = BackoffStrategy<ContinuousClock>.exponential(
            scale: exponentialBackoffScale, base: Double(exponentialBackoffBase))
        let capped = maxDelay.map { curve.max($0) } ?? curve
        return jitter.applied(
            to: capped, first: curve.delay(forRetry: 0), cap: maxDelay, using: SystemRandomNumberGenerator())
    }
}

// MARK: - Defaults

extension HTTPRetryPolicy {
    /// Retries after the first attempt: 2, as in Alamofire (3 attempts in all).
    public static let defaultRetryLimit: UInt = 2

    /// The backoff's growth factor: 2, as in Alamofire.
    public static let defaultExponentialBackoffBase: UInt = 2

    /// The first backoff delay: 0.5 s, as in Alamofire.
    public static let defaultExponentialBackoffScale: Double = 0.5

    /// The methods retried by default, as in Alamofire: the idempotent methods of RFC 9110 §9.2.2.
    public static let defaultRetryableHTTPMethods: Set<HTTPRequestMethod> = [
        .delete,  // idempotent by definition, though a server may not implement it that way
        .get,  // safe: reading twice changes nothing
        .head,  // safe: like GET without a body
        .options,  // safe: asks what the server supports
        .put,  // idempotent: the second PUT stores the same representation again
        .trace,  // safe: echoes the request back
    ]

    /// The status codes retried with the backoff by default, as in Alamofire.
    public static let defaultRetryableHTTPStatusCodes: Set<Int> = [
        408,  // Request Timeout: the server gave up waiting for the request; sending it again may be quicker
        500,  // Internal Server Error: often a passing fault in the server
        502,  // Bad Gateway: the upstream behind a proxy failed; it may recover
        503,  // Service Unavailable: overloaded or in maintenance, by definition temporary
        504,  // Gateway Timeout: the upstream was too slow this time
    ]

    /// The status codes whose `Retry-After` header is honoured by default: 429 Too Many Requests (RFC 6585) and
    /// 503 Service Unavailable (RFC 9110 §15.6.4).
    static let defaultRetryAfterStatusCodes: Set<Int> = [429, 503]

    /// The longest `Retry-After` honoured by default: 60 seconds. A server asking for longer is usually in a state a
    /// user should hear about now rather than after a silent minute.
    static let defaultMaxRetryAfter: Duration = .seconds(60)

    /// The default cap on a backoff delay: 30 seconds, applied before jitter. With the default retry limit the
    /// delays (0.5 s, 1 s) never reach it; it keeps a raised ``retryLimit`` from growing waits without bound.
    static let defaultMaxDelay: Duration? = .seconds(30)

    /// The default jitter: `.full` (see ``jitter``).
    static let defaultJitter: RetryJitter = .full

    /// The name of the header that marks a non-idempotent request as safe to repeat: `Idempotency-Key`.
    static let idempotencyKeyHeader = "Idempotency-Key"

    /// The transport failures retried by default: the 18 `URLError` codes Alamofire's `RetryPolicy` enables, by name.
    /// The codes it leaves out are listed as comments with the reason.
    public static let defaultRetryableTransportFailures: Set<TransportFailure> = [
        // Retried: conditions that can clear up while the app keeps running.
        .backgroundSessionInUseByAnotherProcess,  // the other process may release the background session
        .backgroundSessionWasDisconnected,  // the app was suspended mid-transfer; once it runs again it can resume
        .badServerResponse,  // a garbled or missing reply; the next one may be well formed
        .callIsActive,  // a phone call blocks data on this network; the call will end
        .cannotConnectToHost,  // the host refused or was unreachable; it may be restarting
        .cannotFindHost,  // name resolution failed; DNS often recovers quickly
        .cannotLoadFromNetwork,  // a cache-only load missed; the cache may be filled meanwhile
        .dataNotAllowed,  // cellular data is switched off; the device may join Wi-Fi
        .dnsLookupFailed,  // the DNS lookup failed; usually a transient failure
        .downloadDecodingFailedMidStream,  // the encoded download broke off; the server may send it intact next time
        .downloadDecodingFailedToComplete,  // the download could not be decoded at the end; same as above
        .internationalRoamingOff,  // roaming data is off; the device may join Wi-Fi
        .networkConnectionLost,  // the connection dropped mid-request; a fresh connection may hold
        .notConnectedToInternet,  // offline right now; connectivity may come back
        .secureConnectionFailed,  // the TLS handshake failed for an unstated reason; may be transient
        .serverCertificateHasBadDate,  // the certificate's dates are off; it may be renewed, or the clock corrected
        .serverCertificateNotYetValid,  // the certificate becomes valid soon, or the device clock gets corrected
        .timedOut,  // no answer in time, cause unknown; the next attempt may be faster

        // Not retried: repeating the same request cannot change the outcome.
        // .appTransportSecurityRequiresSecureConnection,  // ATS rules are fixed when the app is built
        // .backgroundSessionRequiresSharedContainer,  // a configuration mistake; it does not change at run time
        // .badURL,  // the URL itself is malformed
        // .cancelled,  // the client cancelled; never retried, even if added here
        // .cannotCloseFile,  // a local file-system failure; the network is not the problem
        // .cannotCreateFile,  // a local file-system failure
        // .cannotDecodeContentData,  // the content encoding is unknown; the server will send the same one again
        // .cannotDecodeRawData,  // the content cannot be decoded; the server will send the same bytes again
        // .cannotMoveFile,  // a local file-system failure
        // .cannotOpenFile,  // a local file-system failure
        // .cannotParseResponse,  // the reply cannot be parsed; the same server will likely reply the same way
        // .cannotRemoveFile,  // a local file-system failure
        // .cannotWriteToFile,  // a local file-system failure
        // .clientCertificateRejected,  // the same certificate will be rejected again
        // .clientCertificateRequired,  // no certificate will appear by retrying
        // .dataLengthExceedsMaximum,  // the resource stays too large
        // .fileDoesNotExist,  // the file stays missing
        // .fileIsDirectory,  // a directory does not turn into a file
        // .httpTooManyRedirects,  // a redirect loop does not fix itself within seconds
        // .noPermissionsToReadFile,  // permissions are not granted by retrying
        // .redirectToNonExistentLocation,  // the server's redirect has no target and will not grow one
        // .requestBodyStreamExhausted,  // the body stream is used up; a retry needs a new stream
        // .resourceUnavailable,  // the resource is not expected back within the retry window
        // .serverCertificateHasUnknownRoot,  // the trust chain does not change by retrying
        // .serverCertificateUntrusted,  // the trust decision does not change by retrying
        // .unknown,  // an error nobody can interpret is not evidence that retrying helps
        // .unsupportedURL,  // the scheme or URL form stays unsupported
        // .userAuthenticationRequired,  // credentials do not appear by retrying
        // .userCancelledAuthentication,  // the user chose not to authenticate
        // .zeroByteResource,  // an empty resource stays empty
    ]
}

// MARK: - Composition

extension HTTPRetryPolicy {
    /// A copy that also retries `statusCodes` and `transportFailures` with the backoff, and requests with `methods`.
    ///
    /// ```swift
    /// let ordersPolicy = policy.adding(statusCodes: [409])   // also retry 409 Conflict for this endpoint
    /// let lenient = policy.adding(transportFailures: [TransportFailure(.cannotParseResponse), "connectionReset"])
    /// ```
    ///
    /// - Parameters:
    ///   - statusCodes: Added to ``retryableHTTPStatusCodes``.
    ///   - transportFailures: Added to ``retryableTransportFailures`` (``TransportFailure/cancelled`` is still never
    ///     retried).
    ///   - methods: Added to ``retryableHTTPMethods``.
    public func adding(
        statusCodes: Set<Int> = [], transportFailures: Set<TransportFailure> = [], methods: Set<HTTPRequestMethod> = []
    ) -> HTTPRetryPolicy {
        var copy = self
        copy.retryableHTTPStatusCodes.formUnion(statusCodes)
        copy.retryableTransportFailures.formUnion(transportFailures)
        copy.retryableHTTPMethods.formUnion(methods)
        return copy
    }

    /// A copy whose decisions pass through `decision` last, after any added before.
    ///
    /// `decision` gets the context of the failed attempt and the strategy the policy proposes, and returns the strategy
    /// to use. It is not asked about cancellations, which are never retried.
    ///
    /// ```swift
    /// let policy = HTTPRetryPolicy().deciding { context, proposed in
    ///     // Our upload endpoint answers 423 while a previous upload is being processed.
    ///     if context.statusCode == 423, context.url?.path == "/upload" { return .retryAfter(.seconds(2)) }
    ///     return proposed
    /// }
    /// ```
    public func deciding(
        _ decision:
            @escaping @Sendable (_ context: HTTPRetryContext, _ proposed: RetryStrategy<ContinuousClock>)
            -> RetryStrategy<ContinuousClock>
    ) -> HTTPRetryPolicy {
        var copy = self
        copy.decisions.append(decision)
        return copy
    }
}

// MARK: - Decisions

extension HTTPRetryPolicy {
    /// The strategy for a failed attempt described by `context`: the policy's one decision, from plain values any
    /// HTTP client can supply.
    ///
    /// Pure: the result depends only on `context` and the policy (and on custom decisions, if they are pure).
    ///
    /// ```swift
    /// let context = HTTPRetryContext(
    ///     method: .get, statusCode: 503, responseHeader: { $0 == "Retry-After" ? "5" : nil })
    /// policy.decision(for: context)   // .retryAfter(.seconds(5))
    /// ```
    public func decision(for context: HTTPRetryContext) -> RetryStrategy<ContinuousClock> {
        if context.isCancellation { return .stop(because: .requestCancelled) }
        var proposed = builtInDecision(context)
        for decision in decisions {
            proposed = decision(context, proposed)
        }
        return proposed
    }

    /// Whether a response with the status in `context` fails its attempt, so that the retrier sees it as an
    /// ``HTTPStatusError`` and the policy decides whether to retry it (see "Which responses fail their attempt").
    package func treatsAsFailure(_ context: HTTPRetryContext) -> Bool {
        guard let status = context.statusCode else { return true }
        if let authentication, authentication.failureStatusCodes.contains(status) { return true }
        if retryableHTTPStatusCodes.contains(status) || retryAfterStatusCodes.contains(status) { return true }
        if case .stop = decision(for: context) { return false }
        return true
    }

    /// The policy as a RetryKit strategy closure for one request of any HTTP client: give it to a runner together
    /// with ``maxAttempts``.
    ///
    /// A failing response must reach the closure as an ``HTTPStatusError``; any other error is classified with
    /// `classify`.
    ///
    /// - Parameters:
    ///   - method: The request's method.
    ///   - url: The request's URL, for custom decisions; `nil` by default.
    ///   - requestHeader: Looks a request header up by name (case-insensitively); for the `Idempotency-Key`.
    ///   - classify: The transport failure an error stands for; ``TransportFailure/init(classifying:)`` by default.
    ///   - now: The clock for `Retry-After` dates; the system time by default.
    public func strategy(
        method: HTTPRequestMethod, url: URL? = nil,
        requestHeader: @escaping @Sendable (String) -> String? = { _ in nil },
        classify: @escaping @Sendable (any Error) -> TransportFailure? = { TransportFailure(classifying: $0) },
        now: @escaping @Sendable () -> Date = { Date() }
    ) -> @Sendable (any Error) -> RetryStrategy<ContinuousClock> {
        let policy = self
        return { error in
            let decision = policy.decision(
                for: HTTPRetryContext(
                    method: method, url: url, requestHeader: requestHeader, error: error, classify: classify,
                    now: now()))
            guard case .retryAfter(let hint) = decision, policy.retryAfterSpread != .none else { return decision }
            var generator = SystemRandomNumberGenerator()
            let cap = Swift.max(policy.maxRetryAfter, .zero)
            return .retryAfter(policy.retryAfterSpread.delay(after: hint, cap: cap, using: &generator))
        }
    }

    private func builtInDecision(_ context: HTTPRetryContext) -> RetryStrategy<ContinuousClock> {
        guard mayRepeat(context) else { return .stop(because: .methodNotIdempotent(context.method)) }
        if let status = context.statusCode {
            if retryAfterStatusCodes.contains(status), let hint = context.retryAfter {
                let cap = Swift.max(maxRetryAfter, .zero)
                return hint <= cap ? .retryAfter(hint) : .stop(because: .retryAfterBeyondCap(hint, cap: cap))
            }
            return retryableHTTPStatusCodes.contains(status)
                ? .backoff(backoff) : .stop(because: .statusNotRetryable(status))
        }
        guard let failure = context.transportFailure else { return .stop(because: .notATransportFailure) }
        if failure != .cancelled, retryableTransportFailures.contains(failure) { return .backoff(backoff) }
        return .stop(because: .transportFailureNotRetryable(failure))
    }

    /// Whether repeating the request is allowed: an allowed method, an idempotency key, or the caller's opt-in.
    private func mayRepeat(_ context: HTTPRetryContext) -> Bool {
        if retryableHTTPMethods.contains(context.method) || retryNonIdempotentRequests { return true }
        guard retryRequestsWithIdempotencyKey, let key = context.requestHeader(Self.idempotencyKeyHeader) else {
            return false
        }
        return !key.trimmingCharacters(in: .whitespaces).isEmpty
    }
}

/// Everything the policy knows about one failed HTTP attempt: plain values that any HTTP client can supply. Custom
/// decisions (``HTTPRetryPolicy/deciding(_:)``) receive it too.
public struct HTTPRetryContext: Sendable {
    /// The request's method.
    public let method: HTTPRequestMethod
    /// The request's URL, if the client gave it.
    public let url: URL?
    /// The response's status code, if the attempt got a response.
    public let statusCode: Int?
    /// The transport failure, if the attempt failed below HTTP.
    public let transportFailure: TransportFailure?
    /// The error the attempt failed with, if it failed with one (an ``HTTPStatusError`` for a failing response).
    public let error: (any Error)?
    /// The time the decision is made at, for `Retry-After` dates.
    public let now: Date

    private let requestHeaderLookup: @Sendable (String) -> String?
    private let responseHeaderLookup: @Sendable (String) -> String?

    /// A context from plain values.
    ///
    /// - Parameters:
    ///   - method: The request's method.
    ///   - url: The request's URL; `nil` by default.
    ///   - requestHeader: Looks a request header up by name, case-insensitively; none by default.
    ///   - statusCode: The response's status, if there is a response.
    ///   - responseHeader: Looks a response header up by name, case-insensitively; none by default.
    ///   - transportFailure: The transport failure, if the attempt got no response.
    ///   - error: The error the attempt failed with, for custom decisions.
    ///   - now: The current time; the system time by default.
    public init(
        method: HTTPRequestMethod, url: URL? = nil,
        requestHeader: @escaping @Sendable (String) -> String? = { _ in nil },
        statusCode: Int? = nil,
        responseHeader: @escaping @Sendable (String) -> String? = { _ in nil },
        transportFailure: TransportFailure? = nil, error: (any Error)? = nil, now: Date = Date()
    ) {
        self.method = method
        self.url = url
        self.requestHeaderLookup = requestHeader
        self.statusCode = statusCode
        self.responseHeaderLookup = responseHeader
        self.transportFailure = transportFailure
        self.error = error
        self.now = now
    }

    /// The context of an attempt that failed with `error`: an ``HTTPStatusError`` gives the status and the response
    /// headers, any other error its transport failure (`classify`).
    init(
        method: HTTPRequestMethod, url: URL?, requestHeader: @escaping @Sendable (String) -> String?, error: any Error,
        classify: (any Error) -> TransportFailure?, now: Date
    ) {
        if let status = error as? HTTPStatusError {
            self.init(
                method: method, url: url, requestHeader: requestHeader, statusCode: status.statusCode,
                responseHeader: status.header, error: error, now: now)
        } else {
            self.init(
                method: method, url: url, requestHeader: requestHeader, transportFailure: classify(error),
                error: error, now: now)
        }
    }

    /// The value of the request header `name`, if the request has it.
    public func requestHeader(_ name: String) -> String? { requestHeaderLookup(name) }

    /// The value of the response header `name`, if there is a response with it.
    public func responseHeader(_ name: String) -> String? { statusCode == nil ? nil : responseHeaderLookup(name) }

    /// The delay the response's `Retry-After` header asks for (see ``RetryAfter``), whatever the status, before the
    /// policy's cap; `nil` without a response or a valid header.
    public var retryAfter: Duration? {
        responseHeader("Retry-After").flatMap { RetryAfter.delay($0, now: now) }
    }

    /// Whether the attempt was cancelled (``TransportFailure/cancelled``, `CancellationError`). Never retried.
    package var isCancellation: Bool {
        transportFailure == .cancelled || error is CancellationError
    }
}

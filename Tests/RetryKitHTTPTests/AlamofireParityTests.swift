import Foundation
import RetryKitHTTP
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Every URL error code in Alamofire's `RetryPolicy` documentation (seeds/002), typed out independently of
/// `HTTPRetryPolicy.defaultRetryableTransportFailures`, with whether Alamofire retries it.
///
/// The seed enables 18 codes and disables 30.
private let seedURLErrorCodes: [(code: URLError.Code, retried: Bool)] = [
    (.appTransportSecurityRequiresSecureConnection, false),
    (.backgroundSessionInUseByAnotherProcess, true),
    (.backgroundSessionRequiresSharedContainer, false),
    (.backgroundSessionWasDisconnected, true),
    (.badServerResponse, true),
    (.badURL, false),
    (.callIsActive, true),
    (.cancelled, false),
    (.cannotCloseFile, false),
    (.cannotConnectToHost, true),
    (.cannotCreateFile, false),
    (.cannotDecodeContentData, false),
    (.cannotDecodeRawData, false),
    (.cannotFindHost, true),
    (.cannotLoadFromNetwork, true),
    (.cannotMoveFile, false),
    (.cannotOpenFile, false),
    (.cannotParseResponse, false),
    (.cannotRemoveFile, false),
    (.cannotWriteToFile, false),
    (.clientCertificateRejected, false),
    (.clientCertificateRequired, false),
    (.dataLengthExceedsMaximum, false),
    (.dataNotAllowed, true),
    (.dnsLookupFailed, true),
    (.downloadDecodingFailedMidStream, true),
    (.downloadDecodingFailedToComplete, true),
    (.fileDoesNotExist, false),
    (.fileIsDirectory, false),
    (.httpTooManyRedirects, false),
    (.internationalRoamingOff, true),
    (.networkConnectionLost, true),
    (.noPermissionsToReadFile, false),
    (.notConnectedToInternet, true),
    (.redirectToNonExistentLocation, false),
    (.requestBodyStreamExhausted, false),
    (.resourceUnavailable, false),
    (.secureConnectionFailed, true),
    (.serverCertificateHasBadDate, true),
    (.serverCertificateHasUnknownRoot, false),
    (.serverCertificateNotYetValid, true),
    (.serverCertificateUntrusted, false),
    (.timedOut, true),
    (.unknown, false),
    (.unsupportedURL, false),
    (.userAuthenticationRequired, false),
    (.userCancelledAuthentication, false),
    (.zeroByteResource, false),
]

private let methods = [
    "GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE", "POST", "PATCH", "CONNECT", "QUERY", "PROPFIND",
]
/// The seed's five retryable status codes and a spread of others, including 429 and 409.
private let statusCodes = [
    200, 201, 204, 301, 304, 400, 401, 403, 404, 405, 408, 409, 410, 425, 429, 500, 501, 502, 503, 504, 505, 599,
]

/// Alamofire's decision, written from its documented behaviour: the method must be retryable, then a retryable status
/// or a retryable URL error code retries (the retry limit is checked separately, by counting attempts).
private func alamofireRetries(method: String, status: Int?, code: URLError.Code?) -> Bool {
    let retryableMethods: Set<String> = ["DELETE", "GET", "HEAD", "OPTIONS", "PUT", "TRACE"]
    let retryableStatuses: Set<Int> = [408, 500, 502, 503, 504]
    let retryableCodes = Set(seedURLErrorCodes.filter(\.retried).map(\.code))
    guard retryableMethods.contains(method) else { return false }
    if let status, retryableStatuses.contains(status) { return true }
    if let code { return retryableCodes.contains(code) }
    return false
}

@Suite struct AlamofireParityTests {
    private let now = Date(timeIntervalSince1970: 1_700_000_000)

    @Test func defaultsAreAlamofires() {
        #expect(HTTPRetryPolicy.defaultRetryLimit == 2)
        #expect(HTTPRetryPolicy.defaultExponentialBackoffBase == 2)
        #expect(HTTPRetryPolicy.defaultExponentialBackoffScale == 0.5)
        #expect(HTTPRetryPolicy.defaultRetryableHTTPMethods == [.delete, .get, .head, .options, .put, .trace])
        #expect(HTTPRetryPolicy.defaultRetryableHTTPStatusCodes == [408, 500, 502, 503, 504])
        #expect(seedURLErrorCodes.count == 48)
        #expect(Set(seedURLErrorCodes.map(\.code)).count == 48)
        // The 18 codes Alamofire retries, as transport failures: each maps to a failure of its own name.
        let retried = seedURLErrorCodes.filter(\.retried).map(\.code)
        #expect(HTTPRetryPolicy.defaultRetryableTransportFailures == Set(retried.map { TransportFailure($0) }))
        #expect(HTTPRetryPolicy.defaultRetryableTransportFailures.count == 18)
        #expect(Set(seedURLErrorCodes.map { TransportFailure($0.code) }).count == 48)
        let policy = HTTPRetryPolicy()
        #expect(policy.retryLimit == 2 && policy.maxAttempts == 3)
    }

    /// Every method × status code: the default policy decides as Alamofire does.
    ///
    /// Exceptions this table leaves out on purpose, tested below: a request with an `Idempotency-Key` (retried by
    /// RetryKit whatever its method) and 429/503 with a `Retry-After` header (RetryKit waits as asked). No request
    /// here has either.
    @Test(arguments: methods)
    func statusDecisionsMatchAlamofire(method: String) {
        for policy in [HTTPRetryPolicy(), .alamofireCompatible] {
            for status in statusCodes {
                let decision = policy.decision(for: makeRequest(method), response: makeResponse(status), now: now)
                let retries = alamofireRetries(method: method, status: status, code: nil)
                let expected: StrategyKind = retries ? .backoff : .stop
                #expect(StrategyKind(decision) == expected, "\(method) \(status)")
                // The same response wrapped as the error the HTTP layer hands to a runner decides the same way.
                let wrapped = policy.decision(
                    for: makeRequest(method), error: HTTPStatusError(response: makeResponse(status)), now: now)
                #expect(StrategyKind(wrapped) == expected, "\(method) \(status) as HTTPStatusError")
            }
        }
    }

    /// Every method × every URL error code of the seed, enabled or disabled.
    @Test(arguments: methods)
    func urlErrorDecisionsMatchAlamofire(method: String) {
        for policy in [HTTPRetryPolicy(), .alamofireCompatible] {
            for (code, _) in seedURLErrorCodes {
                let retries = alamofireRetries(method: method, status: nil, code: code)
                let expected: StrategyKind = retries ? .backoff : .stop
                let decision = policy.decision(for: makeRequest(method), error: URLError(code), now: now)
                #expect(StrategyKind(decision) == expected, "\(method) \(code.rawValue)")
                // The same code as a bare NSError, as some Foundation paths deliver it.
                let nsError = NSError(domain: NSURLErrorDomain, code: code.rawValue)
                let bridged = policy.decision(for: makeRequest(method), error: nsError, now: now)
                #expect(StrategyKind(bridged) == expected, "\(method) NSError \(code.rawValue)")
            }
        }
    }

    /// The Alamofire preset decides as Alamofire even where the default policy deliberately differs.
    @Test(arguments: methods)
    func presetIgnoresIdempotencyKeysAndRetryAfter(method: String) {
        let policy = HTTPRetryPolicy.alamofireCompatible
        let request = makeRequest(method, headers: ["Idempotency-Key": "k-1"])
        for status in statusCodes {
            let response = makeResponse(status, headers: ["Retry-After": "3"])
            let expected: StrategyKind = alamofireRetries(method: method, status: status, code: nil) ? .backoff : .stop
            #expect(StrategyKind(policy.decision(for: request, response: response, now: now)) == expected)
        }
    }

    /// Alamofire waits `scale·baseⁿ` exactly: 0.5 s, 1 s, 2 s, … with no cap and no jitter.
    @Test func presetDelaysAreExact() throws {
        let policy = HTTPRetryPolicy.alamofireCompatible
        let decision = policy.decision(for: makeRequest(), error: URLError(.timedOut), now: now)
        let backoff = try #require(backoffStrategy(decision))
        let delays = (0...10).map { backoff.delay(forRetry: $0) }
        let expected: [Duration] = (0...10).map { .milliseconds(500 * (1 << $0)) }
        #expect(delays == expected)
        #expect(delays.prefix(3) == [.milliseconds(500), .seconds(1), .seconds(2)])

        var custom = HTTPRetryPolicy.alamofireCompatible
        custom.exponentialBackoffBase = 3
        custom.exponentialBackoffScale = 0.2
        #expect(
            (0...3).map { custom.backoff.delay(forRetry: $0) } == [
                .milliseconds(200), .milliseconds(600), .milliseconds(1_800), .milliseconds(5_400),
            ])
    }

    /// `retryLimit` 2 means three attempts: driven through RetryKit's own state machine, a request that keeps failing
    /// with 503 is retried twice, after 0.5 s and 1 s, and then finishes with the last response.
    @Test func retryLimitBecomesMaxAttemptsInTheCore() throws {
        let policy = HTTPRetryPolicy.alamofireCompatible
        let strategy = policy.strategy(for: makeRequest(), now: { Date(timeIntervalSince1970: 0) })
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: policy.maxAttempts))
        var clock = Duration.zero
        var action = machine.start(at: clock)
        var waits: [Duration] = []
        var attempts = 0
        loop: while true {
            switch action {
            case .run(let attempt, _):
                attempts = attempt.number
                let failure = HTTPStatusError(response: makeResponse(503), data: Data("busy \(attempt.number)".utf8))
                action = machine.attemptFailed(attempt.number, error: failure, at: clock)
            case .consultStrategy(let context, let error):
                action = machine.decide(context.resolve(strategy(error)), at: clock)
            case .withdraw, .awaitCondition, .interrupt, .repeatAfter, .recover, .acquire:
                Issue.record("not an action of this retrier: \(action)")
                break loop
            case .retry(let delay, _, _):
                waits.append(delay)
                clock += delay
                action = machine.waitElapsed(at: clock)
            case .finish:
                let termination = try #require(machine.termination)
                let last = try #require(termination.error as? HTTPStatusError)
                #expect(last.statusCode == 503)
                #expect(last.data == Data("busy 3".utf8))
                #expect(termination.summary.reason == .exhausted)
                break loop
            case .none:
                Issue.record("stale event")
                break loop
            }
        }
        #expect(attempts == 3)
        #expect(waits == [.milliseconds(500), .seconds(1)])
    }
}

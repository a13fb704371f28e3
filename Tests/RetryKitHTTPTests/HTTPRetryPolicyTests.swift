import Foundation
import RetryKitHTTP
import RetryKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What `HTTPRetryPolicy` does beyond Alamofire: Retry-After, idempotency, cancellation, jitter and cap, composition.
@Suite struct HTTPRetryPolicyTests {
    private let now = Date(timeIntervalSince1970: 784_111_777 - 100)  // 100 s before Sun, 06 Nov 1994 08:49:37 GMT
    private let policy = HTTPRetryPolicy()

    private func decide(
        _ policy: HTTPRetryPolicy? = nil, method: String = "GET", requestHeaders: [String: String] = [:],
        status: Int, headers: [String: String] = [:]
    ) -> StrategyKind {
        let request = makeRequest(method, headers: requestHeaders)
        let response = makeResponse(status, headers: headers)
        return StrategyKind((policy ?? self.policy).decision(for: request, response: response, now: now))
    }

    private func decide(_ policy: HTTPRetryPolicy? = nil, method: String = "GET", error: any Error) -> StrategyKind {
        StrategyKind((policy ?? self.policy).decision(for: makeRequest(method), error: error, now: now))
    }

    // MARK: Retry-After

    @Test func retryAfterIsHonouredFor429And503InBothForms() {
        #expect(decide(status: 503, headers: ["Retry-After": "5"]) == .retryAfter(.seconds(5)))
        #expect(decide(status: 429, headers: ["Retry-After": "1"]) == .retryAfter(.seconds(1)))
        #expect(decide(status: 429, headers: ["Retry-After": "0"]) == .retryAfter(.zero))
        // `now` is 08:47:57 GMT.
        let imf = ["Retry-After": "Sun, 06 Nov 1994 08:48:27 GMT"]
        let rfc850 = ["Retry-After": "Sunday, 06-Nov-94 08:48:37 GMT"]
        let asctime = ["Retry-After": "Sun Nov  6 08:48:47 1994"]
        #expect(decide(status: 429, headers: imf) == .retryAfter(.seconds(30)))
        #expect(decide(status: 503, headers: imf) == .retryAfter(.seconds(30)))
        #expect(decide(status: 503, headers: rfc850) == .retryAfter(.seconds(40)))
        #expect(decide(status: 429, headers: asctime) == .retryAfter(.seconds(50)))
    }

    @Test func hintsAtTheCapAreHonouredAndBeyondItGiveUpAtOnce() {
        #expect(decide(status: 503, headers: ["Retry-After": "60"]) == .retryAfter(.seconds(60)))
        #expect(decide(status: 503, headers: ["Retry-After": "61"]) == .stop)
        #expect(decide(status: 429, headers: ["Retry-After": "99999999999999999999999"]) == .stop)
        // 100 s away as a date: beyond the 60 s default.
        #expect(decide(status: 503, headers: ["Retry-After": "Sun, 06 Nov 1994 08:49:37 GMT"]) == .stop)
        #expect(decide(status: 503, headers: ["Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"]) == .stop)

        var patient = policy
        patient.maxRetryAfter = .seconds(120)
        let hundredSeconds = ["Retry-After": "Sun, 06 Nov 1994 08:49:37 GMT"]
        #expect(decide(patient, status: 503, headers: hundredSeconds) == .retryAfter(.seconds(100)))

        var impatient = policy
        impatient.maxRetryAfter = .seconds(-5)  // counts as zero
        #expect(decide(impatient, status: 503, headers: ["Retry-After": "0"]) == .retryAfter(.zero))
        #expect(decide(impatient, status: 503, headers: ["Retry-After": "1"]) == .stop)
    }

    @Test func pastDatesRetryAtOnce() {
        #expect(decide(status: 503, headers: ["Retry-After": "Thu, 01 Jan 1970 00:00:00 GMT"]) == .retryAfter(.zero))
        #expect(decide(status: 429, headers: ["Retry-After": "Sun, 06 Nov 1994 08:00:00 GMT"]) == .retryAfter(.zero))
    }

    @Test func unusableHintsFallBackToTheStatusRules() {
        for value in ["soon", "-1", "1.5", "", "Sun, 31 Feb 1994 08:49:37 GMT"] {
            // 503 is retryable anyway: the backoff replaces the unusable hint.
            #expect(decide(status: 503, headers: ["Retry-After": value]) == .backoff, "\(value)")
            // 429 is not in Alamofire's list: without a usable hint it is not retried.
            #expect(decide(status: 429, headers: ["Retry-After": value]) == .stop, "\(value)")
        }
        #expect(decide(status: 429) == .stop)
    }

    @Test func retryAfterOnOtherStatusesIsIgnored() {
        #expect(decide(status: 500, headers: ["Retry-After": "5"]) == .backoff)
        #expect(decide(status: 404, headers: ["Retry-After": "5"]) == .stop)
        #expect(decide(status: 301, headers: ["Retry-After": "5"]) == .stop)

        var withTeapot = policy
        withTeapot.retryAfterStatusCodes.insert(418)
        #expect(decide(withTeapot, status: 418, headers: ["Retry-After": "2"]) == .retryAfter(.seconds(2)))
        #expect(decide(withTeapot, status: 418) == .stop)
    }

    @Test func hintsUseTheInjectedClock() {
        let request = makeRequest()
        let response = makeResponse(503, headers: ["Retry-After": "Sun, 06 Nov 1994 08:49:37 GMT"])
        var exact = policy
        exact.retryAfterSpread = .none
        let strategy = exact.strategy(for: request, now: { Date(timeIntervalSince1970: 784_111_777 - 12) })
        #expect(StrategyKind(strategy(HTTPStatusError(response: response))) == .retryAfter(.seconds(12)))
    }

    // MARK: Spreading retries after Retry-After (14.7)

    @Test func theDefaultSpreadWaitsUpToTenPercentLongerThanTheHint() {
        #expect(HTTPRetryPolicy.defaultRetryAfterSpread == .proportional(0.1))
        #expect(policy.retryAfterSpread == .proportional(0.1))
        #expect(HTTPRetryPolicy.alamofireCompatible.retryAfterSpread == .none)
        let strategy = policy.strategy(for: makeRequest())
        var waits: Set<Duration> = []
        for _ in 0..<200 {
            let hinted = HTTPStatusError(response: makeResponse(503, headers: ["Retry-After": "5"]))
            guard case .retryAfter(let wait) = strategy(hinted) else {
                Issue.record("not a Retry-After wait")
                return
            }
            #expect(wait >= .seconds(5) && wait <= .milliseconds(5_500), "\(wait)")
            waits.insert(wait)
        }
        #expect(waits.count > 150)  // spread, not lockstep
        // The decision itself is the hint.
        #expect(
            StrategyKind(
                policy.decision(
                    for: makeRequest(), response: makeResponse(503, headers: ["Retry-After": "5"]), now: now))
                == .retryAfter(.seconds(5)))
    }

    @Test(arguments: [
        HTTPRetryPolicy.RetryAfterSpread.none, .proportional(0.1), .proportional(1), .proportional(7),
        .proportional(-1), .proportional(.nan), .proportional(.infinity), .upTo(.seconds(3)), .upTo(.seconds(-3)),
        .upTo(.seconds(Int64.max)),
    ])
    func spreadWaitsAreNeverBeforeTheHintNorPastTheCap(spread: HTTPRetryPolicy.RetryAfterSpread) {
        var generator = SeededRandomNumberGenerator(seed: 0x5EED)
        let hints: [Duration] = [
            .zero, .nanoseconds(1), .milliseconds(1), .seconds(5), .seconds(59), .seconds(60), .seconds(61),
            BackoffStrategy<ContinuousClock>.saturationLimit, .seconds(-1),
        ]
        let caps: [Duration] = [.zero, .seconds(1), .seconds(60), BackoffStrategy<ContinuousClock>.saturationLimit]
        for hint in hints {
            for cap in caps {
                for _ in 0..<50 {
                    let wait = spread.delay(after: hint, cap: cap, using: &generator)
                    let floor = max(hint, .zero)
                    #expect(wait >= floor, "\(spread) \(hint) \(cap): \(wait)")
                    #expect(wait <= max(floor, cap), "\(spread) \(hint) \(cap): \(wait)")
                }
            }
        }
        // A zero hint spreads only with an absolute extra.
        let zero = spread.delay(after: .zero, cap: .seconds(60), using: &generator)
        if case .upTo(let d) = spread, d > .zero {
            #expect(zero <= d)
        } else {
            #expect(zero == .zero)
        }
    }

    // MARK: Idempotency (RFC 9110 §9.2.2)

    @Test(arguments: ["POST", "PATCH", "CONNECT", "LOCK"])
    func nonIdempotentMethodsNeedAKeyOrAnOptIn(method: String) {
        #expect(decide(method: method, status: 503) == .stop)
        #expect(decide(method: method, error: URLError(.networkConnectionLost)) == .stop)
        #expect(decide(method: method, status: 429, headers: ["Retry-After": "1"]) == .stop)

        let keyed = ["Idempotency-Key": "8e03978e-40d5-43e8-bc93-6894a57f9324"]
        #expect(decide(method: method, requestHeaders: keyed, status: 503) == .backoff)
        #expect(decide(method: method, requestHeaders: ["idempotency-key": "k"], status: 503) == .backoff)
        let hinted = decide(method: method, requestHeaders: keyed, status: 429, headers: ["Retry-After": "1"])
        #expect(hinted == .retryAfter(.seconds(1)))
        #expect(decide(method: method, requestHeaders: keyed, status: 404) == .stop)
        #expect(decide(method: method, requestHeaders: ["Idempotency-Key": "  "], status: 503) == .stop)

        var keysIgnored = policy
        keysIgnored.retryRequestsWithIdempotencyKey = false
        #expect(decide(keysIgnored, method: method, requestHeaders: keyed, status: 503) == .stop)

        var optedIn = policy
        optedIn.retryNonIdempotentRequests = true
        #expect(decide(optedIn, method: method, status: 503) == .backoff)
        #expect(decide(optedIn, method: method, error: URLError(.timedOut)) == .backoff)

        #expect(
            decide(policy.adding(methods: [HTTPRequestMethod(rawValue: method)]), method: method, status: 503)
                == .backoff)
    }

    @Test func keyedRequestsArriveAsErrorsToo() {
        let request = makeRequest("POST", headers: ["Idempotency-Key": "k"])
        #expect(
            StrategyKind(policy.decision(for: request, error: URLError(.cannotConnectToHost), now: now)) == .backoff)
    }

    @Test func methodsAreCaseSensitiveAndDefaultToGET() {
        #expect(
            HTTPRequestMethod.get.isIdempotent && HTTPRequestMethod.query.isIdempotent
                && !HTTPRequestMethod.post.isIdempotent)
        #expect(HTTPRequestMethod(rawValue: "get") != .get)
        // Foundation uppercases the standard methods itself, so "get" goes out (and is decided) as GET …
        #expect(decide(method: "get", status: 503) == .backoff)
        // … but other methods are sent, and compared, exactly as written.
        let propfind = policy.adding(methods: ["PROPFIND"])
        #expect(decide(propfind, method: "PROPFIND", status: 503) == .backoff)
        #expect(decide(propfind, method: "propfind", status: 503) == .stop)
        var request = makeRequest()
        request.httpMethod = nil
        #expect(StrategyKind(policy.decision(for: request, response: makeResponse(503), now: now)) == .backoff)
    }

    // MARK: Cancellation

    @Test func cancellationIsNeverRetried() {
        var eager =
            policy
            .adding(transportFailures: [.cancelled])
            .deciding { _, _ in .backoff(.none) }
        eager.retryNonIdempotentRequests = true
        for candidate in [policy, .alamofireCompatible, eager] {
            #expect(decide(candidate, error: URLError(.cancelled)) == .stop)
            #expect(decide(candidate, error: CancellationError()) == .stop)
            let bridged = NSError(domain: NSURLErrorDomain, code: URLError.cancelled.rawValue)
            #expect(decide(candidate, error: bridged) == .stop)
        }
        // The custom decision does run for other failures.
        #expect(decide(eager, error: URLError(.badURL)) == .backoff)
    }

    // MARK: Other errors

    @Test func otherErrors() {
        struct DecodingFailed: Error {}
        #expect(decide(error: DecodingFailed()) == .stop)
        #expect(decide(error: NSError(domain: "Other", code: -1005)) == .stop)
        #expect(decide(error: RetryError(.deadlineExceeded)) == .stop)
        // RetryKit's own per-attempt timeout counts as URLError.timedOut.
        #expect(decide(error: RetryError(.attemptTimedOut, attempts: 1)) == .backoff)
        var noTimeouts = policy
        noTimeouts.retryableTransportFailures.remove(.timedOut)
        #expect(decide(noTimeouts, error: RetryError(.attemptTimedOut, attempts: 1)) == .stop)
        #expect(decide(noTimeouts, error: URLError(.timedOut)) == .stop)
    }

    // MARK: Backoff: jitter and cap

    @Test func defaultBackoffIsFullJitterUnderTheAlamofireCurve() throws {
        let decision = policy.decision(for: makeRequest(), response: makeResponse(500), now: now)
        let backoff = try #require(backoffStrategy(decision))
        for retry in 0..<4 {
            let ceiling = Duration.milliseconds(500 * (1 << retry))
            let samples = (0..<500).map { _ in backoff.delay(forRetry: retry) }
            #expect(samples.allSatisfy { $0 >= .zero && $0 < ceiling }, "retry \(retry)")
            // Spread, not lockstep: 500 draws are not all the same and cover both halves of the range.
            #expect(samples.contains { $0 < ceiling / 2 } && samples.contains { $0 >= ceiling / 2 })
        }
    }

    @Test func theCapAppliesBeforeJitter() {
        var capped = policy
        capped.retryLimit = 50
        capped.jitter = .none
        #expect(capped.backoff.delay(forRetry: 5) == .seconds(16))
        #expect(capped.backoff.delay(forRetry: 6) == .seconds(30))
        #expect(capped.backoff.delay(forRetry: 10_000) == .seconds(30))

        capped.jitter = .full
        let samples = (0..<500).map { _ in capped.backoff.delay(forRetry: 10_000) }
        #expect(samples.allSatisfy { $0 < .seconds(30) })
        #expect(samples.contains { $0 < .seconds(15) } && samples.contains { $0 >= .seconds(15) })

        capped.maxDelay = nil
        capped.jitter = .none
        #expect(capped.backoff.delay(forRetry: 10_000) == BackoffStrategy<ContinuousClock>.saturationLimit)
    }

    @Test func otherJitters() {
        var equal = policy
        equal.jitter = .equal
        let equalSamples = (0..<500).map { _ in equal.backoff.delay(forRetry: 2) }
        #expect(equalSamples.allSatisfy { $0 >= .seconds(1) && $0 < .seconds(2) })

        var proportional = policy
        proportional.jitter = .proportional(0.2)
        let proportionalSamples = (0..<500).map { _ in proportional.backoff.delay(forRetry: 1) }
        #expect(proportionalSamples.allSatisfy { $0 >= .milliseconds(800) && $0 <= .milliseconds(1_200) })

        // The one RetryJitter of RetryKit: decorrelated jitter too, from the scale up to the cap.
        var decorrelated = policy
        decorrelated.retryLimit = 20
        decorrelated.jitter = .decorrelated
        let decorrelatedSamples = (0..<20).map { decorrelated.backoff.delay(forRetry: $0) }
        #expect(decorrelatedSamples.allSatisfy { $0 >= .milliseconds(500) && $0 < .seconds(30) })
        #expect(Set(decorrelatedSamples).count > 1)
    }

    @Test func oddParametersNeverTrap() {
        var odd = HTTPRetryPolicy(retryLimit: 0, exponentialBackoffBase: 0, exponentialBackoffScale: .nan)
        odd.jitter = .none
        #expect(odd.maxAttempts == 1)
        #expect(odd.backoff.delay(forRetry: 0) == .zero)
        odd.exponentialBackoffScale = -3
        #expect(odd.backoff.delay(forRetry: 3) == .zero)
        odd.exponentialBackoffScale = 1
        #expect(odd.backoff.delay(forRetry: 0) == .seconds(1))
        #expect(odd.backoff.delay(forRetry: 1) == .zero)
        odd.exponentialBackoffBase = 1
        #expect(odd.backoff.delay(forRetry: 40) == .seconds(1))
        odd.exponentialBackoffBase = .max
        odd.exponentialBackoffScale = .infinity
        #expect(odd.backoff.delay(forRetry: 3) == .seconds(30))
        odd.retryLimit = .max
        #expect(odd.maxAttempts == Int.max)
        odd.retryLimit = UInt(Int.max)
        #expect(odd.maxAttempts == Int.max)
        odd.retryLimit = UInt(Int.max) - 1
        #expect(odd.maxAttempts == Int.max)
    }

    // MARK: Composition

    @Test func addingStatusCodesForOneEndpoint() {
        let conflicts = policy.adding(statusCodes: [409])
        #expect(decide(conflicts, status: 409) == .backoff)
        #expect(decide(status: 409) == .stop)
        #expect(decide(conflicts, method: "POST", status: 409) == .stop)
    }

    @Test func customDecisionsSeeTheContextAndRunInOrder() throws {
        let seen = Locked<[String]>([])
        let custom =
            policy
            .deciding { context, proposed in
                seen.withLock {
                    $0.append("first \(context.method) \(context.statusCode ?? 0) \(StrategyKind(proposed))")
                }
                if context.statusCode == 423, context.url?.path == "/upload" {
                    return .retryAfter(.seconds(2))
                }
                return proposed
            }
            .deciding { context, proposed in
                let lock = context.responseHeader("lock-token") ?? "-"
                seen.withLock { $0.append("second \(StrategyKind(proposed)) \(lock)") }
                return context.retryAfter == .seconds(7) ? .stop : proposed
            }

        let upload = makeRequest("PUT", url: URL(fileURLWithPath: "/upload"))
        let locked = HTTPStatusError(response: makeResponse(423, headers: ["Lock-Token": "t1"]))
        #expect(StrategyKind(custom.decision(for: upload, error: locked, now: now)) == .retryAfter(.seconds(2)))
        #expect(seen.withLock { $0 } == ["first PUT 423 stop", "second retryAfter(2.0 seconds) t1"])

        let hinted = makeResponse(503, headers: ["Retry-After": "7"])
        #expect(StrategyKind(custom.decision(for: upload, response: hinted, now: now)) == .stop)
        #expect(StrategyKind(custom.decision(for: makeRequest(), error: URLError(.timedOut), now: now)) == .backoff)
    }

    @Test func contextReportsWhatItKnows() {
        let seen = Locked<[String]>([])
        let recording = policy.deciding { context, proposed in
            seen.withLock {
                $0.append(
                    "\(context.transportFailure?.rawValue ?? "-") \(context.isCancellation) \(context.statusCode ?? 0)")
            }
            return proposed
        }
        _ = recording.decision(for: makeRequest(), error: URLError(.timedOut), now: now)
        _ = recording.decision(for: makeRequest(), error: NSError(domain: NSURLErrorDomain, code: -1005), now: now)
        _ = recording.decision(for: makeRequest(), error: HTTPStatusError(response: makeResponse(500)), now: now)
        _ = recording.decision(for: makeRequest(), error: URLError(.cancelled), now: now)
        _ = recording.decision(for: makeRequest(), error: RetryError(.attemptTimedOut, attempts: 1), now: now)
        _ = recording.decision(for: makeRequest(), error: NSError(domain: NSURLErrorDomain, code: -1), now: now)
        // A cancellation is never shown to custom decisions.
        #expect(
            seen.withLock { $0 } == [
                "timedOut false 0", "networkConnectionLost false 0", "- false 500", "timedOut false 0",
                "URLError(-1) false 0",
            ])
    }

    @Test func everyStopSaysWhy() {
        func stopReason(_ strategy: RetryStrategy<ContinuousClock>) -> String? {
            if case .stop(let reason) = strategy { return "\(reason.name): \(reason.explanation)" }
            return nil
        }
        let get = makeRequest()
        #expect(
            stopReason(policy.decision(for: get, response: makeResponse(429), now: now))
                == "statusNotRetryable: status 429 is not retryable")
        #expect(
            stopReason(policy.decision(for: makeRequest("POST"), response: makeResponse(503), now: now))
                == "methodNotIdempotent: POST is not idempotent and the request has no idempotency key")
        #expect(
            stopReason(policy.decision(for: get, response: makeResponse(503, headers: ["Retry-After": "61"]), now: now))
                == "retryAfterBeyondCap: the server's Retry-After of 61.0 seconds is beyond the cap of 60.0 seconds")
        #expect(
            stopReason(policy.decision(for: get, error: URLError(.cannotParseResponse), now: now))
                == "transportFailureNotRetryable: transport failure cannotParseResponse is not retryable")
        #expect(
            stopReason(policy.decision(for: get, error: URLError(.cancelled), now: now))
                == "requestCancelled: the request was cancelled")
        #expect(
            stopReason(policy.decision(for: get, error: CocoaError(.fileNoSuchFile), now: now))?.hasPrefix(
                "notATransportFailure") == true)
    }

    // MARK: Any client

    @Test func plainValuesDecideAsURLSessionsTypesDo() {
        let hint: @Sendable (String) -> String? = { $0.lowercased() == "retry-after" ? "5" : nil }
        #expect(StrategyKind(policy.decision(for: HTTPRetryContext(method: .get, statusCode: 503))) == .backoff)
        #expect(
            StrategyKind(policy.decision(for: HTTPRetryContext(method: .get, statusCode: 429, responseHeader: hint)))
                == .retryAfter(.seconds(5)))
        #expect(StrategyKind(policy.decision(for: HTTPRetryContext(method: .post, statusCode: 503))) == .stop)
        let keyed: @Sendable (String) -> String? = { $0 == "Idempotency-Key" ? "k1" : nil }
        #expect(
            StrategyKind(policy.decision(for: HTTPRetryContext(method: .post, requestHeader: keyed, statusCode: 503)))
                == .backoff)
        #expect(
            StrategyKind(policy.decision(for: HTTPRetryContext(method: .get, transportFailure: .timedOut))) == .backoff)
        #expect(StrategyKind(policy.decision(for: HTTPRetryContext(method: .get, transportFailure: "tls"))) == .stop)
        #expect(
            StrategyKind(policy.decision(for: HTTPRetryContext(method: .get, transportFailure: .cancelled))) == .stop)
        #expect(StrategyKind(policy.decision(for: HTTPRetryContext(method: .get))) == .stop)
        // Response headers exist only with a response.
        #expect(HTTPRetryContext(method: .get, responseHeader: hint).retryAfter == nil)
        #expect(policy.treatsAsFailure(HTTPRetryContext(method: .get, statusCode: 503)))
        #expect(!policy.treatsAsFailure(HTTPRetryContext(method: .get, statusCode: 404)))
    }

    // MARK: Which responses fail an attempt

    @Test func responsesFailTheirAttemptWhenTheirStatusIsRetryableOrTheyWouldBeRetried() {
        func fails(
            _ policy: HTTPRetryPolicy, _ status: Int, method: String = "GET", headers: [String: String] = [:]
        ) -> Bool {
            policy.treatsAsFailure(makeResponse(status, headers: headers), for: makeRequest(method), now: now)
        }
        for status in [408, 500, 502, 503, 504, 429] {
            #expect(fails(policy, status), "\(status)")
        }
        for status in [200, 201, 204, 301, 304, 400, 401, 404, 409, 501] {
            #expect(!fails(policy, status), "\(status)")
        }
        // Failing but not retried: the caller gets the response, and the retrier reports that it stopped.
        #expect(fails(policy, 503, method: "POST"))
        #expect(fails(policy, 503, headers: ["Retry-After": "3600"]))
        #expect(decide(status: 503, headers: ["Retry-After": "3600"]) == .stop)
        // A custom decision that retries a status makes it fail its attempt.
        #expect(fails(policy.adding(statusCodes: [409]), 409))
        #expect(
            fails(policy.deciding { context, proposed in context.statusCode == 425 ? .backoff(.none) : proposed }, 425))
        // Alamofire's preset does not know Retry-After, so 429 is an ordinary response there.
        #expect(!fails(.alamofireCompatible, 429))
        #expect(fails(.alamofireCompatible, 503))
    }

    @Test func limitsDefaultToNoneAndAreKept() {
        #expect(policy.attemptTimeout == nil)
        #expect(policy.totalTimeout == nil)
        #expect(policy.budget == nil)
        var limited = policy
        let budget = RetryBudget(capacity: 10)
        limited.attemptTimeout = .milliseconds(250)
        limited.totalTimeout = .seconds(5)
        limited.budget = budget
        #expect(limited.attemptTimeout == .milliseconds(250))
        #expect(limited.totalTimeout == .seconds(5))
        #expect(limited.budget === budget)
    }

    @Test func statusErrorDescribesItself() {
        let error = HTTPStatusError(response: makeResponse(503), data: Data("busy".utf8))
        #expect(error.statusCode == 503)
        #expect(error.description.contains("503"))
        #expect(error.description.contains("4 byte"))
    }
}

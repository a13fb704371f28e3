import Dispatch
import Foundation
import RetryKitHTTP
import RetryKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The retrying URLSession API in both styles, against the scripted server over real loopback sockets.
///
/// Serialized so that the real-time assertions do not compete with each other for the CPU. Backoffs are in
/// milliseconds; only the two `Retry-After` tests, the transport-timeout budget test and the per-attempt timeout test
/// wait a second or two each.
@Suite(.serialized, .timeLimit(.minutes(3))) struct URLSessionRetryTests {
    // MARK: Retried statuses

    @Test(arguments: RequestStyle.allCases)
    func serviceUnavailableTwiceThenSuccessRetriesWithThePolicysDelays(style: RequestStyle) async throws {
        let server = try ScriptedHTTPServer(scripts: [
            "/flaky": [.respond(503, body: "busy"), .respond(503, body: "busy"), .respond(200, body: "ok")]
        ])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let log = EventLog()

        let result = await send(
            makeRequest(url: server.url("/flaky")), policy: millisecondPolicy(), style: style, in: session, log: log)

        #expect(result.status == 200)
        #expect(result.body == "ok")
        #expect(result.error == nil)
        // The policy's delays: 0.01·2ⁿ s without jitter.
        #expect(log.delays == [.milliseconds(10), .milliseconds(20)])
        #expect(log.failures.map { ($0.error as? HTTPStatusError)?.statusCode } == [503, 503])
        #expect(log.summary?.reason == .succeeded)
        #expect(log.summary?.attempts == 3)
        if style == .completionHandler {
            #expect(result.summary == log.summary)
        }
        let arrivals = server.requests(to: "/flaky").map(\.receivedAt)
        #expect(arrivals.count == 3)
        let gaps = zip(arrivals, arrivals.dropFirst()).map { pair in pair.1 - pair.0 }
        #expect(gaps.count == log.delays.count)
        for (gap, delay) in zip(gaps, log.delays) {
            #expect(gap >= delay, "requests \(gap) apart, the policy chose \(delay)")
        }
    }

    @Test func tooManyRequestsWaitsForRetryAfterInSeconds() async throws {
        let server = try ScriptedHTTPServer(scripts: [
            "/limited": [.respond(429, headers: ["Retry-After": "1"]), .respond(200, body: "ok")]
        ])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let log = EventLog()

        let result = await send(
            makeRequest(url: server.url("/limited")), policy: HTTPRetryPolicy(), style: .completionHandler,
            in: session, log: log)

        #expect(result.status == 200)
        #expect(result.summary?.attempts == 2)
        // The hint, spread up to 10% later by default.
        #expect(log.delays.count == 1 && log.delays.allSatisfy { $0 >= .seconds(1) && $0 <= .milliseconds(1_100) })
        let arrivals = server.requests(to: "/limited").map(\.receivedAt)
        #expect(arrivals.count == 2)
        if arrivals.count == 2 {
            #expect(arrivals[1] - arrivals[0] >= .seconds(1))
        }
    }

    @Test func serviceUnavailableWaitsForRetryAfterAsAnHTTPDate() async throws {
        // HTTP-dates have whole seconds: a date 1–2 s ahead asks for a wait of about 1–2 s.
        let target = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 2).rounded(.down))
        let server = try ScriptedHTTPServer(scripts: [
            "/maintenance": [.respond(503, headers: ["Retry-After": imfFixdate(target)]), .respond(200, body: "ok")]
        ])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let log = EventLog()
        // The server's arrival times are on ContinuousClock: this pair maps them to wall-clock dates.
        let (startDate, startInstant) = (Date(), ContinuousClock.now)
        func date(_ instant: ContinuousClock.Instant) -> Date {
            let elapsed = startInstant.duration(to: instant).components
            return startDate.addingTimeInterval(Double(elapsed.seconds) + Double(elapsed.attoseconds) * 1e-18)
        }
        func seconds(_ interval: TimeInterval) -> Duration { .nanoseconds(Int64(interval * 1e9)) }

        let result = await send(
            makeRequest(url: server.url("/maintenance")), policy: HTTPRetryPolicy(), style: .async, in: session,
            log: log)

        #expect(result.status == 200)
        #expect(result.body == "ok")
        let delay = try #require(log.delays.first)
        let arrivals = server.requests(to: "/maintenance").map(\.receivedAt)
        try #require(arrivals.count == 2)
        // The wait is the time left until the date when the 503 arrived, made up to 10% longer by the default
        // `retryAfterSpread`: at most 110% of the time left when the first request reached the server (≤ 2 s), at least
        // the time left when the retry was sent. Bounds taken from the run itself, not from a guess of how fast a
        // loaded machine answers (2 s plus the spread can exceed a fixed 2 s bound); 20 ms for the clocks' rounding.
        let slack = Duration.milliseconds(20)
        let leftAtFirstArrival = max(seconds(target.timeIntervalSince(date(arrivals[0]))), .zero)
        #expect(delay <= leftAtFirstArrival * 1.1 + slack, "\(delay) for \(leftAtFirstArrival) left")
        #expect(delay >= seconds(target.timeIntervalSince(date(arrivals[1]))) - slack, "\(delay)")
        #expect(delay <= .milliseconds(2_200))
        // The retry waited for the date (not for a default backoff), and for the whole delay.
        #expect(date(arrivals[1]) >= target.addingTimeInterval(-0.02), "retry sent before \(imfFixdate(target))")
        #expect(arrivals[1] - arrivals[0] >= delay)
    }

    // MARK: Not retried

    @Test(arguments: RequestStyle.allCases)
    func notFoundIsNotRetried(style: RequestStyle) async throws {
        let server = try ScriptedHTTPServer(scripts: [
            "/missing": [.respond(404, body: "no such thing"), .respond(200, body: "found")]
        ])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let log = EventLog()

        let result = await send(
            makeRequest(url: server.url("/missing")), policy: millisecondPolicy(), style: style, in: session, log: log)

        #expect(result.status == 404)
        #expect(result.body == "no such thing")
        #expect(result.error == nil)
        #expect(server.requestCount(to: "/missing") == 1)
        #expect(log.failures.isEmpty)
        #expect(log.summary?.reason == .succeeded)
        #expect(log.summary?.attempts == 1)
    }

    @Test(arguments: RequestStyle.allCases)
    func postIsRetriedOnlyWithAnIdempotencyKey(style: RequestStyle) async throws {
        let server = try ScriptedHTTPServer(scripts: [
            "/orders": [.respond(503, body: "busy"), .respond(201, body: "created")],
            "/keyed-orders": [.respond(503, body: "busy"), .respond(201, body: "created")],
        ])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let policy = millisecondPolicy()

        var plain = makeRequest("POST", url: server.url("/orders"))
        plain.httpBody = Data("{\"item\":1}".utf8)
        let log = EventLog()
        let refused = await send(plain, policy: policy, style: style, in: session, log: log)
        #expect(refused.status == 503)
        #expect(refused.body == "busy")
        #expect(refused.error == nil)
        #expect(server.requestCount(to: "/orders") == 1)
        #expect(log.summary?.reason == .stopped(.methodNotIdempotent))
        #expect(log.failures.map(\.next) == [.giveUp(.stopped(.methodNotIdempotent))])

        var keyed = makeRequest("POST", url: server.url("/keyed-orders"), headers: ["Idempotency-Key": "order-42"])
        keyed.httpBody = Data("{\"item\":1}".utf8)
        let retried = await send(keyed, policy: policy, style: style, in: session)
        #expect(retried.status == 201)
        #expect(retried.body == "created")
        let recorded = server.requests(to: "/keyed-orders")
        #expect(recorded.count == 2)
        #expect(recorded.allSatisfy { $0.method == "POST" && $0.value(forHeader: "Idempotency-Key") == "order-42" })
        #expect(recorded.allSatisfy { $0.body == Data("{\"item\":1}".utf8) })
    }

    // MARK: Transport errors

    @Test(arguments: RequestStyle.allCases)
    func refusedConnectionsAreRetriedThenSurfaceAsCannotConnectToHost(style: RequestStyle) async throws {
        let refusing = try RefusingPort()
        defer { refusing.close() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let log = EventLog()

        let result = await send(
            makeRequest(url: refusing.url("/anything")), policy: millisecondPolicy(scale: 0.001), style: style,
            in: session, log: log)

        #expect(result.urlErrorCode == .cannotConnectToHost)
        #expect(result.response == nil)
        #expect(log.started == 3)
        #expect(log.failures.count == 3)
        #expect(log.failures.allSatisfy { ($0.error as? URLError)?.code == .cannotConnectToHost })
        #expect(log.summary?.reason == .exhausted)
        #expect(log.summary?.attempts == 3)
        // The URLError says why the retrier gave up.
        let giveUp = (result.error as? URLError)?.userInfo[HTTPRetryPolicy.giveUpErrorKey] as? RetryError
        #expect(giveUp?.reason == .exhausted)
        #expect(giveUp?.attempts == 3)
        #expect((giveUp?.lastError as? URLError)?.code == .cannotConnectToHost)
        #expect(giveUp?.localizedDescription.hasPrefix("Every allowed attempt failed. 3 attempts ran in ") == true)
    }

    @Test(arguments: RequestStyle.allCases)
    func resetsAreRetriedAsNetworkConnectionLost(style: RequestStyle) async throws {
        let server = try ScriptedHTTPServer(scripts: [
            "/reset-once": [.reset, .respond(200, body: "ok")],
            "/always-reset": [.reset],
        ])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let policy = millisecondPolicy(retryLimit: 1, scale: 0.001)

        let log = EventLog()
        let recovered = await send(
            makeRequest(url: server.url("/reset-once")), policy: policy, style: style, in: session, log: log)
        #expect(recovered.status == 200)
        #expect(recovered.body == "ok")
        let codes = log.failures.map { ($0.error as? URLError)?.code }
        if ClosedConnectionRequests.mayResend && codes.isEmpty {
            // Apple's URLSession resent the GET on its own after the reset: one attempt, two requests.
            #expect(log.started == 1)
        } else {
            #expect(codes.count == 1 && codes.allSatisfy { $0.map(TransportErrorCodes.reset.contains) == true })
        }
        #expect(server.requestCount(to: "/reset-once") == 2)

        let failed = await send(
            makeRequest(url: server.url("/always-reset")), policy: policy, style: style, in: session)
        #expect(failed.urlErrorCode.map(TransportErrorCodes.reset.contains) == true)
        #expect(ClosedConnectionRequests.range(attempts: 2).contains(server.requestCount(to: "/always-reset")))
    }

    // MARK: Giving up with the last response

    @Test(arguments: RequestStyle.allCases)
    func exhaustionReturnsTheLastResponse(style: RequestStyle) async throws {
        let server = try ScriptedHTTPServer(scripts: [
            "/down": [
                .respond(503, body: "first"), .respond(500, body: "second"),
                .respond(502, headers: ["X-Attempt": "3"], body: "third"),
            ]
        ])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let log = EventLog()

        let result = await send(
            makeRequest(url: server.url("/down")), policy: millisecondPolicy(scale: 0.001), style: style, in: session,
            log: log)

        #expect(result.error == nil)
        #expect(result.status == 502)
        #expect(result.body == "third")
        #expect((result.response as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Attempt") == "3")
        #expect(server.requestCount(to: "/down") == 3)
        #expect(log.summary?.reason == .exhausted)
        if style == .completionHandler {
            #expect(result.summary?.reason == .exhausted)
            #expect(result.summary?.attempts == 3)
        }
    }

    @Test(arguments: RequestStyle.allCases)
    func retryAfterBeyondTheCapOrTheDeadlineGivesUpAtOnceWithTheResponse(style: RequestStyle) async throws {
        let server = try ScriptedHTTPServer(scripts: [
            "/much-later": [.respond(503, headers: ["Retry-After": "120"], body: "later"), .respond(200)],
            "/after-deadline": [.respond(503, headers: ["Retry-After": "55"], body: "later"), .respond(200)],
        ])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }

        // 120 s is beyond the default cap of 60 s.
        let capLog = EventLog()
        let start = ContinuousClock.now
        let capped = await send(
            makeRequest(url: server.url("/much-later")), policy: HTTPRetryPolicy(), style: style, in: session,
            log: capLog)
        #expect(capped.at - start < promptBound)  // waiting would take 60 s (the cap) or 120 s
        #expect(capped.status == 503)
        #expect(capped.body == "later")
        #expect(capped.error == nil)
        #expect(server.requestCount(to: "/much-later") == 1)
        #expect(capLog.summary?.reason == .stopped(.retryAfterBeyondCap))
        if case .stopped(let stop) = capLog.summary?.reason {
            #expect(stop.explanation == "the server's Retry-After of 120.0 seconds is beyond the cap of 60.0 seconds")
        }

        // 55 s is within the cap but ends after the 45 s total timeout: the core gives up without waiting.
        var policy = HTTPRetryPolicy()
        policy.totalTimeout = .seconds(45)
        let deadlineLog = EventLog()
        let again = ContinuousClock.now
        let late = await send(
            makeRequest(url: server.url("/after-deadline")), policy: policy, style: style, in: session,
            log: deadlineLog)
        #expect(late.at - again < promptBound)  // waiting would take 45 s (the deadline) or 55 s
        #expect(late.status == 503)
        #expect(late.body == "later")
        #expect(late.error == nil)
        #expect(server.requestCount(to: "/after-deadline") == 1)
        #expect(deadlineLog.summary?.reason == .deadlineExceeded)
        #expect(deadlineLog.failures.map(\.next) == [.giveUp(.deadlineExceeded)])
    }

    @Test func aSharedBudgetLimitsRetriesAcrossRequestsAndStyles() async throws {
        let server = try ScriptedHTTPServer(scripts: ["/outage": [.respond(503, body: "down")]])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        // Two retries in all: 10 tokens at 5 per retry.
        let budget = RetryBudget(capacity: 10, retryCost: 5)
        var policy = millisecondPolicy(retryLimit: 5, scale: 0.001)
        policy.budget = budget
        let request = makeRequest(url: server.url("/outage"))

        let firstLog = EventLog()
        let first = await send(request, policy: policy, style: .completionHandler, in: session, log: firstLog)
        #expect(first.status == 503)
        #expect(first.body == "down")
        #expect(first.summary?.reason == .budgetExhausted)
        #expect(first.summary?.attempts == 3)
        #expect(budget.availableTokens == 0)

        let secondLog = EventLog()
        let second = await send(request, policy: policy, style: .async, in: session, log: secondLog)
        #expect(second.status == 503)
        #expect(second.error == nil)
        #expect(secondLog.summary?.reason == .budgetExhausted)
        #expect(secondLog.summary?.attempts == 1)

        // Without the budget each request would have made 6 attempts.
        #expect(server.requestCount(to: "/outage") == 4)
    }

    @Test(arguments: RequestStyle.allCases)
    func aTransportTimeoutCostsTheBudgetsTimeoutRetryCost(style: RequestStyle) async throws {
        let server = try ScriptedHTTPServer(scripts: ["/hang": [.neverAnswer]])
        defer { server.stop() }
        let session = makeSession(timeout: 1)  // URLSession's own timeout: URLError.timedOut after 1 s
        defer { session.finishTasksAndInvalidate() }
        // A retry costs 1 token, a retry after a timeout 10: the bucket pays for one retry after a timeout, where it
        // would pay for ten at the plain cost.
        let budget = RetryBudget(capacity: 10, retryCost: 1, timeoutRetryCost: 10)
        var policy = millisecondPolicy(retryLimit: 5, scale: 0.001)
        policy.budget = budget
        let log = EventLog()

        let result = await send(
            makeRequest(url: server.url("/hang")), policy: policy, style: style, in: session, log: log)
        #expect(result.urlErrorCode == .timedOut)
        #expect(log.summary?.reason == .budgetExhausted)
        #expect(log.summary?.attempts == 2)
        #expect(budget.availableTokens == 0)
        // The server records a request when its thread reads it; on a loaded machine that can come after the client
        // gave up on it (the bytes wait in the socket), so wait for it rather than race it.
        #expect(await eventually { server.requestCount(to: "/hang") == 2 })
    }

    // MARK: Cancellation and timeouts

    @Test(arguments: RequestStyle.allCases)
    func cancelDuringABackoffReturnsAtOnce(style: RequestStyle) async throws {
        let server = try ScriptedHTTPServer(scripts: ["/slow-recovery": [.respond(503), .respond(200)]])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        var policy = millisecondPolicy(scale: 60)  // a 60 s backoff
        policy.maxDelay = nil
        let request = makeRequest(url: server.url("/slow-recovery"))
        let log = EventLog()

        let result: Retried
        let cancelledAt: ContinuousClock.Instant
        switch style {
        case .completionHandler:
            let outcome = Locked<[Retried]>([])
            let task = session.dataTask(with: request, retryPolicy: policy, observer: log.record) {
                data, response, error, summary in
                outcome.withLock { $0.append(Retried(data: data, response: response, error: error, summary: summary)) }
            }
            #expect(await eventually { !log.delays.isEmpty })
            cancelledAt = .now
            task.cancel()
            #expect(task.isFinished)
            #expect(await eventually { !outcome.withLock(\.isEmpty) })
            task.cancel()  // idempotent
            try await Task.sleep(for: .milliseconds(50))
            let outcomes = outcome.withLock { $0 }
            #expect(outcomes.count == 1)
            result = try #require(outcomes.first)
            #expect(result.urlErrorCode == .cancelled)
            #expect(result.summary?.reason == .cancelled)
            #expect(result.summary?.attempts == 1)
        case .async:
            let task = Task { await send(request, policy: policy, style: .async, in: session, log: log) }
            #expect(await eventually { !log.delays.isEmpty })
            cancelledAt = .now
            task.cancel()
            result = await task.value
            #expect(result.error is CancellationError)
        }
        #expect(log.delays == [.seconds(60)])
        #expect(result.at - cancelledAt < promptBound)
        #expect(log.summary?.reason == .cancelled)
        #expect(server.requestCount(to: "/slow-recovery") == 1)
    }

    @Test(arguments: RequestStyle.allCases)
    func cancelDuringAnAttemptCancelsItsDataTask(style: RequestStyle) async throws {
        let server = try ScriptedHTTPServer(scripts: ["/hang": [.neverAnswer], "/ok": [.respond(200, body: "ok")]])
        defer { server.stop() }
        // One connection per host: a request still in flight would hold the only connection until the 60 s timeout.
        let session = makeSession(timeout: 60, connectionsPerHost: 1)
        defer { session.invalidateAndCancel() }
        let request = makeRequest(url: server.url("/hang"))
        let log = EventLog()

        let result: Retried
        let cancelledAt: ContinuousClock.Instant
        switch style {
        case .completionHandler:
            let outcome = Locked<Retried?>(nil)
            let task = session.dataTask(with: request, retryPolicy: millisecondPolicy(), observer: log.record) {
                data, response, error, summary in
                outcome.withLock { $0 = Retried(data: data, response: response, error: error, summary: summary) }
            }
            #expect(await eventually { server.requestCount(to: "/hang") == 1 })
            cancelledAt = .now
            task.cancel()
            #expect(await eventually { outcome.withLock { $0 != nil } })
            result = try #require(outcome.withLock { $0 })
            #expect(result.urlErrorCode == .cancelled)
            #expect(result.summary?.reason == .cancelled)
        case .async:
            let task = Task {
                await send(request, policy: millisecondPolicy(), style: .async, in: session, log: log)
            }
            #expect(await eventually { server.requestCount(to: "/hang") == 1 })
            cancelledAt = .now
            task.cancel()
            result = await task.value
            #expect(result.error is CancellationError)
        }
        #expect(result.at - cancelledAt < promptBound)  // not cancelled, the attempt would wait for the 60 s timeout
        #expect(log.summary?.reason == .cancelled)
        #expect(server.requestCount(to: "/hang") == 1)

        // The cancelled data task released the session's only connection.
        let start = ContinuousClock.now
        #expect(await fetch(server.url("/ok"), in: session).status == 200)
        #expect(ContinuousClock.now - start < promptBound)
    }

    @Test(arguments: RequestStyle.allCases)
    func perAttemptTimeoutFiresAndCancelsTheDataTask(style: RequestStyle) async throws {
        let server = try ScriptedHTTPServer(scripts: ["/hang": [.neverAnswer]])
        defer { server.stop() }
        // One connection per host: the second attempt reaches the server only if the first data task was cancelled.
        let session = makeSession(timeout: 60, connectionsPerHost: 1)
        defer { session.invalidateAndCancel() }
        var policy = millisecondPolicy(retryLimit: 1, scale: 0.001)
        // 1 s rather than less: the second attempt must reach the server within its own timeout, even when the
        // machine is loaded.
        policy.attemptTimeout = .seconds(1)
        let log = EventLog()

        let start = ContinuousClock.now
        let result = await send(
            makeRequest(url: server.url("/hang")), policy: policy, style: style, in: session, log: log)

        #expect(result.urlErrorCode == .timedOut)
        let underlying = (result.error as? URLError)?.userInfo[NSUnderlyingErrorKey] as? RetryError
        #expect(underlying?.reason == .attemptTimedOut)
        // Reached by the second attempt only if the first data task was cancelled. Waited for, not raced: on a loaded
        // machine the server's thread may read the second request after its time was up (the bytes wait in the
        // socket).
        #expect(await eventually { server.requestCount(to: "/hang") == 2 })
        let failures = log.failures
        #expect(failures.count == 2)
        #expect(failures.allSatisfy { ($0.error as? RetryError)?.reason == .attemptTimedOut })
        if let first = failures.first {
            #expect(first.at - start >= .seconds(1))
            // The attempt timeout fired, not the session's 60 s request timeout. Typically ~1 s; the bound leaves
            // room for a loaded 2-core machine (over 20 runnable threads), where the first second can go to others.
            #expect(first.at - start < promptBound)
        }
        #expect(result.at - start >= .seconds(2))
        #expect(log.summary?.reason == .exhausted)
    }

    @Test(arguments: RequestStyle.allCases)
    func totalTimeoutDuringTheFirstAttemptSurfacesAsTimedOut(style: RequestStyle) async throws {
        let server = try ScriptedHTTPServer(scripts: ["/hang": [.neverAnswer]])
        defer { server.stop() }
        let session = makeSession(timeout: 60)
        defer { session.invalidateAndCancel() }
        var policy = millisecondPolicy()
        policy.totalTimeout = .milliseconds(300)
        let log = EventLog()

        let start = ContinuousClock.now
        let result = await send(
            makeRequest(url: server.url("/hang")), policy: policy, style: style, in: session, log: log)

        #expect(result.urlErrorCode == .timedOut)
        #expect(result.at - start >= .milliseconds(300))
        // Typically ~300 ms; the bound only shows that the session's 60 s timeout did not fire, with room for a loaded
        // 2-core machine.
        #expect(result.at - start < promptBound)
        #expect(log.summary?.reason == .deadlineExceeded)
        #expect(server.requestCount(to: "/hang") == 1)
    }

    // MARK: Many at once

    @Test(arguments: RequestStyle.allCases)
    func twoHundredConcurrentRequestsToFlakyPathsEachCompleteExactlyOnce(style: RequestStyle) async throws {
        let count = 200
        let server = try ScriptedHTTPServer()
        defer { server.stop() }
        for index in 0..<count {
            server.script("/flaky/\(index)", [.respond(503), .respond(200, body: "\(index)")])
        }
        let session = makeSession(timeout: 60, connectionsPerHost: 64)
        defer { session.finishTasksAndInvalidate() }
        let policy = HTTPRetryPolicy(retryLimit: 3, exponentialBackoffScale: 0.005)  // with full jitter

        let extra = Locked(0)
        let results = await withTaskGroup(of: (Int, Retried).self) { group in
            for index in 0..<count {
                group.addTask {
                    let request = makeRequest(url: server.url("/flaky/\(index)"))
                    return (
                        index, await send(request, policy: policy, style: style, in: session, extraCompletions: extra)
                    )
                }
            }
            var results: [Int: Retried] = [:]
            for await (index, result) in group { results[index] = result }
            return results
        }

        #expect(results.count == count)
        #expect((0..<count).allSatisfy { results[$0]?.status == 200 && results[$0]?.body == "\($0)" })
        #expect(server.requests.count == 2 * count)
        if style == .completionHandler {
            #expect((0..<count).allSatisfy { results[$0]?.summary?.attempts == 2 })
            try await Task.sleep(for: .milliseconds(100))
            #expect(extra.withLock { $0 } == 0)
        }
    }

    // MARK: Queue, release, configuration

    @Test func completionHandlerAndObserverRunOnTheGivenQueue() async throws {
        let server = try ScriptedHTTPServer(scripts: ["/flaky": [.respond(500), .respond(200, body: "ok")]])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "URLSessionRetryTests.queue")
        queue.setSpecific(key: key, value: "mine")
        let offQueue = Locked(0)
        let log = EventLog()

        let result: Retried = await withCheckedContinuation { continuation in
            session.dataTask(
                with: makeRequest(url: server.url("/flaky")), retryPolicy: millisecondPolicy(), queue: queue,
                observer: { event in
                    if DispatchQueue.getSpecific(key: key) != "mine" { offQueue.withLock { $0 += 1 } }
                    log.record(event)
                }
            ) { data, response, error, summary in
                if DispatchQueue.getSpecific(key: key) != "mine" { offQueue.withLock { $0 += 1 } }
                continuation.resume(returning: Retried(data: data, response: response, error: error, summary: summary))
            }
        }

        #expect(result.status == 200)
        #expect(log.events.count == 5)  // started, failed, started, succeeded, finished
        #expect(offQueue.withLock { $0 } == 0)
    }

    @Test func aFinishedRequestReleasesWhatItCapturedWhileItsTaskIsKept() async throws {
        final class Witness: Sendable {}
        let server = try ScriptedHTTPServer(scripts: ["/ok": [.respond(200)]])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        let finished = Locked(false)

        var witness: Witness? = Witness()
        weak let weakWitness = witness
        let task = session.dataTask(with: makeRequest(url: server.url("/ok")), retryPolicy: HTTPRetryPolicy()) {
            [witness] _, _, _, _ in
            _ = witness
            finished.withLock { $0 = true }
        }
        witness = nil
        #expect(await eventually { finished.withLock { $0 } })
        #expect(await eventually { weakWitness == nil })
        #expect(task.isFinished)
    }

    @Test(arguments: RequestStyle.allCases)
    func anInvalidPolicySendsNothingAndReportsRetryError(style: RequestStyle) async throws {
        let server = try ScriptedHTTPServer(scripts: ["/ok": [.respond(200)]])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }
        var policy = HTTPRetryPolicy()
        policy.attemptTimeout = .zero

        let result = await send(makeRequest(url: server.url("/ok")), policy: policy, style: style, in: session)

        guard case .invalidConfiguration = (result.error as? RetryError)?.reason else {
            Issue.record("expected RetryError.invalidConfiguration, got \(String(describing: result.error))")
            return
        }
        #expect(result.response == nil)
        #expect(server.requests.isEmpty)
    }

    // MARK: Foundation's own calls

    /// Importing RetryKitHTTP changes no Foundation call that does not name `retryPolicy:`: both styles send the
    /// request once and hand back the 503, as Foundation does (the compile-time side is in Tests/CompileFail/).
    @Test func foundationsOwnCallsNeverRetry() async throws {
        let server = try ScriptedHTTPServer(scripts: [
            "/callback": [.respond(503, body: "busy"), .respond(200, body: "ok")],
            "/async": [.respond(503, body: "busy"), .respond(200, body: "ok")],
        ])
        defer { server.stop() }
        let session = makeSession()
        defer { session.finishTasksAndInvalidate() }

        let status: Int? = await withCheckedContinuation { continuation in
            let task: URLSessionDataTask = session.dataTask(with: makeRequest(url: server.url("/callback"))) {
                _, response, _ in
                continuation.resume(returning: (response as? HTTPURLResponse)?.statusCode)
            }
            task.resume()
        }
        #expect(status == 503)
        #expect(server.requests(to: "/callback").count == 1)

        let (data, response) = try await session.data(for: makeRequest(url: server.url("/async")))
        #expect((response as? HTTPURLResponse)?.statusCode == 503)
        #expect(String(decoding: data, as: UTF8.self) == "busy")
        #expect(server.requests(to: "/async").count == 1)
    }
}

import Foundation
import RetryKitHTTP
import Testing

/// A response of a client that is not URLSession.
private struct FakeResponse: Sendable, Equatable {
    var status: Int
    var headers: [String: String] = [:]

    func header(_ name: String) -> String? {
        headers.first { $0.key.lowercased() == name.lowercased() }?.value
    }
}

/// An error of that client.
private enum FakeClientError: Error {
    case connectTimeout
    case remoteConnectionClosed
    case invalidURL
}

/// A client that answers from a script, one step per attempt (the last step repeats).
private final class FakeClient: Sendable {
    private let steps: Locked<[Result<FakeResponse, FakeClientError>]>
    private let sent = Locked(0)

    init(_ steps: [Result<FakeResponse, FakeClientError>]) {
        self.steps = Locked(steps)
    }

    var requests: Int { sent.withLock { $0 } }

    func execute() async throws -> FakeResponse {
        sent.withLock { $0 += 1 }
        let step = steps.withLock { $0.count > 1 ? $0.removeFirst() : $0[0] }
        return try step.get()
    }
}

private let classifyFake: @Sendable (any Error) -> TransportFailure? = { error in
    switch error as? FakeClientError {
    case .connectTimeout: .timedOut
    case .remoteConnectionClosed: .networkConnectionLost
    case .invalidURL, nil: nil
    }
}

private func send(
    _ client: FakeClient, policy: HTTPRetryPolicy, method: HTTPRequestMethod = .get,
    requestHeaders: [String: String] = [:],
    events: Locked<[RetryEvent<FakeResponse>]> = Locked([])
) async throws -> FakeResponse {
    try await policy.run(
        method: method, requestHeader: { requestHeaders[$0] }, statusCode: { $0.status },
        responseHeader: { $0.header($1) }, classify: classifyFake,
        observer: { event in events.withLock { $0.append(event) } }
    ) { _ in try await client.execute() }
}

/// `HTTPRetryPolicy.run`: the policy drives a client that is not URLSession, from plain values.
@Suite(.timeLimit(.minutes(3))) struct AnyClientTests {
    @Test func retryableStatusesAreRetriedUntilASuccess() async throws {
        let client = FakeClient([.success(FakeResponse(status: 503)), .success(FakeResponse(status: 200))])
        let events = Locked<[RetryEvent<FakeResponse>]>([])
        let response = try await send(client, policy: millisecondPolicy(), events: events)
        #expect(response.status == 200)
        #expect(client.requests == 2)
        let failures = events.withLock { $0 }.compactMap { event -> Int? in
            guard case .attemptFailed(_, let error, _) = event else { return nil }
            return (error as? HTTPStatusError)?.statusCode
        }
        #expect(failures == [503])
    }

    @Test func theLastFailingResponseIsReturnedNotThrown() async throws {
        let client = FakeClient([.success(FakeResponse(status: 502))])
        let response = try await send(client, policy: millisecondPolicy())
        #expect(response.status == 502)
        #expect(client.requests == 3)
        // Not retryable: returned at once.
        let notFound = FakeClient([.success(FakeResponse(status: 404))])
        #expect(try await send(notFound, policy: millisecondPolicy()).status == 404)
        #expect(notFound.requests == 1)
    }

    @Test func retryAfterAndIdempotencyComeFromTheHeaderLookups() async throws {
        let limited = FakeClient([
            .success(FakeResponse(status: 429, headers: ["retry-after": "0"])), .success(FakeResponse(status: 200)),
        ])
        #expect(try await send(limited, policy: millisecondPolicy()).status == 200)
        #expect(limited.requests == 2)

        let tooLong = FakeClient([.success(FakeResponse(status: 503, headers: ["Retry-After": "3600"]))])
        #expect(try await send(tooLong, policy: millisecondPolicy()).status == 503)
        #expect(tooLong.requests == 1)

        let post = FakeClient([.success(FakeResponse(status: 503)), .success(FakeResponse(status: 201))])
        #expect(try await send(post, policy: millisecondPolicy(), method: .post).status == 503)
        #expect(post.requests == 1)
        let keyed = FakeClient([.success(FakeResponse(status: 503)), .success(FakeResponse(status: 201))])
        let created = try await send(
            keyed, policy: millisecondPolicy(), method: .post, requestHeaders: ["Idempotency-Key": "k1"])
        #expect(created.status == 201)
    }

    @Test func giveUpsSayWhyInTheFinishedEvent() async throws {
        func reason(
            _ steps: [Result<FakeResponse, FakeClientError>], policy: HTTPRetryPolicy = millisecondPolicy(),
            method: HTTPRequestMethod = .get
        ) async -> RetryError.Reason? {
            let events = Locked<[RetryEvent<FakeResponse>]>([])
            _ = try? await send(FakeClient(steps), policy: policy, method: method, events: events)
            return events.withLock { $0 }.compactMap { event -> RetryError.Reason? in
                if case .finished(let summary, _) = event { return summary.reason }
                return nil
            }.first
        }
        #expect(await reason([.success(FakeResponse(status: 429))]) == .stopped(.statusNotRetryable))
        #expect(await reason([.success(FakeResponse(status: 503))], method: .post) == .stopped(.methodNotIdempotent))
        let tooLong = FakeResponse(status: 503, headers: ["Retry-After": "3600"])
        #expect(await reason([.success(tooLong)]) == .stopped(.retryAfterBeyondCap))
        #expect(await reason([.success(FakeResponse(status: 500))]) == .exhausted)
        #expect(await reason([.failure(.invalidURL)]) == .stopped(.notATransportFailure))
        var budgeted = millisecondPolicy()
        budgeted.budget = RetryBudget(capacity: 0)
        #expect(await reason([.success(FakeResponse(status: 500))], policy: budgeted) == .budgetExhausted)
        var hurried = HTTPRetryPolicy()
        hurried.totalTimeout = .seconds(1)
        let later = FakeResponse(status: 503, headers: ["Retry-After": "30"])
        #expect(await reason([.success(later)], policy: hurried) == .deadlineExceeded)
    }

    @Test func transportErrorsAreClassifiedByTheClient() async throws {
        let flaky = FakeClient([.failure(.remoteConnectionClosed), .success(FakeResponse(status: 200))])
        #expect(try await send(flaky, policy: millisecondPolicy()).status == 200)
        #expect(flaky.requests == 2)

        let broken = FakeClient([.failure(.invalidURL)])
        let stopped = await #expect(throws: RetryError.self) { try await send(broken, policy: millisecondPolicy()) }
        #expect(stopped?.reason == .stopped(.notATransportFailure))
        #expect(stopped?.lastError as? FakeClientError == .invalidURL)
        #expect(broken.requests == 1)

        let down = FakeClient([.failure(.remoteConnectionClosed)])
        let exhausted = await #expect(throws: RetryError.self) { try await send(down, policy: millisecondPolicy()) }
        #expect(exhausted?.reason == .exhausted)
        #expect(exhausted?.attempts == 3)
        #expect(exhausted?.lastError as? FakeClientError == .remoteConnectionClosed)
    }

    @Test func aClassifiedTimeoutCostsTheBudgetsTimeoutRetryCost() async throws {
        let budget = RetryBudget(capacity: 10, retryCost: 1, timeoutRetryCost: 10)
        var policy = millisecondPolicy(retryLimit: 5, scale: 0.001)
        policy.budget = budget
        let hanging = FakeClient([.failure(.connectTimeout)])
        let refused = await #expect(throws: RetryError.self) { try await send(hanging, policy: policy) }
        #expect(refused?.reason == .budgetExhausted)
        #expect(refused?.lastError as? FakeClientError == .connectTimeout)
        #expect(hanging.requests == 2)
        #expect(budget.availableTokens == 0)
    }
}

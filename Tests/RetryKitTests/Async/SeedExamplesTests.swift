import Foundation
import RetryKit
import RetryKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A scripted stand-in for a server: each call to `data(from:)` takes the next step.
final class SeedScriptedSession: Sendable {
    enum Step: Sendable {
        case status(Int, headers: [String: String] = [:], body: String = "")
        case failure(URLError.Code)
    }

    /// The session `URLSession.shared` resolves to inside ``SeedExamples``.
    @TaskLocal static var current: SeedScriptedSession?

    private let steps: Locked<[Step]>
    private let calls = AsyncCounter()

    init(_ steps: [Step]) {
        self.steps = Locked(steps)
    }

    var callCount: Int { calls.value }

    func data(from url: URL) async throws -> (Data, URLResponse) {
        calls.increment()
        let step = steps.withLock { steps in steps.isEmpty ? Step.failure(.resourceUnavailable) : steps.removeFirst() }
        switch step {
        case .status(let code, let headers, let body):
            guard
                let response = HTTPURLResponse(
                    url: url, statusCode: code, httpVersion: "HTTP/1.1", headerFields: headers)
            else { throw URLError(.badServerResponse) }
            return (Data(body.utf8), response)
        case .failure(let code):
            throw URLError(code)
        }
    }
}

/// The seed's three documented examples, word for word (re-indented), against a scripted server: inside this type
/// `URLSession.shared` is the task's ``SeedScriptedSession``.
struct SeedExamples {
    struct URLSession {
        static var shared: SeedScriptedSession { SeedScriptedSession.current ?? SeedScriptedSession([]) }
    }

    struct TooManyRequests: Error {
        let retryAfter: Double
    }

    let url: URL

    /// "Use the defaults"
    func defaults() async throws -> (Data, URLResponse) {
        let (data, response) = try await retry {
            try await URLSession.shared.data(from: url)
        }
        return (data, response)
    }

    /// "Use a custom backoff strategy and custom amount of attempts"
    func customBackoff() async throws -> (Data, URLResponse) {
        let (data, response) = try await retry(maxAttempts: 5) {
            try await URLSession.shared.data(from: url)
        } strategy: { _ in
            return .backoff(.constant(.seconds(2)))
        }
        return (data, response)
    }

    /// "Use a custom backoff and retry strategy"
    func tooManyRequests() async throws -> (Data, URLResponse) {
        let (data, response) = try await retry {
            let (data, response) = try await URLSession.shared.data(from: url)
            if let response = response as? HTTPURLResponse,
                let retryAfter = response.value(forHTTPHeaderField: "Retry-After").flatMap(Double.init),
                response.statusCode == 429
            {
                throw TooManyRequests(retryAfter: retryAfter)
            }
            return (data, response)
        } strategy: { error in
            if let error = error as? TooManyRequests {
                return .backoff(.constant(.seconds(error.retryAfter)))
            } else {
                return .stop
            }
        }
        return (data, response)
    }
}

@Suite("The seed's documented examples", .timeLimit(.minutes(2)))
struct SeedExamplesTests {
    let examples = SeedExamples(url: URL(fileURLWithPath: "/seed/example"))

    private func statusCode(_ response: URLResponse) -> Int? {
        (response as? HTTPURLResponse)?.statusCode
    }

    /// Runs `example` against `session` and checks that it rethrows the `URLError` with `code`, after `calls` requests.
    private func expectRethrows(
        _ code: URLError.Code, after calls: Int, on session: SeedScriptedSession,
        _ example: () async throws -> (Data, URLResponse), sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        await SeedScriptedSession.$current.withValue(session) {
            let error = await #expect(throws: URLError.self, sourceLocation: sourceLocation) { try await example() }
            #expect(error?.code == code, sourceLocation: sourceLocation)
        }
        #expect(session.callCount == calls, sourceLocation: sourceLocation)
    }

    /// The custom backoff example's call, on `clock` rather than the real clock: five attempts, two seconds apart.
    private func customBackoff(
        _ session: SeedScriptedSession, on clock: VirtualClock
    ) -> Task<(Data, URLResponse), any Error> {
        let url = examples.url
        return Task {
            try await retry(maxAttempts: 5, clock: clock) {
                try await session.data(from: url)
            } strategy: { _ in
                return .backoff(.constant(.seconds(2)))
            }
        }
    }

    @Test("Defaults: errors are retried twice more, without delay")
    func defaultsRetryThreeTimes() async throws {
        let session = SeedScriptedSession([
            .failure(.timedOut), .failure(.networkConnectionLost), .status(200, body: "ok"),
        ])
        let (data, response) = try await SeedScriptedSession.$current.withValue(session) {
            try await examples.defaults()
        }
        #expect(String(decoding: data, as: UTF8.self) == "ok")
        #expect(statusCode(response) == 200)
        #expect(session.callCount == 3)
    }

    @Test("Defaults: the third failure is rethrown as it is")
    func defaultsRethrowTheLastError() async throws {
        let session = SeedScriptedSession([.failure(.timedOut), .failure(.timedOut), .failure(.cannotConnectToHost)])
        await expectRethrows(.cannotConnectToHost, after: 3, on: session) { try await examples.defaults() }
    }

    @Test("Custom backoff, unchanged call: a first success returns at once")
    func customBackoffSucceedsAtOnce() async throws {
        let session = SeedScriptedSession([.status(204)])
        let (_, response) = try await SeedScriptedSession.$current.withValue(session) {
            try await examples.customBackoff()
        }
        #expect(statusCode(response) == 204)
        #expect(session.callCount == 1)
        // That it does not wait is checked below with a 60 s backoff: this example's 2 s is too close to the
        // scheduling delays of a busy machine for a bound on real time.
    }

    @Test("The same call with a 60 s backoff: a first success does not wait for it")
    func aFirstSuccessDoesNotWaitForTheBackoff() async throws {
        let session = SeedScriptedSession([.status(204)])
        let url = examples.url
        let start = ContinuousClock.now
        let (_, response) = try await retry(maxAttempts: 5) {
            try await session.data(from: url)
        } strategy: { _ in
            return .backoff(.constant(.seconds(60)))
        }
        #expect(statusCode(response) == 204)
        #expect(session.callCount == 1)
        #expect(start.duration(to: .now) < promptBound, "a retrier that waited the backoff takes 60 s")
    }

    @Test("Custom backoff on a test clock: five attempts, two seconds apart")
    func customBackoffWaitsTwoSecondsBetweenFiveAttempts() async throws {
        let clock = VirtualClock()
        let session = SeedScriptedSession(Array(repeating: .failure(.timedOut), count: 4) + [.status(200)])
        let task = customBackoff(session, on: clock)
        for retry in 1...4 {
            await clock.waitForSleepers()
            #expect(session.callCount == retry)
            #expect(clock.nextDeadline == clock.now.advanced(by: .seconds(2)))
            await clock.advance(by: .seconds(2))
        }
        let (_, response) = try await task.value
        #expect(statusCode(response) == 200)
        #expect(session.callCount == 5)
        #expect(clock.now == .zero.advanced(by: .seconds(8)))
    }

    @Test("Custom backoff on a test clock: the fifth failure is rethrown")
    func customBackoffExhausts() async throws {
        let clock = VirtualClock()
        let session = SeedScriptedSession(Array(repeating: .failure(.timedOut), count: 5))
        let task = customBackoff(session, on: clock)
        await #expect(throws: URLError.self) { try await clock.run(until: task) }
        #expect(session.callCount == 5)
        #expect(clock.now == .zero.advanced(by: .seconds(8)))
    }

    @Test("429: waits the Retry-After seconds, then succeeds")
    func tooManyRequestsHonoursRetryAfter() async throws {
        let session = SeedScriptedSession([.status(429, headers: ["Retry-After": "0.02"]), .status(200, body: "done")])
        let start = ContinuousClock.now
        let (data, response) = try await SeedScriptedSession.$current.withValue(session) {
            try await examples.tooManyRequests()
        }
        #expect(String(decoding: data, as: UTF8.self) == "done")
        #expect(statusCode(response) == 200)
        #expect(session.callCount == 2)
        #expect(start.duration(to: .now) >= .milliseconds(20))
    }

    @Test("429: any other error stops at once and is rethrown")
    func tooManyRequestsStopsOnOtherErrors() async throws {
        let session = SeedScriptedSession([.failure(.badServerResponse), .status(200)])
        await expectRethrows(.badServerResponse, after: 1, on: session) { try await examples.tooManyRequests() }
    }

    @Test("429 three times: the last TooManyRequests is rethrown")
    func tooManyRequestsExhausts() async throws {
        let session = SeedScriptedSession([
            .status(429, headers: ["Retry-After": "0.001"]), .status(429, headers: ["Retry-After": "0.001"]),
            .status(429, headers: ["Retry-After": "7"]),
        ])
        await SeedScriptedSession.$current.withValue(session) {
            let error = await #expect(throws: SeedExamples.TooManyRequests.self) {
                try await examples.tooManyRequests()
            }
            #expect(error?.retryAfter == 7)
        }
        #expect(session.callCount == 3)
    }

    @Test("A non-2xx status that is not 429 is returned, not retried")
    func otherStatusIsAValue() async throws {
        let session = SeedScriptedSession([.status(503)])
        let (_, response) = try await SeedScriptedSession.$current.withValue(session) {
            try await examples.tooManyRequests()
        }
        #expect(statusCode(response) == 503)
        #expect(session.callCount == 1)
    }
}

import Foundation
import RetryKitHTTP
import RetryKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One answer per give-up (issue 27, point 6): a retrier that gives up on a failing response ends the same way in all
/// four forms — the completion handler of `dataTask(with:retryPolicy:)`, `try await` on the task it returns, the async
/// `data(for:retryPolicy:)` and `policy.run` — with the last response and no error.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct GiveUpAgreementTests {
    /// A give-up on a failing response, and how many attempts it takes.
    enum GiveUp: String, CaseIterable, Sendable, CustomStringConvertible {
        /// Every attempt gets a 503: the attempts run out.
        case exhausted
        /// A `POST` without an `Idempotency-Key` gets a 503: the policy stops at once.
        case stopped

        var description: String { rawValue }
        var method: String { self == .exhausted ? "GET" : "POST" }
        var attempts: Int { self == .exhausted ? 3 : 1 }
    }

    /// The four ways to run a policy against URLSession.
    enum Form: String, CaseIterable, Sendable {
        case completionHandler, taskValue, dataFor, policyRun
    }

    /// What a form ended with: a status and body, or an error.
    struct Ending: Equatable, CustomStringConvertible {
        var status: Int?
        var body: String?
        var error: String?

        var description: String {
            "status \(status.map(String.init) ?? "nil"), body \(body ?? "nil"), \(error ?? "no error")"
        }
    }

    static func end(_ form: Form, _ request: URLRequest, _ policy: HTTPRetryPolicy, _ session: URLSession) async
        -> Ending
    {
        func ending(_ data: Data?, _ response: URLResponse?, _ error: (any Error)?) -> Ending {
            Ending(
                status: (response as? HTTPURLResponse)?.statusCode,
                body: data.map { String(decoding: $0, as: UTF8.self) },
                error: error.map { String(describing: $0) })
        }
        switch form {
        case .completionHandler:
            let retried = await send(request, policy: policy, style: .completionHandler, in: session)
            return ending(retried.data, retried.response, retried.error)
        case .taskValue:
            let task = session.dataTask(with: request, retryPolicy: policy) { _, _, _, _ in }
            do {
                let (data, response) = try await task.value
                return ending(data, response, nil)
            } catch {
                return ending(nil, nil, error)
            }
        case .dataFor:
            let retried = await send(request, policy: policy, style: .async, in: session)
            return ending(retried.data, retried.response, retried.error)
        case .policyRun:
            do {
                let (data, response) = try await policy.run(
                    method: HTTPRequestMethod(rawValue: request.httpMethod ?? "GET"),
                    requestHeader: { request.value(forHTTPHeaderField: $0) },
                    statusCode: { ($0.1 as? HTTPURLResponse)?.statusCode ?? 0 },
                    responseHeader: { ($0.1 as? HTTPURLResponse)?.value(forHTTPHeaderField: $1) }
                ) { _ in try await session.data(for: request) }
                return ending(data, response, nil)
            } catch {
                return ending(nil, nil, error)
            }
        }
    }

    @Test(arguments: GiveUp.allCases)
    func everyFormEndsAGiveUpOnAFailingResponseWithThatResponse(giveUp: GiveUp) async throws {
        let server = try ScriptedHTTPServer()
        let session = makeSession()
        let policy = millisecondPolicy(retryLimit: 2)

        var endings: [Form: Ending] = [:]
        for form in Form.allCases {
            let path = "/busy-\(form.rawValue)"
            server.script(path, [.respond(503, body: "busy")])
            endings[form] = await Self.end(form, makeRequest(giveUp.method, url: server.url(path)), policy, session)
            #expect(server.requestCount(to: path) == giveUp.attempts, "\(form)")
        }

        let expected = Ending(status: 503, body: "busy", error: nil)
        for form in Form.allCases {
            #expect(endings[form] == expected, "\(form)")
        }
        await tearDown(server, session)
    }
}

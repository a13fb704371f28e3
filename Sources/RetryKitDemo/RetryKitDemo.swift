import Dispatch
import Foundation
import RetryKit
import RetryKitHTTP
import RetryKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `swift run retrykit-demo`: every RetryKit style against a flaky endpoint on a local scripted server.
///
/// Every combination of flags is a meaningful run: the outcome each scenario should have is computed from the flags
/// (with `--max-attempts 2` the flaky endpoints, which fail twice, are given up on), and the exit status says whether
/// every scenario ended that way.
@main
struct RetryKitDemo {
    /// What the command line asked for.
    struct Options: Equatable {
        var scenarios: [Scenario] = Scenario.allCases
        var maxAttempts = 4
        var baseDelay: Duration = .milliseconds(100)
    }

    /// What to do: run the scenarios, or print the usage.
    enum Command: Equatable {
        case run(Options)
        case help
    }

    enum Scenario: String, CaseIterable {
        case legacy, bridged, http, cancel, refresh

        var title: String {
            switch self {
            case .legacy: return "A legacy completion-handler API, retried with retry(on:)"
            case .bridged: return "The same legacy call, bridged into async/await with withRetry"
            case .http: return "URLSession with HTTPRetryPolicy, honouring Retry-After"
            case .cancel: return "Cancellation in the middle of a 2 s backoff"
            case .refresh: return "100 requests with an expired token share one refresh (HTTPAuthenticator)"
            }
        }

        /// The path the scenario requests from the scripted server.
        var path: String {
            switch self {
            case .legacy: return "/legacy/weather"
            case .bridged: return "/bridged/weather"
            case .http: return "/http/forecast"
            case .cancel: return "/cancel/always-503"
            case .refresh: return "/refresh/profile"
            }
        }
    }

    /// The exit statuses.
    enum ExitStatus {
        /// Every scenario ended as its flags say it should (succeeded, gave up or was cancelled).
        static let expected: Int32 = 0
        /// A scenario ended otherwise, or the local server could not start.
        static let unexpected: Int32 = 1
        /// A bad flag or value.
        static let usage: Int32 = 2
    }

    static let maxAttemptsRange = 1...100
    static let baseDelayRange = 0...5_000

    static let usage = """
        usage: retrykit-demo [SCENARIO… | --scenario SCENARIO…] [--max-attempts N] [--base-delay-ms N]

        Runs each style of RetryKit against a flaky endpoint on a scripted HTTP server bound to 127.0.0.1
        and prints a per-attempt timeline (attempt, outcome, chosen delay, actual wait).

        scenarios (default: all, in this order; each at most once):
          legacy    \(Scenario.legacy.title)
          bridged   \(Scenario.bridged.title)
          http      \(Scenario.http.title)
          cancel    \(Scenario.cancel.title)
          refresh   \(Scenario.refresh.title)

        options (`--flag value` or `--flag=value`):
          --scenario NAME     run this scenario (as the plain NAME does; repeat it for more)
          --max-attempts N    attempts per retrier, \(maxAttemptsRange.lowerBound) to \(maxAttemptsRange.upperBound) \
        (default 4). The flaky endpoints fail twice, so
                              below 3 the retriers give up, and with 1 the cancel scenario has no wait to cancel:
                              the demo expects exactly that.
          --base-delay-ms N   first backoff delay of legacy and bridged, \(baseDelayRange.lowerBound) to \
        \(baseDelayRange.upperBound) ms (default 100);
                              http waits as its Retry-After header says, cancel waits 2 s;
                              refresh retries a 401 at once after the refresh, and prints
                              `refresh: requests=N succeeded=N refreshes=N`
          -h, --help          print this help and exit

        exit status: 0 when every scenario ended as expected for these flags, 1 when one did not,
        2 for a bad flag or value.
        """

    /// Parses the arguments (without the program name). Never traps: a bad flag or value is a ``DemoUsageError``.
    static func parse(_ arguments: [String]) -> Result<Command, DemoUsageError> {
        var options = Options()
        var chosen: [Scenario] = []
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            if argument == "-h" || argument == "--help" { return .success(.help) }
            guard argument.hasPrefix("-") else {
                guard let scenario = Scenario(rawValue: argument) else {
                    return .failure(DemoUsageError("unknown scenario '\(argument)'"))
                }
                if !chosen.contains(scenario) { chosen.append(scenario) }
                continue
            }
            // `--flag=value` or `--flag value`.
            let flag: String
            let value: String?
            if let equals = argument.firstIndex(of: "=") {
                flag = String(argument[..<equals])
                value = String(argument[argument.index(after: equals)...])
            } else {
                flag = argument
                value = index < arguments.endIndex ? arguments[index] : nil
                if value != nil { index += 1 }
            }
            switch flag {
            case "--scenario":
                guard let value else { return .failure(DemoUsageError("--scenario takes a scenario's name")) }
                guard let scenario = Scenario(rawValue: value) else {
                    return .failure(DemoUsageError("unknown scenario '\(value)'"))
                }
                if !chosen.contains(scenario) { chosen.append(scenario) }
            case "--max-attempts":
                guard let number = wholeNumber(value, in: maxAttemptsRange) else {
                    return .failure(DemoUsageError(flag, value, expects: maxAttemptsRange))
                }
                options.maxAttempts = number
            case "--base-delay-ms":
                guard let number = wholeNumber(value, in: baseDelayRange) else {
                    return .failure(DemoUsageError(flag, value, expects: baseDelayRange))
                }
                options.baseDelay = .milliseconds(number)
            default:
                return .failure(DemoUsageError("unknown option '\(flag)'"))
            }
        }
        if !chosen.isEmpty {
            options.scenarios = Scenario.allCases.filter(chosen.contains)
        }
        return .success(.run(options))
    }

    private static func wholeNumber(_ text: String?, in range: ClosedRange<Int>) -> Int? {
        guard let text, let number = Int(text), range.contains(number) else { return nil }
        return number
    }

    static func main() async {
        switch parse(Array(CommandLine.arguments.dropFirst())) {
        case .success(.help):
            print(usage)
            exit(0)
        case .failure(let error):
            FileHandle.standardError.write(Data("retrykit-demo: \(error.message) (see --help)\n".utf8))
            exit(ExitStatus.usage)
        case .success(.run(let options)):
            exit(await run(options))
        }
    }

    /// Runs the scenarios and returns the exit status.
    static func run(_ options: Options) async -> Int32 {
        let server: ScriptedHTTPServer
        do {
            server = try ScriptedHTTPServer()
        } catch {
            FileHandle.standardError.write(Data("retrykit-demo: cannot start the local server: \(error)\n".utf8))
            return ExitStatus.unexpected
        }
        defer { server.stop() }
        print("Scripted HTTP server on \(server.baseURL), at most \(options.maxAttempts) attempts per retrier\n")

        let demo = Demo(server: server, options: options)
        var failures: [String] = []
        for scenario in options.scenarios {
            print("▶ \(scenario.rawValue): \(scenario.title)")
            let expected = demo.expectedOutcome(of: scenario)
            print("  expected: \(expected)")
            let outcome = await demo.run(scenario)
            if outcome == expected {
                print("  ✓ \(outcome), as expected\n")
            } else {
                print("  ✗ \(outcome), expected \(expected)\n")
                failures.append(scenario.rawValue)
            }
        }
        if !failures.isEmpty {
            print("unexpected outcomes in: \(failures.joined(separator: ", "))")
            return ExitStatus.unexpected
        }
        print("every scenario ended as expected")
        return ExitStatus.expected
    }
}

/// A bad command line, described in one line.
struct DemoUsageError: Error, Equatable {
    let message: String

    init(_ message: String) {
        self.message = message
    }

    init(_ flag: String, _ value: String?, expects range: ClosedRange<Int>) {
        let expectation = "a whole number from \(range.lowerBound) to \(range.upperBound)"
        if let value {
            self.init("\(flag) takes \(expectation), not '\(value)'")
        } else {
            self.init("\(flag) takes \(expectation)")
        }
    }
}

/// How a scenario ended: the retrier's result and how many requests the server received.
struct Outcome: Equatable, CustomStringConvertible {
    enum Ending: String {
        case succeeded
        case gaveUp = "gave up"
        case cancelled
    }

    let ending: Ending
    /// How many requests the server received (refresh: how many it accepted with the valid token).
    let requests: Int
    /// How many tokens the server issued to refreshes (refresh only).
    var refreshes: Int? = nil

    var description: String {
        let refreshed = refreshes.map { ", \($0) refresh\($0 == 1 ? "" : "es")" } ?? ""
        return "\(ending.rawValue) after \(requests) request\(requests == 1 ? "" : "s")\(refreshed)"
    }
}

/// The scenarios. Each reports how it ended, to compare with ``expectedOutcome(of:)``.
struct Demo: Sendable {
    let server: ScriptedHTTPServer
    let options: RetryKitDemo.Options
    /// A session without a URL cache: on Linux, cancelling a task of a session with one can trap in Foundation
    /// (README, "Platforms"), and the cancel scenario cancels an attempt in flight.
    let client = LegacyClient(session: URLSession(configuration: Demo.sessionConfiguration()))
    let queue = DispatchQueue(label: "retrykit-demo")

    static func sessionConfiguration() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        return configuration
    }

    /// The failures each scenario's endpoint answers with before it succeeds (the cancel scenario's never does).
    static let failuresBeforeSuccess = 2

    /// How `scenario` should end with these options.
    func expectedOutcome(of scenario: RetryKitDemo.Scenario) -> Outcome {
        Self.expectedOutcome(of: scenario, maxAttempts: options.maxAttempts)
    }

    /// How `scenario` should end when each retrier may make `attempts` attempts.
    static func expectedOutcome(of scenario: RetryKitDemo.Scenario, maxAttempts attempts: Int) -> Outcome {
        switch scenario {
        case .legacy, .bridged, .http:
            let needed = failuresBeforeSuccess + 1
            return attempts >= needed
                ? Outcome(ending: .succeeded, requests: needed) : Outcome(ending: .gaveUp, requests: attempts)
        case .cancel:
            // The first attempt fails; with a retry left, the retrier waits 2 s and is cancelled during the wait.
            return Outcome(ending: attempts >= 2 ? .cancelled : .gaveUp, requests: 1)
        case .refresh:
            // Every first attempt gets 401; with a retry left, one refresh and every retry accepted. With one attempt the
            // 401 is the last response: no refresh.
            return attempts >= 2
                ? Outcome(ending: .succeeded, requests: refreshRequests, refreshes: 1)
                : Outcome(ending: .gaveUp, requests: 0, refreshes: 0)
        }
    }

    func run(_ scenario: RetryKitDemo.Scenario) async -> Outcome {
        let path = scenario.path
        let ending: Outcome.Ending
        switch scenario {
        case .legacy: ending = await legacy(path)
        case .bridged: ending = await bridged(path)
        case .http: ending = await http(path)
        case .cancel: ending = await cancel(path)
        case .refresh: return await refresh(path).outcome
        }
        return Outcome(ending: ending, requests: server.requestCount(to: path))
    }

    private static func ending(of error: any Error) -> Outcome.Ending {
        error is CancellationError ? .cancelled : .gaveUp
    }

    private var backoff: BackoffStrategy<ContinuousClock> {
        .exponential(a: options.baseDelay, b: 2).max(.seconds(2)).jitter()
    }

    /// A flaky path: two 503s, then 200.
    private func flakyURL(_ path: String) -> URL {
        server.script(path, [.respond(503), .respond(503), .respond(200, body: "sunny")])
        let url = server.url(path)
        print("  GET \(url.path): 503, 503, then 200")
        return url
    }

    private func legacy(_ path: String) async -> Outcome.Ending {
        let url = flakyURL(path)
        let timeline = Timeline()
        let client = self.client
        let backoff = self.backoff
        let maxAttempts = options.maxAttempts
        let handle: RetryHandle<String> = retry(maxAttempts: maxAttempts, on: queue) { _, done in
            client.fetchText(url, done: done)
        } strategy: { _ in
            .backoff(backoff)
        } observer: { event in
            timeline.observe(event)
        } completion: { _, summary in
            print(
                "  completion on the retrier's queue: \(summary.reason), retries left: "
                    + "\(maxAttempts - summary.attempts)")
        }
        do {
            let text = try await handle.value
            print("  value: \"\(text)\"")
            return .succeeded
        } catch {
            return Self.ending(of: error)
        }
    }

    private func bridged(_ path: String) async -> Outcome.Ending {
        let url = flakyURL(path)
        let timeline = Timeline()
        let client = self.client
        do {
            let text = try await withRetry(maxAttempts: options.maxAttempts) { _, done in
                client.fetchText(url, done: done)
            } strategy: { _ in
                .backoff(backoff)
            } observer: { event in
                timeline.observe(event)
            }
            print("  value: \"\(text)\"")
            return .succeeded
        } catch {
            print("  error: \(Timeline.describe(error))")
            return Self.ending(of: error)
        }
    }

    private func http(_ path: String) async -> Outcome.Ending {
        server.script(path, [.respond(429, headers: ["Retry-After": "1"]), .respond(503), .respond(200, body: "rain")])
        var request = URLRequest(url: server.url(path))
        request.httpMethod = "GET"
        print("  GET \(path): 429 with Retry-After: 1, then 503, then 200")
        var policy = HTTPRetryPolicy()  // Alamofire's defaults + Retry-After, full jitter, 30 s cap
        policy.retryLimit = UInt(options.maxAttempts - 1)
        policy.exponentialBackoffScale = 0.1
        let timeline = Timeline(describe: { error in
            if let status = error as? HTTPStatusError { return "HTTP \(status.statusCode)" }
            return Timeline.describe(error)
        })
        do {
            let (data, response) = try await client.session.data(for: request, retryPolicy: policy) { event in
                timeline.observe(event)
            }
            // When the retrier gives up on a failing status, the last response is the result.
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            print("  response: HTTP \(status), body \"\(String(decoding: data, as: UTF8.self))\"")
            return (200..<300).contains(status) ? .succeeded : .gaveUp
        } catch {
            print("  error: \(Timeline.describe(error))")
            return Self.ending(of: error)
        }
    }

    /// How many requests the refresh scenario sends.
    static let refreshRequests = 100

    /// What the refresh scenario measured.
    struct RefreshCounts: Equatable {
        let requests: Int
        let succeeded: Int
        let refreshes: Int
        /// The requests the server accepted with the valid token.
        let accepted: Int

        /// The scenario's one summary line.
        var line: String { "refresh: requests=\(requests) succeeded=\(succeeded) refreshes=\(refreshes)" }

        var outcome: Outcome {
            Outcome(
                ending: succeeded == requests ? .succeeded : .gaveUp, requests: accepted, refreshes: refreshes)
        }
    }

    /// 100 concurrent requests, half `dataTask(with:retryPolicy:)` and half `data(for:retryPolicy:)`, whose bearer
    /// token has expired: one `HTTPAuthenticator` refreshes it once for all of them.
    func refresh(_ path: String) async -> RefreshCounts {
        let refreshPath = "/refresh/token"
        server.script(path, [.respond(200, body: "profile")])
        let expired = server.requireBearerToken(on: [path], refreshPath: refreshPath)
        server.expireToken()
        let count = Self.refreshRequests
        print("  GET \(path) ×\(count), half dataTask, half data(for:), with \(expired), which has expired")
        print("  POST \(refreshPath) issues the next token")

        let refreshURL = server.url(refreshPath)
        let refreshSession = client.session
        let authenticator = HTTPAuthenticator<String>(
            credential: expired,
            apply: { token, request in request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") },
            refresh: { _ in
                var request = URLRequest(url: refreshURL)
                request.httpMethod = "POST"
                let (data, response) = try await refreshSession.data(for: request)
                guard (response as? HTTPURLResponse)?.statusCode == 200 else {
                    throw URLError(.userAuthenticationRequired)
                }
                return String(decoding: data, as: UTF8.self)
            })
        var plain = HTTPRetryPolicy()
        plain.retryLimit = UInt(options.maxAttempts - 1)
        plain.exponentialBackoffScale = 0.1
        let policy = plain.authenticated(by: authenticator)

        let configuration = Self.sessionConfiguration()
        configuration.httpMaximumConnectionsPerHost = 16
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        let request = URLRequest(url: server.url(path))
        let succeeded = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<count {
                if index.isMultiple(of: 2) {
                    group.addTask {
                        await withCheckedContinuation { continuation in
                            session.dataTask(with: request, retryPolicy: policy) { _, response, _, _ in
                                continuation.resume(returning: (response as? HTTPURLResponse)?.statusCode == 200)
                            }
                        }
                    }
                } else {
                    group.addTask {
                        let response = try? await session.data(for: request, retryPolicy: policy).1
                        return (response as? HTTPURLResponse)?.statusCode == 200
                    }
                }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        let valid = server.currentToken.map { "Bearer \($0)" }
        let accepted = server.requests(to: path).filter { recorded in
            recorded.headers.contains { $0.name.lowercased() == "authorization" && $0.value == valid }
        }.count
        let counts = RefreshCounts(
            requests: count, succeeded: succeeded, refreshes: server.tokenRefreshes, accepted: accepted)
        print(counts.line)
        return counts
    }

    private func cancel(_ path: String) async -> Outcome.Ending {
        server.script(path, [.respond(503)])
        let url = server.url(path)
        print("  GET \(url.path): always 503; backoff 2 s; cancel() 300 ms into the first wait")
        let timeline = Timeline()
        let client = self.client
        let queue = self.queue
        // The handle, once `retry` has returned it, and when `cancel()` was called.
        let box = Locked<(handle: RetryHandle<String>?, cancelledAt: ContinuousClock.Instant?)>((nil, nil))
        let handle: RetryHandle<String> = retry(maxAttempts: options.maxAttempts, on: queue) { _, done in
            client.fetchText(url, done: done)
        } strategy: { _ in
            .backoff(.constant(.seconds(2)))
        } observer: { event in
            timeline.observe(event)
            guard case .attemptFailed(_, _, .retry) = event else { return }
            queue.asyncAfter(deadline: .now() + .milliseconds(300)) {
                let handle = box.withLock { state in
                    state.cancelledAt = .now
                    return state.handle
                }
                print("  cancel() called")
                handle?.cancel()
            }
        } completion: { result, _ in
            let since = box.withLock { $0.cancelledAt }.map { Timeline.ms($0.duration(to: .now)) + " after cancel()" }
            let outcome = (try? result.get()) ?? "\(result)"
            print("  completion: \(outcome)\(since.map { ", \($0)" } ?? "")")
        }
        box.withLock { $0.handle = handle }
        do {
            _ = try await handle.value
            return .succeeded
        } catch {
            return Self.ending(of: error)
        }
    }
}

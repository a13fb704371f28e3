import Dispatch
import Foundation
import RetryKit
import RetryKitHTTP
import RetryKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `swift run retrykit-demo`: every RetryKit style against a flaky endpoint on a local scripted server.
@main
struct RetryKitDemo {
    struct Options {
        var scenarios: [Scenario] = Scenario.allCases
        var maxAttempts = 4
        var baseDelay: Duration = .milliseconds(100)
    }

    enum Scenario: String, CaseIterable {
        case legacy, bridged, http, cancel

        var title: String {
            switch self {
            case .legacy: return "A legacy completion-handler API, retried with retry(on:)"
            case .bridged: return "The same legacy call, bridged into async/await with withRetry"
            case .http: return "URLSession with HTTPRetryPolicy, honouring Retry-After"
            case .cancel: return "Cancellation in the middle of a 2 s backoff"
            }
        }
    }

    static let usage = """
        usage: retrykit-demo [SCENARIO…] [--max-attempts N] [--base-delay-ms N]

        Runs each style of RetryKit against a flaky endpoint on a scripted HTTP server bound to 127.0.0.1
        and prints a per-attempt timeline (attempt, outcome, chosen delay, actual wait).

        scenarios: \(Scenario.allCases.map(\.rawValue).joined(separator: ", ")) (default: all)
          --max-attempts N    attempts per retrier (default 4)
          --base-delay-ms N   first backoff delay in ms for legacy and bridged (default 100)
        """

    static func parse(_ arguments: [String]) -> Result<Options, DemoUsageError> {
        var options = Options()
        var chosen: [Scenario] = []
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "-h", "--help":
                return .failure(DemoUsageError(message: nil))
            case "--max-attempts":
                guard let value = iterator.next().flatMap(Int.init), value >= 1 else {
                    return .failure(DemoUsageError(message: "--max-attempts takes a whole number ≥ 1"))
                }
                options.maxAttempts = value
            case "--base-delay-ms":
                guard let value = iterator.next().flatMap(Int.init), value >= 0, value <= 5_000 else {
                    return .failure(DemoUsageError(message: "--base-delay-ms takes a whole number from 0 to 5000"))
                }
                options.baseDelay = .milliseconds(value)
            default:
                guard let scenario = Scenario(rawValue: argument) else {
                    return .failure(DemoUsageError(message: "unknown scenario or option: \(argument)"))
                }
                chosen.append(scenario)
            }
        }
        if !chosen.isEmpty { options.scenarios = chosen }
        return .success(options)
    }

    static func main() async {
        let options: Options
        switch parse(Array(CommandLine.arguments.dropFirst())) {
        case .success(let parsed):
            options = parsed
        case .failure(let error):
            if let message = error.message {
                FileHandle.standardError.write(Data("retrykit-demo: \(message)\n\n\(usage)\n".utf8))
                exit(2)
            }
            print(usage)
            exit(0)
        }

        let server: ScriptedHTTPServer
        do {
            server = try ScriptedHTTPServer()
        } catch {
            FileHandle.standardError.write(Data("retrykit-demo: cannot start the local server: \(error)\n".utf8))
            exit(1)
        }
        defer { server.stop() }
        print("Scripted HTTP server on \(server.baseURL)\n")

        let demo = Demo(server: server, options: options)
        var failures: [String] = []
        for scenario in options.scenarios {
            print("▶ \(scenario.rawValue): \(scenario.title)")
            let expected = await demo.run(scenario)
            print(expected ? "" : "  ✗ unexpected outcome\n")
            if !expected { failures.append(scenario.rawValue) }
        }
        if !failures.isEmpty {
            print("unexpected outcomes in: \(failures.joined(separator: ", "))")
            exit(1)
        }
    }
}

struct DemoUsageError: Error {
    let message: String?
}

/// The scenarios. Each returns whether it ended as the demo expects.
struct Demo: Sendable {
    let server: ScriptedHTTPServer
    let options: RetryKitDemo.Options
    let client = LegacyClient(session: URLSession(configuration: .ephemeral))
    let queue = DispatchQueue(label: "retrykit-demo")

    func run(_ scenario: RetryKitDemo.Scenario) async -> Bool {
        switch scenario {
        case .legacy: return await legacy()
        case .bridged: return await bridged()
        case .http: return await http()
        case .cancel: return await cancel()
        }
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

    private func legacy() async -> Bool {
        let url = flakyURL("/legacy/weather")
        let timeline = Timeline()
        let client = self.client
        let backoff = self.backoff
        let handle: RetryHandle<String> = retry(maxAttempts: options.maxAttempts, on: queue) { attempt, done in
            let task = client.fetchText(url) { text, error in done(text, error) }
            done.onCancel { task.cancel() }
        } strategy: { _ in
            .backoff(backoff)
        } observer: { event in
            timeline.observe(event)
        } completion: { _, summary in
            print(
                "  completion on the retrier's queue: \(summary.reason), retries left: "
                    + "\(options.maxAttempts - summary.attempts)")
        }
        return (try? await handle.value) == "sunny"
    }

    private func bridged() async -> Bool {
        let url = flakyURL("/bridged/weather")
        let timeline = Timeline()
        let client = self.client
        do {
            let text = try await withRetry(maxAttempts: options.maxAttempts) { attempt, done in
                let task = client.fetchText(url) { text, error in done(text, error) }
                done.onCancel { task.cancel() }
            } strategy: { _ in
                .backoff(backoff)
            } observer: { event in
                timeline.observe(event)
            }
            return text == "sunny"
        } catch {
            return false
        }
    }

    private func http() async -> Bool {
        let path = "/http/forecast"
        server.script(path, [.respond(429, headers: ["Retry-After": "1"]), .respond(503), .respond(200, body: "rain")])
        var request = URLRequest(url: server.url(path))
        request.httpMethod = "GET"
        print("  GET \(path): 429 with Retry-After: 1, then 503, then 200")
        var policy = HTTPRetryPolicy()  // Alamofire's defaults + Retry-After, full jitter, 30 s cap
        policy.retryLimit = UInt(max(options.maxAttempts - 1, 0))
        policy.exponentialBackoffScale = 0.1
        let timeline = Timeline(describe: { error in
            if let status = error as? HTTPStatusError { return "HTTP \(status.statusCode)" }
            return Timeline.describe(error)
        })
        do {
            let (data, response) = try await client.session.data(for: request, retryPolicy: policy) { event in
                timeline.observe(event)
            }
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            print("  response: HTTP \(status), body \"\(String(decoding: data, as: UTF8.self))\"")
            return status == 200
        } catch {
            print("  error: \(error)")
            return false
        }
    }

    private func cancel() async -> Bool {
        let path = "/cancel/always-503"
        server.script(path, [.respond(503)])
        let url = server.url(path)
        print("  GET \(url.path): always 503; backoff 2 s; cancel() 300 ms into the first wait")
        let timeline = Timeline()
        let client = self.client
        let queue = self.queue
        // The handle, once `retry` has returned it, and when `cancel()` was called.
        let box = Locked<(handle: RetryHandle<String>?, cancelledAt: ContinuousClock.Instant?)>((nil, nil))
        let handle: RetryHandle<String> = retry(maxAttempts: options.maxAttempts, on: queue) { attempt, done in
            let task = client.fetchText(url) { text, error in done(text, error) }
            done.onCancel { task.cancel() }
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
            let since = box.withLock { $0.cancelledAt }.map { Timeline.ms($0.duration(to: .now)) } ?? "?"
            let outcome = (try? result.get()) ?? "\(result)"
            print("  completion: \(outcome), \(since) after cancel()")
        }
        box.withLock { $0.handle = handle }
        do {
            _ = try await handle.value
            return false
        } catch {
            return error is CancellationError
        }
    }
}

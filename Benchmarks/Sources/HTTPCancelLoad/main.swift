// http-cancel-load: cancel → completion of many concurrent URLSession requests, each cancelled at a random moment.
//
//     http-cancel-load [callback|async|urlsession|task|all] [count] [--window S] [--connections N] [--seed S]
//
// A local server (RetryKitTesting's ScriptedHTTPServer on 127.0.0.1) hangs a third of the requests, answers a third
// 503 and a third 503 with `Retry-After: 1`; the RetryKit styles retry them (20 retries, 0.5 s · 2ˣ or the hint, no
// jitter), so every request is still running when its cancel comes. Each request is cancelled at a seeded random moment
// within `--window` seconds (1.5 by default) of the start, from a block on the global queue, as app code would; the
// figure is the time from the line before that block's cancel call to the request's completion:
//
// - `callback`: `session.dataTask(with:retryPolicy:) { … }`, then `task.cancel()`; ends when the completion handler
//   runs.
// - `async`: a `Task` awaiting `session.data(for:retryPolicy:)`, then `task.cancel()`; ends when the call throws.
// - `urlsession`: plain `session.dataTask(with:) { … }` to the hanging path (a 503 would end before its cancel without
//   a retrier), then `task.cancel()`; ends when URLSession reports the cancelled task. This is how long URLSession
//   itself takes to report a cancelled task, the `cancel()` call included.
// - `task`: a `Task` suspended in a continuation that only its cancellation handler resumes, then `task.cancel()`; no
//   request. The floor of the async style: one wake of a task on the cooperative pool, in the same conditions.
//
// Each style runs in turn in this process with a fresh session (`--connections` connections per host, 1,000 by
// default: every request gets its own connection). Run it beside CPU burners to measure under load (`yes > /dev/null`
// twice on 2 cores; see README.md, "HTTP cancel under load"). One line of `key=value` pairs per style. Release builds.

import Dispatch
import Foundation
import RetryKitHTTP
import RetryKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Helpers

/// `DispatchTime.now()` in nanoseconds.
func uptime() -> UInt64 {
    DispatchTime.now().uptimeNanoseconds
}

/// Nanosecond timestamps and completion counts, one slot per request, written from any thread.
final class Stamps: @unchecked Sendable {
    // @unchecked Sendable: every access holds the lock.
    private let lock = NSLock()
    private var cancelled: [UInt64]
    private var ended: [UInt64]
    private var completions: [Int]

    init(count: Int) {
        cancelled = Array(repeating: 0, count: count)
        ended = Array(repeating: 0, count: count)
        completions = Array(repeating: 0, count: count)
    }

    func cancel(_ index: Int) {
        let now = uptime()
        lock.lock()
        cancelled[index] = now
        lock.unlock()
    }

    func end(_ index: Int) {
        let now = uptime()
        lock.lock()
        if completions[index] == 0 { ended[index] = now }
        completions[index] += 1
        lock.unlock()
    }

    var snapshot: (cancelled: [UInt64], ended: [UInt64], completions: [Int]) {
        lock.lock()
        defer { lock.unlock() }
        return (cancelled, ended, completions)
    }

    var completed: Int {
        lock.lock()
        defer { lock.unlock() }
        return completions.reduce(0) { $0 + ($1 > 0 ? 1 : 0) }
    }
}

/// The p-th percentile (0...100) of `sorted`.
func percentile(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    let rank = Int((p / 100 * Double(sorted.count - 1)).rounded())
    return sorted[min(max(rank, 0), sorted.count - 1)]
}

func format(_ value: Double, _ digits: Int = 1) -> String {
    String(format: "%.\(digits)f", value)
}

/// Blocks the main thread until `condition` holds, polling.
func waitUntil(timeout: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline { return false }
        usleep(2_000)
    }
    return true
}

func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(
        separator: "/") ?? "?"
}

func makeSession(connections: Int) -> URLSession {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = nil  // swift-corelibs-foundation traps on an early cancel with a cache (README)
    configuration.timeoutIntervalForRequest = 120
    configuration.httpMaximumConnectionsPerHost = connections
    configuration.connectionProxyDictionary = [:]
    return URLSession(configuration: configuration)
}

/// A task's wait that only its cancellation ends: the least an async request's cancellation costs (one wake of the
/// task on the cooperative pool), the `task` baseline.
final class CancelWake: @unchecked Sendable {
    // @unchecked Sendable: every access holds the lock.
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Void, Never>?
    private var cancelled = false

    static func wait() async {
        let wake = CancelWake()
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                wake.lock.lock()
                if wake.cancelled {
                    wake.lock.unlock()
                    continuation.resume()
                } else {
                    wake.continuation = continuation
                    wake.lock.unlock()
                }
            }
        } onCancel: {
            wake.lock.lock()
            wake.cancelled = true
            let continuation = wake.continuation
            wake.continuation = nil
            wake.lock.unlock()
            continuation?.resume()
        }
    }
}

// MARK: - One run

let paths = ["/hang", "/503", "/503-retry-after"]

/// Runs `count` requests in `style`, cancels each at its moment, and returns the figure's line.
func run(
    _ style: String, count: Int, window: Double, connections: Int, seed: UInt64, server: ScriptedHTTPServer
) -> String {
    let session = makeSession(connections: connections)
    var policy = HTTPRetryPolicy(retryLimit: 20)
    policy.jitter = .none
    var generator = SeededRandomNumberGenerator(seed: seed)
    let moments = (0..<count).map { _ in Double.random(in: 0..<window, using: &generator) }
    let stamps = Stamps(count: count)
    let load = loadAverage()
    let cancels = DispatchQueue.global()

    let start = DispatchTime.now()
    for index in 0..<count {
        let path = style == "urlsession" ? "/hang" : paths[index % paths.count]
        let request = URLRequest(url: server.url(path))
        let cancel: @Sendable () -> Void
        switch style {
        case "callback":
            let task = session.dataTask(with: request, retryPolicy: policy) { _, _, _, _ in stamps.end(index) }
            cancel = { task.cancel() }
        case "async":
            let task = Task {
                _ = try? await session.data(for: request, retryPolicy: policy)
                stamps.end(index)
            }
            cancel = { task.cancel() }
        case "task":
            let task = Task {
                await CancelWake.wait()
                stamps.end(index)
            }
            cancel = { task.cancel() }
        default:
            let task = session.dataTask(with: request) { _, _, _ in stamps.end(index) }
            task.resume()
            cancel = { task.cancel() }
        }
        cancels.asyncAfter(deadline: start + moments[index]) {
            stamps.cancel(index)
            cancel()
        }
    }
    let allEnded = waitUntil(timeout: window + 120) { stamps.completed >= count }
    let (cancelled, ended, completions) = stamps.snapshot
    session.invalidateAndCancel()
    guard allEnded else {
        return
            "figure=http-cancel kind=\(style) error=\(count - stamps.completed) of \(count) requests did not complete"
    }

    // A request that ended before its cancel (none should) is counted, not measured.
    let measured = (0..<count).filter { cancelled[$0] != 0 && ended[$0] >= cancelled[$0] }
    let latency = measured.map { Double(ended[$0] - cancelled[$0]) / 1e6 }.sorted()
    let duplicates = completions.reduce(0) { $0 + max($1 - 1, 0) }
    // The worst per path: a hanging attempt, a backoff between 503s, a `Retry-After` wait (or its attempt).
    let worstByPath = (0..<paths.count).map { path in
        measured.filter { $0 % paths.count == path }.map { Double(ended[$0] - cancelled[$0]) / 1e6 }.max() ?? .nan
    }
    return "figure=http-cancel kind=\(style) count=\(count) measured=\(latency.count) "
        + "ended_before_cancel=\(count - measured.count) duplicate_completions=\(duplicates) "
        + "median_ms=\(format(percentile(latency, 50), 2)) p99_ms=\(format(percentile(latency, 99), 2)) "
        + "max_ms=\(format(latency.last ?? .nan, 2)) "
        + (style == "urlsession" || style == "task"
            ? ""
            : "max_hang_ms=\(format(worstByPath[0], 2)) max_503_ms=\(format(worstByPath[1], 2)) "
                + "max_retry_after_ms=\(format(worstByPath[2], 2)) ")
        + "loadavg=\(load)"
}

// MARK: - Main

/// The value after `name` in `arguments`, removed from them with its name; `value` if absent.
func option(_ name: String, in arguments: inout [String], default value: String) -> String {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return value }
    defer { arguments.removeSubrange(index...index + 1) }
    return arguments[index + 1]
}
var arguments = Array(CommandLine.arguments.dropFirst())
let window = Double(option("--window", in: &arguments, default: "1.5")) ?? 1.5
let connections = Int(option("--connections", in: &arguments, default: "1000")) ?? 1000
let seed = UInt64(option("--seed", in: &arguments, default: "26")) ?? 26
let which = arguments.first ?? "all"
let count = arguments.count > 1 ? Int(arguments[1]) ?? 1000 : 1000
let styles = which == "all" ? ["callback", "async", "urlsession", "task"] : [which]
guard styles.allSatisfy({ ["callback", "async", "urlsession", "task"].contains($0) }) else {
    print(
        "usage: http-cancel-load [callback|async|urlsession|task|all] [count] [--window S] [--connections N] [--seed S]"
    )
    exit(2)
}

let server: ScriptedHTTPServer
do {
    server = try ScriptedHTTPServer(scripts: [
        "/hang": [.neverAnswer],
        "/503": [.respond(503)],
        "/503-retry-after": [.respond(503, headers: ["Retry-After": "1"])],
    ])
} catch {
    print("figure=http-cancel error=cannot start the server: \(error)")
    exit(1)
}
for (offset, style) in styles.enumerated() {
    print(
        run(style, count: count, window: window, connections: connections, seed: seed &+ UInt64(offset), server: server)
    )
    sleep(2)  // the server's threads of the cancelled connections wind down
}
server.stop()

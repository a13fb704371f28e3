import Foundation
import RetryKitHTTP

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The two faces of the retrying URLSession API.
enum RequestStyle: String, CaseIterable, Sendable, CustomStringConvertible {
    case completionHandler
    case async

    var description: String { rawValue }
}

/// Every event a retrying request reported, with the time it arrived. Thread-safe.
final class EventLog: Sendable {
    typealias Event = RetryEvent<URLSession.RetryResponse>

    private let entries = Locked<[(event: Event, at: ContinuousClock.Instant)]>([])

    func record(_ event: Event) {
        let now = ContinuousClock.now
        entries.withLock { $0.append((event, now)) }
    }

    var events: [Event] { entries.withLock { $0.map(\.event) } }

    /// How many attempts started.
    var started: Int {
        events.reduce(0) { count, event in
            if case .attemptStarted = event { return count + 1 }
            return count
        }
    }

    /// Every failed attempt: its error, what came next, and when it was reported.
    var failures: [(error: any Error, next: RetryNextStep, at: ContinuousClock.Instant)] {
        entries.withLock { entries in
            entries.compactMap { entry in
                if case .attemptFailed(_, let error, let next) = entry.event { return (error, next, entry.at) }
                return nil
            }
        }
    }

    /// The delays chosen before each retry (`attemptFailed(…, next: .retry(after:))`).
    var delays: [Duration] {
        failures.compactMap { failure in
            if case .retry(let delay) = failure.next { return delay }
            return nil
        }
    }

    /// The summary of the `finished` event, once there is one.
    var summary: RetrySummary? {
        for event in events {
            if case .finished(let summary, _) = event { return summary }
        }
        return nil
    }
}

/// What the caller of a retrying request got.
struct Retried: Sendable {
    var data: Data?
    var response: URLResponse?
    var error: (any Error)?
    /// The completion handler's summary (completion-handler style only).
    var summary: RetrySummary?
    /// When the outcome arrived.
    var at = ContinuousClock.now

    var status: Int? { (response as? HTTPURLResponse)?.statusCode }
    var body: String? { data.map { String(decoding: $0, as: UTF8.self) } }

    /// The URLError code of the error, if it is a `URLError` (or an `NSError` in `NSURLErrorDomain`).
    var urlErrorCode: URLError.Code? {
        guard let error else { return nil }
        if let urlError = error as? URLError { return urlError.code }
        let nsError = error as NSError
        return nsError.domain == NSURLErrorDomain ? URLError.Code(rawValue: nsError.code) : nil
    }
}

/// Sends `request` with retries in `style` and returns what the caller got. In the completion-handler style, a second
/// call of the completion handler is counted in `extraCompletions`.
func send(
    _ request: URLRequest, policy: HTTPRetryPolicy, style: RequestStyle, in session: URLSession,
    log: EventLog = EventLog(), extraCompletions: Locked<Int> = Locked(0)
) async -> Retried {
    switch style {
    case .completionHandler:
        let calls = Locked(0)
        return await withCheckedContinuation { continuation in
            session.dataTask(with: request, retryPolicy: policy, observer: log.record) {
                data, response, error, summary in
                let first = calls.withLock { calls in
                    calls += 1
                    return calls == 1
                }
                guard first else {
                    extraCompletions.withLock { $0 += 1 }
                    return
                }
                continuation.resume(
                    returning: Retried(data: data, response: response, error: error, summary: summary))
            }
        }
    case .async:
        do {
            let (data, response) = try await session.data(for: request, retryPolicy: policy) { log.record($0) }
            return Retried(data: data, response: response)
        } catch {
            return Retried(error: error)
        }
    }
}

/// A policy with Alamofire's exponential backoff scaled down to milliseconds and without jitter: the waits before the
/// retries are 10 ms, 20 ms, 40 ms, …
func millisecondPolicy(retryLimit: UInt = 2, scale: Double = 0.01) -> HTTPRetryPolicy {
    var policy = HTTPRetryPolicy(retryLimit: retryLimit, exponentialBackoffScale: scale)
    policy.jitter = .none
    return policy
}

/// `date` as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the preferred HTTP-date form.
func imfFixdate(_ date: Date) -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return formatter.string(from: date)
}

/// Polls the async `condition` every 5 ms until it holds or `limit` passes; returns whether it held.
func eventuallyAsync(within limit: Duration = .seconds(60), _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return await condition()
}

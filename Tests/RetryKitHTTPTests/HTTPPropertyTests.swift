import Foundation
import PropertyTesting
import RetryKitHTTP
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

private let limit = BackoffStrategy<ContinuousClock>.saturationLimit

/// A random `HTTPRetryPolicy`: every numeric and `Duration` parameter at its edges or random.
private struct HTTPPolicyCase: CustomStringConvertible, Sendable {
    var policy: HTTPRetryPolicy
    var description: String

    static func generate(_ random: inout PropertyRandom) -> HTTPPolicyCase {
        var policy = HTTPRetryPolicy(
            retryLimit: random.uint(), exponentialBackoffBase: random.uint(), exponentialBackoffScale: random.double())
        policy.maxRetryAfter = random.duration()
        policy.maxDelay = random.oneIn(3) ? nil : random.duration()
        policy.jitter = random.pick([.none, .full, .equal, .proportional(random.double())])
        policy.attemptTimeout = random.oneIn(2) ? nil : random.duration()
        policy.totalTimeout = random.oneIn(2) ? nil : random.duration()
        let text =
            "HTTPRetryPolicy(retryLimit: \(policy.retryLimit), exponentialBackoffBase: \(policy.exponentialBackoffBase), "
            + "exponentialBackoffScale: \(policy.exponentialBackoffScale)), maxRetryAfter: "
            + "\(exact(policy.maxRetryAfter)), maxDelay: \(exact(policy.maxDelay)), jitter: \(policy.jitter), "
            + "attemptTimeout: \(exact(policy.attemptTimeout)), totalTimeout: \(exact(policy.totalTimeout))"
        return HTTPPolicyCase(policy: policy, description: text)
    }
}

/// A `Retry-After` value: seconds at the edges of `Int64` and beyond, HTTP dates from the past to year 9999, and junk.
private func retryAfterValue(_ random: inout PropertyRandom, now: Date) -> String {
    switch Int.random(in: 0..<7, using: &random) {
    case 0: return String(random.int())
    case 1: return String(Int.random(in: 0...120, using: &random))
    case 2: return String(repeating: "9", count: Int.random(in: 1...40, using: &random))
    case 3:
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let offset = random.pick([
            -1e9, -1, 0, 1, 59, 61, 3_600, 1e9, 2.5e11, Double.random(in: -1e6...1e6, using: &random),
        ])
        return formatter.string(from: now.addingTimeInterval(offset))
    case 4:
        return random.pick(["", " ", "1.5", "-0", "+5", "0x10", "1e3", "Fri, 31 Dec 9999 23:59:59 GMT", "\t7 ", "٣"])
    case 5: return " \(Int.random(in: 0...1_000, using: &random)) "
    default:
        return String(
            (0..<Int.random(in: 0...12, using: &random)).map { _ in random.pick(Array("0123456789 ,:-GMTadx")) })
    }
}

@Suite("Properties: HTTP policy and Retry-After")
struct HTTPPropertyTests {
    @Test(
        "every HTTPRetryPolicy parameter: maxAttempts saturates, backoff delays lie in [0, limit] and under maxDelay"
    )
    func policyParameters() {
        checkProperty("HTTP policy parameters", generate: HTTPPolicyCase.generate) { testCase in
            let policy = testCase.policy
            var found: [String] = []
            let expectedAttempts = policy.retryLimit >= UInt(Int.max) ? Int.max : Int(policy.retryLimit) + 1
            if policy.maxAttempts != expectedAttempts { found.append("maxAttempts \(policy.maxAttempts)") }
            let backoff = policy.backoff
            for x in [0, 1, 2, 30, 64, 1_000, Int.max] {
                let delay = backoff.delay(forRetry: x)
                if delay < .zero || delay > limit {
                    found.append("delay \(exact(delay)) at x = \(x) outside [0, limit]")
                }
                // A cap holds whatever jitter follows it (issue 13.2), proportional jitter included.
                if let cap = policy.maxDelay, delay > min(max(cap, .zero), limit) {
                    found.append("delay \(exact(delay)) at x = \(x) above maxDelay")
                }
            }
            return found
        }
    }

    @Test("a Retry-After delay is never negative and never above maxRetryAfter")
    func retryAfterCap() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        checkProperty("Retry-After cap") { random in
            (HTTPPolicyCase.generate(&random), retryAfterValue(&random, now: now), random.pick([429, 503]))
        } property: { testCase, value, status in
            var found: [String] = []
            let url = URL(fileURLWithPath: "/")
            guard
                let response = HTTPURLResponse(
                    url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: ["Retry-After": value])
            else { return ["no response"] }
            var request = URLRequest(url: url)
            request.httpMethod = "GET"
            if let parsed = RetryAfter.delay(value, now: now), parsed < .zero || parsed > limit {
                found.append("RetryAfter.delay(\"\(value)\") = \(exact(parsed)) outside [0, limit]")
            }
            if case .retryAfter(let delay) = testCase.policy.decision(for: request, response: response, now: now) {
                let cap = min(max(testCase.policy.maxRetryAfter, .zero), limit)
                if delay < .zero || delay > cap {
                    found.append("Retry-After \"\(value)\" waits \(exact(delay)), cap \(exact(cap))")
                }
            }
            return found
        }
    }
}

import BenchmarkSupport
import Foundation  // log, cos
import RetryKit
import RetryKitHTTP

/// The thundering herd after a `Retry-After` hint, in virtual time: `clients` clients are all answered 503 with the
/// same hint at about the same moment, and each retries after the wait its policy's
/// `HTTPRetryPolicy.RetryAfterSpread` gives. The figure is the peak number of retries reaching the server in one
/// millisecond.
///
/// - The 503s reach the clients after one network hop, |N(10 ms, 2 ms)| as in the contention simulation.
/// - **Delay-seconds** (`Retry-After: 5`): each client waits 5 s from when its 503 arrived.
/// - **HTTP-date** (`Retry-After: <date 5 s ahead>`): each client waits until that date, the same instant for all.
/// - The retry reaches the server after another hop.
enum RetryAfterHerd {
    /// The hint's two forms.
    enum Form: String, CaseIterable {
        case delaySeconds = "delay-seconds"
        case httpDate = "HTTP-date"
    }

    /// The peak number of retries per millisecond at the server, and the span from first to last retry.
    struct Outcome {
        var peakPerMillisecond: Int
        var spreadMilliseconds: Double
    }

    /// One run.
    static func run(
        clients: Int, hint: Duration, form: Form, spread: HTTPRetryPolicy.RetryAfterSpread,
        cap: Duration, seed: UInt64
    ) -> Outcome {
        var network = SplitMix64(seed: SplitMix64.derive(seed, 0))
        var jitter = SplitMix64(seed: SplitMix64.derive(seed, 1))
        let hintMilliseconds = hint / .milliseconds(1)
        var arrivals: [Double] = []
        arrivals.reserveCapacity(clients)
        for _ in 0..<clients {
            let answered = hop(&network)
            // What the client waits for, as the policy computes it: the hint (for a date, the time left until it).
            let asked =
                form == .delaySeconds
                ? hint : .nanoseconds(Int64(((hintMilliseconds - answered) * 1e6).rounded()))
            let wait = spread.delay(after: asked, cap: cap, using: &jitter)
            arrivals.append(answered + wait / .milliseconds(1) + hop(&network))
        }
        var perMillisecond: [Int: Int] = [:]
        for arrival in arrivals { perMillisecond[Int(arrival.rounded(.down)), default: 0] += 1 }
        let peak = perMillisecond.values.max() ?? 0
        let span = (arrivals.max() ?? 0) - (arrivals.min() ?? 0)
        return Outcome(peakPerMillisecond: peak, spreadMilliseconds: span)
    }

    /// A network hop in milliseconds: |N(10, 2)|, by Box–Muller.
    private static func hop(_ generator: inout SplitMix64) -> Double {
        let u1 = max(generator.nextUnit(), 0x1p-53)
        let u2 = generator.nextUnit()
        let normal = (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
        return abs(Simulation.hopMean + Simulation.hopStandardDeviation * normal)
    }

    /// The report: 1,000 clients, a 5 s hint in both forms, without a spread and with the policy's default.
    static func report(seed: UInt64, runs: Int) -> [String] {
        let spreads: [(String, HTTPRetryPolicy.RetryAfterSpread)] = [
            ("none (exactly the hint)", .none),
            ("default: `.proportional(0.1)`", HTTPRetryPolicy.defaultRetryAfterSpread),
        ]
        var lines = [
            "Retry-After herd: 1,000 clients answered 503 with `Retry-After` 5 s at about the same moment (one hop",
            "|N(10 ms, 2 ms)| apart), each retrying after the wait its `HTTPRetryPolicy.retryAfterSpread` gives",
            "(cap 60 s); peak retries reaching the server in one millisecond, mean of \(runs) runs (max in brackets).",
            "",
            "| hint | spread | peak retries / ms | first to last retry (ms) |",
            "| --- | --- | ---: | ---: |",
        ]
        for form in Form.allCases {
            for (index, (name, spread)) in spreads.enumerated() {
                var peak = 0.0
                var worst = 0
                var span = 0.0
                for run in 0..<runs {
                    let runSeed = SplitMix64.derive(SplitMix64.derive(seed, UInt64(index)), UInt64(run))
                    let outcome = Self.run(
                        clients: 1_000, hint: .seconds(5), form: form, spread: spread, cap: .seconds(60),
                        seed: runSeed)
                    peak += Double(outcome.peakPerMillisecond)
                    worst = max(worst, outcome.peakPerMillisecond)
                    span += outcome.spreadMilliseconds
                }
                let cells = [
                    form.rawValue, name,
                    format(peak / Double(runs), decimals: 1) + " (\(worst))",
                    format(span / Double(runs), decimals: 0),
                ]
                lines.append("| " + cells.joined(separator: " | ") + " |")
            }
        }
        return lines
    }
}

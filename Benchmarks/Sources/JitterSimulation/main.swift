// jitter-sim: the AWS "Exponential Backoff And Jitter" simulation, driven by RetryKit's public backoff API.
//
//     swift run -c release jitter-sim [--runs N] [--seed S] [--clients 10,50,100,190] [--check]
//
// Prints a Markdown report (legend and table) to standard output. Deterministic for a given seed and run count.
// With --check, exits with status 1 if a row with a target (full jitter, exponential without jitter) is more than
// 10% away from the reference on calls or time.

import BenchmarkSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

struct Options {
    var runs = 100
    var seed: UInt64 = 0x5EED_2015
    var clientCounts = [10, 50, 100, 190]
    var check = false

    static let usage = """
        usage: jitter-sim [--runs N] [--seed S] [--clients 10,50,100,190] [--check]
          --runs N      runs averaged per row (default 100)
          --seed S      master seed, decimal or 0x-hex (default 0x5EED2015)
          --clients L   comma-separated client counts (default 10,50,100,190)
          --check       exit 1 if a targeted row is more than 10% from the reference
        """

    init?(_ arguments: [String]) {
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            switch argument {
            case "--runs":
                guard let value = rest.popFirst().flatMap({ Int($0) }), value > 0 else { return nil }
                runs = value
            case "--seed":
                guard let text = rest.popFirst() else { return nil }
                let parsed = text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
                guard let value = parsed else { return nil }
                seed = value
            case "--clients":
                guard let text = rest.popFirst() else { return nil }
                let values = text.split(separator: ",").compactMap { Int($0) }
                guard !values.isEmpty, values.allSatisfy({ $0 > 0 }) else { return nil }
                clientCounts = values
            case "--check":
                check = true
            default:
                return nil
            }
        }
    }
}

/// Mean and standard error of the mean, accumulated one sample at a time.
struct Mean {
    private var count = 0.0
    private var sum = 0.0
    private var sumOfSquares = 0.0

    mutating func add(_ value: Double) {
        count += 1
        sum += value
        sumOfSquares += value * value
    }

    var value: Double { sum / count }

    var standardError: Double {
        guard count > 1 else { return 0 }
        let variance = max(0, (sumOfSquares - sum * sum / count) / (count - 1))
        return (variance / count).squareRoot()
    }
}

/// `value` with `decimals` digits after the point and thousands separators: 62,954 or 1,852.8.
func format(_ value: Double, decimals: Int) -> String {
    let scale = decimals == 0 ? 1.0 : 10.0
    let scaled = (value * scale).rounded()
    let whole = Int(scaled / scale)
    var digits = String(whole)
    var grouped = ""
    while digits.count > 3 {
        grouped = "," + digits.suffix(3) + grouped
        digits.removeLast(3)
    }
    grouped = digits + grouped
    guard decimals > 0 else { return grouped }
    let tenth = Int(scaled) - whole * 10
    return grouped + "." + String(tenth)
}

func ratio(_ value: Double, _ reference: Double?) -> String {
    guard let reference else { return "" }
    return String(Int((value / reference * 100).rounded())) + "%"
}

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.contains("--help") || arguments.contains("-h") {
    print(Options.usage)
    exit(0)
}
guard let options = Options(arguments) else {
    print(Options.usage)
    exit(2)
}

let clock = ContinuousClock()
let started = clock.now
var rows: [String] = []
var missed: [String] = []

for clientCount in options.clientCounts {
    let networkStream = SplitMix64.derive(SplitMix64.derive(options.seed, 0), UInt64(clientCount))
    for (index, strategy) in SimulatedStrategy.all.enumerated() {
        let backoffStream = SplitMix64.derive(SplitMix64.derive(options.seed, UInt64(index + 1)), UInt64(clientCount))
        var calls = Mean()
        var time = Mean()
        for run in 0..<options.runs {
            // The same network stream for every strategy (common random numbers), a separate one for the backoff.
            var network = SplitMix64(seed: SplitMix64.derive(networkStream, UInt64(run)))
            let backoff = strategy.make(SplitMix64.derive(backoffStream, UInt64(run)))
            let outcome = Simulation.run(clients: clientCount, backoff: backoff, network: &network)
            calls.add(Double(outcome.calls))
            time.add(outcome.milliseconds)
        }

        let reference = ReferenceFigures.figures[clientCount]?[strategy.name]
        var target = ""
        if let reference, ReferenceFigures.targetRows.contains(strategy.name) {
            let callsOff = calls.value / reference.calls - 1
            let timeOff = time.value / reference.milliseconds - 1
            if abs(callsOff) <= ReferenceFigures.tolerance && abs(timeOff) <= ReferenceFigures.tolerance {
                target = "met (±10%)"
            } else {
                target = "MISSED (±10%)"
                missed.append("\(clientCount) clients, \(strategy.name)")
            }
        }
        let cells = [
            String(clientCount),
            strategy.name,
            format(calls.value, decimals: 1),
            reference.map { format($0.calls, decimals: 1) } ?? "",
            ratio(calls.value, reference?.calls),
            format(time.value, decimals: 0) + " ± " + format(time.standardError, decimals: 0),
            reference.map { format($0.milliseconds, decimals: 0) } ?? "",
            ratio(time.value, reference?.milliseconds),
            target,
        ]
        rows.append("| " + cells.joined(separator: " | ") + " |")
    }
}

let elapsed = clock.now - started
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18

print("Seed \(String(options.seed, radix: 16).uppercased()) (hex), \(options.runs) runs per row.")
print("Network hop |N(10 ms, 2 ms)|, base 5 ms, cap 2,000 ms, 4 hops per attempt (the model: Benchmarks/README.md).")
print("Simulated in \(format(seconds, decimals: 1)) s.")
print()
print("| clients | strategy | calls | reference | ratio | time (ms) ± s.e. | reference | ratio | target |")
print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
for row in rows {
    print(row)
}
print()
print("Strategies (RetryKit public API; every jittered strategy gets its own seeded generator per run):")
print()
for strategy in SimulatedStrategy.all {
    print("- \(strategy.name): `\(strategy.expression)`")
}

print()
for line in RetryAfterHerd.report(seed: options.seed, runs: options.runs) {
    print(line)
}

if options.check && !missed.isEmpty {
    print()
    print("Targets missed: " + missed.joined(separator: "; "))
    exit(1)
}

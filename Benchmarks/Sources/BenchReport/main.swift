// bench-report: the runner and backoff-core tables of README.md, built from one run of `run.sh`.
//
//     bench-report runners results/benchmarks.md results/load.txt > results/runners.md
//     bench-report backoff results/benchmarks.md > results/backoff.md
//
// Reads the harness's Markdown report (per-call time percentiles and malloc counts of the `Runners` benchmarks) and the
// `key=value` lines of `runner-load`, pairs every RetryKit figure with its baseline from the same run, and prints the
// table: figure, RetryKit, baseline, ratio, target, met?. Nothing is typed in by hand: a figure missing from the
// inputs prints as "n/a".

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// MARK: - Inputs

/// One benchmark of the harness report: percentiles by metric name ("Time (wall clock) (ns) *", "Malloc (total) *").
struct HarnessResult {
    var rows: [String: [Double]] = [:]  // metric -> [p0, p25, p50, p75, p90, p99, p100, samples]
}

func readFile(_ path: String) -> String? {
    guard let file = fopen(path, "r") else { return nil }
    defer { fclose(file) }
    var text = ""
    var buffer = [CChar](repeating: 0, count: 4096)
    while fgets(&buffer, Int32(buffer.count), file) != nil {
        text += String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
    return text
}

/// Parses `### name` sections and their `| metric | p0 | … |` rows.
func parseHarness(_ text: String) -> [String: HarnessResult] {
    var results: [String: HarnessResult] = [:]
    var current: String?
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        if line.hasPrefix("### ") {
            let name = String(line.dropFirst(4)).trimmingCharacters()
            results[name] = HarnessResult()
            current = name
            continue
        }
        guard let name = current, line.hasPrefix("|") else { continue }
        let cells = line.split(separator: "|").map { String($0).trimmingCharacters() }
        guard cells.count >= 9, !cells[0].hasPrefix("Metric"), !cells[0].hasPrefix(":") else { continue }
        let values = cells[1...].compactMap { Double($0) }
        if values.count >= 8 { results[name]?.rows[cells[0]] = values }
    }
    return results
}

/// Parses the `key=value` lines of `runner-load`, keyed by "figure kind count". A figure measured several times (run.sh
/// repeats the noisy ones) gets the median of each numeric field.
func parseLoad(_ text: String) -> [String: [String: String]] {
    var samples: [String: [String: [Double]]] = [:]
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
        var fields: [String: String] = [:]
        for pair in line.split(separator: " ") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        guard let figure = fields["figure"], let kind = fields["kind"], let count = fields["count"] else { continue }
        let key = "\(figure) \(kind) \(count)"
        for (name, value) in fields {
            if let number = Double(value) { samples[key, default: [:]][name, default: []].append(number) }
        }
    }
    var lines: [String: [String: String]] = [:]
    for (key, fields) in samples {
        for (name, values) in fields {
            let sorted = values.sorted()
            lines[key, default: [:]][name] = String(sorted[sorted.count / 2])
        }
    }
    return lines
}

extension String {
    func trimmingCharacters() -> String {
        var text = Substring(self)
        while let first = text.first, first == " " { text.removeFirst() }
        while let last = text.last, last == " " { text.removeLast() }
        return String(text)
    }
}

// MARK: - Formatting

/// `1234.5` as "1,235" (or with `digits` decimals).
func number(_ value: Double, _ digits: Int = 0) -> String {
    guard value.isFinite else { return "n/a" }
    let scaled = (value * pow(10, Double(digits))).rounded() / pow(10, Double(digits))
    let whole = Int(scaled.rounded(.towardZero))
    var text = String(abs(whole))
    var index = text.count - 3
    while index > 0 {
        text.insert(",", at: text.index(text.startIndex, offsetBy: index))
        index -= 3
    }
    if whole < 0 || (scaled < 0 && whole == 0) { text = "-" + text }
    if digits > 0 {
        let fraction = abs(scaled - Double(whole))
        let decimals = String(Int((fraction * pow(10, Double(digits))).rounded()))
        text += "." + String(repeating: "0", count: max(0, digits - decimals.count)) + decimals
    }
    return text
}

func ratio(_ a: Double, _ b: Double) -> String {
    guard a.isFinite, b.isFinite, b > 0 else { return "n/a" }
    return number(a / b, 2) + "×"
}

// MARK: - The table

let arguments = CommandLine.arguments
let usage = "usage: bench-report runners results/benchmarks.md results/load.txt | backoff results/benchmarks.md"
guard arguments.count >= 3, let harnessText = readFile(arguments[2]) else {
    print(usage)
    exit(2)
}
let mode = arguments[1]
let harness = parseHarness(harnessText)
let load = mode == "runners" && arguments.count == 4 ? parseLoad(readFile(arguments[3]) ?? "") : [:]

let time = "Time (wall clock) (ns) *"
let mallocs = "Malloc (total) *"

/// p50 (index 2) or p0 (index 0) of a harness metric.
@MainActor
func harnessValue(_ name: String, _ metric: String, _ index: Int) -> Double {
    harness[name]?.rows[metric]?[index] ?? .nan
}

/// "p50 (p0)" of a harness time, in ns.
@MainActor
func timeCell(_ name: String) -> String {
    let p50 = harnessValue(name, time, 2)
    let p0 = harnessValue(name, time, 0)
    return "\(number(p50)) ns (\(number(p0)))"
}

@MainActor
func loadValue(_ key: String, _ field: String) -> Double {
    load[key]?[field].flatMap { Double($0) } ?? .nan
}

var rows: [[String]] = []

/// A row comparing a harness benchmark with its baseline: time p50 (p0), ratio of the p50s, a ratio target.
@MainActor
func harnessRatioRow(
    _ figure: String, _ retryKit: String, _ baseline: String, target: Double?, why: String
) {
    let a = harnessValue(retryKit, time, 2)
    let b = harnessValue(baseline, time, 2)
    var met = "n/a"
    if let target, a.isFinite, b.isFinite, b > 0 {
        met = a / b <= target ? "yes" : "no: \(number(a / b, 2))× (target \(number(target, 2))×); \(why)"
    } else if target == nil {
        met = "no target"
    }
    rows.append([
        figure, timeCell(retryKit), timeCell(baseline), ratio(a, b),
        target.map { "≤ \(number($0, 2))×" } ?? "none set", met,
    ])
}

// Callback runner.
harnessRatioRow(
    "callback runner: fails twice then succeeds, zero delay, `done` called before the operation returns",
    "callback: RetryKit, fails twice, done before returning", "callback: hand-written, fails twice, done before returning",
    target: 1.25,
    why:
        "fixed cost per retrier (a lock, a handle, the closures, the state machine) against three bare `queue.async` hops; see below"
)
harnessRatioRow(
    "callback runner: fails twice then succeeds, zero delay, `done` called later on the queue",
    "callback: RetryKit, fails twice, done later on the queue",
    "callback: hand-written, fails twice, done later on the queue",
    target: 1.25, why: "the same fixed cost per retrier; see below")
harnessRatioRow(
    "callback runner: succeeds at once (the fixed cost of a retrier)",
    "callback: RetryKit, succeeds at once, done before returning",
    "callback: hand-written, succeeds at once, done before returning", target: nil, why: "")

// Async retry.
do {
    let name = "async: RetryKit, succeeds at once"
    let direct = "async: direct, succeeds at once"
    let over = harnessValue(name, time, 2) - harnessValue(direct, time, 2)
    rows.append([
        "async `retry`, success on the first try (seed-compatible overload)", timeCell(name), timeCell(direct),
        "+\(number(over)) ns", "≤ 100 ns over the direct call",
        over.isFinite ? (over <= 100 ? "yes" : "no: +\(number(over)) ns") : "n/a",
    ])
    let failing = "async: RetryKit, fails twice, .none"
    let directFailing = "async: direct, fails twice, .none"
    let value = harnessValue(failing, time, 2)
    rows.append([
        "async `retry`, fails twice then succeeds, `.none`", timeCell(failing), timeCell(directFailing),
        ratio(value, harnessValue(directFailing, time, 2)), "≤ 600 ns per call",
        value.isFinite ? (value <= 600 ? "yes" : "no: \(number(value)) ns") : "n/a",
    ])
}

// Bridges.
harnessRatioRow(
    "bridge: `withRetry` around a completion-handler operation that calls back before returning",
    "bridge: RetryKit withRetry, calls back before returning", "bridge: bare continuation, calls back before returning",
    target: 1.3,
    why:
        "a bare continuation resumed at once costs almost nothing, a retrier still has its lock, state machine and cancellation handler (about 0.3 µs); see below"
)
harnessRatioRow(
    "bridge: `withRetry` around a completion-handler operation that calls back later from another queue",
    "bridge: RetryKit withRetry, calls back later from another queue",
    "bridge: bare continuation, calls back later from another queue",
    target: 1.3, why: "see below")

// Memory.
do {
    let callback = loadValue("memory callback 100000", "bytes_per_item")
    let timer = loadValue("memory timer 100000", "bytes_per_item")
    rows.append([
        "memory per waiting callback retrier (100,000 waiting on a 60 s backoff; VmRSS delta / count)",
        "\(number(callback)) B", "\(number(timer)) B (armed `DispatchSourceTimer`)", ratio(callback, timer),
        "≤ 1,024 B",
        callback.isFinite
            ? (callback <= 1024
                ? "yes"
                : "no: +\(number(callback - 1024)) B; the retrier's own state, lock, handle and closures come on top of the timer; see below")
            : "n/a",
    ])
    let task = loadValue("memory async 100000", "bytes_per_item")
    let sleeping = loadValue("memory task-sleep 100000", "bytes_per_item")
    rows.append([
        "memory per waiting async retrier (100,000 tasks in `retry`, waiting on a 60 s backoff)",
        "\(number(task)) B", "\(number(sleeping)) B (a task in `Task.sleep`)", ratio(task, sleeping), "≤ 2,560 B",
        task.isFinite ? (task <= 2560 ? "yes" : "no: +\(number(task - 2560)) B") : "n/a",
    ])
}

// Timer accuracy.
for (kind, baselineKind, label, baselineLabel) in [
    ("callback", "dispatch", "callback retriers", "bare one-shot `DispatchSourceTimer`s"),
    ("async", "task-sleep", "async `retry` tasks", "tasks in `Task.sleep`"),
] {
    let key = "timers \(kind) 2000"
    let baseKey = "timers \(baselineKind) 2000"
    let p99 = loadValue(key, "p99_ms")
    let cell = "p50 \(number(loadValue(key, "p50_ms"), 3)) ms / p99 \(number(p99, 3)) ms"
    let baseCell =
        "p50 \(number(loadValue(baseKey, "p50_ms"), 3)) ms / p99 \(number(loadValue(baseKey, "p99_ms"), 3)) ms"
    var met = "n/a"
    if p99.isFinite {
        met =
            p99 <= 1
            ? "yes"
            : kind == "async"
                ? "no: p99 \(number(p99, 2)) ms; the wait is the clock's `sleep` (`Task.sleep`), as late as the baseline"
                : "no: p99 \(number(p99, 2)) ms"
    }
    rows.append([
        "timer lateness of 10–59 ms backoffs, 2,000 \(label) waiting at once", cell, "\(baseCell) (\(baselineLabel))",
        ratio(p99, loadValue(baseKey, "p99_ms")) + " (p99)", "p99 ≤ 1 ms", met,
    ])
}

// Scale.
do {
    let small = loadValue("scale callback 1000", "wall_ns_per_retrier")
    for count in [1_000, 10_000, 100_000] {
        let key = "scale callback \(count)"
        let baseKey = "scale hand-written \(count)"
        let wall = loadValue(key, "wall_ns_per_retrier")
        let cpu = loadValue(key, "cpu_ns_per_retrier")
        let baseWall = loadValue(baseKey, "wall_ns_per_retrier")
        let baseCPU = loadValue(baseKey, "cpu_ns_per_retrier")
        let isLast = count == 100_000
        rows.append([
            "scale: \(number(Double(count))) callback retriers at once, each failing twice with a 1 ms backoff "
                + "(time per retrier, wall; CPU in parentheses)",
            "\(number(wall / 1000, 1)) µs (\(number(cpu / 1000, 1)))",
            "\(number(baseWall / 1000, 1)) µs (\(number(baseCPU / 1000, 1))) (hand-written, `asyncAfter`)",
            isLast ? "\(ratio(wall, small)) of 1,000" : ratio(wall, baseWall),
            isLast ? "100,000 ≤ 1.5× of 1,000" : "",
            isLast ? (wall / small <= 1.5 ? "yes" : "no: \(number(wall / small, 2))×") : "",
        ])
    }
}

// Allocations.
do {
    func perRetry(_ failing: String, _ succeeding: String) -> Double {
        (harnessValue(failing, mallocs, 2) - harnessValue(succeeding, mallocs, 2)) / 2
    }
    let callbackFailing = "callback: RetryKit, fails twice, done before returning"
    let callbackSucceeding = "callback: RetryKit, succeeds at once, done before returning"
    let handFailing = "callback: hand-written, fails twice, done before returning"
    let handSucceeding = "callback: hand-written, succeeds at once, done before returning"
    rows.append([
        "mallocs per retrier, callback runner: succeeds at once / fails twice",
        "\(number(harnessValue(callbackSucceeding, mallocs, 2))) / \(number(harnessValue(callbackFailing, mallocs, 2)))",
        "\(number(harnessValue(handSucceeding, mallocs, 2))) / \(number(harnessValue(handFailing, mallocs, 2)))",
        "", "reported", "",
    ])
    rows.append([
        "mallocs per retry (per extra attempt), callback runner, `done` before returning",
        number(perRetry(callbackFailing, callbackSucceeding), 1), number(perRetry(handFailing, handSucceeding), 1),
        "", "reported", "",
    ])
    let asyncFailing = "async: RetryKit, fails twice, .none"
    let asyncSucceeding = "async: RetryKit, succeeds at once"
    rows.append([
        "mallocs per call, async `retry`: succeeds at once / fails twice",
        "\(number(harnessValue(asyncSucceeding, mallocs, 2))) / \(number(harnessValue(asyncFailing, mallocs, 2)))",
        "\(number(harnessValue("async: direct, succeeds at once", mallocs, 2))) / "
            + "\(number(harnessValue("async: direct, fails twice, .none", mallocs, 2)))",
        "", "reported", "",
    ])
    rows.append([
        "mallocs per call, `withRetry`: calls back before returning / later",
        "\(number(harnessValue("bridge: RetryKit withRetry, calls back before returning", mallocs, 2))) / "
            + "\(number(harnessValue("bridge: RetryKit withRetry, calls back later from another queue", mallocs, 2)))",
        "\(number(harnessValue("bridge: bare continuation, calls back before returning", mallocs, 2))) / "
            + "\(number(harnessValue("bridge: bare continuation, calls back later from another queue", mallocs, 2)))",
        "", "reported", "",
    ])
}

switch mode {
case "runners":
    print("| figure | RetryKit | baseline | ratio | target | met? |")
    print("| --- | ---: | ---: | ---: | --- | --- |")
    for row in rows {
        print("| " + row.map { $0.replacingPipes() }.joined(separator: " | ") + " |")
    }
case "backoff":
    // One `delay(forRetry:previous:)` per scaled iteration: the harness's per-iteration figures are per call.
    let seeded = "baseline: hand-written min(2 s, 10 ms · 2^x) · U[0, 1), seeded generator"
    let system = "baseline: hand-written min(2 s, 10 ms · 2^x) · U[0, 1), system generator"
    let backoffRows: [(String, String, String?)] = [
        ("`.exponential(a: 10 ms, b: 2).max(2 s)`, no jitter", "delay: exponential.max, no jitter", nil),
        ("`… .jitter(using:)`, seeded generator", "delay: exponential.max.jitter(using:), seeded generator", seeded),
        (
            "`… .jitter(using:)`, seeded, x = 10,000 (saturated, then capped)",
            "delay: exponential.max.jitter(using:), seeded, x = 10,000 (saturated)", nil
        ),
        (
            "`.decorrelatedJitter(base:cap:using:)`, previous fed back, seeded",
            "delay: decorrelatedJitter, previous fed back, seeded generator", nil
        ),
        ("`… .jitter()`, system generator (the default)", "delay: exponential.max.jitter(), system generator", system),
    ]
    print("| figure | RetryKit | baseline | ratio | target |")
    print("| --- | ---: | ---: | ---: | --- |")
    var maxMallocs = 0.0
    var maxBaselineMallocs = 0.0
    for (figure, name, baseline) in backoffRows {
        maxMallocs = max(maxMallocs, harnessValue(name, mallocs, 2))
        var baselineCell = ""
        var ratioCell = ""
        if let baseline {
            baselineCell = timeCell(baseline)
            ratioCell = ratio(harnessValue(name, time, 2), harnessValue(baseline, time, 2))
            maxBaselineMallocs = max(maxBaselineMallocs, harnessValue(baseline, mallocs, 2))
        }
        print("| \(figure) | \(timeCell(name)) | \(baselineCell) | \(ratioCell) | none set |")
    }
    print("| mallocs per call, every row above (at most) | \(number(maxMallocs)) | \(number(maxBaselineMallocs)) | | |")
default:
    print(usage)
    exit(2)
}

extension String {
    func replacingPipes() -> String {
        split(separator: "|", omittingEmptySubsequences: false).joined(separator: "\\|")
    }
}

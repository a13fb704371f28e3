// alloc-check: allocation counts per iteration of RetryKit's runners, asserted against limits, so that a regression
// fails CI (in the manner of swift-nio's allocation-counter tests). Linux/glibc only: the `MallocCounter` target
// replaces the C allocator's entry points for the whole process and counts their calls.
//
//     alloc-check [ITERATIONS]     (default 1,000 per measurement)
//
// For each workload of the `Workloads` module: a warm-up run (one-time costs: metadata, threads, caches), then three
// runs of ITERATIONS and three of 2 × ITERATIONS iterations; the figure is the difference of the least counts (anything
// else the process does only adds allocations), divided by ITERATIONS. Every thread's allocations count, as in a real
// process. A RetryKit
// workload whose figure exceeds its limit fails the check (exit status 1); the baselines are printed beside them for
// reference and are not asserted. A figure more than one allocation under its limit is reported, so that the limit
// can be tightened with the improvement that made it possible.

import MallocCounter
import Workloads

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Allocations per iteration allowed for each RetryKit workload: the counts measured on main when the limit was last
/// set (cf4d382, after engine's one-allocation `Locked`: 13, 11, 3, 0, 1; before it 14, 12, 4, 0, 1; the same counts
/// re-measured on main at 4eafd48, after engine's defect fixes and continuous time in the callback runner), plus a
/// slack of half an allocation, so that one more allocation per iteration fails. The callback rows lowered on the cb
/// branch (11 and 9): the callback runner no longer boxes how the retrier ended (the machine keeps it), and its
/// state and lock share the runner's one allocation. withRetryNow: 3 since the bridge is one allocation (the async
/// branch; 4 with the release-detection token before); 2 since a success is stored in the bridge, not boxed (async2).
/// callbackRetryKit 11.5 -> 15.5 (issue 24/27): the rewritten runner allocates a record per attempt (no reuse by
/// uniqueness), keeps its state in a lock box of its own and the user's closures in two objects, and every attempt
/// starts in a block of its own. callbackRetryKit 15.5 -> 11.5, callbackRetryKitOnce 9.5 -> 7.5 (issue 24, third
/// session): an attempt's completion is one object reference (the user's `{ result in done(result) }` needs no context)
/// and the user's closures are one object. Lower a limit when a change lowers its count; raise one only
/// with a reason in the commit message.
let limits: [Workload: Double] = [
    .callbackRetryKit: 11.5,
    .callbackRetryKitOnce: 7.5,
    .withRetryNow: 2.5,
    .asyncSuccess: 0.5,
    .asyncFailTwice: 1.5,
]

/// Each asserted workload beside the baseline printed next to it.
let rows: [(Workload, Workload?)] = [
    (.callbackRetryKit, .callbackHand),
    (.callbackRetryKitOnce, nil),
    (.withRetryNow, .continuationNow),
    (.asyncSuccess, .directSuccess),
    (.asyncFailTwice, .seedFailTwice),
]

let arguments = CommandLine.arguments.dropFirst()
let iterations = arguments.first.flatMap { Int($0) } ?? 1_000
guard iterations > 0, arguments.count <= 1 else {
    print("usage: alloc-check [ITERATIONS]")
    exit(2)
}
guard malloc_counter_is_active() != 0 else {
    print("alloc-check: the malloc counter is not active on this platform (Linux with glibc only); nothing checked")
    exit(0)
}

/// Allocations per iteration of `workload`: the least count of three runs of 2 × `iterations` minus the least count of
/// three runs of `iterations`, divided by `iterations` (what a run costs besides its iterations cancels out). Exits if
/// the workload misbehaves.
func allocationsPerIteration(_ workload: Workload) -> Double {
    _ = workload.run(iterations: min(iterations, 200))
    func least(_ count: Int) -> Int64 {
        var least = Int64.max
        for _ in 0..<3 {
            let before = malloc_counter_allocations()
            let result = workload.run(iterations: count)
            let after = malloc_counter_allocations()
            guard result == workload.expected(iterations: count) else {
                print("alloc-check: \(workload.rawValue) did not do the expected work: \(result)")
                exit(3)
            }
            least = min(least, after - before)
        }
        return least
    }
    let single = least(iterations)
    let double = least(2 * iterations)
    return Double(double - single) / Double(iterations)
}

func format(_ value: Double) -> String {
    let hundredths = Int((value * 100).rounded())
    let fraction = hundredths % 100
    return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
}

print(
    "Allocations per iteration (every thread counted): least of 3 runs of \(2 * iterations) minus least of 3 of \(iterations)"
)
print("")
print("| workload | allocations | limit | check | baseline | baseline allocations |")
print("| --- | ---: | ---: | --- | --- | ---: |")
var failures: [String] = []
var loose: [String] = []
for (workload, baseline) in rows {
    let figure = allocationsPerIteration(workload)
    let limit = limits[workload] ?? 0
    let check: String
    if figure > limit + 0.005 {
        check = "FAIL"
        failures.append("\(workload.rawValue): \(format(figure)) allocations per iteration, limit \(format(limit))")
    } else {
        check = "ok"
        if figure < limit - 1 { loose.append("\(workload.rawValue): \(format(figure)), limit \(format(limit))") }
    }
    let baselineFigure = baseline.map { format(allocationsPerIteration($0)) } ?? ""
    print(
        "| \(workload.rawValue) | \(format(figure)) | \(format(limit)) | \(check) | \(baseline?.rawValue ?? "") "
            + "| \(baselineFigure) |")
}
print("")
for line in loose { print("note: well under its limit, tighten it in Sources/AllocCheck/main.swift: \(line)") }
if failures.isEmpty {
    print("alloc-check: every workload within its limit")
    exit(0)
}
for line in failures { print("alloc-check: regression: \(line)") }
exit(1)

// TestKit: the virtual-time test kit (RetryKitTesting's VirtualScheduler and VirtualClock) at the scale users put on it.
//
//     TestKit scheduler [items] [runs]   schedule `items` items (seeded random deadlines, 0–999 ms, so many share one)
//                                        on a VirtualScheduler, then run() them all; default 100,000 items
//     TestKit clock [sleepers] [runs]    `sleepers` tasks sleep on a VirtualClock (seeded random deadlines); wait until
//                                        all are sleeping, advance past the last deadline, await every task;
//                                        default 10,000 sleepers
//
// Prints one line of `key=value` pairs per run and a last line with the median of the runs (default 3). Times are
// wall time from the first item scheduled (task created) to the last one run (task finished), and the CPU time of the
// process over the same run (all threads; the figure to trust when other work loads the machine). Every run checks its
// result (every item ran, in deadline order; every task woke) and exits with status 1 if it is wrong. Release builds
// only: `swift run -c release TestKit scheduler`.

import Dispatch
import Foundation
import RetryKitTesting

#if canImport(Glibc)
    import Glibc
#endif

func wallNanoseconds() -> UInt64 {
    DispatchTime.now().uptimeNanoseconds
}

/// User plus system CPU time of this process (all threads), in nanoseconds.
func cpuNanoseconds() -> UInt64 {
    var usage = rusage()
    #if canImport(Glibc)
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    #else
        getrusage(RUSAGE_SELF, &usage)
    #endif
    func nanos(_ t: timeval) -> UInt64 { UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_usec) * 1_000 }
    return nanos(usage.ru_utime) + nanos(usage.ru_stime)
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("TestKit: \(message)\n".utf8))
    exit(1)
}

/// A counter the scheduled items share (the benchmark's own lock; RetryKit's is internal to it).
final class Tally: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    private var last = Duration.zero
    private var outOfOrder = 0

    /// Records an item that runs at virtual time `now`.
    func record(_ now: Duration) {
        lock.lock()
        count += 1
        if now < last { outOfOrder += 1 }
        last = now
        lock.unlock()
    }

    var snapshot: (count: Int, outOfOrder: Int) {
        lock.lock()
        defer { lock.unlock() }
        return (count, outOfOrder)
    }
}

/// Schedules `items` items and runs them all; returns the wall time in nanoseconds.
func measureScheduler(items: Int, seed: UInt64) -> UInt64 {
    var generator = SeededRandomNumberGenerator(seed: seed)
    let deadlines = (0..<items).map { _ in Duration.milliseconds(Int64(generator.next() % 1_000)) }
    let queue = DispatchQueue(label: "testkit-scheduler")
    let scheduler = VirtualScheduler()
    let tally = Tally()
    let start = wallNanoseconds()
    for deadline in deadlines {
        _ = scheduler.schedule(after: deadline, on: queue) { tally.record(scheduler.now) }
    }
    scheduler.run()
    let took = wallNanoseconds() - start
    let (count, outOfOrder) = tally.snapshot
    guard count == items, outOfOrder == 0, scheduler.pendingCount == 0 else {
        fail("scheduler: \(count) of \(items) items ran, \(outOfOrder) out of order")
    }
    return took
}

/// Puts `sleepers` tasks to sleep on one clock and wakes them all; returns the wall time in nanoseconds.
func measureClock(sleepers: Int, seed: UInt64) async -> UInt64 {
    var generator = SeededRandomNumberGenerator(seed: seed)
    let deadlines = (0..<sleepers).map { _ in
        VirtualClock.Instant.zero.advanced(by: .milliseconds(1 + Int64(generator.next() % 1_000)))
    }
    let clock = VirtualClock()
    let start = wallNanoseconds()
    let tasks = deadlines.map { deadline in
        Task { () -> Bool in
            do {
                try await clock.sleep(until: deadline)
                return clock.now >= deadline
            } catch {
                return false
            }
        }
    }
    await clock.waitForSleepers(sleepers)
    await clock.advance(by: .seconds(1))
    var woke = 0
    for task in tasks where await task.value { woke += 1 }
    let took = wallNanoseconds() - start
    guard woke == sleepers, clock.sleeperCount == 0 else { fail("clock: \(woke) of \(sleepers) sleepers woke") }
    return took
}

func loadAverage() -> String {
    guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "unknown" }
    return text.split(separator: " ").prefix(3).joined(separator: " ")
}

func milliseconds(_ nanoseconds: UInt64) -> String {
    String(format: "%.1f", Double(nanoseconds) / 1e6)
}

let arguments = CommandLine.arguments.dropFirst()
let kind = arguments.first ?? ""
let count = arguments.dropFirst().first.flatMap { Int($0) }
let runs = max(1, arguments.dropFirst(2).first.flatMap { Int($0) } ?? 3)

var times: [UInt64] = []
var cpuTimes: [UInt64] = []
for run in 1...runs {
    let took: UInt64
    let cpuStart = cpuNanoseconds()
    switch kind {
    case "scheduler":
        took = measureScheduler(items: count ?? 100_000, seed: 0x5EED_0013 &+ UInt64(run))
    case "clock":
        took = await measureClock(sleepers: count ?? 10_000, seed: 0x5EED_0014 &+ UInt64(run))
    default:
        fail("usage: TestKit scheduler|clock [count] [runs]")
    }
    let cpu = cpuNanoseconds() - cpuStart
    print("figure=\(kind) run=\(run) wall_ms=\(milliseconds(took)) cpu_ms=\(milliseconds(cpu)) load=\(loadAverage())")
    times.append(took)
    cpuTimes.append(cpu)
}
let defaultCount = kind == "clock" ? 10_000 : 100_000
print(
    "figure=\(kind) count=\(count ?? defaultCount) runs=\(runs)"
        + " median_wall_ms=\(milliseconds(times.sorted()[runs / 2])) min_wall_ms=\(milliseconds(times.min() ?? 0))"
        + " median_cpu_ms=\(milliseconds(cpuTimes.sorted()[runs / 2]))")

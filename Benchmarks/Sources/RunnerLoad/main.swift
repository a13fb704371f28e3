// runner-load: the runner figures that are not a time per call, each beside its baseline.
//
//     runner-load memory  callback|async|timer|task-sleep  [count]   bytes per waiting item (VmRSS delta / count)
//     runner-load timers  callback|dispatch|async|task-sleep [count] lateness of 1–50 ms waits, all pending at once
//     runner-load scale   callback|hand-written [count]              wall and CPU time per retrier, 1 ms backoff
//     runner-load cancel  async|task-sleep|callback|timer [count]  cancel -> completion of waits on a 60 s
//                         backoff, every core busy with a CPU-bound process (runner-load burn) meanwhile
//     runner-load recovery callback|async [count]                  bytes per retrier waiting on one refresh, and
//                         the time from the refresh's end to the last retry's start
//
// Each invocation measures one thing in a fresh process (memory freed by an earlier measurement would otherwise be
// reused and hide the next one) and prints one line of `key=value` pairs, which `run.sh` collects into
// `results/load.txt` and `bench-report` turns into the table in README.md. Release builds only.

import Dispatch
import Foundation
import RetryKit

#if canImport(Glibc)
    import Glibc
#endif

/// The failure every flaky operation reports (pre-boxed, as in the harness benchmarks).
struct Flaky: Error {}
let flaky: any Error = Flaky()

// MARK: - Helpers

/// Resident memory of this process in bytes, from /proc/self/status.
func residentBytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        let kilobytes = line.split(separator: " ").compactMap { Int($0) }.first ?? 0
        return kilobytes * 1024
    }
    return 0
}

/// `DispatchTime.now()` in nanoseconds: the clock RetryKit's callback runner and Dispatch timers use.
func uptime() -> UInt64 {
    DispatchTime.now().uptimeNanoseconds
}

/// User plus system CPU time of this process, in nanoseconds.
func cpuTime() -> UInt64 {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    func nanos(_ t: timeval) -> UInt64 { UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_usec) * 1_000 }
    return nanos(usage.ru_utime) + nanos(usage.ru_stime)
}

/// A thread-safe counter (the tool's own; RetryKit's lock type is internal to it).
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0

    func increment() {
        lock.lock()
        value += 1
        lock.unlock()
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}

/// Nanosecond timestamps written by many threads at distinct indices, read once everything has finished.
final class Stamps: @unchecked Sendable {
    let values: UnsafeMutableBufferPointer<UInt64>

    init(count: Int) {
        values = .allocate(capacity: count)
        values.initialize(repeating: 0)
    }

    subscript(index: Int) -> UInt64 {
        get { values[index] }
        set { values[index] = newValue }
    }
}

/// A Dispatch timer handed to its queue to arm (`DispatchSourceTimer` is not `Sendable`; it is armed on its queue
/// only, once).
struct TimerBox: @unchecked Sendable {
    let source: any DispatchSourceTimer
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

/// Blocks until `condition` holds, polling (for counts reached on other threads and in tasks).
func waitUntil(timeout: Double = 120, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline { return false }
        usleep(1_000)
    }
    return true
}

/// Serial queues the retriers are spread over (a few, as an app's subsystems would use).
let queues = (0..<4).map { DispatchQueue(label: "runner-load-\($0)") }

/// Lets every queue drain what was submitted before this call.
func drainQueues() {
    for queue in queues { queue.sync {} }
}

// MARK: - Waiting items

/// What a waiting item does when it ends: a `Counter` counts it; a ``StampedEnd`` records the time, then counts.
///
/// Generic rather than a closure, and the functions below inlined into their call sites, so that the item's own closure
/// captures just this value, of its concrete type (the memory figures measure that closure too): a `Counter` alone,
/// as a hand-written call site would.
protocol EndSignal: Sendable {
    func signal()
}

extension Counter: EndSignal {
    func signal() { increment() }
}

/// The end of item `index`: stamped in `stamps`, then counted in `finished`.
struct StampedEnd: EndSignal {
    let stamps: Stamps
    let index: Int
    let finished: Counter

    init(_ stamps: Stamps, _ index: Int, _ finished: Counter) {
        self.stamps = stamps
        self.index = index
        self.finished = finished
    }

    func signal() {
        stamps[index] = uptime()
        finished.increment()
    }
}

/// A callback retrier on `queue` whose first attempt fails, so that it waits 60 s; its completion signals `end`.
@inline(__always)
func waitingCallbackRetrier(on queue: DispatchQueue, then end: some EndSignal) -> RetryHandle<Int> {
    retry(maxAttempts: 2, on: queue) { (_, done: AttemptCompletion<Int>) in
        done(.failure(flaky))
    } strategy: { _ in
        .backoff(.constant(.seconds(60)))
    } completion: { _, _ in
        end.signal()
    }
}

/// A task whose async retrier fails its first attempt and then waits 60 s (`reached` counts it as it starts the
/// wait); signals `end` when the retrier returns.
@inline(__always)
func waitingAsyncRetrier(reached: Counter, then end: some EndSignal) -> Task<Void, Never> {
    Task.detached {
        _ = try? await retry(maxAttempts: 2) { () async throws -> Int in
            throw flaky
        } strategy: { _ in
            reached.increment()  // the retrier now sleeps for 60 s
            return .backoff(.constant(.seconds(60)))
        }
        end.signal()
    }
}

/// A task in `Task.sleep` for 60 s (`reached` counts it); signals `end` when the sleep ends.
@inline(__always)
func sleepingTask(reached: Counter, then end: some EndSignal) -> Task<Void, Never> {
    Task.detached {
        reached.increment()
        try? await Task.sleep(for: .seconds(60))
        end.signal()
    }
}

// MARK: - Memory

/// Bytes per item waiting on a 60 s timer, `count` at once; cancels everything afterwards and waits for it to end.
func memory(_ kind: String, count: Int) -> String {
    let finished = Counter()
    // Warm up: code pages, lazily initialized runtime state, the queues' threads.
    warmUp(kind)

    var handles: [RetryHandle<Int>] = []
    var sources: [any DispatchSourceTimer] = []
    var tasks: [Task<Void, Never>] = []
    handles.reserveCapacity(count)
    sources.reserveCapacity(count)
    tasks.reserveCapacity(count)
    let reached = Counter()
    usleep(100_000)
    let before = residentBytes()

    switch kind {
    case "callback":
        for index in 0..<count {
            handles.append(waitingCallbackRetrier(on: queues[index % queues.count], then: finished))
        }
        drainQueues()  // every retrier has run attempt 1 and armed its 60 s timer
    case "timer":
        for index in 0..<count {
            let source = DispatchSource.makeTimerSource(queue: queues[index % queues.count])
            source.schedule(deadline: .now() + .seconds(60), repeating: .never, leeway: .nanoseconds(0))
            source.setEventHandler { finished.increment() }
            source.activate()
            sources.append(source)
        }
    case "async":
        for _ in 0..<count {
            tasks.append(waitingAsyncRetrier(reached: reached, then: finished))
        }
        _ = waitUntil { reached.count >= count }
    case "task-sleep":
        for _ in 0..<count {
            tasks.append(sleepingTask(reached: reached, then: finished))
        }
        _ = waitUntil { reached.count >= count }
    default:
        return "error=unknown kind \(kind)"
    }
    usleep(300_000)  // let the last ones settle into their wait
    let after = residentBytes()
    let perItem = Double(after - before) / Double(count)

    // Cancel everything and wait for it to end.
    let cancelStart = uptime()
    for handle in handles { handle.cancel() }
    for source in sources { source.cancel() }
    for task in tasks { task.cancel() }
    let ended: Bool
    if kind == "timer" {
        drainQueues()
        ended = true
    } else {
        ended = waitUntil { finished.count >= count }
    }
    let cancelNanos = uptime() - cancelStart
    return "figure=memory kind=\(kind) count=\(count) bytes_per_item=\(format(perItem, 0)) "
        + "rss_before_mb=\(format(Double(before) / 1_048_576)) rss_after_mb=\(format(Double(after) / 1_048_576)) "
        + "all_ended=\(ended) cancel_ms=\(format(Double(cancelNanos) / 1e6))"
}

/// Runs a few short-lived items of `kind`, so that the measurement does not include one-time costs.
func warmUp(_ kind: String) {
    let group = DispatchGroup()
    for index in 0..<200 {
        group.enter()
        retry(maxAttempts: 2, on: queues[index % queues.count]) { (attempt, done: AttemptCompletion<Int>) in
            if attempt.number == 1 { done(.failure(flaky)) } else { done(.success(1)) }
        } strategy: { _ in
            .backoff(.constant(.milliseconds(1)))
        } completion: { _, _ in
            group.leave()
        }
    }
    group.wait()
    if kind == "async" || kind == "task-sleep" {
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            await withTaskGroup(of: Void.self) { tasks in
                for _ in 0..<200 {
                    tasks.addTask {
                        _ = try? await retry(maxAttempts: 2) { () async throws -> Int in
                            throw flaky
                        } strategy: { _ in
                            .backoff(.constant(.milliseconds(1)))
                        }
                    }
                }
            }
            done.signal()
        }
        done.wait()
    }
}

// MARK: - Timer accuracy

/// The backoff of waiter `index` in milliseconds: 10–59 ms, staggered, so that all of them are armed (which takes a
/// few milliseconds for 2,000) before the first one fires.
func stagger(_ index: Int) -> Int { 10 + index % 50 }

/// Lateness of backoff waits with `count` waiting at once: how long after (failure + delay) the next attempt starts.
func timers(_ kind: String, count: Int) -> String {
    let armed = Stamps(count: count)  // when the wait was chosen (the strategy ran) or the timer armed
    let fired = Stamps(count: count)  // when the next attempt started, or the timer fired
    let group = DispatchGroup()
    for _ in 0..<count { group.enter() }
    warmUp("callback")

    switch kind {
    case "callback":
        for index in 0..<count {
            let delay = Duration.milliseconds(stagger(index))
            let queue = queues[index % queues.count]
            retry(maxAttempts: 2, on: queue) { (attempt, done: AttemptCompletion<Int>) in
                if attempt.number == 1 {
                    done(.failure(flaky))
                } else {
                    fired[index] = uptime()
                    done(.success(index))
                }
            } strategy: { _ in
                armed[index] = uptime()
                return .retryAfter(delay)
            } completion: { _, _ in
                group.leave()
            }
        }
    case "dispatch":
        var sources: [any DispatchSourceTimer] = []
        sources.reserveCapacity(count)
        for index in 0..<count {
            let queue = queues[index % queues.count]
            let source = DispatchSource.makeTimerSource(queue: queue)
            source.setEventHandler {
                fired[index] = uptime()
                group.leave()
            }
            sources.append(source)
            let box = TimerBox(source: source)
            queue.async {
                armed[index] = uptime()
                box.source.schedule(
                    deadline: DispatchTime(uptimeNanoseconds: armed[index] + UInt64(stagger(index)) * 1_000_000),
                    repeating: .never, leeway: .nanoseconds(0))
                box.source.activate()
            }
        }
        group.wait()
        for source in sources { source.cancel() }
    case "async", "task-sleep":
        for index in 0..<count {
            Task.detached {
                if kind == "async" {
                    _ = try? await retry(maxAttempts: 2) { () async throws -> Int in
                        if armed[index] == 0 { throw flaky }
                        fired[index] = uptime()
                        return index
                    } strategy: { _ in
                        armed[index] = uptime()
                        return .retryAfter(.milliseconds(stagger(index)))
                    }
                } else {
                    armed[index] = uptime()
                    try? await Task.sleep(for: .milliseconds(stagger(index)))
                    fired[index] = uptime()
                }
                group.leave()
            }
        }
    default:
        return "error=unknown kind \(kind)"
    }
    group.wait()

    var lateness: [Double] = []
    lateness.reserveCapacity(count)
    for index in 0..<count {
        let due = armed[index] + UInt64(stagger(index)) * 1_000_000
        lateness.append((Double(fired[index]) - Double(due)) / 1e6)  // milliseconds; negative would be early
    }
    lateness.sort()
    return "figure=timers kind=\(kind) count=\(count) p50_ms=\(format(percentile(lateness, 50), 3)) "
        + "p99_ms=\(format(percentile(lateness, 99), 3)) max_ms=\(format(lateness.last ?? .nan, 3)) "
        + "min_ms=\(format(lateness.first ?? .nan, 3))"
}

// MARK: - Scale

/// The hand-written baseline: every attempt dispatched with `queue.async`, a failed attempt retried after 1 ms with
/// `asyncAfter`, the handler recursing or completing.
func handWrittenRetry(
    attempt: Int, queue: DispatchQueue, completion: @escaping @Sendable (Result<Int, any Error>) -> Void
) {
    queue.async {
        let result: Result<Int, any Error> = attempt < 3 ? .failure(flaky) : .success(attempt)
        switch result {
        case .failure where attempt < 3:
            queue.asyncAfter(deadline: .now() + .milliseconds(1)) {
                handWrittenRetry(attempt: attempt + 1, queue: queue, completion: completion)
            }
        default:
            completion(result)
        }
    }
}

/// `count` retriers started at once, each failing twice with a 1 ms backoff: wall and CPU time per retrier.
func scale(_ kind: String, count: Int) -> String {
    warmUp("callback")
    let group = DispatchGroup()
    for _ in 0..<count { group.enter() }
    let wallStart = uptime()
    let cpuStart = cpuTime()
    switch kind {
    case "callback":
        for index in 0..<count {
            retry(maxAttempts: 3, on: queues[index % queues.count]) { (attempt, done: AttemptCompletion<Int>) in
                if attempt.number < 3 { done(.failure(flaky)) } else { done(.success(attempt.number)) }
            } strategy: { _ in
                .backoff(.constant(.milliseconds(1)))
            } completion: { _, _ in
                group.leave()
            }
        }
    case "hand-written":
        for index in 0..<count {
            handWrittenRetry(attempt: 1, queue: queues[index % queues.count]) { _ in group.leave() }
        }
    default:
        return "error=unknown kind \(kind)"
    }
    group.wait()
    let wall = Double(uptime() - wallStart)
    let cpu = Double(cpuTime() - cpuStart)
    return "figure=scale kind=\(kind) count=\(count) wall_ns_per_retrier=\(format(wall / Double(count), 0)) "
        + "cpu_ns_per_retrier=\(format(cpu / Double(count), 0)) wall_ms=\(format(wall / 1e6))"
}

// MARK: - Prompt cancellation

/// Starts a CPU-bound child process (this executable's `burn` figure) with one spinning thread per core; the caller
/// terminates it.
func startBurner() -> Process? {
    let process = Process()
    let executable =
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        ?? CommandLine.arguments[0]
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = ["burn", "spin", String(ProcessInfo.processInfo.activeProcessorCount)]
    process.standardOutput = FileHandle.nullDevice
    do {
        try process.run()
        return process
    } catch {
        return nil
    }
}

/// `threads` threads spinning until the process is terminated (at most 300 s, in case the parent died).
func burn(threads: Int) -> Never {
    for _ in 0..<max(threads, 1) {
        Thread.detachNewThread {
            var x: UInt64 = 1
            while true {
                for _ in 0..<1_000_000 { x = x &* 6_364_136_223_846_793_005 &+ 1 }
                if x == 0 { print(x) }
            }
        }
    }
    sleep(300)
    exit(0)
}

/// `count` waits on a 60 s backoff, then every core busied by a CPU-bound child process, then each wait cancelled:
/// the time from a wait's own cancel call to its completion (the retrier's completion handler, the end of the task).
/// Baselines: one-shot `DispatchSourceTimer`s cancelled (their cancel handler is the completion) and tasks in
/// `Task.sleep` cancelled.
func cancellation(_ kind: String, count: Int) -> String {
    warmUp(kind == "async" || kind == "task-sleep" ? "async" : "callback")
    let cancelled = Stamps(count: count)
    let ended = Stamps(count: count)
    let finished = Counter()
    let reached = Counter()
    var handles: [RetryHandle<Int>] = []
    var sources: [any DispatchSourceTimer] = []
    var tasks: [Task<Void, Never>] = []

    switch kind {
    case "async":
        for index in 0..<count {
            tasks.append(waitingAsyncRetrier(reached: reached, then: StampedEnd(ended, index, finished)))
        }
        _ = waitUntil { reached.count >= count }
    case "task-sleep":
        for index in 0..<count {
            tasks.append(sleepingTask(reached: reached, then: StampedEnd(ended, index, finished)))
        }
        _ = waitUntil { reached.count >= count }
    case "callback":
        for index in 0..<count {
            handles.append(
                waitingCallbackRetrier(on: queues[index % queues.count], then: StampedEnd(ended, index, finished)))
        }
        drainQueues()
    case "timer":
        for index in 0..<count {
            let source = DispatchSource.makeTimerSource(queue: queues[index % queues.count])
            source.schedule(deadline: .now() + .seconds(60), repeating: .never, leeway: .nanoseconds(0))
            source.setEventHandler {}
            source.setCancelHandler {
                ended[index] = uptime()
                finished.increment()
            }
            source.activate()
            sources.append(source)
        }
        drainQueues()
    default:
        return "error=unknown kind \(kind)"
    }
    usleep(300_000)  // the last ones settle into their wait

    guard let burner = startBurner() else { return "error=cannot start the CPU-bound child process" }
    usleep(500_000)  // the child's threads are spinning
    let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").first ?? "?"
    let start = uptime()
    for index in 0..<count {
        cancelled[index] = uptime()
        switch kind {
        case "async", "task-sleep": tasks[index].cancel()
        case "callback": handles[index].cancel()
        default: sources[index].cancel()
        }
    }
    let cancelLoop = uptime() - start
    let allEnded = waitUntil(timeout: 60) { finished.count >= count }
    let lastEnd = (0..<count).map { ended[$0] }.max() ?? start
    burner.terminate()
    burner.waitUntilExit()
    guard allEnded else { return "error=\(count - finished.count) of \(count) waits did not end within 60 s" }

    var latency = (0..<count).map { (Double(ended[$0]) - Double(cancelled[$0])) / 1e6 }
    latency.sort()
    return "figure=cancel kind=\(kind) count=\(count) p50_ms=\(format(percentile(latency, 50), 3)) "
        + "p99_ms=\(format(percentile(latency, 99), 3)) max_ms=\(format(latency.last ?? .nan, 3)) "
        + "last_end_ms=\(format(Double(lastEnd - start) / 1e6, 3)) cancel_loop_ms=\(format(Double(cancelLoop) / 1e6, 3)) "
        + "burner_threads=\(ProcessInfo.processInfo.activeProcessorCount) loadavg_1m=\(load)"
}

// MARK: - Recovery

/// The server's answer to a request with an expired token.
struct Unauthorized: Error {}

/// `count` retriers of `kind` (`callback`: `RecoveringRetryPlan.execute(on:)` on the shared queues; `async`: its async
/// `execute` in a task each) whose first attempt fails with an expired token, all waiting on one refresh: the memory
/// per waiting retrier (VmRSS delta / count, the refresh held), then the time from the refresh's end to the start of
/// the last retry.
func recovery(_ kind: String, count: Int) -> String {
    let refreshes = Counter()
    let failures = Counter()
    let finished = Counter()
    let held = HeldRefresh()
    let session = RetryRecovery<Int>(
        credential: 1, when: { $0 is Unauthorized },
        refresh: { old, completion in
            refreshes.increment()
            held.keep { completion(.success((old ?? 0) + 1)) }
        })
    let plan = RetryPlan.constantDelay(.seconds(60)).giveUpAfter(maxAttempts: 3).recovering(with: session)
    let retryStarts = Stamps(count: count)
    warmUp("callback")
    usleep(100_000)
    let before = residentBytes()
    var handles: [RetryHandle<Int>] = []
    var tasks: [Task<Void, Never>] = []
    handles.reserveCapacity(count)
    tasks.reserveCapacity(count)
    for index in 0..<count {
        @Sendable func attempt(_ token: Int) throws -> Int {
            if token == 1 {
                failures.increment()
                throw Unauthorized()
            }
            retryStarts[index] = uptime()
            return token
        }
        switch kind {
        case "callback":
            handles.append(
                plan.execute(on: queues[index % queues.count]) { (token, _, done: AttemptCompletion<Int>) in
                    done(Result { try attempt(token) })
                } completion: { _, _ in
                    finished.increment()
                })
        case "async":
            tasks.append(
                Task.detached {
                    _ = try? await plan.execute { token, _ in try attempt(token) }
                    finished.increment()
                })
        default:
            return "error=unknown kind \(kind)"
        }
    }
    _ = waitUntil { failures.count >= count }
    drainQueues()
    usleep(300_000)  // the last ones register with the recovery
    let after = residentBytes()
    let refreshEnd = uptime()
    held.release()
    let ended = waitUntil { finished.count >= count }
    var last: UInt64 = 0
    for index in 0..<count { last = max(last, retryStarts[index]) }
    let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").first ?? "?"
    return
        "figure=recovery kind=\(kind) count=\(count) bytes_per_item=\(format(Double(after - before) / Double(count), 0)) "
        + "refreshes=\(refreshes.count) all_ended=\(ended) "
        + "last_retry_ms=\(format(Double(last > refreshEnd ? last - refreshEnd : 0) / 1e6, 1)) loadavg_1m=\(load)"
}

/// A refresh completion kept until ``release()``.
final class HeldRefresh: @unchecked Sendable {
    private let lock = NSLock()
    private var pending: [@Sendable () -> Void] = []

    func keep(_ completion: @escaping @Sendable () -> Void) {
        lock.lock()
        pending.append(completion)
        lock.unlock()
    }

    func release() {
        lock.lock()
        let due = pending
        pending = []
        lock.unlock()
        for completion in due { completion() }
    }
}

// MARK: - Main

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count >= 2 else {
    print(
        "usage: runner-load memory callback|async|timer|task-sleep [count] | timers callback|dispatch|async|task-sleep "
            + "[count] | scale callback|hand-written [count] | cancel async|task-sleep|callback|timer [count] "
            + "| recovery callback|async [count]")
    exit(2)
}
let figure = arguments[arguments.startIndex]
let kind = arguments[arguments.startIndex + 1]
let count = arguments.count > 2 ? Int(arguments[arguments.startIndex + 2]) ?? 0 : 0
let line: String
switch figure {
case "memory": line = memory(kind, count: count > 0 ? count : 100_000)
case "timers": line = timers(kind, count: count > 0 ? count : 2_000)
case "scale": line = scale(kind, count: count > 0 ? count : 10_000)
case "cancel": line = cancellation(kind, count: count > 0 ? count : 1_000)
case "recovery": line = recovery(kind, count: count > 0 ? count : 10_000)
case "burn": burn(threads: count)
default: line = "error=unknown figure \(figure)"
}
print(line)
exit(line.hasPrefix("error") ? 1 : 0)

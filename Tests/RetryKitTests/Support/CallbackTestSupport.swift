// Helpers for the completion-handler runner's tests. Names carry a `CB` prefix so they cannot clash with other test
// helpers in this target.

import Dispatch
import Foundation
import RetryKit
import RetryKitTesting
import Testing

extension SeededRandomNumberGenerator {
    /// A value in `0..<bound`, reproducible for a given seed (`bound` must be positive).
    mutating func below(_ bound: Int) -> Int {
        Int(next() % UInt64(bound))
    }
}

/// An error with a code, so tests can tell which attempt produced it.
struct CBError: Error, Equatable, CustomStringConvertible {
    let code: Int
    var description: String { "E\(code)" }
}

/// An object whose only job is to be captured and then checked with a weak reference.
final class CBCanary: Sendable {}

/// A weak reference that can cross threads.
struct CBWeak<Object: AnyObject & Sendable>: Sendable {
    weak var object: Object?

    init(_ object: Object) {
        self.object = object
    }
}

/// A short, comparable description of an event.
func cbDescribe<Value>(_ event: RetryEvent<Value>) -> String {
    switch event {
    case .attemptStarted(let attempt):
        return "start \(attempt.number)"
    case .attemptFailed(let attempt, let error, let next):
        switch next {
        case .retry(let delay): return "fail \(attempt.number) \(error) retry \(delay)"
        case .giveUp(let reason): return "fail \(attempt.number) \(error) giveUp \(reason)"
        case .recover: return "fail \(attempt.number) \(error) recover"
        }
    case .attemptSucceeded(let attempt, let value):
        return "ok \(attempt.number) \(value)"
    case .finished(let summary, let error):
        return "finished \(summary.reason) \(summary.attempts)" + (error.map { " \($0)" } ?? "")
    case .duplicateCompletion(let attempt):
        return "duplicate \(attempt.number)"
    }
}

/// Records everything a retrier reports: events, completions, summaries, and the queue they ran on.
final class CBRecorder<Value: Sendable>: Sendable {
    private struct Log {
        var events: [String] = []
        var rawEvents: [RetryEvent<Value>] = []
        var results: [Result<Value, any Error>] = []
        var summaries: [RetrySummary] = []
        var offQueue: [String] = []
    }

    private let log = Locked(Log())
    /// When set, every callback checks that it runs on the queue carrying this key.
    private let queueKey: DispatchSpecificKey<String>?

    init(checking queue: DispatchQueue? = nil) {
        if let queue {
            let key = DispatchSpecificKey<String>()
            queue.setSpecific(key: key, value: "retry-queue")
            queueKey = key
        } else {
            queueKey = nil
        }
    }

    private func checkQueue(_ what: String) {
        guard let queueKey, DispatchQueue.getSpecific(key: queueKey) != "retry-queue" else { return }
        log.withLock { $0.offQueue.append(what) }
    }

    var observer: @Sendable (RetryEvent<Value>) -> Void {
        { event in
            self.checkQueue("observer")
            self.log.withLock {
                $0.events.append(cbDescribe(event))
                $0.rawEvents.append(event)
            }
        }
    }

    var completion: @Sendable (Result<Value, any Error>, RetrySummary) -> Void {
        { result, summary in
            self.checkQueue("completion")
            self.log.withLock {
                $0.results.append(result)
                $0.summaries.append(summary)
            }
        }
    }

    /// Call from inside an operation or strategy to check its queue too.
    func noteUserCode(_ what: String) {
        checkQueue(what)
    }

    var events: [String] { log.withLock { $0.events } }
    var rawEvents: [RetryEvent<Value>] { log.withLock { $0.rawEvents } }
    var results: [Result<Value, any Error>] { log.withLock { $0.results } }
    var summaries: [RetrySummary] { log.withLock { $0.summaries } }
    var completionCount: Int { log.withLock { $0.results.count } }
    var offQueue: [String] { log.withLock { $0.offQueue } }

    /// The single result, or `nil` if there is not exactly one.
    var onlyResult: Result<Value, any Error>? {
        let results = self.results
        return results.count == 1 ? results[0] : nil
    }

    var onlySummary: RetrySummary? {
        let summaries = self.summaries
        return summaries.count == 1 ? summaries[0] : nil
    }
}

extension Result {
    var cbValue: Success? {
        if case .success(let value) = self { return value }
        return nil
    }

    var cbError: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

/// Whether `error` is a `RetryError` with `reason`.
func cbIsRetryError(_ error: (any Error)?, _ reason: RetryError.Reason) -> Bool {
    (error as? RetryError)?.reason == reason
}

/// A counter that can be bumped from any thread.
final class CBCounter: Sendable {
    private let value = Locked(0)

    @discardableResult
    func increment() -> Int {
        value.withLock {
            $0 += 1
            return $0
        }
    }

    var count: Int { value.withLock { $0 } }
}

/// A value set once from any thread, read from any other.
final class CBSlot<T: Sendable>: Sendable {
    private let value = Locked<T?>(nil)

    func set(_ newValue: T) { value.withLock { $0 = newValue } }
    var get: T? { value.withLock { $0 } }
}

/// Keeps attempts' completions without calling them: the operation of an attempt that never calls back. (An attempt
/// whose every `done` is released uncalled fails at once with `RetryError.Reason.completionReleased` instead.)
final class CBKeeper<Value: Sendable>: Sendable {
    private let kept = Locked<[AttemptCompletion<Value>]>([])

    func keep(_ done: AttemptCompletion<Value>) { kept.withLock { $0.append(done) } }
    var count: Int { kept.withLock { $0.count } }
}

/// Wraps a scheduler and records what the runner asks of it: hops, timers and their delays. Tokens are tracked weakly,
/// to check that the runner releases its timers.
final class CBRecordingScheduler<Base: RetryScheduler>: RetryScheduler {
    final class Token: RetryCancellable {
        let base: Base.Token
        private let cancelled = Locked(false)

        init(base: Base.Token) {
            self.base = base
        }

        func cancel() {
            cancelled.withLock { $0 = true }
            base.cancel()
        }

        var isCancelled: Bool { cancelled.withLock { $0 } }
    }

    private struct Record {
        var executes = 0
        var delays: [Duration] = []
        var tokens: [CBWeak<Token>] = []
    }

    let base: Base
    private let record = Locked(Record())

    init(_ base: Base) {
        self.base = base
    }

    var now: Duration { base.now }

    func execute(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) {
        record.withLock { $0.executes += 1 }
        base.execute(on: queue, work)
    }

    func schedule(after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) -> Token {
        let token = Token(base: base.schedule(after: delay, on: queue, work))
        record.withLock {
            $0.delays.append(delay)
            $0.tokens.append(CBWeak(token))
        }
        return token
    }

    var executeCount: Int { record.withLock { $0.executes } }
    var scheduledDelays: [Duration] { record.withLock { $0.delays } }
    /// How many scheduled tokens are still alive (referenced by someone).
    var liveTokens: Int { record.withLock { $0.tokens.filter { $0.object != nil }.count } }
}

/// The bound of the tests that check that a cancel ends a retrier waiting on a 60 s backoff (or an operation asleep for
/// 60 s) promptly: half of that, so that a retrier that waited on would fail it, and far above the milliseconds a cancel
/// takes, so that a machine stalled by load does not (one stalled by two sanitizer runs and a build beside each other
/// held threads for 12 s). How fast the cancel really is, `Benchmarks/` measures.
let promptBound: Duration = .seconds(30)

/// Polls `condition` every millisecond until it holds or `timeout` passes; returns whether it held.
func cbWait(timeout: Duration = .seconds(60), _ condition: () -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while !condition() {
        if clock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return true
}

/// Runs `scheduler`'s due work until `condition` holds, letting other threads (for example the tasks of async
/// operations) make progress in between; with `jumpingTimers`, also moves virtual time to the next timer whenever
/// nothing is due. Gives up after `timeout` of real time.
func cbPump(
    _ scheduler: VirtualScheduler, jumpingTimers: Bool = false, timeout: Duration = .seconds(60),
    until condition: () -> Bool
) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while true {
        scheduler.advance()
        if condition() { return true }
        if clock.now >= deadline { return false }
        if jumpingTimers, let next = scheduler.nextDeadline, next > scheduler.now {
            scheduler.advance(by: next - scheduler.now)
        } else {
            try? await Task.sleep(for: .microseconds(200))
        }
    }
}

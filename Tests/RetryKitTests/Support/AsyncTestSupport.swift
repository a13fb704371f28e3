import Dispatch
import Foundation
import RetryKit
import RetryKitTesting

/// The error scripted operations throw; `id` is usually the attempt number.
struct AsyncTestError: Error, Equatable, CustomStringConvertible {
    let id: Int

    var description: String { "AsyncTestError(\(id))" }
}

/// A thread-safe counter.
final class AsyncCounter: Sendable {
    private let count = Locked(0)

    /// Adds one and returns the new value.
    @discardableResult
    func increment() -> Int {
        count.withLock { count in
            count += 1
            return count
        }
    }

    var value: Int { count.withLock { $0 } }
}

/// A thread-safe list that tests append to from any thread.
final class AsyncLog<Element: Sendable>: Sendable {
    private let items = Locked<[Element]>([])

    func append(_ item: Element) {
        items.withLock { $0.append(item) }
    }

    var values: [Element] { items.withLock { $0 } }
}

/// A one-shot signal a test can await: `fire()` from anywhere, `wait()` until it has fired (returns at once after).
final class AsyncSignal: Sendable {
    private enum State {
        case idle
        case waiting([CheckedContinuation<Void, Never>])
        case fired
    }

    private let state = Locked(State.idle)

    func fire() {
        let waiters: [CheckedContinuation<Void, Never>] = state.withLock { state in
            defer { state = .fired }
            if case .waiting(let waiters) = state { return waiters }
            return []
        }
        for waiter in waiters {
            waiter.resume()
        }
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let fired: Bool = state.withLock { state in
                switch state {
                case .idle:
                    state = .waiting([continuation])
                    return false
                case .waiting(let waiters):
                    state = .waiting(waiters + [continuation])
                    return false
                case .fired:
                    return true
                }
            }
            if fired { continuation.resume() }
        }
    }
}

/// A clock that records every read of `now` and every sleep, and returns from sleeps at once (or throws a scripted
/// error). Used to prove that `.none` never touches the clock.
final class AsyncRecordingClock: Clock, Sendable {
    typealias Instant = VirtualClock.Instant
    typealias Duration = Swift.Duration

    private struct State {
        var now: Duration = .zero
        var nowReads = 0
        var sleeps: [Duration] = []
    }

    private let state = Locked(State())
    private let sleepError: (any Error)?

    init(sleepError: (any Error)? = nil) {
        self.sleepError = sleepError
    }

    var now: Instant {
        state.withLock { state in
            state.nowReads += 1
            return Instant(offset: state.now)
        }
    }

    var minimumResolution: Duration { .zero }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        state.withLock { state in
            state.sleeps.append(deadline.offset - state.now)
            state.now = max(state.now, deadline.offset)
        }
        if let sleepError { throw sleepError }
    }

    var nowReads: Int { state.withLock { $0.nowReads } }
    var sleeps: [Duration] { state.withLock { $0.sleeps } }
}

/// A readable line for one event, so that event logs can be compared as `[String]`.
func asyncEventLine<Value>(_ event: RetryEvent<Value>) -> String {
    switch event {
    case .attemptStarted(let attempt):
        return "started \(attempt.number)/\(attempt.maxAttempts) at \(attempt.elapsed)"
    case .attemptFailed(let attempt, let error, let next):
        return "failed \(attempt.number) with \(error) next \(next)"
    case .attemptSucceeded(let attempt, let value):
        return "succeeded \(attempt.number) with \(value)"
    case .finished(let summary, let error):
        let error = error.map { "\($0)" } ?? "nil"
        return "finished \(summary.reason) after \(summary.attempts) at \(summary.elapsed) with \(error)"
    case .duplicateCompletion(let attempt):
        return "duplicate \(attempt.number)"
    }
}

/// The delays the core chooses for `count` consecutive retries of `strategy`, feeding each delay back as `previous`.
func asyncCoreDelays<C>(_ strategy: BackoffStrategy<C>, count: Int) -> [Duration] where C.Duration == Duration {
    var previous: Duration?
    var delays: [Duration] = []
    for retry in 0..<count {
        let delay = strategy.delay(forRetry: retry, previous: previous)
        delays.append(delay)
        previous = delay
    }
    return delays
}

/// Runs `body` on a thread of its own and suspends until it returns: for work that may block or spin (a wait on a
/// semaphore, a draw that could livelock), so that it never holds a thread of Swift's cooperative pool, which has as
/// many threads as cores (two on the machines the suite must stay green on).
func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.start()
    }
}

/// Waits for `semaphore` for up to `timeout` without blocking a thread of the cooperative pool: whether it was
/// signalled in time.
func wait(for semaphore: DispatchSemaphore, upTo timeout: Duration) async -> Bool {
    let (seconds, attoseconds) = timeout.components
    let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
    return await offThePool { semaphore.wait(timeout: .now() + .nanoseconds(nanoseconds)) == .success }
}

extension AsyncRetry {
    /// Sleeps on `clock` until `deadline`, and ends at once with `CancellationError` when the task is cancelled,
    /// whatever the clock does.
    ///
    /// `ContinuousClock` and `SuspendingClock` sleep through the runtime, which already ends a sleep from the task's
    /// cancellation handler, and RetryKitTesting's clocks do the same: they are called directly (a constant check once specialized, so the waiting task needs no
    /// more memory than a bare `Task.sleep`). Any other clock's `sleep` may end only when its deadline passes, or
    /// check for cancellation late: it runs in a task of its own, and a cancellation handler resumes the waiting task
    /// at once and cancels that sleep.
    ///
    /// - Throws: `CancellationError` when the task is cancelled, or what the clock's `sleep` throws.
    @inlinable
    static func sleep<C: Clock>(until deadline: C.Instant, tolerance: C.Duration?, clock: C) async throws {
        if endsSleepOnCancellation(C.self) {
            try await clock.sleep(until: deadline, tolerance: tolerance)
        } else {
            try await sleepEndingOnCancel(until: deadline, tolerance: tolerance, clock: clock)
        }
    }

    /// Whether a `C`'s `sleep` is known to end at once when the sleeping task is cancelled: `ContinuousClock` and
    /// `SuspendingClock` (the runtime's sleep) and RetryKitTesting's clocks. A constant once specialized.
    @inlinable
    static func endsSleepOnCancellation<C: Clock>(_: C.Type) -> Bool {
        C.self == ContinuousClock.self || C.self == SuspendingClock.self || C.self is any SleepEndsOnCancellation.Type
    }

    /// ``sleep(until:tolerance:clock:)`` for a duration from now.
    @inlinable
    static func sleep<C: Clock>(for delay: C.Duration, tolerance: C.Duration?, clock: C) async throws {
        if endsSleepOnCancellation(C.self) {
            try await clock.sleep(for: delay, tolerance: tolerance)
        } else {
            try await sleepEndingOnCancel(until: clock.now.advanced(by: delay), tolerance: tolerance, clock: clock)
        }
    }

    /// The sleep of a clock RetryKit does not know: see ``sleep(until:tolerance:clock:)``.
    @usableFromInline
    static func sleepEndingOnCancel<C: Clock>(until deadline: C.Instant, tolerance: C.Duration?, clock: C)
        async throws
    {
        try Task.checkCancellation()
        let race = SleepRace()
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
                guard race.wait(continuation) else { return }
                let sleeper = Task {
                    do {
                        try await clock.sleep(until: deadline, tolerance: tolerance)
                        race.end(nil)
                    } catch {
                        race.end(error)
                    }
                }
                race.keep(sleeper)
            }
        } onCancel: {
            race.cancel()
        }
    }
}

/// A clock whose `sleep` ends at once with `CancellationError` when the sleeping task is cancelled, and which
/// RetryKit's runners therefore call directly (RetryKitTesting's `VirtualClock` and `InstantClock`): its sleepers
/// register from the waiting task itself, in order, as virtual-time tests expect.
@usableFromInline
package protocol SleepEndsOnCancellation {}

/// A sleep in a task of its own against the waiting task's cancellation: the first to end resumes the waiting task,
/// exactly once, after the lock is released.
@usableFromInline
final class SleepRace: Sendable {
    private struct State {
        var continuation: UnsafeContinuation<Void, any Error>?
        var sleeper: Task<Void, Never>?
        /// The sleep or the cancellation has ended it.
        var ended = false
    }

    private let state = Locked(State())

    @usableFromInline
    init() {}

    /// Parks the waiting task. Returns `false` (having resumed it with `CancellationError`) if it was cancelled
    /// already.
    func wait(_ continuation: UnsafeContinuation<Void, any Error>) -> Bool {
        let waits: Bool = state.withLock { s in
            if s.ended { return false }
            s.continuation = continuation
            return true
        }
        if !waits { continuation.resume(throwing: CancellationError()) }
        return waits
    }

    /// Keeps the sleeping task, to cancel it if the waiting task is cancelled first.
    func keep(_ sleeper: Task<Void, Never>) {
        let cancelled: Bool = state.withLock { s in
            if s.ended { return true }
            s.sleeper = sleeper
            return false
        }
        if cancelled { sleeper.cancel() }
    }

    /// The sleep ended, with the clock's error if it threw.
    func end(_ error: (any Error)?) {
        let continuation: UnsafeContinuation<Void, any Error>? = state.withLock { s in
            s.ended = true
            s.sleeper = nil
            defer { s.continuation = nil }
            return s.continuation
        }
        if let error {
            continuation?.resume(throwing: error)
        } else {
            continuation?.resume()
        }
    }

    /// The waiting task was cancelled: it resumes now, and the sleep is called off.
    func cancel() {
        let (continuation, sleeper): (UnsafeContinuation<Void, any Error>?, Task<Void, Never>?) = state.withLock { s in
            s.ended = true
            defer {
                s.continuation = nil
                s.sleeper = nil
            }
            return (s.continuation, s.sleeper)
        }
        sleeper?.cancel()
        continuation?.resume(throwing: CancellationError())
    }
}

import RetryKit

/// A clock whose time moves only when a test says so.
///
/// Test async retry logic without sleeping: hand the clock to the code under test, let it reach its sleep, look at
/// the deadline it asked for, and move time forward.
///
/// ```swift
/// let clock = VirtualClock()
/// let task = Task {
///     try await retry(maxAttempts: 3, clock: clock) { try await api.load() } strategy: { _ in
///         .backoff(.constant(.seconds(2)))
///     }
/// }
/// await clock.waitForSleepers()                 // the retrier failed once and is now waiting
/// #expect(clock.nextDeadline == clock.now.advanced(by: .seconds(2)))
/// await clock.advance(by: .seconds(2))          // the second attempt runs
/// ```
///
/// ## Determinism
///
/// Nothing here depends on real time or on how many times a test yields:
///
/// - ``waitForSleepers(_:)`` suspends until the given number of sleepers are pending, so a test knows the code under
///   test has reached its sleep.
/// - ``advance(by:)`` and `run(until:)` wake due sleepers one at a time in order of
///   (deadline, registration): sleepers due at the same instant wake first-in first-out. Before waking a sleeper,
///   ``now`` is set to its deadline; the next one is woken only after the previous one's `sleep` has returned.
/// - A woken task then runs concurrently with the test. Its reads of ``now`` see at least its deadline; if the same
///   `advance` moves time further, they may see a later instant. To check elapsed times exactly, advance one
///   deadline at a time (``waitForSleepers(_:)``, then ``advance(by:)`` the time from ``now`` to ``nextDeadline``).
///
/// ## Cancellation
///
/// A sleeping task that is cancelled stops sleeping at once with `CancellationError`, whether or not time moves; a
/// task that is already cancelled throws without sleeping.
///
/// ## Scale and range
///
/// Registering, waking and cancelling a sleeper cost O(log n) with n tasks sleeping, so thousands of retriers can
/// share one clock. Virtual time saturates at ±`Int64.max` seconds from the origin instead of overflowing: no
/// deadline or advance traps, whatever its size.
///
/// `VirtualClock` is a class: every copy of a reference sees the same time. It is safe to use from any task.
public final class VirtualClock: Clock, Sendable {
    /// An instant on a virtual timeline: the time since the clock's origin.
    public struct Instant: InstantProtocol, CustomStringConvertible {
        /// The time since the origin (``zero``).
        public var offset: Duration

        /// The instant `offset` after the origin; outside RetryKit, write `.zero.advanced(by: offset)`.
        package init(offset: Duration) {
            self.offset = offset
        }

        /// The origin of the timeline: where a clock created with default arguments starts.
        public static var zero: Self { Self(offset: .zero) }

        /// The instant `duration` later (earlier for a negative `duration`).
        ///
        /// Saturates instead of overflowing: the result is limited to ±`Int64.max` seconds from the origin.
        public func advanced(by duration: Duration) -> Self {
            Self(offset: VirtualTime.adding(offset, duration))
        }

        /// The time from this instant to `other` (negative if `other` is earlier).
        ///
        /// Saturates instead of overflowing: the result is limited to ±`Int64.max` seconds.
        public func duration(to other: Self) -> Duration {
            VirtualTime.subtracting(other.offset, offset)
        }

        public static func < (lhs: Self, rhs: Self) -> Bool {
            lhs.offset < rhs.offset
        }

        public var description: String { "VirtualClock.Instant(\(offset))" }
    }

    /// Durations are Swift's `Duration`, so every RetryKit entry point, strategy and policy works with this clock.
    public typealias Duration = Swift.Duration

    /// A sleeper that is pending: counted by ``sleeperCount`` and woken in (deadline, registration) order.
    private enum PendingSleeper {
        /// The task has not registered its continuation yet.
        case registered
        /// The task is suspended.
        case waiting(CheckedContinuation<Void, any Error>)
    }

    /// What happened to a sleeper that stopped being pending before its task registered its continuation.
    private enum EarlyOutcome {
        /// Woken: the task returns as soon as it registers.
        case woken
        /// Cancelled: the task throws as soon as it registers.
        case cancelled
    }

    private enum WakeAcknowledgement {
        case expected
        case awaited(CheckedContinuation<Void, Never>)
        case received
    }

    private enum CountWaiter {
        case registered(count: Int)
        case waiting(count: Int, CheckedContinuation<Void, Never>)
        case cancelled
    }

    private struct State {
        var now: Duration
        /// Pending sleepers by id; ids grow with registration, which gives the FIFO order at equal deadlines.
        var sleepers = DeadlineQueue<PendingSleeper>()
        /// Sleepers woken or cancelled before their task registered its continuation.
        var early: [DeadlineID: EarlyOutcome] = [:]
        var acknowledgements: [DeadlineID: WakeAcknowledgement] = [:]
        var nextWaiterID = 0
        var countWaiters: [Int: CountWaiter] = [:]

        var pendingCount: Int { sleepers.count }

        /// Removes and returns the count waiters that the current number of pending sleepers satisfies.
        mutating func satisfiedCountWaiters() -> [CheckedContinuation<Void, Never>] {
            guard !countWaiters.isEmpty else { return [] }
            let pending = pendingCount
            var ready: [CheckedContinuation<Void, Never>] = []
            for (id, waiter) in countWaiters {
                if case .waiting(let count, let continuation) = waiter, pending >= count {
                    countWaiters[id] = nil
                    ready.append(continuation)
                }
            }
            return ready
        }
    }

    private let state: Locked<State>

    /// Creates a clock whose time starts at `now`.
    ///
    /// - Parameter now: The starting instant. ``Instant/zero`` by default.
    public init(now: Instant = .zero) {
        state = Locked(State(now: VirtualTime.clamp(now.offset)))
    }

    /// The current virtual time. It changes only through ``advance(by:)`` and `run(until:)`, and never goes
    /// backwards.
    public var now: Instant { Instant(offset: state.withLock { $0.now }) }

    /// Zero: virtual time has no resolution limit.
    public var minimumResolution: Duration { .zero }

    /// The number of tasks currently sleeping on this clock.
    public var sleeperCount: Int { state.withLock { $0.pendingCount } }

    /// The deadline of the sleeper that would wake first, if any task is sleeping.
    public var nextDeadline: Instant? { state.withLock { $0.sleepers.first().map { Instant(offset: $0.deadline) } } }

    /// The deadlines of all sleeping tasks, in the order they would wake.
    package var pendingDeadlines: [Instant] {
        state.withLock { $0.sleepers.sortedKeys.map { Instant(offset: $0.deadline) } }
    }

    /// Suspends until virtual time reaches `deadline`.
    ///
    /// Returns at once if `deadline` is not after ``now``.
    ///
    /// - Parameters:
    ///   - deadline: The instant to wake at. Beyond `Int64.max` seconds from the origin, it counts as that instant.
    ///   - tolerance: Ignored: virtual time wakes sleepers exactly at their deadline.
    /// - Throws: `CancellationError` if the task is cancelled before or while sleeping; cancellation wakes the task
    ///   at once.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let registration: (id: DeadlineID, ready: [CheckedContinuation<Void, Never>])? = state.withLock { state in
            let deadline = VirtualTime.clamp(deadline.offset)
            guard deadline > state.now else { return nil }
            let id = state.sleepers.insert(.registered, at: deadline)
            return (id, state.satisfiedCountWaiters())
        }
        guard let registration else { return }
        for waiter in registration.ready {
            waiter.resume()
        }
        let id = registration.id
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome: Result<Void, CancellationError>? = state.withLock { state in
                    if case .registered = state.sleepers[id] {
                        state.sleepers[id] = .waiting(continuation)
                        return nil
                    }
                    switch state.early.removeValue(forKey: id) {
                    case .woken: return .success(())
                    case .cancelled, nil: return .failure(CancellationError())
                    }
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let continuation: CheckedContinuation<Void, any Error>? = state.withLock { state in
                switch state.sleepers.remove(id) {
                case .registered:
                    state.early[id] = .cancelled
                    return nil
                case .waiting(let continuation):
                    return continuation
                case nil:
                    return nil
                }
            }
            continuation?.resume(throwing: CancellationError())
        }
        acknowledgeWake(id)
    }

    /// Suspends until at least `count` tasks are sleeping on this clock.
    ///
    /// Use it to know that the code under test has reached its next sleep before moving time. Returns at once if
    /// enough tasks are already sleeping, and when the waiting task is cancelled.
    ///
    /// - Parameter count: The number of sleepers to wait for. `1` by default.
    public func waitForSleepers(_ count: Int = 1) async {
        let id: Int? = state.withLock { state in
            guard state.pendingCount < count else { return nil }
            let id = state.nextWaiterID
            state.nextWaiterID += 1
            state.countWaiters[id] = .registered(count: count)
            return id
        }
        guard let id else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow: Bool = state.withLock { state in
                    switch state.countWaiters[id] {
                    case .registered(let count) where state.pendingCount < count:
                        state.countWaiters[id] = .waiting(count: count, continuation)
                        return false
                    default:
                        state.countWaiters[id] = nil
                        return true
                    }
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let continuation: CheckedContinuation<Void, Never>? = state.withLock { state in
                switch state.countWaiters[id] {
                case .registered:
                    state.countWaiters[id] = .cancelled
                    return nil
                case .waiting(_, let continuation):
                    state.countWaiters[id] = nil
                    return continuation
                case .cancelled, nil:
                    return nil
                }
            }
            continuation?.resume()
        }
    }

    /// Moves time forward by `duration`, waking every sleeper whose deadline is reached, in order.
    ///
    /// - Parameter duration: How far to move. Zero wakes the sleepers due now; a negative duration does nothing. Time
    ///   stops at `Int64.max` seconds instead of overflowing, so any duration is accepted.
    public func advance(by duration: Duration) async {
        await advance(to: now.advanced(by: duration))
    }

    /// Moves time forward to `deadline`, waking every sleeper whose deadline is reached, in order.
    ///
    /// Sleepers due at or before `deadline` wake one at a time in (deadline, registration) order; ``now`` is set to
    /// each one's deadline before it wakes and to `deadline` at the end. A sleeper that registers during the advance
    /// with a deadline within it is woken too. Time never goes backwards: a `deadline` before ``now`` only wakes
    /// sleepers that are already due.
    ///
    /// - Parameter deadline: The instant to move to. Beyond `Int64.max` seconds from the origin, it counts as that
    ///   instant.
    package func advance(to deadline: Instant) async {
        let target = VirtualTime.clamp(deadline.offset)
        while await wakeNext(notAfter: target) != nil {}
        state.withLock { state in
            state.now = Swift.max(state.now, target)
        }
    }

    /// Moves time to the earliest pending deadline and wakes that one sleeper (the first registered, if several are
    /// due at that instant).
    ///
    /// - Returns: The instant moved to, or `nil` if no task was sleeping.
    @discardableResult
    package func wakeNext() async -> Instant? {
        await wakeNext(notAfter: nil).map(Instant.init(offset:))
    }

    /// Wakes sleepers one at a time, moving time to each deadline, until no task is sleeping.
    ///
    /// `run()` returns as soon as no sleeper is pending. A task it woke that goes on to sleep again only after `run()`
    /// checked is not woken; to drive a task to its end, use `run(until:)`.
    package func run() async {
        while await wakeNext(notAfter: nil) != nil {}
    }

    /// Wakes sleepers, moving time forward, until `task` finishes, and returns its value.
    ///
    /// Deterministic whatever the task does between sleeps: time moves only while the task (or another task using
    /// this clock) is sleeping, to the earliest deadline, one sleeper at a time.
    ///
    /// Time moves as soon as a sleeper is pending, even if other work the task waits for (an operation finishing on
    /// a dispatch queue, a child task) is still running. When a timeout sleeps on this clock beside such work, drive
    /// the clock step by step with ``waitForSleepers(_:)`` and ``advance(by:)`` instead. A retrier with a
    /// `totalTimeout` or an `attemptTimeout` is such a case: each attempt races a sleeper for its deadline, and
    /// `run(until:)` may wake that sleeper before an attempt that is about to fail at once has failed. To keep such a
    /// test deterministic, wake only the sleepers you expect (check ``nextDeadline`` before advancing to it).
    ///
    /// - Parameter task: The task to drive. Its sleepers and those of any other task on this clock are woken.
    /// - Returns: The task's value.
    /// - Throws: The task's error.
    public func run<Success: Sendable>(until task: Task<Success, any Error>) async throws -> Success {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.wakeSleepersUntilCancelled() }
            defer { group.cancelAll() }
            return try await task.value
        }
    }

    /// Wakes sleepers, moving time forward, until `task` finishes, and returns its value.
    ///
    /// The same as the `run(until:)` that takes a throwing task, for a task that cannot fail.
    ///
    /// - Parameter task: The task to drive.
    /// - Returns: The task's value.
    public func run<Success: Sendable>(until task: Task<Success, Never>) async -> Success {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.wakeSleepersUntilCancelled() }
            defer { group.cancelAll() }
            return await task.value
        }
    }

    /// Wakes each sleeper as it arrives, moving time forward, until the calling task is cancelled: the driver of
    /// both `run(until:)`.
    private func wakeSleepersUntilCancelled() async {
        while !Task.isCancelled {
            await waitForSleepers(1)
            if Task.isCancelled { return }
            await wakeNext()
        }
    }

    // MARK: - Waking

    private func wakeNext(notAfter limit: Duration?) async -> Duration? {
        let woken: (id: DeadlineID, deadline: Duration, continuation: CheckedContinuation<Void, any Error>?)? =
            state.withLock { state in
                guard let (key, sleeper) = state.sleepers.popFirst(dueBy: limit) else { return nil }
                state.now = Swift.max(state.now, key.deadline)
                state.acknowledgements[key.id] = .expected
                switch sleeper {
                case .waiting(let continuation):
                    return (key.id, key.deadline, continuation)
                case .registered:
                    state.early[key.id] = .woken
                    return (key.id, key.deadline, nil)
                }
            }
        guard let woken else { return nil }
        woken.continuation?.resume()
        await awaitWakeAcknowledgement(woken.id)
        return woken.deadline
    }

    /// Called by a sleeper whose `sleep` is about to return normally.
    private func acknowledgeWake(_ id: DeadlineID) {
        let continuation: CheckedContinuation<Void, Never>? = state.withLock { state in
            switch state.acknowledgements[id] {
            case .awaited(let continuation):
                state.acknowledgements[id] = nil
                return continuation
            case .expected:
                state.acknowledgements[id] = .received
                return nil
            case .received, nil:
                return nil
            }
        }
        continuation?.resume()
    }

    private func awaitWakeAcknowledgement(_ id: DeadlineID) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let received: Bool = state.withLock { state in
                if case .received = state.acknowledgements[id] {
                    state.acknowledgements[id] = nil
                    return true
                }
                state.acknowledgements[id] = .awaited(continuation)
                return false
            }
            if received { continuation.resume() }
        }
    }
}

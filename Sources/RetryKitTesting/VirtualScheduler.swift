import Dispatch
import RetryKit

/// A `RetryScheduler` on virtual time, for testing completion-handler retry logic without waiting.
///
/// Nothing runs until you move time: ``advance()`` runs the work that is due now, ``advance(by:)`` moves time forward
/// running everything that falls due on the way, ``run()`` runs until no work is left. A retrier that backs off for
/// minutes finishes in microseconds, and the delays it waited are visible as ``now``.
///
/// ```swift
/// let scheduler = VirtualScheduler()
/// retry(on: queue, scheduler: scheduler) { attempt, done in
///     done(.failure(Flaky()))
/// } strategy: { _ in
///     .backoff(.constant(.seconds(10)))
/// } completion: { result, summary in … }
///
/// scheduler.advance()                  // attempt 1 runs and fails
/// scheduler.advance(by: .seconds(10))  // attempt 2 runs and fails
/// scheduler.run()                      // attempt 3, then the completion
/// ```
///
/// Work due at the same instant runs first-in first-out: items are ordered by (deadline, order of scheduling).
/// Work scheduled while advancing runs in the same call if it falls due before the call's target time.
///
/// Scheduling, running and cancelling an item cost O(log n) with n items pending, so a test can put hundreds of
/// thousands of retriers on one scheduler. Virtual time saturates at ±`Int64.max` seconds instead of overflowing: no
/// delay, starting time or advance traps, whatever its size.
///
/// ## Real work beside virtual time
///
/// When a test's operation hands its result to another thread or task before calling back, plain ``advance(by:)``
/// can fire an attempt timeout before that work had a chance to run. Start such work with ``track(on:_:)`` or
/// ``trackTask(_:)`` and move time with ``advance(by:settlingWithin:)``: each step waits (in real time, bounded) until
/// tracked work has finished before virtual time moves.
///
/// - Important: The scheduler **ignores the queue** it is given: all work runs synchronously on the thread that calls
///   ``advance()``, ``advance(by:)`` or ``run()``. This keeps tests deterministic and single-threaded.
///
/// Thread-safe: operations may call their completion (which schedules work here) from other threads while a test
/// advances time. Work never runs while the scheduler's lock is held.
public final class VirtualScheduler: RetryScheduler {
    /// Cancels one scheduled item; cancelling removes it (and releases its work) at once.
    public struct Token: RetryCancellable {
        fileprivate let id: DeadlineID
        fileprivate weak var scheduler: VirtualScheduler?

        /// Removes the item if it has not run yet.
        public func cancel() {
            scheduler?.remove(id)
        }
    }

    private struct State {
        var now: Duration
        /// Pending work in (deadline, order of scheduling) order.
        var queue = DeadlineQueue<@Sendable () -> Void>()
        /// Tracked work started and not finished yet (see ``VirtualScheduler/beginTrackedWork()``).
        var trackedWork = 0
        /// Grows whenever something a settling wait looks at changes: work scheduled, tracked work finished.
        var generation: UInt64 = 0
        var nextWaiterID = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var cancelledWaiters: Set<Int> = []

        mutating func insert(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DeadlineID {
            generation &+= 1
            return queue.insert(work, at: VirtualTime.adding(now, Swift.max(delay, .zero)))
        }

        /// Whether nothing is due now and no tracked work is running: the point where settling stops.
        mutating func isSettled() -> Bool {
            guard trackedWork == 0 else { return false }
            guard let next = queue.first() else { return true }
            return next.deadline > now
        }

        /// Takes the settling waiters to resume, once the lock is released.
        mutating func takeWaiters() -> [CheckedContinuation<Void, Never>] {
            guard !waiters.isEmpty else { return [] }
            defer { waiters.removeAll() }
            return Array(waiters.values)
        }

        /// Removes and returns the next item if it is due at or before `limit` (any item if `limit` is `nil`),
        /// moving `now` to its deadline.
        mutating func next(dueBy limit: Duration?) -> (@Sendable () -> Void)? {
            guard let (key, work) = queue.popFirst(dueBy: limit) else { return nil }
            now = Swift.max(now, key.deadline)
            return work
        }
    }

    private let state: Locked<State>

    /// Creates a scheduler whose virtual clock reads `now`.
    ///
    /// - Parameter now: The starting time. `.zero` by default; limited to ±`Int64.max` seconds.
    public init(now: Duration = .zero) {
        state = Locked(State(now: VirtualTime.clamp(now)))
    }

    /// The virtual time. It moves only when ``advance(by:)`` or ``run()`` move it.
    public var now: Duration {
        state.withLock { $0.now }
    }

    /// How many items are scheduled and have not run or been cancelled: pending hops and timers.
    public var pendingCount: Int {
        state.withLock { $0.queue.count }
    }

    /// When the next item falls due, or `nil` if nothing is pending.
    public var nextDeadline: Duration? {
        state.withLock { $0.queue.first()?.deadline }
    }

    /// Schedules `work` to run at the current virtual time: on the next ``advance()``. Ignores `queue`.
    public func execute(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) {
        let waiters = state.withLock { state in
            _ = state.insert(after: .zero, work)
            return state.takeWaiters()
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Schedules `work` to run once virtual time has moved `delay` further. Ignores `queue`.
    ///
    /// A negative delay counts as zero; a deadline beyond `Int64.max` seconds is `Int64.max` seconds.
    public func schedule(after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void)
        -> Token
    {
        let (id, waiters) = state.withLock { state in (state.insert(after: delay, work), state.takeWaiters()) }
        for waiter in waiters { waiter.resume() }
        return Token(id: id, scheduler: self)
    }

    /// Runs the work that is due now, including work it schedules for now, without moving time.
    public func advance() {
        advance(by: .zero)
    }

    /// Moves virtual time forward by `duration`, running every item that falls due on the way, in (deadline, order of
    /// scheduling) order, on the calling thread.
    ///
    /// While an item runs, ``now`` reads its deadline; afterwards it reads the start time plus `duration`. A negative
    /// duration counts as zero; time stops at `Int64.max` seconds instead of overflowing, so any duration is
    /// accepted.
    public func advance(by duration: Duration) {
        let target = state.withLock { VirtualTime.adding($0.now, Swift.max(duration, .zero)) }
        while let work = state.withLock({ $0.next(dueBy: target) }) {
            work()
        }
        state.withLock { $0.now = Swift.max($0.now, target) }
    }

    /// Runs everything, moving virtual time to each item's deadline, until no work is left.
    ///
    /// Returns only when nothing is pending: a retrier that retries forever never lets it return.
    public func run() {
        while let work = state.withLock({ $0.next(dueBy: nil) }) {
            work()
        }
    }

    // MARK: - Settling: real work before virtual time moves

    /// Work running for real (on a dispatch queue, in a task) that ``settle(timeout:)`` and
    /// ``advance(by:settlingWithin:)`` wait for before they move virtual time.
    ///
    /// Created by ``VirtualScheduler/beginTrackedWork()``; call ``finish()`` when the work is done. Only the first call
    /// counts.
    public final class TrackedWork: Sendable {
        private let scheduler: VirtualScheduler
        private let finished = Locked(false)

        fileprivate init(scheduler: VirtualScheduler) {
            self.scheduler = scheduler
        }

        /// Marks the work as done. Calls after the first do nothing.
        public func finish() {
            let first = finished.withLock { finished in
                defer { finished = true }
                return !finished
            }
            if first { scheduler.endTrackedWork() }
        }
    }

    /// Thrown when tracked work or work due now keeps a settling wait from ending within its time limit.
    public struct SettleTimeout: Error, CustomStringConvertible {
        /// How much tracked work had not finished.
        public let unfinishedWork: Int
        /// The virtual time at which the wait gave up. Virtual time did not move past it.
        public let now: Duration
        /// The real time waited.
        public let timeout: Duration

        /// What went wrong and what to check, for the test's failure message.
        public var description: String {
            "VirtualScheduler: \(unfinishedWork) piece(s) of tracked work still running after \(timeout) of real time, at "
                + "virtual time \(now); virtual time was not moved. Every beginTrackedWork() needs its finish(); "
                + "work started with track(on:_:) or trackTask(_:) must return."
        }
    }

    /// How much tracked work has started and not finished.
    public var unfinishedTrackedWork: Int {
        state.withLock { $0.trackedWork }
    }

    /// Starts counting a piece of real work that settling waits for; call ``TrackedWork/finish()`` when it is done.
    ///
    /// Use it for work started in a way ``track(on:_:)`` and ``trackTask(_:)`` do not cover, such as a callback
    /// from another library.
    public func beginTrackedWork() -> TrackedWork {
        state.withLock { $0.trackedWork += 1 }
        return TrackedWork(scheduler: self)
    }

    /// Runs `work` on `queue` with `queue.async`, as tracked work: settling waits until it has returned.
    ///
    /// Unlike the work RetryKit schedules here, this runs on `queue`, for real, concurrently with the test: use it in
    /// a test's operation for the part that would run elsewhere in production, such as a network callback.
    public func track(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) {
        let tracked = beginTrackedWork()
        queue.async {
            work()
            tracked.finish()
        }
    }

    /// Runs `operation` in a new task, as tracked work: settling waits until it has returned.
    ///
    /// - Returns: The task, to cancel it or wait for it.
    @discardableResult
    public func trackTask(_ operation: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        let tracked = beginTrackedWork()
        return Task {
            await operation()
            tracked.finish()
        }
    }

    /// Lets pending work reach its next wait without moving virtual time: runs the work due now, and waits (in real
    /// time) for tracked work to finish, running what it schedules for now, until no tracked work is running and
    /// nothing is due now.
    ///
    /// Tracked work is what ``track(on:_:)``, ``trackTask(_:)`` and ``beginTrackedWork()`` start. Work that is not
    /// tracked (a `DispatchQueue.async` in the code under test) is invisible to the scheduler, which cannot wait for it.
    ///
    /// - Parameter timeout: The longest real time to wait. 10 s by default: ample for work that only needs a thread.
    /// - Throws: ``SettleTimeout`` if tracked work is still running after `timeout`; `CancellationError` if the
    ///   waiting task is cancelled.
    public func settle(timeout: Duration = .seconds(10)) async throws {
        let clock = ContinuousClock()
        let limit = Swift.min(Swift.max(timeout, .zero), .seconds(1_000_000_000))
        let deadline = clock.now.advanced(by: limit)
        while true {
            advance()
            let generation: UInt64? = state.withLock { $0.isSettled() ? nil : $0.generation }
            guard let generation else { return }
            try Task.checkCancellation()
            if clock.now >= deadline {
                throw SettleTimeout(unfinishedWork: unfinishedTrackedWork, now: now, timeout: limit)
            }
            await waitForChange(after: generation, until: deadline)
        }
    }

    /// Moves virtual time forward by `duration` like ``advance(by:)``, but before each step that moves time, lets
    /// pending work reach its next wait (``settle(timeout:)``): an attempt timeout fires only if the attempt's tracked
    /// work has not called back by the time virtual time really passes the timeout.
    ///
    /// ```swift
    /// retry(attemptTimeout: .seconds(5), on: queue, scheduler: scheduler) { attempt, done in
    ///     scheduler.track(on: .global()) { done(.success(42)) }  // a real hop, as a network callback would be
    /// } completion: { result, summary in … }
    ///
    /// try await scheduler.advance(by: .seconds(10), settlingWithin: .seconds(5))  // succeeds; never times out
    /// ```
    ///
    /// - Parameters:
    ///   - duration: How far to move virtual time, as in ``advance(by:)``.
    ///   - timeout: The longest real time each settling wait may take.
    /// - Throws: ``SettleTimeout`` if tracked work is still running after `timeout`, `CancellationError` if the waiting
    ///   task is cancelled; virtual time stays where the wait began.
    public func advance(by duration: Duration, settlingWithin timeout: Duration) async throws {
        let target = state.withLock { VirtualTime.adding($0.now, Swift.max(duration, .zero)) }
        while true {
            try await settle(timeout: timeout)
            guard let work = state.withLock({ $0.next(dueBy: target) }) else { break }
            work()
        }
        state.withLock { $0.now = Swift.max($0.now, target) }
        try await settle(timeout: timeout)
    }

    fileprivate func endTrackedWork() {
        let waiters = state.withLock { state in
            state.trackedWork -= 1
            state.generation &+= 1
            return state.takeWaiters()
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Suspends until the state's generation moves past `generation`, or `deadline` passes.
    private func waitForChange(after generation: UInt64, until deadline: ContinuousClock.Instant) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitForSignal(after: generation) }
            group.addTask { try? await Task.sleep(until: deadline, clock: .continuous) }
            await group.next()
            group.cancelAll()
        }
    }

    private func waitForSignal(after generation: UInt64) async {
        let id = state.withLock { state in
            defer { state.nextWaiterID += 1 }
            return state.nextWaiterID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if state.generation != generation || state.cancelledWaiters.contains(id) { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let continuation: CheckedContinuation<Void, Never>? = state.withLock { state in
                if let continuation = state.waiters.removeValue(forKey: id) { return continuation }
                state.cancelledWaiters.insert(id)
                return nil
            }
            continuation?.resume()
        }
        state.withLock { _ = $0.cancelledWaiters.remove(id) }
    }

    fileprivate func remove(_ id: DeadlineID) {
        let removed = state.withLock { $0.queue.remove(id) }
        _ = removed  // released here, outside the lock
    }
}

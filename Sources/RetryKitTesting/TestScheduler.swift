import Dispatch
import RetryKit

/// A `RetryScheduler` on virtual time, for testing completion-handler retry logic without waiting.
///
/// Nothing runs until you move time: ``advance()`` runs the work that is due now, ``advance(by:)`` moves time forward
/// running everything that falls due on the way, ``run()`` runs until no work is left. A retrier that backs off for
/// minutes finishes in microseconds, and the delays it waited are visible as ``now``.
///
/// ```swift
/// let scheduler = TestScheduler()
/// retry(on: queue, scheduler: scheduler) { attempt, done in
///     done(.failure(Flaky()))
/// } strategy: { _ in
///     .backoff(.constant(.seconds(10)))
/// } completion: { result in … }
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
/// - Important: The scheduler **ignores the queue** it is given: all work runs synchronously on the thread that calls
///   ``advance()``, ``advance(by:)`` or ``run()``. This keeps tests deterministic and single-threaded.
///
/// Thread-safe: operations may call their completion (which schedules work here) from other threads while a test
/// advances time. Work never runs while the scheduler's lock is held.
public final class TestScheduler: RetryScheduler {
    /// Cancels one scheduled item; cancelling removes it (and releases its work) at once.
    public struct Token: RetryCancellable {
        fileprivate let id: DeadlineID
        fileprivate weak var scheduler: TestScheduler?

        /// Removes the item if it has not run yet.
        public func cancel() {
            scheduler?.remove(id)
        }
    }

    private struct State {
        var now: Duration
        /// Pending work in (deadline, order of scheduling) order.
        var queue = DeadlineQueue<@Sendable () -> Void>()

        mutating func insert(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DeadlineID {
            queue.insert(work, at: VirtualTime.adding(now, Swift.max(delay, .zero)))
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
        _ = state.withLock { $0.insert(after: .zero, work) }
    }

    /// Schedules `work` to run once virtual time has moved `delay` further. Ignores `queue`.
    ///
    /// A negative delay counts as zero; a deadline beyond `Int64.max` seconds is `Int64.max` seconds.
    public func schedule(after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void)
        -> Token
    {
        let id = state.withLock { $0.insert(after: delay, work) }
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

    fileprivate func remove(_ id: DeadlineID) {
        let removed = state.withLock { $0.queue.remove(id) }
        _ = removed  // released here, outside the lock
    }
}

import Dispatch

/// Something a ``RetryScheduler`` scheduled that can still be called off.
public protocol RetryCancellable: Sendable {
    /// Calls off the scheduled work if it has not started yet.
    ///
    /// Idempotent, and safe to call from any thread, also after the work has run. It cannot stop work that is
    /// already running, so runners guard their work with their own state as well.
    func cancel()
}

/// The source of time and the way of running work for the completion-handler `retry(…, on: queue, …)`.
///
/// Production code uses ``DispatchTimerScheduler`` (``RetryScheduler/dispatch``): it runs work with `DispatchQueue.async` and waits
/// with one-shot `DispatchSourceTimer`s. Tests use `VirtualScheduler` from `RetryKitTesting`, which runs on virtual time,
/// so a retrier that backs off for minutes finishes in microseconds.
///
/// The retrier asks a scheduler for three things only:
///
/// - ``now``: the current time, to measure elapsed time, per-attempt timeouts and the total deadline;
/// - ``execute(on:_:)``: hop to the caller's queue (to start, and once per completed attempt);
/// - ``schedule(after:on:_:)``: wait before a retry, or time out an attempt. A zero-delay retry schedules nothing.
///
/// A scheduler is never called while RetryKit holds a lock.
public protocol RetryScheduler: Sendable {
    /// What ``schedule(after:on:_:)`` returns: a handle that calls the work off.
    associatedtype Token: RetryCancellable

    /// The current time on a monotonic clock, as a duration since an arbitrary fixed origin.
    ///
    /// Only differences between two readings are meaningful.
    var now: Duration { get }

    /// Runs `work` on `queue` as soon as possible, never synchronously on the calling thread.
    func execute(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void)

    /// Runs `work` on `queue` once `delay` has passed, unless the returned token is cancelled first.
    ///
    /// - Parameters:
    ///   - delay: How long to wait. Negative delays count as zero.
    ///   - queue: The queue `work` runs on.
    ///   - work: The work; it runs at most once.
    /// - Returns: A token that cancels the work.
    func schedule(after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) -> Token
}

extension RetryScheduler where Self == DispatchTimerScheduler {
    /// The production scheduler: `DispatchQueue.async` and one-shot `DispatchSourceTimer`s, the one way to name it
    /// (``DispatchTimerScheduler`` is visible only as the type of this value).
    public static var dispatch: DispatchTimerScheduler { DispatchTimerScheduler() }
}

/// The production ``RetryScheduler``: runs work with `DispatchQueue.async` and waits with one-shot
/// `DispatchSourceTimer`s that target the caller's queue.
///
/// Each call to ``schedule(after:on:_:)`` creates a fresh timer, arms it for one deadline and resumes it exactly once
/// before returning, so a timer is never released un-resumed or suspended. The returned ``Timer`` keeps the timer
/// alive (a timer whose last reference is dropped never fires); cancelling it releases the timer's handler.
///
/// Time is continuous, as `ContinuousClock`'s (the default clock of the async APIs): it keeps counting while an Apple
/// device sleeps, so that a backoff, a timeout or a deadline means the same span of real time in the completion-handler
/// and the async styles, on every platform. ``now`` reads `ContinuousClock`'s time source, and timers are armed with a wall-clock
/// deadline (`DispatchWallTime`), the Dispatch time that also counts through sleep (`DispatchTime` is uptime: it stops
/// while the device sleeps). Only a change of the system's wall clock while a timer is pending moves that one timer;
/// elapsed time and the total deadline are still measured on `ContinuousClock`. Delays are clamped to
/// `[0, BackoffStrategy.saturationLimit]` (10⁹ s) before they are converted to nanoseconds, so no delay can overflow
/// or trap; a deadline beyond Dispatch's range becomes `DispatchWallTime.distantFuture`.
public struct DispatchTimerScheduler: RetryScheduler {
    /// A pending `DispatchSourceTimer`; ``cancel()`` cancels it.
    public struct Timer: RetryCancellable, @unchecked Sendable {
        // @unchecked Sendable: `DispatchSourceTimer` is not marked Sendable, but its `cancel()` (the only method called
        // through this type) is thread-safe, and the source is otherwise never touched after it was resumed.
        let source: any DispatchSourceTimer

        /// Cancels the timer. Harmless after it fired, and idempotent.
        public func cancel() {
            source.cancel()
        }
    }

    /// Creates the production scheduler; outside RetryKit, write ``RetryScheduler/dispatch``.
    package init() {}

    /// `ContinuousClock`'s current time (its time source, read directly), as the duration since the clock's origin.
    public var now: Duration {
        Self.duration(nanoseconds: ContinuousTime.nanoseconds())
    }

    /// A continuous-time reading as a duration since the clock's origin.
    static func duration(nanoseconds: UInt64) -> Duration {
        Duration(
            secondsComponent: Int64(nanoseconds / 1_000_000_000),  // < 2⁶⁴ / 10⁹: fits
            attosecondsComponent: Int64(nanoseconds % 1_000_000_000) * 1_000_000_000)
    }

    /// Runs `work` with `queue.async`.
    public func execute(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) {
        queue.async(execute: work)
    }

    /// Arms a one-shot `DispatchSourceTimer` on `queue` that runs `work` once `delay` has passed.
    ///
    /// The delay is clamped to `[0, 10⁹ s]`; leeway is zero.
    public func schedule(after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void)
        -> Timer
    {
        let source = DispatchSource.makeTimerSource(queue: queue)
        source.schedule(
            wallDeadline: Self.deadline(after: delay, from: .now()), repeating: .never, leeway: .nanoseconds(0))
        source.setEventHandler(handler: work)
        source.activate()  // the one and only resume of this source
        return Timer(source: source)
    }

    /// `now + delay`, with `delay` clamped to `[0, 10⁹ s]` and rounded up to whole nanoseconds.
    static func deadline(after delay: Duration, from now: DispatchWallTime) -> DispatchWallTime {
        // Counted in `UInt64`, not `Int`: a 32-bit `Int` (arm64_32) holds only 2.147 s of nanoseconds.
        DurationConversion.wallDeadline(after: DelayMath.clamp(delay), from: now)
    }
}

import RetryKit

/// A clock whose sleeps return at once, while its time moves forward by the duration slept.
///
/// Use it when a test only cares about what the code under test does, not about when: retries with long backoffs run
/// instantly, and ``now`` still tells how long they would have waited.
///
/// ```swift
/// let clock = InstantClock()
/// let value = try await retry(maxAttempts: 5, clock: clock) { try await flaky() } strategy: { _ in
///     .backoff(.exponential(a: .seconds(1), b: 2))
/// }
/// #expect(clock.now == .zero.advanced(by: .seconds(1 + 2 + 4)))   // if the fourth attempt succeeded
/// ```
///
/// `sleep(until:)` checks for cancellation (throwing `CancellationError` if the task is cancelled), moves ``now`` to
/// the deadline if it is later, and returns without suspending. Copies of an `InstantClock` share their time.
///
/// Timeouts measured on an `InstantClock` expire at once, so an attempt timeout races every attempt; use
/// ``VirtualClock`` to test timeouts.
public struct InstantClock: Clock {
    /// The same virtual timeline as ``VirtualClock``.
    public typealias Instant = VirtualClock.Instant
    /// Durations are Swift's `Duration`, so every RetryKit entry point, strategy and policy works with this clock.
    public typealias Duration = Swift.Duration

    private let current: Locked<Duration>

    /// Creates a clock whose time starts at `now`.
    ///
    /// - Parameter now: The starting instant. ``VirtualClock/Instant/zero`` by default.
    public init(now: Instant = .zero) {
        current = Locked(now.offset)
    }

    /// The current virtual time: the start plus everything slept so far.
    public var now: Instant { Instant(offset: current.withLock { $0 }) }

    /// Zero: virtual time has no resolution limit.
    public var minimumResolution: Duration { .zero }

    /// Moves ``now`` to `deadline` (if it is later) and returns at once.
    ///
    /// - Parameters:
    ///   - deadline: The instant the caller wants to sleep until.
    ///   - tolerance: Ignored.
    /// - Throws: `CancellationError` if the task is cancelled.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        current.withLock { now in
            now = Swift.max(now, deadline.offset)
        }
    }
}

import RetryKit

/// A clock whose sleeps return at once, while its time moves forward by the duration slept.
///
/// Use it when a test only cares about what the code under test does, not about when: retries with long backoffs run
/// instantly, and ``now`` still tells how long they would have waited.
///
/// ```swift
/// let clock = ImmediateClock()
/// let value = try await retry(maxAttempts: 5, clock: clock) { try await flaky() } strategy: { _ in
///     .backoff(.exponential(a: .seconds(1), b: 2))
/// }
/// #expect(clock.now == .zero.advanced(by: .seconds(1 + 2 + 4)))   // if the fourth attempt succeeded
/// ```
///
/// `sleep(until:)` checks for cancellation (throwing `CancellationError` if the task is cancelled), moves ``now`` to
/// the deadline if it is later, and returns without suspending. Copies of an `ImmediateClock` share their time.
///
/// Timeouts measured on an `ImmediateClock` expire at once, so an attempt timeout races every attempt; use
/// ``TestClock`` to test timeouts.
public struct ImmediateClock: Clock {
    /// The same virtual timeline as ``TestClock``.
    public typealias Instant = TestClock.Instant
    /// Virtual time is measured in `Swift.Duration`, as RetryKit's runners require.
    public typealias Duration = Swift.Duration

    private let current: Locked<Duration>

    /// Creates a clock whose time starts at `now`.
    ///
    /// - Parameter now: The starting instant. ``TestClock/Instant/zero`` by default.
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

extension Clock where Self == ImmediateClock {
    /// A new ``ImmediateClock`` starting at ``TestClock/Instant/zero``: `retry(clock: .immediate) { … }`.
    public static var immediate: ImmediateClock { ImmediateClock() }
}

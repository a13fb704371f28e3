import Foundation

/// A value guarded by an `NSLock`: RetryKit's one lock type.
///
/// `NSLock` is used rather than `Synchronization.Mutex` because `Mutex` needs macOS 15 / iOS 18 and produces false
/// reports under the thread sanitizer on the Linux toolchain this project is built with.
///
/// Callers compute what to do inside ``withLock(_:)`` and act on it (resume continuations, run user code, cancel
/// timers) after the lock is released.
///
/// An object whose whole mutable state it guards may subclass it (the callback runner does), which saves an allocation
/// per object; subclasses add only immutable, `Sendable` properties.
@usableFromInline
package class Locked<State>: @unchecked Sendable {
    // @unchecked Sendable: every access to `state` happens while `lock` is held.
    private let lock = NSLock()
    // Exclusive access is what `lock` is for, so the runtime's dynamic exclusivity checks on every access would only
    // cost time on the retry runners' hot paths (about a tenth of the callback runner's time per attempt).
    @exclusivity(unchecked) private var state: State

    package init(_ state: State) {
        self.state = state
    }

    /// Runs `body` with exclusive access to the state and returns its result.
    @inline(__always)
    package final func withLock<T>(_ body: (inout State) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}

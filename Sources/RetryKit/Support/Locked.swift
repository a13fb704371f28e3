#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A value guarded by a lock: RetryKit's one lock type.
///
/// The value and the lock live in one allocation (a ``LockedBuffer`` with no fields), in the manner of swift-nio's
/// `NIOLockedValueBox`. The lock is `os_unfair_lock` on Apple platforms and a `pthread_mutex_t` elsewhere.
/// `Synchronization.Mutex` would do the same but needs macOS 15 / iOS 18, above RetryKit's deployment targets; `NSLock`
/// costs two more allocations and a dynamic call per operation.
///
/// Callers compute what to do inside ``withLock(_:)`` and act on it (resume continuations, run user code, cancel
/// timers) after the lock is released: no user code ever runs while a RetryKit lock is held.
@usableFromInline
package struct Locked<State>: @unchecked Sendable {
    // @unchecked Sendable: every access to the state happens while the lock is held.
    private let storage: LockedStorage<State>

    /// A lock guarding `state`.
    package init(_ state: State) {
        // `create` returns an instance of the class it is called on.
        storage = unsafeDowncast(
            LockedStorage<State>.create(minimumCapacity: LockedStorage<State>.capacity()) { _ in LockPrimitive.Raw() },
            to: LockedStorage<State>.self)
        storage.initialize(state, fields: ())
    }

    /// Runs `body` with exclusive access to the state and returns its result.
    @inline(__always)
    package func withLock<T>(_ body: (inout State) throws -> T) rethrows -> T {
        try storage.withLock(body)
    }
}

/// The one allocation behind a ``Locked``: its state and lock, no fields.
final class LockedStorage<State>: LockedBuffer<State, Void> {
    deinit { tearDown() }
}

/// The platform's lock, used in place (never moved once initialized): by ``LockedBuffer``, and by ``CallbackRunner``,
/// which keeps one in its own buffer.
enum LockPrimitive {
    #if canImport(Darwin)
        typealias Raw = os_unfair_lock

        static func initialize(_ lock: UnsafeMutablePointer<Raw>) {
            lock.initialize(to: os_unfair_lock())
        }

        static func destroy(_ lock: UnsafeMutablePointer<Raw>) {
            lock.deinitialize(count: 1)
        }

        @inline(__always)
        static func lock(_ lock: UnsafeMutablePointer<Raw>) {
            os_unfair_lock_lock(lock)
        }

        @inline(__always)
        static func unlock(_ lock: UnsafeMutablePointer<Raw>) {
            os_unfair_lock_unlock(lock)
        }
    #else
        typealias Raw = pthread_mutex_t

        static func initialize(_ lock: UnsafeMutablePointer<Raw>) {
            lock.initialize(to: pthread_mutex_t())
            // A default (non-recursive, non-error-checking) mutex: initialization with no attributes cannot fail.
            _ = pthread_mutex_init(lock, nil)
        }

        static func destroy(_ lock: UnsafeMutablePointer<Raw>) {
            _ = pthread_mutex_destroy(lock)
            lock.deinitialize(count: 1)
        }

        @inline(__always)
        static func lock(_ lock: UnsafeMutablePointer<Raw>) {
            _ = pthread_mutex_lock(lock)
        }

        @inline(__always)
        static func unlock(_ lock: UnsafeMutablePointer<Raw>) {
            _ = pthread_mutex_unlock(lock)
        }
    #endif
}

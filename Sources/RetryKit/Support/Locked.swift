#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A value guarded by a lock: RetryKit's one lock type.
///
/// The value and the lock live in one allocation, in the manner of swift-nio's `NIOLockedValueBox`: a `ManagedBuffer`
/// whose header is the value and whose one element is the lock, so that the lock has a stable address for its whole
/// life. The lock is `os_unfair_lock` on Apple platforms and a `pthread_mutex_t` elsewhere (error-checking in debug
/// builds, so that a lock taken twice on one thread fails an assertion instead of deadlocking). `Synchronization.Mutex`
/// would do the same but needs macOS 15 / iOS 18, above RetryKit's deployment targets.
///
/// Callers compute what to do inside ``withLock(_:)`` and act on it (resume continuations, run user code, cancel
/// timers, release values that may hold user objects) after the lock is released: no user code ever runs while a
/// RetryKit lock is held.
@usableFromInline
package struct Locked<State>: @unchecked Sendable {
    // @unchecked Sendable: the state is only ever accessed inside `withLock`, while the lock is held.
    private let storage: LockedStorage<State>

    /// A lock guarding `state`.
    package init(_ state: State) {
        storage = LockedStorage.make(state)
    }

    /// Runs `body` with exclusive access to the state and returns its result.
    @inline(__always)
    package func withLock<T>(_ body: (inout State) throws -> T) rethrows -> T {
        try storage.withUnsafeMutablePointers { state, lock in
            LockPrimitive.lock(lock)
            defer { LockPrimitive.unlock(lock) }
            return try body(&state.pointee)
        }
    }
}

/// The one allocation behind a ``Locked``: the state as the header, the lock as the one element.
final class LockedStorage<State>: ManagedBuffer<State, LockPrimitive.Raw> {
    static func make(_ state: State) -> LockedStorage<State> {
        let buffer = create(minimumCapacity: 1) { _ in state }
        // `create` returns an instance of the class it is called on.
        let storage = unsafeDowncast(buffer, to: LockedStorage<State>.self)
        storage.withUnsafeMutablePointerToElements { LockPrimitive.initialize($0) }
        return storage
    }

    deinit {
        // The header (the state) is destroyed by `ManagedBuffer` itself; the element is ours.
        withUnsafeMutablePointerToElements { LockPrimitive.destroy($0) }
    }
}

/// The platform's lock, used in place: initialized once in a ``LockedStorage``'s element and never moved.
///
/// Every call's result is checked in debug builds (`assert`): a failure means a bug in RetryKit (a lock taken twice on
/// one thread), never bad input.
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
            os_unfair_lock_lock(lock)  // traps by itself on a lock taken twice on one thread
        }

        @inline(__always)
        static func unlock(_ lock: UnsafeMutablePointer<Raw>) {
            os_unfair_lock_unlock(lock)
        }
    #else
        typealias Raw = pthread_mutex_t

        static func initialize(_ lock: UnsafeMutablePointer<Raw>) {
            lock.initialize(to: pthread_mutex_t())
            var attributes = pthread_mutexattr_t()
            var status = pthread_mutexattr_init(&attributes)
            assert(status == 0, "pthread_mutexattr_init failed: \(status)")
            #if DEBUG
                status = pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
                assert(status == 0, "pthread_mutexattr_settype failed: \(status)")
            #endif
            status = pthread_mutex_init(lock, &attributes)
            assert(status == 0, "pthread_mutex_init failed: \(status)")
            status = pthread_mutexattr_destroy(&attributes)
            assert(status == 0, "pthread_mutexattr_destroy failed: \(status)")
        }

        static func destroy(_ lock: UnsafeMutablePointer<Raw>) {
            let status = pthread_mutex_destroy(lock)
            assert(status == 0, "pthread_mutex_destroy failed: \(status)")
            lock.deinitialize(count: 1)
        }

        @inline(__always)
        static func lock(_ lock: UnsafeMutablePointer<Raw>) {
            let status = pthread_mutex_lock(lock)
            assert(status == 0, "pthread_mutex_lock failed: \(status) (a RetryKit lock taken twice on one thread?)")
        }

        @inline(__always)
        static func unlock(_ lock: UnsafeMutablePointer<Raw>) {
            let status = pthread_mutex_unlock(lock)
            assert(status == 0, "pthread_mutex_unlock failed: \(status)")
        }
    #endif
}

/// One allocation holding a state guarded by a lock, immutable fields read without the lock, and optionally a tail of
/// raw bytes whose size and alignment are known only at run time: the storage behind ``Locked`` and `RetryBridge`.
///
/// A `ManagedBuffer` (in the manner of swift-nio's `NIOLockedValueBox`): the lock (``LockPrimitive``) is its header, and
/// its elements are words of raw memory holding, in this order, the state, the fields and the tail. The state and the
/// fields are at different addresses, so that reading a field while another thread holds the lock is no access to the
/// state (the thread sanitizer sees a critical section as an access to all of the state, through `pointee`).
///
/// Each use is a `final` subclass whose `deinit` calls ``tearDown()``, so that everything is specialized for its types
/// (the offsets of the state and the fields are constants then). A buffer is made in two steps: `create` on the
/// subclass, with ``capacity(tailSize:tailAlignment:)``, then ``initialize(_:fields:)``. Nothing in here runs user
/// code: callers compute what to do inside ``withLock(_:)`` and act on it after the lock is released.
class LockedBuffer<State, Fields>: ManagedBuffer<LockPrimitive.Raw, UInt> {
    /// The capacity (in words) to create a buffer with, for a tail of `tailSize` bytes at `tailAlignment`.
    @inline(__always)
    static func capacity(tailSize: Int = 0, tailAlignment: Int = 1) -> Int {
        let bytes = fieldsEnd + max(tailAlignment, 1) - 1 + max(tailSize, 0)
        let word = MemoryLayout<UInt>.stride
        return (bytes + word - 1) / word
    }

    /// Initializes a buffer just created (with ``capacity(tailSize:tailAlignment:)``) to hold `state`, the lock
    /// guarding it and `fields`; its tail is left uninitialized (see ``tail(alignment:)``).
    ///
    /// Everything is initialized inside `withUnsafeMutablePointers`, the only place where its pointers are valid.
    /// (They used to be taken out of it and used after it returned: with the callback runner's state in this
    /// container, a release build then read back a state other than the one written, and crashed.) The values are
    /// moved in through optionals (`take()`), not copied: a closure cannot consume a captured parameter. The buffer
    /// is created by each subclass, on its own type: creating it here, from a generic metatype, crashed the compiler's
    /// stack promotion in optimized builds with testing enabled (Swift 6.3.1).
    @inline(__always)
    final func initialize(_ state: consuming State, fields: consuming Fields) {
        var state = Optional(state)
        var fields = Optional(fields)
        withUnsafeMutablePointers { lock, raw in
            let elements = UnsafeMutableRawPointer(raw)
            LockPrimitive.initialize(lock)
            if let state = state.take() { Self.statePointer(elements).initializeMemory(as: State.self, to: state) }
            if let fields = fields.take() { Self.fieldsPointer(elements).initializeMemory(as: Fields.self, to: fields) }
        }
    }

    /// Runs `body` with exclusive access to the state, under the lock.
    @inline(__always)
    final func withLock<T>(_ body: (inout State) throws -> T) rethrows -> T {
        try withUnsafeMutablePointers { lock, elements in
            let state = Self.statePointer(UnsafeMutableRawPointer(elements)).assumingMemoryBound(to: State.self)
            LockPrimitive.lock(lock)
            defer { LockPrimitive.unlock(lock) }
            return try body(&state.pointee)
        }
    }

    /// Runs `body` with the state, without the lock: only before the buffer is shared.
    @inline(__always)
    final func withUnsharedState<T>(_ body: (inout State) throws -> T) rethrows -> T {
        try withUnsafeMutablePointerToElements { elements in
            try body(&Self.statePointer(UnsafeMutableRawPointer(elements)).assumingMemoryBound(to: State.self).pointee)
        }
    }

    /// The field at `key`, read without the lock (the fields never change once the buffer is made), from its own
    /// bytes: at `MemoryLayout.offset(of:)`, which the optimizer folds into a constant (copying all of the fields out
    /// through `pointee` would retain and release every reference among them).
    @inline(__always)
    final func field<T>(_ key: KeyPath<Fields, T>) -> T {
        withUnsafeMutablePointerToElements { elements in
            let fields = Self.fieldsPointer(UnsafeMutableRawPointer(elements))
            guard let offset = MemoryLayout<Fields>.offset(of: key) else {
                return fields.assumingMemoryBound(to: Fields.self).pointee[keyPath: key]
            }
            return UnsafeRawPointer(fields).load(fromByteOffset: offset, as: T.self)
        }
    }

    /// The tail: the first byte at `alignment` after the fields, the `alignment` given to
    /// ``capacity(tailSize:tailAlignment:)``. The buffer neither initializes nor deinitializes it: that is the
    /// owner's, and so is guarding it.
    @inline(__always)
    final func tail(alignment: Int) -> UnsafeMutableRawPointer {
        withUnsafeMutablePointerToElements { elements in
            (Self.fieldsPointer(UnsafeMutableRawPointer(elements)) + MemoryLayout<Fields>.size).alignedUp(
                toMultipleOf: max(alignment, 1))
        }
    }

    /// Deinitializes the state and the fields and destroys the lock: the `deinit` of every subclass, and all it does.
    /// (Not a `deinit` here: a generic class's `deinit` is not specialized, and would destroy the state and the fields
    /// through their metadata; a subclass's is, for its types.)
    @inline(__always)
    final func tearDown() {
        withUnsafeMutablePointers { lock, elements in
            let raw = UnsafeMutableRawPointer(elements)
            Self.statePointer(raw).assumingMemoryBound(to: State.self).deinitialize(count: 1)
            Self.fieldsPointer(raw).assumingMemoryBound(to: Fields.self).deinitialize(count: 1)
            LockPrimitive.destroy(lock)
        }
    }

    // The elements are word-aligned: a state and fields that need no more (all of RetryKit's) are at constant offsets.

    /// Whether the state and the fields need at most a word's alignment (a constant).
    @inline(__always)
    private static var wordAligned: Bool {
        max(MemoryLayout<State>.alignment, MemoryLayout<Fields>.alignment) <= MemoryLayout<UInt>.alignment
    }

    /// The state, at the start of the elements.
    @inline(__always)
    private static func statePointer(_ elements: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
        wordAligned ? elements : elements.alignedUp(toMultipleOf: MemoryLayout<State>.alignment)
    }

    /// The fields, just after the state, at their alignment.
    @inline(__always)
    private static func fieldsPointer(_ elements: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
        let alignment = MemoryLayout<Fields>.alignment
        guard wordAligned else {
            return (statePointer(elements) + MemoryLayout<State>.size).alignedUp(toMultipleOf: alignment)
        }
        return elements + (MemoryLayout<State>.size + alignment - 1) / alignment * alignment
    }

    /// The most bytes from the start of the elements to the end of the fields.
    private static var fieldsEnd: Int {
        let alignment = MemoryLayout<Fields>.alignment
        guard wordAligned else {
            return MemoryLayout<State>.alignment - 1 + MemoryLayout<State>.size + alignment - 1
                + MemoryLayout<Fields>.size
        }
        return (MemoryLayout<State>.size + alignment - 1) / alignment * alignment + MemoryLayout<Fields>.size
    }
}

/// The completion handler an operation calls with the result of one attempt.
///
/// Runners pass one to every attempt. Call it once, from any thread, in whichever style the wrapped API uses:
///
/// ```swift
/// operation: { attempt, done in
///     legacyLoad(id) { value, error in done(value, error) }   // (Value?, Error?) style
/// }
/// operation: { attempt, done in
///     modernLoad(id) { result in done(result) }               // Result style
/// }
/// ```
///
/// Only the first call counts. A second call is ignored and reported to observers as
/// ``RetryEvent/duplicateCompletion(_:)``; a call that arrives after the attempt was cancelled or timed out is ignored.
///
/// An attempt must end: if the operation releases every copy of its completion without calling it (a path that forgets
/// `done`), the completion-handler `retry` fails the attempt with ``RetryError``
/// ``RetryError/Reason-swift.enum/completionReleased``, which the strategy sees like any failure. To keep an attempt in
/// flight, keep its completion.
///
/// Register a cancel hook with ``onCancel(_:)`` so that cancelling the retrier (or a per-attempt timeout) also cancels
/// the work in flight, for example a `URLSessionTask`.
public struct AttemptCompletion<Value: Sendable>: Sendable {
    /// Where the result goes: the record of this one attempt, kept by its runner. The completion's only stored
    /// property, so that a closure capturing nothing but `done` (`{ result in done(result) }`) needs no context of its
    /// own.
    @usableFromInline
    let sink: AttemptSink

    /// A completion that reports to `sink`, the record of one attempt.
    @usableFromInline
    package init(sink: AttemptSink) {
        self.sink = sink
    }

    /// A completion for a stand-alone ``AttemptSlot``.
    package init(_ slot: AttemptSlot<Value>) {
        self.init(sink: slot)
    }

    /// The attempt this completion belongs to.
    @usableFromInline
    var attempt: RetryAttempt { sink.attempt }

    /// Completes the attempt with a result.
    @inlinable
    public func callAsFunction(_ result: Result<Value, any Error>) {
        // Inlinable, so that the switch is specialized in the caller's module.
        switch result {
        case .success(let value): sink.attemptSucceeded(value: value)
        case .failure(let error): sink.attemptFailed(error)
        }
    }

    /// Completes the attempt in the `(Value?, Error?)` style of many legacy APIs.
    ///
    /// A non-`nil` error wins; a `nil` error with a value succeeds; `(nil, nil)` fails with
    /// ``RetryError/Reason-swift.enum/missingResult``.
    @inlinable
    public func callAsFunction(_ value: Value?, _ error: (any Error)?) {
        if let error {
            sink.attemptFailed(error)
        } else if let value {
            sink.attemptSucceeded(value: value)
        } else {
            sink.attemptFailed(RetryError(.missingResult))
        }
    }

    /// Registers work to run if the attempt is abandoned: the retrier was cancelled or the attempt timed out.
    ///
    /// The hook runs at most once, on the thread that cancels, never while RetryKit holds a lock. If the attempt was
    /// already abandoned, it runs at once; if the attempt has already completed, it never runs. A later registration
    /// replaces an earlier one that has not run.
    public func onCancel(_ hook: @escaping @Sendable () -> Void) {
        sink.setCancelHook(hook)
    }

    /// Whether the attempt has been abandoned (cancelled or timed out).
    public var isCancelled: Bool { sink.isAbandoned }

    /// The credential the attempt runs with, in a run with a recovery (``RecoveringRetryPlan``); `nil` otherwise.
    @usableFromInline
    package var credential: (any Sendable)? { sink.credential }
}

/// The record of one attempt, as its ``AttemptCompletion`` sees it: where the completion's calls go. Each runner
/// subclasses it (``CallbackAttempt``, ``BridgeAttempt``, ``AttemptSlot``); this class itself is never instantiated,
/// and its methods are overridden by every subclass (their bodies here do nothing).
///
/// A class rather than a protocol, so that a completion is one object reference (an existential of a class-bound
/// protocol is two words, and a closure capturing it needs a context allocated per attempt). Not generic, so that a
/// completion is one type whatever runs it: a success arrives typed, and the subclass, made by the runner that created
/// the completion, knows the value type.
@usableFromInline
package class AttemptSink: @unchecked Sendable {
    // @unchecked Sendable: `attempt` is immutable; each subclass says why its own state is safe to share.

    /// The attempt the completion belongs to.
    @usableFromInline
    package let attempt: RetryAttempt

    init(attempt: RetryAttempt) {
        self.attempt = attempt
    }

    /// The attempt's completion was called with a value.
    @usableFromInline
    package func attemptSucceeded<V: Sendable>(value: V) {}
    /// The attempt's completion was called with an error.
    @usableFromInline
    package func attemptFailed(_ error: any Error) {}
    /// ``AttemptCompletion/onCancel(_:)``.
    package func setCancelHook(_ hook: @escaping @Sendable () -> Void) {}
    /// ``AttemptCompletion/isCancelled``.
    package var isAbandoned: Bool { false }
    /// The credential the attempt runs with, in a run with a recovery; `nil` otherwise (the default).
    package var credential: (any Sendable)? { nil }
}

/// The life of one attempt's completion: called or not, abandoned or not, and the cancel hook to run if it is
/// abandoned first. A plain value, kept under whatever lock its owner holds.
package struct AttemptRecord: Sendable {
    /// What a call of the completion amounts to.
    package enum Call: Sendable {
        /// The first call, while the attempt is current: deliver the result.
        case deliver
        /// The first call, after the attempt was abandoned: ignore it.
        case ignore
        /// Any later call.
        case duplicate
    }

    /// The completion has been called (once or more).
    package private(set) var called = false
    /// The attempt was abandoned: cancelled, or timed out.
    package private(set) var abandoned = false
    /// The cancel hook, until it runs or can no longer run.
    private var hook: (@Sendable () -> Void)?

    package init() {}

    /// The completion is called.
    ///
    /// - Parameter dropped: Receives the cancel hook that can no longer run, for the caller to release once it has
    ///   unlocked: releasing it may run the user's `deinit`s, which must not run under a RetryKit lock.
    package mutating func call(dropping dropped: inout (@Sendable () -> Void)?) -> Call {
        if called { return .duplicate }
        called = true
        dropped = hook.take()
        return abandoned ? .ignore : .deliver
    }

    /// The attempt is abandoned. Returns the hook to run (outside the lock), if there is one and the completion has
    /// not been called.
    /// (The hook, if any, is always handed out, never released here: a completion's call has already taken it.)
    package mutating func abandon() -> (@Sendable () -> Void)? {
        guard !abandoned else { return nil }
        abandoned = true
        return hook.take()
    }

    /// A hook is registered. Returns `true` if it must run at once (outside the lock): the attempt was already
    /// abandoned and its completion has not been called.
    ///
    /// - Parameter dropped: Receives the earlier hook this one replaces, for the caller to release once it has
    ///   unlocked.
    package mutating func register(
        _ newHook: @escaping @Sendable () -> Void, dropping dropped: inout (@Sendable () -> Void)?
    ) -> Bool {
        if called { return false }
        if abandoned { return true }
        dropped = hook.take()
        hook = newHook
        return false
    }
}

/// A stand-alone attempt: delivers the first result to a closure, reports duplicates and runs the cancel hook at most
/// once, behind its own lock. Used by runners that have no state of their own to keep the attempt in.
package final class AttemptSlot<Value: Sendable>: AttemptSink, @unchecked Sendable {
    // @unchecked Sendable: the attempt's record is only accessed under `state`'s lock; the closures are `@Sendable`.
    private let state = Locked(AttemptRecord())
    private let onResult: @Sendable (Result<Value, any Error>) -> Void
    private let onDuplicate: @Sendable () -> Void

    /// - Parameters:
    ///   - onResult: Receives the first result, unless the attempt was abandoned before it arrived.
    ///   - onDuplicate: Called for every call after the first.
    ///   - attempt: The attempt the slot's completion belongs to.
    package init(
        attempt: RetryAttempt = RetryAttempt(number: 1, maxAttempts: 1, elapsed: .zero),
        onResult: @escaping @Sendable (Result<Value, any Error>) -> Void,
        onDuplicate: @escaping @Sendable () -> Void
    ) {
        self.onResult = onResult
        self.onDuplicate = onDuplicate
        super.init(attempt: attempt)
    }

    package func deliver(_ result: Result<Value, any Error>) {
        var dropped: (@Sendable () -> Void)?
        let call = state.withLock { $0.call(dropping: &dropped) }
        withExtendedLifetime(dropped) {}  // released here, outside the lock
        switch call {
        case .deliver: onResult(result)
        case .duplicate: onDuplicate()
        case .ignore: break
        }
    }

    /// Marks the attempt abandoned and runs its cancel hook, if it has one and has not completed.
    package func abandon() {
        state.withLock { $0.abandon() }?()
    }

    // MARK: AttemptSink

    package override func attemptSucceeded<V: Sendable>(value: V) {
        // Always a `Value`: only an `AttemptCompletion<Value>` reports to this slot.
        if let value = value as? Value {
            deliver(.success(value))
        } else {
            deliver(.failure(RetryError(.missingResult)))
        }
    }

    package override func attemptFailed(_ error: any Error) {
        deliver(.failure(error))
    }

    package override func setCancelHook(_ hook: @escaping @Sendable () -> Void) {
        var dropped: (@Sendable () -> Void)?
        let runNow = state.withLock { $0.register(hook, dropping: &dropped) }
        withExtendedLifetime(dropped) {}  // released here, outside the lock
        if runNow { hook() }
    }

    package override var isAbandoned: Bool { state.withLock { $0.abandoned } }
}

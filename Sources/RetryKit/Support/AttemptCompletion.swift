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
/// Register a cancel hook with ``onCancel(_:)`` so that cancelling the retrier (or a per-attempt timeout) also cancels
/// the work in flight, for example a `URLSessionTask`.
public struct AttemptCompletion<Value: Sendable>: Sendable {
    let slot: AttemptSlot<Value>

    package init(_ slot: AttemptSlot<Value>) {
        self.slot = slot
    }

    /// Completes the attempt with a result.
    public func callAsFunction(_ result: Result<Value, any Error>) {
        slot.deliver(result)
    }

    /// Completes the attempt in the `(Value?, Error?)` style of many legacy APIs.
    ///
    /// A non-`nil` error wins; a `nil` error with a value succeeds; `(nil, nil)` fails with
    /// ``RetryError/Reason-swift.enum/missingResult``.
    public func callAsFunction(_ value: Value?, _ error: (any Error)?) {
        if let error {
            slot.deliver(.failure(error))
        } else if let value {
            slot.deliver(.success(value))
        } else {
            slot.deliver(.failure(RetryError(.missingResult)))
        }
    }

    /// Registers work to run if the attempt is abandoned: the retrier was cancelled or the attempt timed out.
    ///
    /// The hook runs at most once, on the thread that cancels, never while RetryKit holds a lock. If the attempt was
    /// already abandoned, it runs at once; if the attempt has already completed, it never runs. A later registration
    /// replaces an earlier one that has not run.
    public func onCancel(_ hook: @escaping @Sendable () -> Void) {
        slot.setCancelHook(hook)
    }

    /// Whether the attempt has been abandoned (cancelled or timed out).
    public var isCancelled: Bool { slot.isAbandoned }
}

/// The shared state behind one attempt's ``AttemptCompletion``: delivers the first result, reports duplicates and
/// runs the cancel hook at most once.
package final class AttemptSlot<Value: Sendable>: Sendable {
    private let state = Locked(AttemptSlotState())
    private let onResult: @Sendable (Result<Value, any Error>) -> Void
    private let onDuplicate: @Sendable () -> Void

    /// - Parameters:
    ///   - onResult: Receives the first result, unless the attempt was abandoned before it arrived.
    ///   - onDuplicate: Called for every call after the first.
    package init(
        onResult: @escaping @Sendable (Result<Value, any Error>) -> Void,
        onDuplicate: @escaping @Sendable () -> Void
    ) {
        self.onResult = onResult
        self.onDuplicate = onDuplicate
    }

    package func deliver(_ result: Result<Value, any Error>) {
        let outcome: AttemptDeliveryOutcome = state.withLock { state in
            if state.delivered { return .duplicate }
            state.delivered = true
            state.hook = nil
            return state.abandoned ? .ignore : .deliver
        }
        switch outcome {
        case .deliver: onResult(result)
        case .duplicate: onDuplicate()
        case .ignore: break
        }
    }

    /// Marks the attempt abandoned and runs its cancel hook, if it has one and has not completed.
    package func abandon() {
        let hook: (@Sendable () -> Void)? = state.withLock { state in
            guard !state.abandoned else { return nil }
            state.abandoned = true
            defer { state.hook = nil }
            return state.delivered ? nil : state.hook
        }
        hook?()
    }

    package func setCancelHook(_ hook: @escaping @Sendable () -> Void) {
        let runNow: Bool = state.withLock { state in
            if state.delivered { return false }
            if state.abandoned { return true }
            state.hook = hook
            return false
        }
        if runNow { hook() }
    }

    package var isAbandoned: Bool { state.withLock { $0.abandoned } }
}

// Outside the generic class on purpose: a type nested in `AttemptSlot<Value>` is generic too, and unspecialized code
// (RetryKit's callers are other modules) would look its metadata up at run time on every attempt.

/// The mutable state of one ``AttemptSlot``.
private struct AttemptSlotState {
    var delivered = false
    var abandoned = false
    var hook: (@Sendable () -> Void)?
}

private enum AttemptDeliveryOutcome { case deliver, duplicate, ignore }

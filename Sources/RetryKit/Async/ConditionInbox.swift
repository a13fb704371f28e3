/// Where the async runner receives the changes of a gated run's ``RetryCondition``: a thin adapter between the
/// condition's observers (called on whatever thread changes the condition) and the one task that runs the retrier.
///
/// It decides nothing: it queues the snapshots the condition reports, in the order they arrive, and wakes the one task
/// waiting for a change. The runner feeds each one it ``take()``s to the state machine
/// (``RetryStateMachine/conditionChanged(_:at:)``), which alone judges them: every change, so that a condition that
/// closes and opens again at once still interrupts a trial, as in the completion-handler style; a snapshot older than
/// one it has recorded (observers may report concurrently, out of order) is ignored there. A snapshot stays queued
/// until it is taken, so a change that arrives while the runner is busy elsewhere (an attempt that has just ended, a
/// drain) is fed at the next wait. No continuation is resumed, and no user code runs, while the lock is held.
@usableFromInline
final class RetryConditionInbox: Sendable {
    private struct State {
        /// The snapshots not taken yet, in the order they arrived.
        var pending: [RetryConditionSnapshot] = []
        /// The task suspended in ``wait()``, with the number of its call.
        var waiter: (call: UInt64, continuation: UnsafeContinuation<Bool, Never>)?
        /// The last call of ``wait()`` cancelled before it suspended.
        var cancelledCall: UInt64?
        var calls: UInt64 = 0

        var hasPending: Bool { !pending.isEmpty }
    }

    private let state = Locked(State())

    init() {}

    /// Starts observing `condition`: its current state is pending at once, each later change as it comes. Cancel the
    /// returned observation to stop.
    func observe(_ condition: RetryCondition) -> RetryConditionObservation {
        let (snapshot, observation) = condition.observe { [weak self] snapshot in self?.post(snapshot) }
        post(snapshot)
        return observation
    }

    /// A change of the condition, from any thread: queued, and the waiting task (if any) woken.
    func post(_ snapshot: RetryConditionSnapshot) {
        let waiter: UnsafeContinuation<Bool, Never>? = state.withLock { s in
            s.pending.append(snapshot)
            guard let waiter = s.waiter else { return nil }
            s.waiter = nil
            return waiter.continuation
        }
        waiter?.resume(returning: true)
    }

    /// The snapshot that arrived first of those not taken yet, if any.
    func take() -> RetryConditionSnapshot? {
        state.withLock { s in s.pending.isEmpty ? nil : s.pending.removeFirst() }
    }

    /// Suspends until a snapshot is pending (``take()``). Returns `true` then, at once if one is already; `false` if the
    /// task is cancelled (promptly: its cancellation handler resumes it).
    @usableFromInline
    func wait() async -> Bool {
        let call: UInt64? = state.withLock { s in
            if s.hasPending { return nil }
            s.calls &+= 1
            return s.calls
        }
        guard let call else { return true }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<Bool, Never>) in
                let now: Bool? = state.withLock { s in
                    if s.cancelledCall == call { return false }
                    if s.hasPending { return true }
                    s.waiter = (call, continuation)
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter: UnsafeContinuation<Bool, Never>? = state.withLock { s in
                guard let waiter = s.waiter, waiter.call == call else {
                    s.cancelledCall = call  // not suspended yet: it returns as soon as it tries
                    return nil
                }
                s.waiter = nil
                return waiter.continuation
            }
            waiter?.resume(returning: false)
        }
    }
}

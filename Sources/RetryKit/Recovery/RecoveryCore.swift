// The shared part of a recovery: the current credential and its generation, the refresh in flight and the retriers
// waiting for it, the refresh window. `RetryRecovery.swift` has the public, typed face; the state machine asks this one
// for credentials (`Action.acquire`) and feeds its answers back (`recoveryAnswered`).

/// What a recovery answers a retrier that asked for a credential (``RecoveryCore/acquire(newerThan:waiter:)``).
package enum RecoveryAnswer: Sendable {
    /// Run the next attempt with this credential, of this generation.
    case ready(any Sendable, generation: UInt64)
    /// The refresh failed with this error: the retrier gives up with it.
    case failed(any Error)
    /// A refresh was needed, but the window allows no more now: the retrier gives up.
    case limitExceeded
}

/// How ``RecoveryCore/acquire(newerThan:waiter:)`` answered.
package enum RecoveryAcquisition: Sendable {
    /// At once: the waiter will not be called.
    case answered(RecoveryAnswer)
    /// Later: the waiter is called once with the answer (from any thread, never under a lock) unless
    /// ``RecoveryCore/stopWaiting(_:)`` takes it back first.
    case waiting(RecoveryTicket)
}

/// A retrier's place in the queue of those waiting for a refresh.
package struct RecoveryTicket: Hashable, Sendable {
    let id: UInt64
}

/// What waits for a recovery's answer: a runner (an object, so that registering allocates nothing of its own).
package protocol RecoveryWaiter: AnyObject, Sendable {
    /// The answer to a wait (``RecoveryAcquisition/waiting(_:)``): called once, from any thread, never under a lock.
    func recoveryAnswered(_ answer: RecoveryAnswer)
}

/// The engine of a ``RetryRecovery``, with the credential's type erased, so that the state machine and the runners
/// are not generic over it.
///
/// **Generations.** The credential the recovery was created with is generation 0 (or there is none); each successful
/// refresh makes the next generation. A retrier asks for a credential *newer than* the generation that failed: if one
/// is there (another retrier's refresh has replaced it), it gets it at once, without a refresh; if not, a refresh
/// starts, unless one runs already, and the retrier waits for it. A retrier about to run an attempt asks for any
/// credential: it waits only while a refresh runs, when there is none yet, or when the credential says it needs a
/// refresh before use.
///
/// **One refresh at a time.** Every retrier that asks while a refresh runs waits for that refresh; when it ends they
/// are all answered, in the order they asked, with its credential or its error.
///
/// **The window.** A refresh is refused (``RecoveryAnswer/limitExceeded``) when the window's number of refreshes have
/// already started within its interval.
///
/// User code (the predicates and the refresh) never runs under the lock.
package final class RecoveryCore: Sendable {
    let window: RecoveryWindow
    let recognises: @Sendable (any Error) -> Bool
    /// `nil` when no credential needs a refresh before use (then no check runs before an attempt).
    let requiresRefresh: (@Sendable (any Sendable) -> Bool)?
    let refresh: @Sendable (_ current: (any Sendable)?, _ done: RefreshCompletion) -> Void
    /// The time the window measures refreshes on (time since an arbitrary origin).
    let now: @Sendable () -> Duration
    private let state: Locked<State>

    private struct State {
        var credential: (any Sendable)?
        var generation: UInt64 = 0
        /// The refresh in flight, by number; `nil` when none runs.
        var refreshing: UInt64?
        var refreshesStarted: UInt64 = 0
        /// When the last refreshes started (at most the window's number of them), oldest first.
        var recentStarts: [Duration] = []
        /// The retriers waiting for the refresh in flight, by ticket (answered in the order of their tickets).
        var waiters: [UInt64: any RecoveryWaiter] = [:]
        var nextTicket: UInt64 = 0
    }

    init(
        credential: (any Sendable)?, window: RecoveryWindow, recognises: @escaping @Sendable (any Error) -> Bool,
        requiresRefresh: (@Sendable (any Sendable) -> Bool)?,
        refresh: @escaping @Sendable (_ current: (any Sendable)?, _ done: RefreshCompletion) -> Void,
        now: @escaping @Sendable () -> Duration
    ) {
        self.window = window
        self.recognises = recognises
        self.requiresRefresh = requiresRefresh
        self.refresh = refresh
        self.now = now
        self.state = Locked(State(credential: credential))
    }

    /// Whether `error` is a failure this recovery answers (user code: call it without holding a lock).
    package func recognises(_ error: any Error) -> Bool {
        recognises(error)
    }

    /// The current credential and its generation.
    var current: (credential: (any Sendable)?, generation: UInt64) {
        state.withLock { ($0.credential, $0.generation) }
    }

    /// How many retriers wait for the refresh in flight (for tests and benchmarks).
    package var waitingCount: Int {
        state.withLock { $0.waiters.count }
    }

    /// How many refreshes have started.
    var refreshesStarted: UInt64 {
        state.withLock { $0.refreshesStarted }
    }

    /// A credential newer than generation `stale` (any credential for `nil`), now or later.
    ///
    /// Answered at once when such a credential is there, no refresh runs and it does not need one before use
    /// (``RetryRecovery``'s `requiresRefresh`), or when a refresh is needed and the window refuses it. Otherwise
    /// `waiter` is called once with the answer when the refresh in flight ends, starting that refresh if none runs; a
    /// refresh this call starts runs on this thread before it returns (its completion may come from any thread, or
    /// before it returns).
    package func acquire(newerThan stale: UInt64?, waiter: any RecoveryWaiter) -> RecoveryAcquisition {
        var stale = stale
        while true {
            enum Step {
                case check(any Sendable, UInt64)
                case refused
                case wait(RecoveryTicket, start: (number: UInt64, credential: (any Sendable)?)?)
            }
            let step: Step = state.withLock { s in
                if s.refreshing == nil, let credential = s.credential, stale.map({ s.generation > $0 }) ?? true {
                    return .check(credential, s.generation)
                }
                var start: (UInt64, (any Sendable)?)?
                if s.refreshing == nil {
                    // No usable credential: refresh it, if the window allows (the time source is RetryKit's or a test's
                    // clock: no user code).
                    let now = self.now()
                    guard window.allows(after: s.recentStarts, at: now) else { return .refused }
                    s.refreshesStarted += 1
                    s.refreshing = s.refreshesStarted
                    s.recentStarts = window.recording(now, after: s.recentStarts)
                    start = (s.refreshesStarted, s.credential)
                }
                let ticket = RecoveryTicket(id: s.nextTicket)
                s.nextTicket += 1
                s.waiters[ticket.id] = waiter
                return .wait(ticket, start: start)
            }
            switch step {
            case .check(let credential, let generation):
                // User code, outside the lock: a credential known to be expired is refreshed before use.
                guard let requiresRefresh, requiresRefresh(credential) else {
                    return .answered(.ready(credential, generation: generation))
                }
                stale = generation
            case .refused:
                return .answered(.limitExceeded)
            case .wait(let ticket, let start):
                if let start { refresh(start.credential, RefreshCompletion(core: self, number: start.number)) }
                return .waiting(ticket)
            }
        }
    }

    /// Takes back the waiter of `ticket` (its retrier stopped waiting: cancelled, or past its deadline). The refresh
    /// goes on for the others; when nobody waits for it any more it still ends the same way, and its credential becomes
    /// the current one for the retriers that ask later.
    package func stopWaiting(_ ticket: RecoveryTicket) {
        let removed: (any RecoveryWaiter)? = state.withLock { $0.waiters.removeValue(forKey: ticket.id) }
        withExtendedLifetime(removed) {}  // released after unlocking
    }

    /// Refresh `number` ended: answers every waiter, in the order they asked. Only the first end of a refresh counts.
    fileprivate func refreshEnded(_ number: UInt64, with result: Result<any Sendable, any Error>) {
        let answered: (RecoveryAnswer, [any RecoveryWaiter])? = state.withLock { s in
            guard s.refreshing == number else { return nil }
            s.refreshing = nil
            let answer: RecoveryAnswer
            switch result {
            case .success(let credential):
                s.generation += 1
                s.credential = credential
                answer = .ready(credential, generation: s.generation)
            case .failure(let error):
                answer = .failed(error)
            }
            defer { s.waiters = [:] }
            return (answer, s.waiters.sorted { $0.key < $1.key }.map(\.value))
        }
        guard let (answer, waiters) = answered else { return }
        for waiter in waiters { waiter.recoveryAnswered(answer) }
    }
}

/// The completion of one refresh: the first call ends the refresh; released without a call, it ends the refresh with
/// ``RetryError/Reason-swift.enum/completionReleased`` (a refresh function that forgets its completion on one of its
/// paths would otherwise leave every waiting retrier waiting until its deadline, and block every later refresh).
package final class RefreshCompletion: Sendable {
    private let core: RecoveryCore
    private let number: UInt64

    fileprivate init(core: RecoveryCore, number: UInt64) {
        self.core = core
        self.number = number
    }

    deinit {
        core.refreshEnded(number, with: .failure(RetryError(.completionReleased)))  // ignored once it has ended
    }

    /// Ends the refresh with `result`; later calls are ignored.
    package func callAsFunction(_ result: Result<any Sendable, any Error>) {
        core.refreshEnded(number, with: result)
    }
}

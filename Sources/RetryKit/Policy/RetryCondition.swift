/// A live `Bool` that gates retries: a policy with ``RetryPlan/onlyWhen(_:)`` runs attempts only
/// while it is `true` ("network reachable", "user signed in").
///
/// A condition holds the latest value of its source and shares it with every run that uses it. Create one from
/// whatever tells you the state, on any platform:
///
/// ```swift
/// let signedIn = RetryCondition(false)          // set it yourself
/// signedIn.value = true
///
/// let reachable = RetryCondition(reachabilityUpdates)   // any AsyncSequence of Bool
///
/// let online = RetryCondition { update in       // any callback-based source
///     monitor.onChange = { isOnline in update(isOnline) }
///     monitor.start()
///     return { monitor.stop() }                 // called when the condition finishes or is released
/// }
/// ```
///
/// On platforms with Combine, `RetryCondition(publisher)` takes any `Publisher<Bool, Never>`.
///
/// ## Values and the end
///
/// ``value`` is `nil` until the source publishes; `nil` and `false` both keep attempts from running. After
/// ``finish()`` (or the end of the source) the value is frozen: a condition that ended `true` lets runs go on as if
/// it had no condition, one that ended `false` or `nil` makes every waiting run finish with ``RetryError``
/// (``RetryError/Reason-swift.enum/conditionEnded``).
///
/// Updates may come from any thread. The source is listened to from the moment the condition is created until it
/// finishes or the condition is released (policies keep their condition alive).
public final class RetryCondition: Sendable {
    /// The input of a callback-based source: call it with each new value, and ``finish()`` when the source ends.
    ///
    /// It holds the condition weakly, so a source may keep it without creating a reference cycle; once the condition
    /// is released, calls do nothing.
    public struct Update: Sendable {
        weak var condition: RetryCondition?

        /// Sets the condition's value.
        public func callAsFunction(_ value: Bool) {
            condition?.value = value
        }

        /// Ends the condition (see ``RetryCondition/finish()``).
        public func finish() {
            condition?.finish()
        }
    }

    private struct State {
        var snapshot = RetryConditionSnapshot(value: nil, ended: false, version: 0)
        var observers: [UInt64: @Sendable (RetryConditionSnapshot) -> Void] = [:]
        var nextObserver: UInt64 = 0
        /// Stops the source; called once, when the condition finishes or is released.
        var stopSource: (@Sendable () -> Void)?
    }

    private let state: Locked<State>

    /// Creates a condition you set yourself with ``value`` and end with ``finish()``.
    ///
    /// - Parameter initial: The starting value; `nil` (no value yet, attempts wait) by default.
    public init(_ initial: Bool? = nil) {
        state = Locked(State(snapshot: RetryConditionSnapshot(value: initial, ended: false, version: 0)))
    }

    /// Creates a condition fed by a callback-based source.
    ///
    /// `register` runs once, at once, on the calling thread. It receives the ``Update`` to call with each value (from
    /// any thread) and returns a closure that stops the source; RetryKit calls that closure once, when the condition
    /// finishes or is released, never while holding a lock.
    public convenience init(register: (_ update: Update) -> @Sendable () -> Void) {
        self.init(nil)
        let stop = register(Update(condition: self))
        let stopNow: Bool = state.withLock { state in
            if state.snapshot.ended { return true }
            state.stopSource = stop
            return false
        }
        if stopNow { stop() }
    }

    /// Creates a condition that follows the values of an async sequence.
    ///
    /// The sequence is iterated once, in a task started now; its end, or an error it throws, ends the condition.
    /// Releasing the condition cancels the task.
    public convenience init<S: AsyncSequence & Sendable>(_ values: S) where S.Element == Bool {
        self.init(register: { update in
            let task = Task {
                do {
                    for try await value in values {
                        update.condition?.value = value
                    }
                } catch {
                    // An error ends the condition, like the end of the sequence.
                }
                update.finish()
            }
            return { task.cancel() }
        })
    }

    deinit {
        state.withLock { $0.stopSource }?()
    }

    /// The latest value: `true` lets attempts run, `false` and `nil` (no value yet) make them wait.
    ///
    /// Setting it notifies the runs waiting on the condition (on the setting thread; they hop to their own queue or
    /// task). Setting it after ``finish()`` does nothing.
    public var value: Bool? {
        get { state.withLock { $0.snapshot.value } }
        set {
            let notify: (RetryConditionSnapshot, [@Sendable (RetryConditionSnapshot) -> Void])? = state.withLock { s in
                guard !s.snapshot.ended, s.snapshot.value != newValue else { return nil }
                s.snapshot.value = newValue
                s.snapshot.version &+= 1
                return (s.snapshot, Array(s.observers.values))
            }
            if let (snapshot, observers) = notify {
                for observer in observers { observer(snapshot) }
            }
        }
    }

    /// Whether the condition has ended: its value no longer changes.
    public var isFinished: Bool { state.withLock { $0.snapshot.ended } }

    /// Ends the condition: freezes its value, stops its source and tells the waiting runs. Idempotent.
    public func finish() {
        let ended: (RetryConditionSnapshot, [@Sendable (RetryConditionSnapshot) -> Void], (@Sendable () -> Void)?)? =
            state.withLock { s in
                guard !s.snapshot.ended else { return nil }
                s.snapshot.ended = true
                s.snapshot.version &+= 1
                let observers = Array(s.observers.values)
                s.observers = [:]
                defer { s.stopSource = nil }
                return (s.snapshot, observers, s.stopSource)
            }
        guard let (snapshot, observers, stop) = ended else { return }
        for observer in observers { observer(snapshot) }
        stop?()
    }

    /// Registers `handler` for every later change and returns the current state with a token that unregisters it.
    ///
    /// Changes made after registration reach the handler (on the changing thread, possibly concurrently and out of
    /// order: compare ``RetryConditionSnapshot/version``s). Nothing is registered once the condition has ended.
    package func observe(
        _ handler: @escaping @Sendable (RetryConditionSnapshot) -> Void
    ) -> (RetryConditionSnapshot, RetryConditionObservation) {
        state.withLock { s in
            guard !s.snapshot.ended else { return (s.snapshot, RetryConditionObservation(condition: nil, id: 0)) }
            let id = s.nextObserver
            s.nextObserver &+= 1
            s.observers[id] = handler
            return (s.snapshot, RetryConditionObservation(condition: self, id: id))
        }
    }

    /// A condition that is `true` only while every one of `conditions` is `true`.
    ///
    /// Its value is `false` when any of them is `false`, otherwise `nil` when any has no value yet, otherwise `true`.
    /// It ends when any of them ends while not `true` (its value then stays not `true`), or when all of them have ended
    /// `true`. It keeps `conditions` alive until it ends or is released.
    package static func all(_ conditions: [RetryCondition]) -> RetryCondition {
        RetryCondition(register: { update in
            let refresh: @Sendable () -> Void = {
                // Each pass publishes what the sources say now, then checks that they still say it: when updates
                // race, the last one to publish sees the final state, so the combined value always settles on it.
                while true {
                    let (value, ended) = combine(conditions)
                    update.condition?.value = value
                    if ended {
                        update.finish()
                        return
                    }
                    if combine(conditions) == (value, ended) { return }
                }
            }
            let observations = conditions.map { $0.observe { _ in refresh() }.1 }
            refresh()
            return {
                for observation in observations { observation.cancel() }
                withExtendedLifetime(conditions) {}
            }
        })
    }

    /// The combined value of `conditions`, and whether the combination has ended (see ``all(_:)``).
    private static func combine(_ conditions: [RetryCondition]) -> (value: Bool?, ended: Bool) {
        let snapshots = conditions.map { $0.state.withLock { $0.snapshot } }
        let value: Bool? =
            snapshots.contains { $0.value == false } ? false : snapshots.contains { $0.value == nil } ? nil : true
        let ended = snapshots.contains { $0.ended && !$0.isOpen } || snapshots.allSatisfy(\.ended)
        return (value, ended)
    }

    /// How many runs are observing the condition now (for tests).
    package var observerCount: Int { state.withLock { $0.observers.count } }

    fileprivate func removeObserver(_ id: UInt64) {
        let removed = state.withLock { $0.observers.removeValue(forKey: id) }
        _ = removed  // released outside the lock
    }
}

/// A condition's state at one moment. Later states have larger versions.
package struct RetryConditionSnapshot: Sendable {
    package var value: Bool?
    package var ended: Bool
    package var version: UInt64

    package init(value: Bool?, ended: Bool, version: UInt64) {
        self.value = value
        self.ended = ended
        self.version = version
    }

    /// Whether attempts may run.
    package var isOpen: Bool { value == true }
}

/// Unregisters an observer of a ``RetryCondition``.
package struct RetryConditionObservation: Sendable {
    weak var condition: RetryCondition?
    let id: UInt64

    package func cancel() {
        condition?.removeObserver(id)
    }
}

#if canImport(Combine)
    import Combine

    extension RetryCondition {
        /// Creates a condition that follows a Combine publisher's values; its completion ends the condition.
        ///
        /// The publisher is subscribed to now; releasing the condition cancels the subscription.
        public convenience init<P: Publisher>(_ publisher: P) where P.Output == Bool, P.Failure == Never {
            self.init(nil)
            let update = Update(condition: self)
            let cancellable = publisher.sink(
                receiveCompletion: { _ in update.finish() },
                receiveValue: { value in update(value) })
            let subscription = CombineSubscription(cancellable: cancellable)
            let stopNow: Bool = state.withLock { state in
                if state.snapshot.ended { return true }
                state.stopSource = { subscription.cancel() }
                return false
            }
            if stopNow { subscription.cancel() }
        }
    }

    /// A Combine subscription kept by a condition.
    // @unchecked Sendable: `AnyCancellable.cancel()`, the only member used, is thread-safe, and the subscription is
    // never touched otherwise.
    private struct CombineSubscription: @unchecked Sendable {
        let cancellable: AnyCancellable

        func cancel() {
            cancellable.cancel()
        }
    }
#endif

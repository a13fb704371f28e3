extension RetryPolicy {
    /// Runs an async operation with this policy and returns its value.
    ///
    /// ```swift
    /// let user = try await policy.execute { attempt in try await api.user(id) }
    /// let inTests = try await policy.execute(clock: VirtualClock()) { attempt in try await api.user(id) }
    /// ```
    ///
    /// Without a condition this is the observed async `retry` with the policy's limits, budget and strategy, in the
    /// caller's isolation, with the same events and errors: the operation's own last error when attempts run out or a
    /// give-up predicate matches, ``RetryError`` for a deadline, a refused budget or an invalid configuration,
    /// `CancellationError` when the task is cancelled.
    ///
    /// With ``onlyWhen(_:)`` the run is a series of trials, one at a time: it waits (burning no
    /// attempt) until the condition is `true`, runs a trial (that retrier) in a child task, and cancels the trial when
    /// the condition turns `false` (a wait ends at once, a running attempt is cancelled cooperatively; if it still
    /// returns a value, that value is the result). When the condition turns `true` again a new trial starts afresh.
    /// If the condition ends while `false`, the run throws ``RetryError``
    /// (``RetryError/Reason-swift.enum/conditionEnded``) with the last attempt error. The observer sees each trial's
    /// events and one ``RetryEvent/finished(_:error:)`` at the end, whose summary counts the attempts of all trials.
    ///
    /// Cancelling the calling task cancels the run: it throws `CancellationError`.
    ///
    /// - Parameters:
    ///   - tolerance: The tolerance passed to the clock for each sleep. `nil` by default.
    ///   - clock: The clock that measures waits and timeouts (`C.Duration == Duration`). `ContinuousClock()` by
    ///     default.
    ///   - isolation: The actor the policy's strategy and the observer run on; inherited from the caller.
    ///   - operation: The work to try; it receives the attempt.
    ///   - observer: Receives every event, in order, in `isolation`. Ignores them by default. See
    ///     ``RetryEvent/makeStream()`` for an `AsyncStream` of them.
    /// - Returns: The value of the first attempt that succeeds.
    /// - Throws: See above.
    public func execute<Value: Sendable, C: Clock>(
        tolerance: Duration? = nil,
        clock: C = ContinuousClock(),
        isolation: isolated (any Actor)? = #isolation,
        operation: @escaping @Sendable (_ attempt: RetryAttempt) async throws -> Value,
        observer: @escaping @Sendable (RetryEvent<Value>) -> Void = { _ in }
    ) async throws -> Value where C.Duration == Duration {
        guard effectiveCondition != nil else {
            return try await retry(
                configuration: configuration, tolerance: tolerance, clock: clock, isolation: isolation,
                operation: operation, strategy: strategy(on: C.self), observer: observer)
        }
        let ledger = TrialLedger()
        let start = clock.now
        let (result, reason) = await runTrials(
            tolerance: tolerance, clock: clock, isolation: isolation, operation: operation, observer: observer,
            ledger: ledger)
        let summary = RetrySummary(reason: reason, attempts: ledger.attempts, elapsed: start.duration(to: clock.now))
        switch result {
        case .success(let value):
            observer(.finished(summary, error: nil))
            return value
        case .failure(let error):
            observer(.finished(summary, error: error))
            throw error
        }
    }

    /// Runs trials until one succeeds or gives up, the condition ends while closed, or the task is cancelled; emits
    /// no `finished` event (the caller does, for the whole run).
    ///
    /// - Returns: The result, and the reason the run ends.
    func runTrials<Value: Sendable, C: Clock>(
        tolerance: Duration?, clock: C, isolation: isolated (any Actor)?,
        operation: @escaping @Sendable (RetryAttempt) async throws -> Value,
        observer: @escaping @Sendable (RetryEvent<Value>) -> Void,
        ledger: TrialLedger
    ) async -> (Result<Value, any Error>, RetryError.Reason) where C.Duration == Duration {
        let gate = AsyncConditionGate(effectiveCondition)
        defer { gate.close() }
        let configuration = self.configuration
        let strategy = self.strategy(on: C.self)
        let trialObserver = ledger.observer(forwardingTo: observer)
        while true {
            switch await gate.wait(open: true) {
            case .reached: break
            case .ended: return (.failure(ledger.conditionEndedError()), .conditionEnded)
            case .cancelled: return (.failure(CancellationError()), .cancelled)
            }
            let (result, abandoned) = await withTaskGroup(
                of: AsyncTrialEvent<Value>.self, returning: (Result<Value, any Error>, Bool).self, isolation: isolation
            ) { group in
                group.addTask {
                    await runTrial(
                        configuration: configuration, tolerance: tolerance, clock: clock, isolation: isolation,
                        operation: operation, strategy: strategy, observer: trialObserver)
                }
                group.addTask {
                    await gate.wait(open: false) == .reached ? .conditionClosed : .conditionStaysOpen
                }
                var abandoned = false
                while let event = await group.next() {
                    switch event {
                    case .conditionClosed:
                        abandoned = true
                        ledger.interruptTrial()
                        group.cancelAll()
                    case .conditionStaysOpen:
                        continue
                    case .trialFinished(let result):
                        group.cancelAll()
                        return (result, abandoned)
                    }
                }
                return (.failure(CancellationError()), abandoned)  // unreachable: the trial always reports
            }
            let trialReason = ledger.lastSummary?.reason ?? .cancelled
            if case .success = result { return (result, .succeeded) }
            if trialReason == .cancelled {
                if Task.isCancelled { return (.failure(CancellationError()), .cancelled) }
                if abandoned { continue }
            }
            return (result, trialReason)
        }
    }
}

/// What a child task of a gated async run reports.
enum AsyncTrialEvent<Value: Sendable>: Sendable {
    case trialFinished(Result<Value, any Error>)
    case conditionClosed
    case conditionStaysOpen
}

/// One trial: the observed async retrier, in `isolation`.
private func runTrial<Value: Sendable, C: Clock>(
    configuration: RetryConfiguration, tolerance: Duration?, clock: C, isolation: isolated (any Actor)?,
    operation: @escaping @Sendable (RetryAttempt) async throws -> Value,
    strategy: @escaping @Sendable (any Error) -> RetryStrategy<C>,
    observer: @escaping @Sendable (RetryEvent<Value>) -> Void
) async -> AsyncTrialEvent<Value> where C.Duration == Duration {
    do {
        return .trialFinished(
            .success(
                try await retry(
                    configuration: configuration, tolerance: tolerance, clock: clock, isolation: isolation,
                    operation: operation, strategy: strategy, observer: observer)))
    } catch {
        return .trialFinished(.failure(error))
    }
}

/// A ``RetryCondition`` seen from async code: await until it is open or closed.
final class AsyncConditionGate: Sendable {
    enum Wait: Sendable, Equatable {
        /// The condition is (now) in the wanted state.
        case reached
        /// The condition ended in the other state: it will never be in the wanted one.
        case ended
        /// The waiting task was cancelled, or the gate closed.
        case cancelled
    }

    private enum Waiter {
        case registered(open: Bool)
        case waiting(open: Bool, CheckedContinuation<Wait, Never>)
        case cancelled
    }

    private struct State {
        /// The latest state of the condition; `nil` only while the gate is being created.
        var snapshot: RetryConditionSnapshot?
        var observation: RetryConditionObservation?
        var waiters: [UInt64: Waiter] = [:]
        var nextID: UInt64 = 0
        var closed = false

        func answer(open: Bool) -> Wait? {
            if closed { return .cancelled }
            guard let snapshot else { return nil }
            if snapshot.isOpen == open { return .reached }
            return snapshot.ended ? .ended : nil
        }

        /// Records `snapshot` unless a newer one is known; returns whether it was recorded.
        mutating func record(_ new: RetryConditionSnapshot) -> Bool {
            if let snapshot, new.version <= snapshot.version { return false }
            snapshot = new
            return true
        }

        /// Takes the waiters the current snapshot answers.
        mutating func answered() -> [(CheckedContinuation<Wait, Never>, Wait)] {
            var ready: [(CheckedContinuation<Wait, Never>, Wait)] = []
            for (id, waiter) in waiters {
                if case .waiting(let open, let continuation) = waiter, let answer = answer(open: open) {
                    waiters[id] = nil
                    ready.append((continuation, answer))
                }
            }
            return ready
        }
    }

    private let state: Locked<State>

    /// Observes `condition`; without one, the gate is always open.
    init(_ condition: RetryCondition?) {
        guard let condition else {
            state = Locked(State(snapshot: RetryConditionSnapshot(value: true, ended: true, version: 0)))
            return
        }
        state = Locked(State())
        let (snapshot, observation) = condition.observe { [weak self] snapshot in self?.update(snapshot) }
        let stale: Bool = state.withLock { s in
            _ = s.record(snapshot)
            guard !s.closed else { return true }
            s.observation = observation
            return false
        }
        if stale { observation.cancel() }
    }

    /// Stops observing and releases every waiter with ``Wait/cancelled``.
    func close() {
        let (observation, waiters): (RetryConditionObservation?, [UInt64: Waiter]) = state.withLock { s in
            s.closed = true
            defer {
                s.observation = nil
                s.waiters = [:]
            }
            return (s.observation, s.waiters)
        }
        observation?.cancel()
        for case .waiting(_, let continuation) in waiters.values { continuation.resume(returning: .cancelled) }
    }

    private func update(_ snapshot: RetryConditionSnapshot) {
        let ready = state.withLock { s -> [(CheckedContinuation<Wait, Never>, Wait)] in
            guard s.record(snapshot) else { return [] }
            return s.answered()
        }
        for (continuation, answer) in ready { continuation.resume(returning: answer) }
    }

    /// Suspends until the condition is open (`open: true`) or closed (`open: false`).
    func wait(open: Bool) async -> Wait {
        enum Registration {
            case answered(Wait)
            case registered(UInt64)
        }
        let registration: Registration = state.withLock { s in
            if let answer = s.answer(open: open) { return .answered(answer) }
            let id = s.nextID
            s.nextID &+= 1
            s.waiters[id] = .registered(open: open)
            return .registered(id)
        }
        let id: UInt64
        switch registration {
        case .answered(let answer): return answer
        case .registered(let registered): id = registered
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Wait, Never>) in
                let now: Wait? = state.withLock { s in
                    switch s.waiters[id] {
                    case .registered:
                        if let answer = s.answer(open: open) {
                            s.waiters[id] = nil
                            return answer
                        }
                        s.waiters[id] = .waiting(open: open, continuation)
                        return nil
                    case .cancelled, .waiting, nil:
                        s.waiters[id] = nil
                        return .cancelled
                    }
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let continuation: CheckedContinuation<Wait, Never>? = state.withLock { s in
                switch s.waiters[id] {
                case .registered:
                    s.waiters[id] = .cancelled
                    return nil
                case .waiting(_, let continuation):
                    s.waiters[id] = nil
                    return continuation
                case .cancelled, nil:
                    return nil
                }
            }
            continuation?.resume(returning: .cancelled)
        }
    }
}

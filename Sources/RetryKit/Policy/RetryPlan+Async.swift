extension RetryPlan {
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
    /// attempt) until the condition is `true`, runs a trial (that retrier, each attempt in a child task), and abandons
    /// the trial when the condition turns `false`: a wait ends at once, a running attempt's task is cancelled and the
    /// run waits for it to return, then ignores its result (a value it still returns is not the result, as in the
    /// completion-handler style) and reports it as ``RetryEvent/attemptFailed(_:error:next:)`` with `CancellationError`
    /// and `next: .giveUp(.cancelled)`. When the condition turns `true` again a new trial starts afresh.
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
        guard let condition = effectiveCondition else {
            return try await retry(
                configuration: configuration, tolerance: tolerance, clock: clock, isolation: isolation,
                operation: operation, strategy: strategy(on: C.self), observer: observer)
        }
        let conditions = RetryConditionInbox()
        let observation = conditions.observe(condition)
        defer { observation.cancel() }
        let machine = AsyncTrialMachine(configuration, conditions: conditions, repeatDelay: nil)
        return try await runTrialMachine(
            of: machine, since: clock.now, tolerance: tolerance, clock: clock, isolation: isolation,
            operation: operation, observer: observer)
    }

    /// Runs `machine`, a run of trials of this policy (gated by its condition, repeating), with the one async runner
    /// (``runObservedRetry(machine:tolerance:clock:isolation:now:runAttempt:strategy:observer:willStart:)``): the
    /// machine decides when a trial starts, is interrupted, pauses or ends. A gated run's attempts race the condition's
    /// changes (``AsyncRetry/runAttempt(_:timeout:tolerance:clock:isolation:operation:conditions:conditionChanged:)``),
    /// each fed to the machine as it comes. Returns the value of a success: the end of the run, or, repeating, a pause
    /// that the next call with the same machine (and the same `start`) waits out.
    func runTrialMachine<Value: Sendable, C: Clock>(
        of machine: AsyncTrialMachine, since start: C.Instant, tolerance: Duration?, clock: C,
        isolation: isolated (any Actor)?,
        operation: @escaping @Sendable (RetryAttempt) async throws -> Value,
        observer: (RetryEvent<Value>) -> Void
    ) async throws -> Value where C.Duration == Duration {
        var holder = machine
        let now = { start.duration(to: clock.now) }
        return try await runObservedRetry(
            machine: &holder, tolerance: tolerance, clock: clock, isolation: isolation, now: now,
            runAttempt: { attempt, timeout in
                await AsyncRetry.runAttempt(
                    attempt, timeout: timeout, tolerance: tolerance, clock: clock, isolation: isolation,
                    operation: operation, conditions: machine.conditions,
                    conditionChanged: { machine.attemptSignalled(at: now()) })
            },
            strategy: strategy(on: C.self), observer: observer, willStart: { _ in })
    }
}

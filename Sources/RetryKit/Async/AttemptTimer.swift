extension AsyncRetry {
    /// Carries out an attempt's timer, the one the state machine arms with `run(_, timeout:)`, for the async runners
    /// (the observed `retry` and `withRetry`): ``racing(_:until:tolerance:clock:isolation:timedOut:sleepFailed:signal:signalled:)``
    /// with an attempt and a timer only.
    ///
    /// - Returns: The first outcome, or `nil` if neither reported one (the task was cancelled).
    @inlinable
    static func racingTimer<Outcome: Sendable, C: Clock>(
        until deadline: C.Instant, tolerance: Duration?, clock: C, isolation: isolated (any Actor)?,
        attempt: @escaping @Sendable () async -> Outcome?,
        timedOut: @escaping @Sendable () -> Outcome?
    ) async -> Outcome? where C.Duration == Duration {
        await racing(
            attempt, until: deadline, tolerance: tolerance, clock: clock, isolation: isolation, timedOut: timedOut,
            signal: nil, signalled: { nil })
    }

    /// The one place where the async runners race: an attempt, its timer and the changes of a gated run's condition.
    ///
    /// `attempt`, a timer until `deadline` and `signal` each run in a child task (those given); the first that reports a
    /// non-`nil` outcome ends the race, and the others are cancelled (and awaited, as structured concurrency requires:
    /// an attempt's late result is dropped). When the timer fires first, `timedOut` runs in the timer's task and says
    /// what it comes to: the runner's `.timedOut`, which it feeds to the machine as
    /// ``RetryStateMachine/attemptTimedOut(_:at:)``, or `nil` when it has told the attempt itself, which then reports
    /// (`withRetry`'s bridge ends the attempt, whichever of its completion and its timer comes first). When the clock's
    /// sleep throws (other than because the race ended), `sleepFailed` says what that comes to. Each time `signal`
    /// returns `true` (a change of the condition is pending), `signalled` runs in `isolation` (the runner feeds the
    /// change to its machine there): a non-`nil` outcome ends the race (the machine interrupted the attempt or the
    /// wait), `nil` listens again. Without an attempt the race is a wait that a signal may end.
    ///
    /// - Returns: The first outcome, or `nil` if none was reported (the task was cancelled).
    @inlinable
    static func racing<Outcome: Sendable, C: Clock>(
        _ attempt: (@Sendable () async -> Outcome?)?,
        until deadline: C.Instant?, tolerance: C.Duration?, clock: C, isolation: isolated (any Actor)?,
        timedOut: @escaping @Sendable () -> Outcome?,
        sleepFailed: @escaping @Sendable (any Error) -> Outcome? = { _ in nil },
        signal: (@Sendable () async -> Bool)?,
        signalled: () -> Outcome?
    ) async -> Outcome? {
        await withTaskGroup(of: RaceReport<Outcome>.self, isolation: isolation) { group in
            if let attempt { group.addTask { .outcome(await attempt()) } }
            if let deadline {
                group.addTask {
                    do {
                        try await AsyncRetry.sleep(until: deadline, tolerance: tolerance, clock: clock)
                    } catch {
                        // Cancelled: the race is over, or the task was cancelled.
                        return .outcome(Task.isCancelled ? nil : sleepFailed(error))
                    }
                    return .outcome(Task.isCancelled ? nil : timedOut())
                }
            }
            if let signal { group.addTask { .signal(await signal()) } }
            var outcome: Outcome?
            while outcome == nil, let next = await group.next() {
                switch next {
                case .outcome(let reported):
                    outcome = reported
                case .signal(true):
                    outcome = signalled()
                    if outcome == nil, let signal { group.addTask { .signal(await signal()) } }
                case .signal(false):
                    break  // cancelled: the task was cancelled
                }
            }
            group.cancelAll()
            return outcome
        }
    }
}

/// What a child task of ``AsyncRetry/racing(_:until:tolerance:clock:isolation:timedOut:sleepFailed:signal:signalled:)``
/// reports.
@usableFromInline
enum RaceReport<Outcome: Sendable>: Sendable {
    /// The attempt's or the timer's outcome (`nil`: none).
    case outcome(Outcome?)
    /// Whether a change of the condition is pending (`false`: the listener was cancelled).
    case signal(Bool)
}

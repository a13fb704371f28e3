extension AsyncRetry {
    /// Carries out an attempt's timer, the one the state machine arms with `run(_, timeout:)`, for the async runners
    /// (the observed `retry` and `withRetry`): the one place where an attempt and its timer race.
    ///
    /// `attempt` and a timer until `deadline` run in two child tasks; the first that reports a non-`nil` outcome ends
    /// the race and the other is cancelled (and awaited, as structured concurrency requires). When the timer fires
    /// first, `timedOut` runs in the timer's task and says what it comes to: the runner's `.timedOut`, which it feeds
    /// to the machine as ``RetryStateMachine/attemptTimedOut(_:at:)`` (the machine decides what follows: a failed
    /// attempt, or the end of the total timeout), or `nil` when it has told the attempt itself, which then reports
    /// (`withRetry`'s bridge ends the attempt, whichever of its completion and its timer comes first).
    ///
    /// - Returns: The first outcome, or `nil` if neither reported one (the task was cancelled).
    @inlinable
    static func racingTimer<Outcome: Sendable, C: Clock>(
        until deadline: C.Instant, tolerance: Duration?, clock: C, isolation: isolated (any Actor)?,
        attempt: @escaping @Sendable () async -> Outcome?,
        timedOut: @escaping @Sendable () -> Outcome?
    ) async -> Outcome? where C.Duration == Duration {
        await withTaskGroup(of: Outcome?.self, isolation: isolation) { group in
            group.addTask { await attempt() }
            group.addTask {
                do {
                    try await AsyncRetry.sleep(until: deadline, tolerance: tolerance, clock: clock)
                } catch {
                    return nil  // cancelled: the attempt ended first, or the task was cancelled
                }
                return Task.isCancelled ? nil : timedOut()
            }
            var outcome: Outcome?
            while outcome == nil, let next = await group.next() {
                outcome = next
            }
            group.cancelAll()
            return outcome
        }
    }
}

/// What one attempt of an observed async retrier came to.
@usableFromInline
enum AsyncAttemptOutcome<Value: Sendable>: Sendable {
    /// The attempt produced a value.
    case succeeded(Value)
    /// The attempt threw or completed with an error.
    case failed(any Error)
    /// The attempt's timer (per-attempt timeout or the rest of the total timeout) fired first.
    case timedOut
    /// The task was cancelled while the attempt was waited for.
    case cancelled
}

/// The runner behind the observed `retry` overloads and
/// ``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)``.
///
/// It carries out the state machine's actions one after the other in the caller's isolation and emits the same
/// events as every other runner (``RetryTermination/events(value:)`` for the last ones). Time is
/// `start.duration(to: clock.now)`. How one attempt runs (and how a timeout interrupts it) is `runAttempt`'s
/// business; it receives the instant at which the attempt times out, if it can.
///
/// Inlinable and always inlined, so that the bridge (inlinable itself) runs it specialized for the caller's value type
/// and clock, with its closures inlined: unspecialized, it would look up generic metadata on every event.
///
/// - Parameters:
///   - runAttempt: Runs one attempt; `deadline` is `nil` when the attempt has no timeout. Called in `isolation`.
///   - strategy: Called in `isolation`, never while a lock is held.
///   - observer: Called in `isolation`, in event order.
@inlinable
@inline(__always)
func runObservedRetry<Value: Sendable, C: Clock>(
    configuration: RetryConfiguration,
    tolerance: Duration?,
    clock: C,
    isolation: isolated (any Actor)?,
    runAttempt: (_ attempt: RetryAttempt, _ deadline: C.Instant?) async -> AsyncAttemptOutcome<Value>,
    strategy: (any Error) -> RetryStrategy<C>,
    observer: (RetryEvent<Value>) -> Void
) async throws -> Value where C.Duration == Duration {
    let start = clock.now
    func elapsed() -> Duration { start.duration(to: clock.now) }

    var machine = RetryStateMachine(configuration)
    // Cancellation is checked before the machine is asked for each attempt (here and after each wait).
    var action = Task.isCancelled ? machine.cancel(at: .zero) : machine.start(at: .zero)
    var value: Value?
    var clockError: (any Error)?
    while true {
        switch action {
        case .run(let attempt, let timeout):
            observer(.attemptStarted(attempt))
            let deadline = timeout.map { clock.now.advanced(by: $0) }
            switch await runAttempt(attempt, deadline) {
            case .succeeded(let result):
                value = result
                action = machine.attemptSucceeded(attempt.number, at: elapsed())
            case .failed(let error):
                action =
                    Task.isCancelled
                    ? machine.cancel(at: elapsed())
                    : machine.attemptFailed(attempt.number, error: error, at: elapsed())
            case .timedOut:
                action =
                    Task.isCancelled
                    ? machine.cancel(at: elapsed())
                    : machine.attemptTimedOut(attempt.number, at: elapsed())
            case .cancelled:
                action = machine.cancel(at: elapsed())
            }
        case .consultStrategy(let context, let error):
            action = machine.decide(context.resolve(strategy(error)), at: elapsed())
        case .retry(let delay, let failed, let error):
            observer(.attemptFailed(failed, error: error, next: .retry(after: delay)))
            if delay > .zero {
                do {
                    try await AsyncRetry.sleep(for: delay, tolerance: tolerance, clock: clock)
                } catch {
                    let thrown = AsyncRetry.sleepError(error)
                    if !(thrown is CancellationError) { clockError = thrown }
                    action = machine.cancel(at: elapsed())
                    continue
                }
            }
            action = Task.isCancelled ? machine.cancel(at: elapsed()) : machine.waitElapsed(at: elapsed())
        case .finish(var termination):
            if let clockError {
                termination = RetryTermination(
                    summary: termination.summary, error: clockError, failedAttempt: nil, succeededAttempt: nil)
            }
            termination.forEachEvent(value: value) { observer($0) }
            if termination.error == nil, let value { return value }
            throw termination.error ?? AsyncRetry.inconsistency()
        case .none:
            throw AsyncRetry.inconsistency()
        }
    }
}

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
    /// The machine interrupted the attempt (a gated run's condition closed); its result, if it came, was dropped.
    case interrupted
}

/// The runner behind the observed `retry` overloads and
/// ``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)``.
///
/// An adapter over the one async runner (``runAsyncRetry(machine:observed:tolerance:clock:isolation:now:runAttempt:interruption:strategy:observe:)``,
/// with the machine in the frame): it turns the machine's actions into events, and an attempt's timeout or
/// cancellation into the machine's inputs. The runner carries out the actions in the caller's isolation and emits the same
/// events as every other runner (``RetryTermination/events(value:)`` for the last ones). Time is the span since the
/// call on `clock`: for a `ContinuousClock`, read from its time source directly (``AsyncRetry/continuousNanoseconds()``),
/// so that no `ContinuousClock.Instant` (a resilient type: every copy goes through its value witnesses) lives in the
/// frame. How one attempt runs (and how a timeout interrupts it) is `runAttempt`'s business; it receives the
/// attempt's timeout, if it has one, and reads `clock.now` for its deadline.
///
/// Inlinable and always inlined, so that the bridge (inlinable itself) runs it specialized for the caller's value type
/// and clock, with its closures inlined: unspecialized, it would look up generic metadata on every event.
///
/// - Parameters:
///   - runAttempt: Runs one attempt; `timeout` is `nil` when the attempt has no timeout (it times out `timeout` after
///     it starts). Called in `isolation`.
///   - strategy: Called in `isolation`, never while a lock is held.
///   - observer: Called in `isolation`, in event order.
///   - willStart: Called with each attempt before its `attemptStarted` event (the bridge prepares the attempt there).
///   - reportsTermination: Whether the last events are emitted (`false` when `observer` ignores every event: the
///     machine then builds no termination).
@inlinable
@inline(__always)
func runObservedRetry<Value: Sendable, C: Clock>(
    configuration: consuming RetryConfiguration,
    tolerance: Duration?,
    clock: C,
    isolation: isolated (any Actor)?,
    runAttempt: (_ attempt: RetryAttempt, _ timeout: Duration?) async -> AsyncAttemptOutcome<Value>,
    strategy: (any Error) -> RetryStrategy<C>,
    observer: (RetryEvent<Value>) -> Void,
    willStart: (RetryAttempt) -> Void = { _ in },
    reportsTermination: Bool = true
) async throws -> Value where C.Duration == Duration {
    var machine = AsyncRetryFrameMachine(configuration, reportsTermination: reportsTermination)
    // The run, given how to read the time since the call: one reading each below, so that a specialization keeps one.
    // The machine is passed in, and the run's variables are the generic run's own: a variable captured by a local
    // function is checked for exclusive access at run time (withRetry: +7% instructions).
    @inline(__always)
    func run(_ machine: inout AsyncRetryFrameMachine, now: () -> Duration) async throws -> Value {
        try await runObservedRetry(
            machine: &machine, tolerance: tolerance, clock: clock, isolation: isolation, now: now,
            runAttempt: runAttempt, strategy: strategy, observer: observer, willStart: willStart)
    }
    // One of the two branches remains once specialized.
    if C.self == ContinuousClock.self {
        let origin = AsyncRetry.continuousNanoseconds()
        return try await run(&machine, now: { AsyncRetry.continuousElapsed(since: origin) })
    }
    let start = clock.now
    return try await run(&machine, now: { start.duration(to: clock.now) })
}

/// ``runObservedRetry(configuration:tolerance:clock:isolation:runAttempt:strategy:observer:willStart:)`` with a
/// machine of the caller's, and the time since the call given by `now`: a plain retrier's (``AsyncRetryFrameMachine``), or a run of trials
/// (``AsyncTrialMachine``). A gated run's `runAttempt` races the attempt against the condition's changes and feeds them
/// to that machine itself (``AsyncTrialMachine/attemptSignalled(at:)``); when the machine interrupts the attempt it
/// reports ``AsyncAttemptOutcome/interrupted``. A repeating run returns the value of each success with the machine
/// paused; the next call with the same machine waits the rest of the pause and goes on (`now` must go on measuring
/// from the run's start).
@inlinable
@inline(__always)
func runObservedRetry<Value: Sendable, C: Clock, M: AsyncRetryMachineHolder>(
    machine: inout M,
    tolerance: Duration?,
    clock: C,
    isolation: isolated (any Actor)?,
    now: () -> Duration,
    runAttempt: (_ attempt: RetryAttempt, _ timeout: Duration?) async -> AsyncAttemptOutcome<Value>,
    strategy: (any Error) -> RetryStrategy<C>,
    observer: (RetryEvent<Value>) -> Void,
    willStart: (RetryAttempt) -> Void
) async throws -> Value where C.Duration == Duration {
    // What the machine's actions said, for the attempt, the strategy and the last events.
    var running: (attempt: RetryAttempt, timeout: Duration?)?
    var consulted: (any Error)?
    var value: Value?  // the successful attempt's, for its event
    var interruption = AsyncAttemptInterruption.none
    return try await runAsyncRetry(
        machine: &machine, observed: true, tolerance: tolerance, clock: clock,
        isolation: isolation,
        now: now,
        runAttempt: { (number: Int) async throws(any Error) -> Value in
            interruption = .none
            guard let (attempt, timeout) = running, attempt.number == number else { throw AsyncRetry.inconsistency() }
            switch await runAttempt(attempt, timeout) {
            case .succeeded(let result):
                value = result
                return result
            case .failed(let error):
                throw error
            case .timedOut:
                interruption = .timedOut
                throw RetryError(.attemptTimedOut)  // not seen: the machine makes the attempt's error
            case .cancelled:
                interruption = .cancelled
                throw CancellationError()
            case .interrupted:
                interruption = .interrupted
                throw CancellationError()  // not seen: the machine has emitted the interruption
            }
        },
        interruption: { interruption },
        strategy: { error in strategy(consulted ?? error) },
        observe: { action, termination in
            switch action {
            case .run(let attempt, let timeout):
                running = (attempt, timeout)
                willStart(attempt)
                observer(.attemptStarted(attempt))
            case .consultStrategy(_, let error):
                consulted = error
            case .retry(let delay, let failed, let error):
                observer(.attemptFailed(failed, error: error, next: .retry(after: delay)))
            case .finish:
                termination?.forEachEvent(value: value) { observer($0) }
            case .interrupt(let attempt):
                if let attempt {
                    observer(.attemptFailed(attempt, error: CancellationError(), next: .giveUp(.cancelled)))
                }
            case .repeatAfter(_, let succeeded):
                if let value { observer(.attemptSucceeded(succeeded, value)) }
            case .withdraw, .awaitCondition, .none, .recover, .acquire:
                break  // a budget is paid where the machine decides; a recovery never runs here
            }
        })
}

extension AsyncRetry {
    /// `ContinuousClock`'s time source, read directly (``ContinuousTime``): nanoseconds since an arbitrary origin.
    @usableFromInline
    static func continuousNanoseconds() -> UInt64 {
        ContinuousTime.nanoseconds()
    }

    /// The span from `origin` (an earlier ``continuousNanoseconds()``) to now, on `ContinuousClock`.
    @usableFromInline
    static func continuousElapsed(since origin: UInt64) -> Duration {
        ContinuousTime.since(origin)
    }
}

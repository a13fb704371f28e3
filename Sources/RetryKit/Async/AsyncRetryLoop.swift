/// The async runner: the one loop that runs attempts for every async entry point (the basic `retry`, the observed
/// `retry` and `withRetry` through ``runObservedRetry(configuration:tolerance:clock:isolation:runAttempt:strategy:observer:)``,
/// policies, their trials and repetitions, the HTTP layer). It carries out the state machine's actions in the
/// caller's isolation; the completion-handler runner is the only other place that runs attempts.
///
/// Two shapes, one loop, specialized for each (`machine`'s type, and `observed`, a constant where it is inlined):
/// - **basic** (``AsyncRetryHeapMachine``, `observed == false`): time is not observable (except with a budget, whose
///   refusal says how long the attempts took), so the machine is fed a constant `now` and nothing is observed. The
///   machine lives on the heap only from the first failure on (it is fed the same `start` again, then that failure:
///   the machine is a pure function of its events). A call that succeeds at once allocates nothing, and only a
///   reference to the machine and a small ``AsyncRetryStep`` live across the awaits, so a task waiting in the basic
///   `retry` needs no more task memory than a task sleeping on its own.
/// - **observed** (``AsyncRetryFrameMachine``): `now` is the time since the call, and every action the machine takes
///   is shown to `observe` first (the events, the running attempt and its timeout, the error the strategy is asked
///   about). With an ``AsyncTrialMachine`` (a run of trials: a policy with a condition, a repeating policy) the loop
///   also waits for the condition (``AsyncRetryStep/awaitCondition``), races each wait of a gated run against the
///   condition's changes (``RetryConditionInbox``, each fed to the machine as it comes; the attempts race them in
///   `runAttempt`), carries out the machine's interruptions (``AsyncRetryStep/interrupted``), and returns a repeating
///   run's value at each success (the machine, paused, stays with the caller for the next call). The basic shape's
///   machine runs no trials: that code is not in its specialization (`observed` is a constant).
///
/// Cancellation is checked before the machine is asked for each attempt (here and after each wait), so that a
/// cancelled task reports the attempts that really ran.
///
/// - Parameters:
///   - machine: Where the state machine is kept, and how it is fed. `inout`, so that it lives in the caller's frame
///     once, not copied into this one (a waiting task's memory holds both frames).
///   - runAttempt: Runs attempt `number`: its value, or its error. In a gated run, the attempt races the condition's
///     changes and feeds them to the machine itself (``AsyncTrialMachine``), and reports an interruption with
///     `interruption`.
///   - interruption: Asked (observed shape only) when an attempt threw: whether it timed out, was cancelled or was
///     interrupted instead.
///   - observe: Sees every action of the machine, in order, before it is carried out (`{ _ in }` for the basic shape,
///     whose machine never calls it).
@inlinable
@inline(__always)
func runAsyncRetry<R, E, C, M: AsyncRetryMachineHolder>(
    machine: inout M,
    observed: Bool,
    tolerance: C.Duration?,
    clock: C,
    isolation: isolated (any Actor)?,
    now: () -> Duration,
    runAttempt: (_ number: Int) async throws(E) -> sending R,
    interruption: () -> AsyncAttemptInterruption = { .none },
    strategy: (E) -> RetryStrategy<C>,
    observe: RetryStateMachine.ActionObserver
) async throws -> sending R where C: Clock, E: Error {
    var step = machine.begin(cancelled: Task.isCancelled, at: DelayMath.zero, now: now, observe: observe)  // the call
    var failure: E?
    // A clock whose duration is not `Swift.Duration`: the wait the strategy asked for, in the clock's own unit (the
    // machine was told to retry with no delay of its own). Always `nil` for a `Swift.Duration` clock.
    var clockWait: C.Duration?
    while true {
        switch consume step {  // every case sets the next step (or leaves): no copy of this one
        case .run(let number):
            do throws(E) {
                let value = try await runAttempt(number)
                machine.succeeded(number, at: now(), observe: observe)
                return value
            } catch {
                let cancelled = Task.isCancelled
                switch observed ? interruption() : .none {
                case .none:
                    step = machine.failed(
                        number, AsyncRetry.erased(error), cancelled: cancelled, at: now(), observe: observe)
                case .timedOut:
                    // The attempt's timer fired first: the machine decides (the total deadline may have passed too).
                    step = machine.timedOut(number, cancelled: cancelled, at: now(), observe: observe)
                case .cancelled:
                    step = machine.failed(
                        number, AsyncRetry.erased(error), cancelled: true, at: now(), observe: observe)
                case .interrupted:
                    // The machine interrupted the attempt (it has emitted its failure); it has been drained.
                    step = .interrupted
                }
                // Kept for the strategy, which the machine asks about it next: moved there, not copied.
                if !cancelled { failure = consume error }
            }
        case .consult(let context):
            // `failure` is always set here: the machine only asks after a failure.
            guard let error = failure.take() else { throw AsyncRetry.inconsistency() }
            let (decision, wait) = strategy(error).resolved(in: context)
            clockWait = wait
            step = machine.decided(
                decision, waitsOnClock: wait != nil, cancelled: Task.isCancelled, at: now(), observe: observe)
        case .wait(let delay):
            if let wait = try AsyncRetry.wait(delay, orClockWait: clockWait) {
                clockWait = nil
                if observed, let inbox = machine.conditions {
                    // A gated run: the wait races the condition, whose changes the machine may interrupt it for.
                    let outcome = await AsyncRetry.racing(
                        nil, until: clock.now.advanced(by: wait), tolerance: tolerance, clock: clock,
                        isolation: isolation, timedOut: { GatedWait.elapsed }, sleepFailed: { .failed($0) },
                        signal: { await inbox.wait() },
                        signalled: {
                            guard
                                case .interrupted? = machine.conditionChanged(
                                    cancelled: false, at: now(), observe: observe)
                            else { return nil }
                            return .interrupted
                        })
                    switch outcome {
                    case .elapsed?:
                        break
                    case .interrupted?:
                        step = .interrupted
                        continue
                    case .failed(let error)?:
                        throw machine.sleepFailed(AsyncRetry.sleepError(error), at: now(), observe: observe)
                    case nil:
                        throw machine.sleepFailed(CancellationError(), at: now(), observe: observe)
                    }
                } else {
                    do {
                        try await AsyncRetry.sleep(for: wait, tolerance: tolerance, clock: clock)
                    } catch {
                        throw machine.sleepFailed(AsyncRetry.sleepError(error), at: now(), observe: observe)
                    }
                }
            }
            step = machine.waited(cancelled: Task.isCancelled, at: now(), observe: observe)
        case .awaitCondition:
            // A gated run waits for its condition: each change goes to the machine; a cancelled task cancels the run.
            guard observed, let inbox = machine.conditions else { throw AsyncRetry.inconsistency() }
            let changed = await inbox.wait()
            step =
                machine.conditionChanged(cancelled: !changed || Task.isCancelled, at: now(), observe: observe)
                ?? .awaitCondition
        case .interrupted:
            // The attempt or the wait the machine interrupted is over: a new trial, or a wait for the condition.
            guard observed else { throw AsyncRetry.inconsistency() }
            step = machine.interrupted(cancelled: Task.isCancelled, at: now(), observe: observe)
        case .fail(let error):
            throw error
        }
    }
}

/// How an attempt of the observed shape that threw ended, beyond its error.
@usableFromInline
enum AsyncAttemptInterruption {
    /// It failed with its error.
    case none
    /// Its timer (per-attempt timeout or the rest of the total timeout) fired first.
    case timedOut
    /// The task was cancelled while it was waited for.
    case cancelled
    /// The machine interrupted it (the condition of a gated run closed): its result, if any, was dropped.
    case interrupted
}

/// How a wait of a gated run ended.
@usableFromInline
enum GatedWait: Sendable {
    /// The delay passed.
    case elapsed
    /// The machine interrupted it (the condition closed).
    case interrupted
    /// The clock's sleep threw.
    case failed(any Error)
}

/// What the async runner does next: the part of a state machine action it needs, and nothing more.
@usableFromInline
enum AsyncRetryStep {
    /// Run attempt `number`.
    case run(Int)
    /// Ask the strategy (with this context) about the last failure.
    case consult(RetryDecisionContext)
    /// Wait this long, then ask for the next attempt.
    case wait(Duration)
    /// Give up with this error.
    case fail(any Error)
    /// Wait for a change of the condition (a gated run of trials only).
    case awaitCondition
    /// The machine interrupted the attempt or the wait (a gated run's condition closed): once it is over, report it.
    case interrupted

    /// The step for a machine's `action`; `finalError` is read only when the machine finished
    /// (``RetryStateMachine/finalError``).
    @usableFromInline
    init(_ action: consuming RetryStateMachine.Action, finalError: @autoclosure () -> (any Error)?) {
        switch consume action {
        case .run(let attempt, _): self = .run(attempt.number)
        case .consultStrategy(let context, _): self = .consult(context)
        case .withdraw: self = .fail(AsyncRetry.inconsistency())  // carried out where decided (`decidePaying`)
        // A run with a recovery runs on the completion-handler runner (`RecoveringRetryPlan`): never here.
        case .recover, .acquire: self = .fail(AsyncRetry.inconsistency())
        case .retry(let delay, _, _): self = .wait(delay)
        case .finish: self = .fail(finalError() ?? AsyncRetry.inconsistency())
        case .awaitCondition: self = .awaitCondition
        case .interrupt: self = .interrupted  // its event is emitted by the observer of the action
        case .none, .repeatAfter: self = .fail(AsyncRetry.inconsistency())  // `repeatAfter` ends `succeeded`
        }
    }
}

/// Helpers shared by the async runners.
@usableFromInline
enum AsyncRetry {
    /// The error a runner throws if the state machine ever answers out of sequence. Unreachable by construction; it
    /// exists so that no path can trap.
    @usableFromInline
    static func inconsistency() -> RetryError {
        RetryError(.invalidConfiguration("internal inconsistency in the async retry runner"))
    }

    /// `error` as `any Error`.
    ///
    /// When `E` is itself `any Error` (an untyped `throws` operation) the plain conversion would box the existential in
    /// a new heap box on every failure. The cast returns it as it is: specialized for that `E`, it is a cast of a type
    /// to itself, which the compiler removes.
    @inlinable
    static func erased<E: Error>(_ error: E) -> any Error {
        if E.self == (any Error).self, let same = cast(error, to: (any Error).self) { return same }
        return error
    }

    /// `value` as a `T`, if it is one.
    @inlinable
    static func cast<U, T>(_ value: U, to _: T.Type) -> T? {
        value as? T
    }

    /// What the basic `retry` sleeps for, in the clock's duration type: the strategy's own wait for a clock whose
    /// duration is not `Swift.Duration`, otherwise the machine's `delay` (the same type then: the cast is a no-op once
    /// specialized); `nil` for no wait.
    @inlinable
    static func wait<D: DurationProtocol>(_ delay: Duration, orClockWait pending: D?) throws -> D? {
        if let pending { return pending }
        guard DelayMath.isPositive(delay) else { return nil }
        guard let converted = delay as? D else { throw inconsistency() }  // only a `Swift.Duration` clock gets here
        return converted
    }

    /// `duration` as a `Swift.Duration`: itself for a clock measured in `Swift.Duration` (a no-op once specialized),
    /// zero for a clock with a duration type of its own.
    @inlinable
    static func elapsed<D: DurationProtocol>(_ duration: D) -> Duration {
        (duration as? Duration) ?? .zero
    }

    /// The error a wait ends with when the clock's `sleep` throws: `CancellationError` when the task was cancelled
    /// (whatever the clock threw), otherwise the clock's own error.
    @usableFromInline
    static func sleepError(_ error: any Error) -> any Error {
        if error is CancellationError || Task.isCancelled { return CancellationError() }
        return error
    }
}

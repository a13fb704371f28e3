/// Runs an async operation and retries it when it throws, waiting between attempts as the strategy says.
///
/// This is the async entry point. It is source-compatible with the async retry library RetryKit replaces: the same
/// name, parameters, defaults and behaviour, for any `Clock`, so existing call sites (generic ones included) compile
/// unchanged; Migration.md lists the few differences in behaviour.
///
/// ```swift
/// let (data, response) = try await retry(maxAttempts: 5, clock: clock) {
///     try await URLSession.shared.data(from: url)
/// } strategy: { _ in
///     .backoff(.exponential(a: .milliseconds(100), b: 2).max(.seconds(5)).jitter())
/// }
/// ```
///
/// ## How it runs
///
/// Attempt 1 runs at once. When an attempt throws and attempts are left, `strategy` is asked what to do with the
/// error: ``RetryStrategy/backoff(_:)`` waits the strategy's delay for this retry
/// (``BackoffStrategy/delay(forRetry:previous:)`` with the 0-based retry index), ``RetryStrategy/retryAfter(_:)``
/// waits exactly the given delay, ``RetryStrategy/stop`` gives up. The strategy is only consulted *between* attempts:
/// after the last attempt fails, its error is rethrown without asking. Attempts are counted and delays chosen by the
/// same engine as every other RetryKit runner.
///
/// - A zero delay (``BackoffStrategy/none``, the default) neither reads the clock nor suspends.
/// - Waits use `clock.sleep(for:tolerance:)`.
/// - Everything runs in the caller's isolation (`#isolation`): `operation` and `strategy` may touch the caller's
///   actor-isolated state without `await`, and `operation` may return a non-`Sendable` value.
///
/// ## Time limits and events
///
/// This overload takes the async retry library's options, plus `budget:`. `totalTimeout:`, `attemptTimeout:` and
/// `observer:` belong to
/// ``retry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:clock:isolation:operation:strategy:observer:)``,
/// whose operation receives its ``RetryAttempt`` and is `@Sendable` (a timeout runs it in a child task). Adding one of
/// them to a call of this overload never switches the call to that closure shape behind your back: the call is rejected
/// with a message that says to write the operation as `{ attempt in … }`.
///
/// ## Cancellation
///
/// Task cancellation is checked before every attempt: a task that is already cancelled when `retry` is called runs no
/// attempt. Cancellation during a wait ends the wait at once. If the task is cancelled when an attempt throws, the
/// strategy is not consulted, nor when an attempt throws `CancellationError` itself (a cancellation from inside the
/// work is not a transient fault). In all these cases `retry` throws `CancellationError`. An attempt that is running
/// when the task is cancelled is not interrupted (cancellation is cooperative); if it still succeeds, its value is
/// returned.
///
/// - Parameters:
///   - maxAttempts: The most attempts, including the first. `3` by default. A value below 1 runs no attempt and
///     throws ``RetryError`` with reason ``RetryError/Reason-swift.enum/invalidConfiguration(_:)`` (it does not trap).
///   - budget: A ``RetryBudget`` shared with other retriers that every retry pays into; when it refuses, `retry` throws
///     ``RetryError`` with reason ``RetryError/Reason-swift.enum/budgetExhausted`` carrying the last error. A success
///     refunds its retry. `nil` by default.
///   - tolerance: The tolerance passed to the clock for each wait. `nil` by default.
///   - clock: The clock that measures the waits: any `Clock`. With `Swift.Duration` (`ContinuousClock`,
///     `SuspendingClock`, RetryKitTesting's `VirtualClock` and `InstantClock`) every strategy is available and delays
///     saturate; with another duration type, the strategies the async retry library offered for any clock
///     (``BackoffStrategy/none``, ``BackoffStrategy/constant(_:)``, ``BackoffStrategy/linear(a:b:)``,
///     ``BackoffStrategy/min(_:)``, ``BackoffStrategy/max(_:)``, ``BackoffStrategy/init(duration:)``) and
///     ``RetryStrategy/retryAfter(_:)`` sleep for exactly the value they compute.
///   - isolation: The actor the operation and the strategy run on; inherited from the caller.
///   - operation: The work to try. Its thrown error type `E` is what `strategy` receives.
///   - strategy: What to do after a failed attempt that still has attempts left. `.backoff(.none)` (retry at once)
///     by default.
/// - Returns: The value of the first attempt that succeeds.
/// - Throws: The last attempt's own error when the attempts run out, the failed attempt's own error when `strategy`
///   returns ``RetryStrategy/stop``, `CancellationError` when the task is cancelled, ``RetryError`` for an invalid
///   configuration, or any error other than cancellation that the clock throws from `sleep`.
@inlinable
@inline(__always)
public func retry<R, E, C>(
    maxAttempts: Int = 3,
    budget: RetryBudget? = nil,
    tolerance: C.Duration? = nil,
    clock: C,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws(E) -> sending R,
    strategy: (E) -> RetryStrategy<C> = { _ in .backoff(.none) }
) async throws -> sending R where C: Clock, E: Error {
    // Always inlined (with the async runner): as a call of its own, this async function would cost an async frame and
    // an executor hop after every attempt, about twice the cost of everything else it does.
    // Without a budget, time is not observable through this overload (no deadline, no events), so the runner is fed a
    // constant `now`, observes nothing, and keeps no machine until the first attempt fails: the fast path reads no
    // clock at all. With a budget, a refused retry's error tells how long the attempts took: that run reads the clock.
    var machine = AsyncRetryHeapMachine(maxAttempts: maxAttempts, budget: budget)
    if budget != nil {
        return try await runBudgetedAsyncRetry(
            machine: &machine, tolerance: tolerance, clock: clock, isolation: isolation, operation: operation,
            strategy: strategy)
    }
    return try await runAsyncRetry(
        machine: &machine, observed: false,
        tolerance: tolerance, clock: clock, isolation: isolation, now: { DelayMath.zero },
        runAttempt: { (_: Int) async throws(E) -> sending R in try await operation() },
        strategy: strategy, observe: { _, _ in })
}

/// The basic `retry` with a budget: the same run, fed the time since the call (a clock whose duration is not
/// `Swift.Duration` reports zero). Not inlined into `retry`, so that the call without a budget keeps its small frame
/// and reads no clock.
@inlinable
@inline(never)
func runBudgetedAsyncRetry<R, E, C>(
    machine: inout AsyncRetryHeapMachine,
    tolerance: C.Duration?,
    clock: C,
    isolation: isolated (any Actor)?,
    operation: () async throws(E) -> sending R,
    strategy: (E) -> RetryStrategy<C>
) async throws -> sending R where C: Clock, E: Error {
    let start = clock.now
    return try await runAsyncRetry(
        machine: &machine, observed: false,
        tolerance: tolerance, clock: clock, isolation: isolation,
        now: { AsyncRetry.elapsed(start.duration(to: clock.now)) },
        runAttempt: { (_: Int) async throws(E) -> sending R in try await operation() },
        strategy: strategy, observe: { _, _ in })
}

/// The async runner: the one loop that runs attempts for every async entry point (the basic `retry`, the observed
/// `retry` and `withRetry` through ``runObservedRetry(configuration:tolerance:clock:isolation:runAttempt:strategy:observer:)``,
/// policies, their trials and repetitions, the HTTP layer). It carries out the state machine's actions in the
/// caller's isolation; the completion-handler runner is the only other place that runs attempts.
///
/// Two shapes, one loop, specialized for each (`machine`'s type, and `observed`, a constant where it is inlined):
/// - **basic** (``AsyncRetryHeapMachine``, `observed == false`): time is not observable (except with a budget, whose
///   refusal says how long the attempts took), so the machine is fed a constant `now` and nothing is observed. The machine lives on the heap only from the first failure on (it is fed
///   the same `start` again, then that failure: the machine is a pure function of its events). A call that succeeds
///   at once allocates nothing, and only a reference to the machine and a small ``AsyncRetryStep`` live across the
///   awaits, so a task waiting in the basic `retry` needs no more task memory than a task sleeping on its own.
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
///     once: passed as a value, the basic shape's frame outgrows the task allocator's first slab (a kilobyte more per
///     waiting task).
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
        case .retry(let delay, _, _): self = .wait(delay)
        case .finish: self = .fail(finalError() ?? AsyncRetry.inconsistency())
        case .awaitCondition: self = .awaitCondition
        case .interrupt: self = .interrupted  // its event is emitted by the observer of the action
        case .none, .repeatAfter: self = .fail(AsyncRetry.inconsistency())  // `repeatAfter` ends `succeeded`
        }
    }
}

/// Where the async runner keeps its state machine, and how it feeds it: the one loop
/// (``runAsyncRetry(machine:observed:tolerance:clock:isolation:now:runAttempt:interruption:strategy:observe:)``)
/// is generic over it, so that each shape runs specialized, with no indirection of its own.
///
/// Every method feeds the machine one event and returns the runner's next step, showing the machine's action to
/// `observe` first.
@usableFromInline
protocol AsyncRetryMachineHolder {
    /// The first step; `now` is read only by a run of trials (``AsyncTrialMachine``): to start it, or to wait what its
    /// machine says remains of the pause after a repeating success (``RetryStateMachine/pauseRemaining(at:)``).
    mutating func begin(
        cancelled: Bool, at start: Duration, now: () -> Duration, observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep
    mutating func succeeded(_ number: Int, at now: Duration, observe: RetryStateMachine.ActionObserver)
    mutating func failed(
        _ number: Int, _ error: any Error, cancelled: Bool, at now: Duration,
        observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep
    mutating func timedOut(
        _ number: Int, cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep
    mutating func decided(
        _ decision: RetryDecision, waitsOnClock: Bool, cancelled: Bool, at now: Duration,
        observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep
    mutating func waited(cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep
    /// The clock's sleep threw `error` (`CancellationError` when the task was cancelled): the retrier ends with it.
    /// Returns the error to throw.
    mutating func sleepFailed(
        _ error: any Error, at now: Duration, observe: RetryStateMachine.ActionObserver
    )
        -> any Error
    /// Where a gated run of trials receives its condition's changes; `nil` for any other run.
    var conditions: RetryConditionInbox? { get }
    /// Feeds the machine the condition's pending change (or `cancel`, if `cancelled`): the step that follows, or `nil`
    /// if the machine goes on as it was.
    mutating func conditionChanged(cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep?
    /// The interruption the machine asked for is carried out.
    mutating func interrupted(cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep
}

extension AsyncRetryMachineHolder {
    // A machine that runs no trials (the basic shape's): nothing to wait for, nothing to interrupt.

    @inlinable
    var conditions: RetryConditionInbox? { nil }

    @inlinable
    mutating func conditionChanged(cancelled: Bool, at _: Duration, observe _: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep?
    {
        .fail(AsyncRetry.inconsistency())
    }

    @inlinable
    mutating func interrupted(cancelled: Bool, at _: Duration, observe _: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep
    {
        .fail(AsyncRetry.inconsistency())
    }
}

/// The basic `retry`'s machine: on the heap, from the first failure on (see ``AsyncRetryMachine``); events are not
/// observable, so `observe` is ignored (and `now` is a constant zero, unless the call has a budget).
@usableFromInline
struct AsyncRetryHeapMachine: AsyncRetryMachineHolder {
    /// Keeps the machine alive from the first failure on, for as long as the call runs (this holder lives in the frame
    /// of `retry` until it returns).
    @usableFromInline var owner: AsyncRetryMachine?
    /// The same machine, for the calls into it: an unmanaged reference costs no retain and release around each call,
    /// which a strong one stored in the async frame does (the optimizer cannot tell that the call leaves the frame's
    /// reference alone). Every call happens while ``owner`` keeps the machine.
    @usableFromInline var machine: Unmanaged<AsyncRetryMachine>?
    @usableFromInline let maxAttempts: Int
    @usableFromInline let budget: RetryBudget?

    @inlinable
    init(maxAttempts: Int, budget: RetryBudget?) {
        self.maxAttempts = maxAttempts
        self.budget = budget
    }

    @inlinable @inline(__always)
    mutating func begin(
        cancelled: Bool, at _: Duration, now _: () -> Duration, observe _: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep {
        AsyncRetryMachine.firstStep(maxAttempts: maxAttempts, budget: budget, cancelled: cancelled)
    }

    @inlinable @inline(__always)
    mutating func succeeded(_ number: Int, at now: Duration, observe _: RetryStateMachine.ActionObserver) {
        // Without a budget nothing reads the machine after a success: it is not told, and simply dropped. With one,
        // the success refunds the budget (the machine says how much).
        if let budget {
            AsyncRetryMachine.succeeded(number, owner, maxAttempts: maxAttempts, budget: budget, at: now)
        }
    }

    @inlinable @inline(__always)
    mutating func failed(
        _ number: Int, _ error: any Error, cancelled: Bool, at now: Duration,
        observe _: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep {
        if let machine {
            return machine._withUnsafeGuaranteedRef { $0.failed(number, error, cancelled: cancelled, at: now) }
        }
        let started = AsyncRetryMachine.started(maxAttempts: maxAttempts, budget: budget)
        machine = .passUnretained(started)
        let step = started.failed(number, error, cancelled: cancelled, at: now)
        owner = started  // moved, after its last use
        return step
    }

    @inlinable @inline(__always)
    mutating func timedOut(
        _ number: Int, cancelled: Bool, at _: Duration, observe _: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep {
        .fail(AsyncRetry.inconsistency())  // the basic `retry` has no attempt timeout
    }

    @inlinable @inline(__always)
    mutating func decided(
        _ decision: RetryDecision, waitsOnClock: Bool, cancelled: Bool, at now: Duration,
        observe _: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep {
        guard let machine else { return .fail(AsyncRetry.inconsistency()) }  // always set after a failure
        return machine._withUnsafeGuaranteedRef {
            $0.decided(decision, waitsOnClock: waitsOnClock, cancelled: cancelled, at: now)
        }
    }

    @inlinable @inline(__always)
    mutating func waited(cancelled: Bool, at now: Duration, observe _: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep
    {
        guard let machine else { return .fail(AsyncRetry.inconsistency()) }  // always set after a failure
        return machine._withUnsafeGuaranteedRef { $0.waited(cancelled: cancelled, at: now) }
    }

    @inlinable @inline(__always)
    mutating func sleepFailed(
        _ error: any Error, at now: Duration, observe _: RetryStateMachine.ActionObserver
    ) -> any Error {
        owner?.cancel(at: now)
        return error
    }
}

/// The observed shape's machine: a value in the runner's frame, fed the time since the call; every action is shown
/// to `observe` (the events, the running attempt and its timeout, the error the strategy is asked about).
@usableFromInline
struct AsyncRetryFrameMachine: AsyncRetryMachineHolder {
    @usableFromInline var machine: RetryStateMachine
    /// Whether a finishing action is shown with the machine's termination; `false` when no one observes the events
    /// (``withRetry(maxAttempts:totalTimeout:attemptTimeout:budget:tolerance:isolation:operation:strategy:)``).
    @usableFromInline let reportsTermination: Bool

    @inlinable
    init(_ configuration: consuming RetryConfiguration, reportsTermination: Bool = true) {
        machine = RetryStateMachine(configuration)
        self.reportsTermination = reportsTermination
    }

    /// The frame of `machine` (a run of trials' machine, say).
    init(machine: RetryStateMachine) {
        self.machine = machine
        reportsTermination = true
    }

    /// Shows `action` to `observe` (with the termination, if it finishes) and returns the runner's step. Called with
    /// an action computed beforehand, never as `step(machine.input(…), …)`: `self` would be read before the input
    /// changes it, and a finished machine would look unfinished.
    @inlinable @inline(__always)
    func step(_ action: consuming RetryStateMachine.Action, _ observe: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep
    {
        if case .finish = action, reportsTermination {
            observe(action, machine.termination)
        } else {
            observe(action, nil)
        }
        return AsyncRetryStep(action, finalError: machine.finalError)
    }

    @inlinable @inline(__always)
    mutating func begin(
        cancelled: Bool, at start: Duration, now: () -> Duration, observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep {
        input(cancelled: cancelled, at: start, observe: observe) { $0.start(at: start) }
    }

    @inlinable @inline(__always)
    mutating func succeeded(_ number: Int, at now: Duration, observe: RetryStateMachine.ActionObserver) {
        let action = machine.attemptSucceededRefunding(number, at: now)  // deposits a budget's refund
        if case .finish = action, reportsTermination {
            observe(action, machine.termination)
        } else {
            observe(action, nil)
        }
    }

    @inlinable @inline(__always)
    mutating func failed(
        _ number: Int, _ error: any Error, cancelled: Bool, at now: Duration,
        observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep {
        let action = cancelled ? machine.cancel(at: now) : machine.attemptFailed(number, error: error, at: now)
        return step(action, observe)
    }

    @inlinable @inline(__always)
    mutating func timedOut(
        _ number: Int, cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep {
        let action = cancelled ? machine.cancel(at: now) : machine.attemptTimedOut(number, at: now)
        return step(action, observe)
    }

    @inlinable @inline(__always)
    mutating func decided(
        _ decision: RetryDecision, waitsOnClock _: Bool, cancelled _: Bool, at now: Duration,
        observe: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep {
        // Every retry, even one without delay, goes through a `wait` step, where cancellation is checked. A budget's
        // withdrawal, if the machine asks for one, is carried out at once (`decidePaying`); it is not observed.
        let action = machine.decidePaying(decision, at: now)
        return step(action, observe)
    }

    @inlinable @inline(__always)
    mutating func waited(cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep
    {
        input(cancelled: cancelled, at: now, observe: observe) { $0.waitElapsed(at: now) }
    }

    /// Feeds the machine `cancel` if `cancelled`, otherwise `input`, and returns the step that follows.
    @inlinable @inline(__always)
    mutating func input(
        cancelled: Bool, at now: Duration, observe: RetryStateMachine.ActionObserver,
        _ input: (inout RetryStateMachine) -> RetryStateMachine.Action
    ) -> AsyncRetryStep {
        let action = cancelled ? machine.cancel(at: now) : input(&machine)
        return step(action, observe)
    }

    @inlinable @inline(__always)
    mutating func sleepFailed(
        _ error: any Error, at now: Duration, observe: RetryStateMachine.ActionObserver
    ) -> any Error {
        guard case .finish = machine.cancel(at: now), let termination = machine.termination else { return error }
        if error is CancellationError {
            observe(.finish, termination)
        } else {
            observe(
                .finish,
                RetryTermination(summary: termination.summary, error: error, failedAttempt: nil, succeededAttempt: nil))
        }
        return error
    }
}

/// The state machine of one basic `retry` call, on the heap, with the events that call feeds it.
///
/// Its methods are not inlined into `retry` on purpose: an action is a large enum, and every temporary of an async
/// function takes room in the task's async frame, as would the machine itself. Kept out of the frame, a task waiting in
/// `retry` fits in the task memory of a task sleeping on its own; otherwise it needs a second kilobyte-sized slab.
/// The machine is fed a constant `now` (zero) unless the call has a budget: time is not observable otherwise.
@usableFromInline
final class AsyncRetryMachine {
    // Only ever used by the one task running its `retry` call: no other access, so no dynamic exclusivity checks.
    @exclusivity(unchecked) private var machine: RetryStateMachine

    private init(maxAttempts: Int, budget: RetryBudget?) {
        machine = RetryStateMachine(RetryConfiguration(maxAttempts: maxAttempts, budget: budget))
    }

    /// The first step of a new machine: attempt 1, unless the configuration is invalid or the task is already
    /// cancelled. The machine itself is not kept.
    ///
    /// A configuration the machine accepts (``RetryConfiguration/problem`` is `nil`) and that has no timeout, as
    /// every configuration of this overload, always starts with attempt 1, without a timer (``RetryStateMachine``'s
    /// `start`; its tests pin it): that answer needs no machine to be built and dropped (nor a configuration), so it
    /// is given inline. Any other start (an invalid configuration, a cancelled task) is the machine's, out of line.
    @inlinable @inline(__always)
    static func firstStep(maxAttempts: Int, budget: RetryBudget?, cancelled: Bool) -> AsyncRetryStep {
        if !cancelled && RetryConfiguration.accepts(maxAttempts: maxAttempts) { return .run(1) }
        return machineStart(maxAttempts: maxAttempts, budget: budget, cancelled: cancelled)
    }

    /// The machine's first step for a start that does not run attempt 1 at once (see ``firstStep``).
    @usableFromInline
    static func machineStart(maxAttempts: Int, budget: RetryBudget?, cancelled: Bool) -> AsyncRetryStep {
        var machine = RetryStateMachine(RetryConfiguration(maxAttempts: maxAttempts, budget: budget))
        let action = cancelled ? machine.cancel(at: .zero) : machine.start(at: .zero)
        return AsyncRetryStep(action, finalError: machine.finalError)
    }

    /// A machine on the heap that has started, and so is running attempt 1 (as the one of ``firstStep``, fed the same
    /// event, said). A factory that is not inlined: otherwise the optimizer puts the object on the stack, which in an
    /// async function is its frame, and the frame is what must stay small.
    @usableFromInline
    static func started(maxAttempts: Int, budget: RetryBudget?) -> AsyncRetryMachine {
        let started = AsyncRetryMachine(maxAttempts: maxAttempts, budget: budget)
        _ = started.machine.start(at: DelayMath.zero)
        return started
    }

    /// Attempt `number` succeeded, in a call with a budget: the budget gets the refund the machine says. A first-try
    /// success has no machine yet: one is started for it, so that the refund is the machine's decision in every case.
    @usableFromInline
    static func succeeded(
        _ number: Int, _ machine: AsyncRetryMachine?, maxAttempts: Int, budget: RetryBudget, at now: Duration
    ) {
        let machine = machine ?? started(maxAttempts: maxAttempts, budget: budget)
        _ = machine.machine.attemptSucceededRefunding(number, at: now)
    }

    /// Attempt `number` failed with `error` (or the task was cancelled while it ran).
    @usableFromInline
    func failed(_ number: Int, _ error: any Error, cancelled: Bool, at now: Duration) -> AsyncRetryStep {
        let action = cancelled ? machine.cancel(at: now) : machine.attemptFailed(number, error: error, at: now)
        return AsyncRetryStep(action, finalError: machine.finalError)
    }

    /// The strategy's resolved decision. A zero-delay retry needs no wait: the next attempt follows at once (or the
    /// cancellation, if the task was cancelled), in the same call, unless the runner `waitsOnClock` for a delay in a
    /// duration type of the clock's own.
    @usableFromInline
    func decided(_ decision: RetryDecision, waitsOnClock: Bool, cancelled: Bool, at now: Duration) -> AsyncRetryStep {
        let action = machine.decidePaying(decision, at: now)  // a budget's withdrawal, if asked for, is paid here
        if !waitsOnClock, case .retry(let delay, _, _) = action, DelayMath.isZero(delay) {
            return waited(cancelled: cancelled, at: now)
        }
        return AsyncRetryStep(action, finalError: machine.finalError)
    }

    /// The wait is over (or the task was cancelled).
    @usableFromInline
    func waited(cancelled: Bool, at now: Duration) -> AsyncRetryStep {
        let action = cancelled ? machine.cancel(at: now) : machine.waitElapsed(at: now)
        return AsyncRetryStep(action, finalError: machine.finalError)
    }

    /// The wait was cut short.
    @usableFromInline
    func cancel(at now: Duration) {
        _ = machine.cancel(at: now)
    }
}

/// Runs an async operation and retries it when it throws, measuring waits on a `ContinuousClock`.
///
/// The same as ``retry(maxAttempts:budget:tolerance:clock:isolation:operation:strategy:)`` with
/// `clock: ContinuousClock()`. The two overloads exist because Swift cannot yet give a generic clock parameter a
/// concrete default value.
///
/// ```swift
/// let (data, response) = try await retry {
///     try await URLSession.shared.data(from: url)
/// }
/// ```
///
/// - Parameters:
///   - maxAttempts: The most attempts, including the first. `3` by default; below 1 throws ``RetryError``.
///   - budget: A ``RetryBudget`` every retry pays into. `nil` by default.
///   - tolerance: The tolerance passed to the clock for each wait. `nil` by default.
///   - isolation: The actor the operation and the strategy run on; inherited from the caller.
///   - operation: The work to try.
///   - strategy: What to do after a failed attempt that still has attempts left. `.backoff(.none)` by default.
/// - Returns: The value of the first attempt that succeeds.
/// - Throws: See ``retry(maxAttempts:budget:tolerance:clock:isolation:operation:strategy:)``.
@inlinable
@inline(__always)
public func retry<R, E>(
    maxAttempts: Int = 3,
    budget: RetryBudget? = nil,
    tolerance: ContinuousClock.Duration? = nil,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws(E) -> sending R,
    strategy: (E) -> RetryStrategy<ContinuousClock> = { _ in .backoff(.none) }
) async throws -> sending R where E: Error {
    try await retry(
        maxAttempts: maxAttempts, budget: budget, tolerance: tolerance, clock: ContinuousClock(), isolation: isolation,
        operation: operation, strategy: strategy)
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
    /// a new heap box on every failure; specialized for that `E`, the check below is a constant and this is free.
    @inlinable
    static func erased<E: Error>(_ error: E) -> any Error {
        if E.self == (any Error).self {
            return unsafeBitCast(error, to: (any Error).self)  // the same type: a no-op
        }
        return error
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

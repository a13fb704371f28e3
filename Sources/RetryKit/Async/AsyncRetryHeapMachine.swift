/// The basic `retry`'s machine: on the heap, from the first failure on (see ``AsyncRetryMachine``); events are not
/// observable, so `observe` is ignored (and `now` is a constant zero, unless the call has a budget).
@usableFromInline
struct AsyncRetryHeapMachine: AsyncRetryMachineHolder {
    /// The machine, from the first failure on (`nil` until then: a call that succeeds at once needs none).
    @usableFromInline var machine: AsyncRetryMachine?
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
            AsyncRetryMachine.succeeded(number, machine, maxAttempts: maxAttempts, budget: budget, at: now)
        }
    }

    @inlinable @inline(__always)
    mutating func failed(
        _ number: Int, _ error: any Error, cancelled: Bool, at now: Duration,
        observe _: RetryStateMachine.ActionObserver
    ) -> AsyncRetryStep {
        if let machine { return machine.failed(number, error, cancelled: cancelled, at: now) }
        let started = AsyncRetryMachine.started(maxAttempts: maxAttempts, budget: budget)
        machine = started
        return started.failed(number, error, cancelled: cancelled, at: now)
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
        return machine.decided(decision, waitsOnClock: waitsOnClock, cancelled: cancelled, at: now)
    }

    @inlinable @inline(__always)
    mutating func waited(cancelled: Bool, at now: Duration, observe _: RetryStateMachine.ActionObserver)
        -> AsyncRetryStep
    {
        guard let machine else { return .fail(AsyncRetry.inconsistency()) }  // always set after a failure
        return machine.waited(cancelled: cancelled, at: now)
    }

    @inlinable @inline(__always)
    mutating func sleepFailed(
        _ error: any Error, at now: Duration, observe _: RetryStateMachine.ActionObserver
    ) -> any Error {
        machine?.cancel(at: now)
        return error
    }
}

/// The state machine of one basic `retry` call, on the heap, with the events that call feeds it.
///
/// On the heap and fed out of line, so that what a task waiting in `retry` keeps across its awaits is a reference to
/// this and the next step, not the machine and its actions: such a task holds no more memory than a task sleeping on
/// its own (Benchmarks/README.md has the figure). The machine is fed a constant `now` (zero) unless the call has a
/// budget: time is not observable otherwise.
@usableFromInline
final class AsyncRetryMachine {
    /// Only ever used by the one task running its `retry` call.
    private var machine: RetryStateMachine

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

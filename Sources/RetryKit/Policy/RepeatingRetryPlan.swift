import Dispatch

/// A policy that polls: it runs a job, and after each success waits the delay given to
/// ``RetryPlan/repeating(withDelay:)`` and runs it again, retrying failures with the policy it was made from, which
/// starts afresh after each success.
///
/// Create one with ``RetryPlan/repeating(withDelay:)``:
///
/// ```swift
/// let poller = RetryPlan.exponentialBackoff().giveUpAfter(maxAttempts: 5).repeating(withDelay: .seconds(30))
///
/// // async: an AsyncSequence of values
/// for try await feed in poller.values({ _ in try await api.feed() }) {
///     render(feed)
/// }
///
/// // completion handler: a handler for each value
/// let handle = poller.execute(on: .main) { attempt, done in
///     legacyFeed { feed, error in done(feed, error) }
/// } onValue: { feed in
///     render(feed)
/// } completion: { error in
///     showOffline(error)
/// }
/// handle.cancel()
/// ```
///
/// A repetition ends only when the policy gives up (its error ends it), when the condition of
/// ``RetryPlan/onlyWhen(_:)`` (applied before `repeating(withDelay:)`) ends while `false`, or when
/// it is cancelled. The pause after a success is not affected by the condition; the next trial then waits for it like
/// any trial.
public struct RepeatingRetryPlan: Sendable {
    /// The policy that retries failures; it starts afresh after each success.
    package let policy: RetryPlan
    /// The pause after each success, measured from the success.
    package let delay: Duration

    init(policy: RetryPlan, delay: Duration) {
        self.policy = policy
        self.delay = delay
    }

    // MARK: - Completion handlers

    /// Repeats a completion-handler operation, handing every success to `onValue`, until the policy gives up, the
    /// condition ends, or the returned handle is cancelled.
    ///
    /// Each repetition is a trial of the policy (a fresh start of it, in one completion-handler retrier on `queue`);
    /// after a success `onValue` runs on `queue`, then a timer of `scheduler` waits the repeating delay before the next
    /// trial (a timer even for a zero delay, so that other work on `queue` runs in between).
    /// ``RetryHandle/cancel()`` cancels the timer or the trial in flight (its cancel hook runs) and `completion`
    /// receives `CancellationError`. ``RetryHandle/value`` of the returned handle throws the error the repetition ended
    /// with.
    ///
    /// - Parameters:
    ///   - queue: The queue the operation, strategy, observer, `onValue` and `completion` run on.
    ///   - scheduler: Where time, hops and timers (including the pause) come from. ``RetryScheduler/dispatch`` by
    ///     default.
    ///   - isolation: The caller's actor, inherited (`#isolation`): on the main actor every closure runs on the main
    ///     queue; from nonisolated code, on `queue`; another actor gets ``RetryError`` `.invalidConfiguration`.
    ///   - operation: One attempt. Call the completion once, from any thread.
    ///   - observer: Receives the events of every trial on `queue`, in order, and one ``RetryEvent/finished(_:error:)``
    ///     at the end. `nil` by default.
    ///   - onValue: Receives each success, on `queue`.
    ///   - completion: The error the repetition ended with: the policy's give-up error, ``RetryError``
    ///     (``RetryError/Reason-swift.enum/conditionEnded``), or `CancellationError`. Runs exactly once, on `queue`.
    ///     Does nothing by default.
    /// - Returns: A handle to cancel the repetition.
    @discardableResult
    public func execute<Value: Sendable>(
        on queue: DispatchQueue,
        scheduler: any RetryScheduler = .dispatch,
        isolation: isolated (any Actor)? = #isolation,
        operation: @escaping (_ attempt: RetryAttempt, _ done: AttemptCompletion<Value>) -> Void,
        observer: ((RetryEvent<Value>) -> Void)? = nil,
        onValue: @escaping (Value) -> Void,
        completion: @escaping (any Error) -> Void = { _ in }
    ) -> RetryHandle<Never> {
        let condition = policy.effectiveCondition
        let handle = startCallbackRetrier(
            configuration: policy.configuration, on: queue, scheduler: scheduler, isolation: isolation,
            operation: operation, strategy: policy.strategy(on: ContinuousClock.self), observer: observer,
            onValue: onValue,
            completion: { result, _ in
                // A repetition ends only with an error: every success pauses and starts the next trial.
                if case .failure(let error) = result { completion(error) }
            },
            trials: (RetryStateMachine.Trials(gated: condition != nil, repeatDelay: delay), condition))
        return RetryHandle(retrier: handle.runner)  // its value is never awaited successfully: a repetition only fails
    }

    /// Repeats an `async` operation from completion-handler code, handing every success to `onValue`.
    ///
    /// Each attempt runs in a new `Task`, cancelled with the trial. Otherwise the same as the completion-handler
    /// variant; see there. Its distinct name keeps the two closure shapes apart: `execute(on:)` accepts only
    /// `{ attempt, done in … }`, `executeTask(on:)` only `{ attempt in … }`.
    ///
    /// - Parameters:
    ///   - queue: The queue the strategy, observer, `onValue` and `completion` run on.
    ///   - scheduler: Where time, hops and timers come from. ``RetryScheduler/dispatch`` by default.
    ///   - isolation: The caller's actor, inherited (`#isolation`): on the main actor every closure runs on the main
    ///     queue; from nonisolated code, on `queue`; another actor gets ``RetryError`` `.invalidConfiguration`.
    ///   - operation: One attempt, run in a new `Task`.
    ///   - observer: Receives the events on `queue`, in order. `nil` by default.
    ///   - onValue: Receives each success, on `queue`.
    ///   - completion: The error the repetition ended with; runs exactly once, on `queue`. Does nothing by default.
    /// - Returns: A handle to cancel the repetition.
    @discardableResult
    public func executeTask<Value: Sendable>(
        on queue: DispatchQueue,
        scheduler: any RetryScheduler = .dispatch,
        isolation: isolated (any Actor)? = #isolation,
        @_inheritActorContext operation: @escaping @Sendable (_ attempt: RetryAttempt) async throws -> Value,
        observer: ((RetryEvent<Value>) -> Void)? = nil,
        onValue: @escaping (Value) -> Void,
        completion: @escaping (any Error) -> Void = { _ in }
    ) -> RetryHandle<Never> {
        execute(
            on: queue, scheduler: scheduler, isolation: isolation, operation: taskAttempt(operation),
            observer: observer, onValue: onValue, completion: completion)
    }

    // MARK: - Async

    /// The values of repeated runs of an async operation, as an `AsyncSequence`.
    ///
    /// ```swift
    /// for try await feed in poller.values({ _ in try await api.feed() }) {
    ///     render(feed)
    /// }
    /// ```
    ///
    /// Work happens only inside `next()`: the first call runs a trial of the policy at once; each later call sleeps on
    /// `clock` until the repeating delay after the previous success, then runs a new trial. So a slow consumer delays
    /// the next run instead of piling up values, and dropping the iterator (leaving the loop) leaves nothing running.
    ///
    /// The sequence ends (returns `nil`) when the consuming task is cancelled, and throws, then ends, when the policy
    /// gives up or the condition ends while `false`. Each iteration is an independent repetition.
    ///
    /// - Parameters:
    ///   - tolerance: The tolerance passed to the clock for each sleep. `nil` by default.
    ///   - clock: The clock that measures the pause, the waits and the timeouts. `ContinuousClock()` by default.
    ///   - operation: The work to repeat; it receives the attempt of its trial.
    ///   - observer: Receives the events of every trial and one ``RetryEvent/finished(_:error:)`` when the sequence
    ///     throws or is cancelled. Ignores them by default.
    /// - Returns: The sequence of values.
    public func values<Value: Sendable, C: Clock>(
        tolerance: Duration? = nil,
        clock: C = ContinuousClock(),
        _ operation: @escaping @Sendable (_ attempt: RetryAttempt) async throws -> Value,
        observer: @escaping @Sendable (RetryEvent<Value>) -> Void = { _ in }
    ) -> RepeatingRetrySequence<Value, C> where C.Duration == Duration {
        RepeatingRetrySequence(
            repeating: self, tolerance: tolerance, clock: clock, operation: operation, observer: observer)
    }
}

/// The values of a repeating policy: see ``RepeatingRetryPlan/values(tolerance:clock:_:observer:)``.
public struct RepeatingRetrySequence<Value: Sendable, C: Clock>: AsyncSequence, Sendable where C.Duration == Duration {
    /// The values the operation returns.
    public typealias Element = Value

    let repeating: RepeatingRetryPlan
    let tolerance: Duration?
    let clock: C
    let operation: @Sendable (RetryAttempt) async throws -> Value
    let observer: @Sendable (RetryEvent<Value>) -> Void

    /// Starts an independent repetition; its first `next()` runs the first trial.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(sequence: self)
    }

    /// Runs a trial in each `next()`. Nothing runs between two calls.
    ///
    /// The one state machine decides what happens when, as for the completion-handler repetition: it pauses after each
    /// success (the iterator keeps it, paused), and the next call waits out the rest of that pause, then goes on.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let sequence: RepeatingRetrySequence
        private let machine: AsyncTrialMachine
        /// When the first call began: the run's times are measured from it.
        private var start: C.Instant?

        init(sequence: RepeatingRetrySequence) {
            self.sequence = sequence
            let policy = sequence.repeating.policy
            machine = AsyncTrialMachine(
                policy.configuration, conditions: policy.effectiveCondition.map { _ in RetryConditionInbox() },
                repeatDelay: sequence.repeating.delay)
        }

        /// Waits for the pause after the previous success, then runs a trial and returns its value.
        ///
        /// - Returns: The next value, or `nil` once the sequence has ended or the task is cancelled.
        /// - Throws: The error the policy gave up with (a `CancellationError` the operation threw included), or
        ///   ``RetryError`` (``RetryError/Reason-swift.enum/conditionEnded``); afterwards the sequence is ended.
        public mutating func next() async throws -> Value? {
            if machine.isFinished { return nil }
            let start = self.start ?? sequence.clock.now
            self.start = start
            // The condition is observed only during a call; its state as the call begins is fed first.
            var observation: RetryConditionObservation?
            if let condition = sequence.repeating.policy.effectiveCondition, let conditions = machine.conditions {
                observation = conditions.observe(condition)
            }
            defer { observation?.cancel() }
            do {
                return try await sequence.repeating.policy.runTrialMachine(
                    of: machine, since: start, tolerance: sequence.tolerance, clock: sequence.clock, isolation: nil,
                    operation: sequence.operation, observer: sequence.observer)
            } catch let error as CancellationError {
                // The task cancelled: the sequence ends (the machine has emitted `finished`). The operation's own
                // `CancellationError` ended the run: it is the error the run gave up with, as in the callback style.
                guard Task.isCancelled else { throw error }
                return nil
            }
        }
    }
}

/// The one retry engine: a pure state machine that counts attempts, chooses delays and decides when to stop.
///
/// Runners (the DispatchSourceTimer runner, the async runner, the bridges and the HTTP layer) feed it events with
/// the current time, as elapsed time since the retrier started, and carry out the ``Action`` it returns. It reads no
/// clock, touches no queue and runs no user code except through ``RetryDecisionContext/resolve(_:)``, which runners
/// call themselves.
///
/// The sequence for one retrier:
///
/// ```
/// start → run(1) → attemptFailed → consultStrategy → decide → retry(after: d) → waitElapsed → run(2) → …
///                                                       ↳ withdraw → budgetAnswered ↗ (with a budget)
///                  attemptSucceeded → finish(succeeded) (then deposit budgetRefund, with a budget)
/// ```
///
/// With a ``RetryBudget`` in the configuration, every retry must be paid for: ``decide(_:at:)`` asks the runner to
/// withdraw from the budget (``Action/withdraw(from:afterTimeout:)``) and waits for the answer
/// (``budgetAnswered(_:at:)``); a refused retry finishes with ``RetryError/Reason-swift.enum/budgetExhausted``. A
/// success refunds what its retry cost: the runner deposits ``budgetRefund`` once the machine has finished. The
/// machine never touches the budget itself; the budget is the one piece of state shared between retriers, and it is
/// thread-safe.
///
/// Every event that does not fit the current state (a late or duplicate result, a timer that lost a race with
/// cancel) returns ``Action/none``, so runners can forward events without checking state themselves.
///
/// The members the async runner needs are `@usableFromInline`: its entry points are `@inlinable` so that the
/// caller's operation is specialized in the caller's module (the hot path stays free of generic dispatch).
@usableFromInline
package struct RetryStateMachine: Sendable {
    @usableFromInline
    package enum Action: Sendable {
        /// Emit `attemptStarted`, arm a timer for `timeout` if it is not `nil` (then report
        /// ``attemptTimedOut(_:at:)``), and run the operation.
        case run(RetryAttempt, timeout: Duration?)
        /// Ask the strategy about the failure, resolve it with the context (without holding a lock) and report the
        /// result with ``decide(_:at:)``.
        case consultStrategy(RetryDecisionContext, error: any Error)
        /// Withdraw from `budget` for the retry just decided (``RetryBudget/withdraw(afterTimeout:)``, costlier after a
        /// timed-out attempt) and report what it paid, or `nil` if it refused, with ``budgetAnswered(_:at:)``. Only
        /// with a budget in the configuration; the withdrawal runs no user code.
        case withdraw(from: RetryBudget, afterTimeout: Bool)
        /// Emit `attemptFailed(…, next: .retry(after: delay))`, wait `delay` (arming no timer for zero) and report
        /// ``waitElapsed(at:)``.
        case retry(after: Duration, failed: RetryAttempt, error: any Error)
        /// Cancel any timer, emit the last events and complete: ``RetryStateMachine/termination`` says how the retrier
        /// ended. No payload, so that every action stays small and cheap to move (a termination is about 170 bytes).
        case finish
        /// Cancel the wait, if one is armed, and do nothing until ``conditionChanged(_:at:)`` says the condition
        /// opened or ended (a gated run only: no trial runs while the condition is closed).
        case awaitCondition
        /// The condition closed during a trial (a gated run only): cancel the attempt in flight (its cancel hook or task;
        /// its result, if it still comes, is stale and ignored) or the wait; emit
        /// `attemptFailed(attempt, error: CancellationError(), next: .giveUp(.cancelled))` if `attempt` is not `nil`
        /// (the trial's attempt that was running or whose failure was being decided); then report
        /// ``interrupted(at:)``.
        case interrupt(RetryAttempt?)
        /// Emit `attemptFailed(failed, error: error, next: .recover)`, then carry out ``acquire``: the failure is one the
        /// configuration's ``RetryConfiguration/recovery`` recognises.
        case recover(failed: RetryAttempt, error: any Error)
        /// Ask the recovery for a credential (``recoveryRequest``: newer than the one that failed, if one did), waiting at
        /// most the request's timeout (then report ``waitElapsed(at:)``); report its answer, whenever it comes, with
        /// ``recoveryAnswered(_:at:)``. A wait the machine no longer wants (``isAcquiring`` is `false`) is called off.
        case acquire
        /// A success of a repeating run: emit `attemptSucceeded` for `succeeded`, hand its value over, wait `delay`
        /// (measured from the success) and report ``waitElapsed(at:)``; the next trial then starts afresh. With a
        /// budget, the success's refund is deposited first (``budgetRefund``).
        case repeatAfter(Duration, succeeded: RetryAttempt)
        /// Nothing to do: the event was stale.
        case none
    }

    /// What makes a retrier a run of trials: a condition that gates them, a pause and a new trial after each success.
    /// Each trial is a fresh retrier of the configuration (its attempts numbered from 1, its own total deadline, its
    /// own backoff chain); the summary counts the attempts of all trials and the time since the run started.
    @usableFromInline
    package struct Trials: Sendable {
        /// Whether a condition gates the trials: none runs while it is closed (``conditionChanged(_:at:)``).
        package var gated: Bool
        /// The pause after each success before the next trial; `nil` when the first success ends the run. Clamped by
        /// the machine (negative counts as zero, longer than ``BackoffStrategy/saturationLimit`` as that limit).
        package var repeatDelay: Duration?

        package init(gated: Bool, repeatDelay: Duration?) {
            self.gated = gated
            self.repeatDelay = repeatDelay
        }
    }

    /// What a runner shows the actions it carries out to (the async runner's observed shape): each action, with the
    /// machine's ``termination`` when the action is ``Action/finish``.
    @usableFromInline
    package typealias ActionObserver = (borrowing Action, RetryTermination?) -> Void

    private enum State: Sendable {
        case idle
        case attempting(RetryAttempt)
        /// The strategy is being asked about the failure of the attempt (its error is ``lastError``).
        case deciding(RetryAttempt)
        /// A retry after `delay` waits for the budget's answer (the failed attempt's error is ``lastError``).
        case paying(RetryAttempt, delay: Duration)
        case waiting(nextAttempt: Int)
        /// Attempt `nextAttempt` waits for a credential from the recovery (``Action/acquire``), asked for at `since`: after
        /// a failure the recovery recognises, or before any attempt of a retrier with a recovery.
        case acquiring(nextAttempt: Int, since: Duration)
        /// A gated run waits for its condition to open; no trial runs.
        case awaitingCondition
        /// The condition closed during a trial: waiting for the runner to report ``interrupted(at:)``.
        case interrupting
        /// A repeating run pauses after a success, before the next trial; the pause ends at the time given (since the
        /// run started): see ``RetryStateMachine/pauseRemaining(at:)``.
        case pausing(until: Duration)
        case finished(Ending)
    }

    /// The state of a run of trials (see ``Trials``): what the condition said last, and where the current trial began.
    fileprivate struct TrialState: Sendable {
        let trials: Trials
        var open = false
        var ended = false
        /// The version of the last condition snapshot recorded.
        var version: UInt64?
        /// When the current trial started (time since the run started): a trial's times are measured from it.
        var origin: Duration = .zero
        /// The attempts of the trials before the current one.
        var attemptsBefore = 0
        /// The current trial's number, from 1 (wrapping back to 1 after `UInt32.max`): see
        /// ``RetryStateMachine/currentTrial``.
        var number: UInt32 = 0
    }

    /// The duplicate completions reported with ``RetryStateMachine/duplicateCompleted(_:)`` and not yet taken for an
    /// event, in order, each with its sequence number, and the sequence number of the last one. Out of line (one word
    /// in the machine, which every waiting retrier keeps): a duplicate completion is rare. Replaced, never mutated in
    /// place.
    private indirect enum DuplicateBox: Sendable {
        case log(pending: [(sequence: UInt64, attempt: RetryAttempt)], last: UInt64)
    }

    /// ``TrialState`` out of line, so that a machine that runs no trials (almost all of them) stays one word larger
    /// than without it. Replaced, never mutated in place (it changes a few times per trial at most).
    fileprivate indirect enum TrialBox: Sendable {
        case state(TrialState)
    }

    /// What a retrier with a recovery (``RetryConfiguration/recovery``) knows about it: which credential the current
    /// attempt runs with, which one failed, and what the summary reports.
    private struct RecoveryState: Sendable {
        /// The credential the recovery gave for the current attempt, and its generation.
        var credential: (any Sendable)?
        var generation: UInt64?
        /// While acquiring after a failure: the generation of the credential that failed (the recovery gives a newer
        /// one, refreshing it if none is newer); `nil` before an attempt that follows no recognised failure.
        var stale: UInt64?
        /// The summary's ``RetrySummary/recoveries`` and ``RetrySummary/recoveryWait``.
        var recoveries = 0
        var waited = Duration.zero
        /// The error the recovery failed with, once it has.
        var failure: (any Error)?
    }

    /// ``RecoveryState`` out of line (one word in a machine without a recovery), copied on write: allocated once per
    /// retrier that uses a recovery, then changed in place (every attempt of such a retrier changes it).
    private final class RecoveryBox: @unchecked Sendable {
        // @unchecked Sendable: `state` is only changed through `RetryStateMachine.updateRecovery`, which copies the box
        // first unless this machine's reference is the only one (as the standard library's collections do): a box
        // that copies of the machine share, possibly on other threads, is never changed.
        var state: RecoveryState

        init(_ state: RecoveryState) {
            self.state = state
        }
    }

    /// How the retrier ended, compactly: ``termination`` rebuilds the rest from the machine's fields (the last error,
    /// the attempts run), so that a finished machine is barely larger than a running one.
    private struct Ending: Sendable {
        /// What the last attempt (the one numbered ``RetryStateMachine/attemptsRun``) came to, if the retrier ended
        /// with its result.
        enum Last: Sendable {
            /// The retrier did not end with an attempt's result (cancelled, deadline before an attempt, invalid).
            case none
            /// The attempt failed with ``RetryStateMachine/lastError``.
            case failed
            /// The attempt timed out (the timeout's error is rebuilt from the attempt's number and ``at``).
            case timedOut
            /// The attempt succeeded.
            case succeeded
        }

        /// ``RetryError/Reason-swift.enum`` in one word: the cases with a payload (strings) are boxed, and only the
        /// rare ends that have one (a strategy's stop, an invalid configuration) allocate that box. Unboxed, a
        /// reason would make every machine (and every waiting retrier) some 30 bytes larger.
        enum Reason: Sendable {
            case succeeded, exhausted, deadlineExceeded, cancelled, budgetExhausted, conditionEnded
            case recoveryFailed, recoveryLimitExceeded
            indirect case stopped(RetryStopReason)
            /// An invalid configuration, with the problem (the error's message).
            indirect case invalid(String)
            /// Any other reason (none is produced by the machine today).
            indirect case other(RetryError.Reason)

            init(_ reason: RetryError.Reason) {
                switch reason {
                case .succeeded: self = .succeeded
                case .exhausted: self = .exhausted
                case .deadlineExceeded: self = .deadlineExceeded
                case .cancelled: self = .cancelled
                case .budgetExhausted: self = .budgetExhausted
                case .conditionEnded: self = .conditionEnded
                case .recoveryFailed: self = .recoveryFailed
                case .recoveryLimitExceeded: self = .recoveryLimitExceeded
                case .stopped(let stop): self = .stopped(stop)
                case .invalidConfiguration(let problem): self = .invalid(problem)
                default: self = .other(reason)
                }
            }

            /// The summary's reason (without an invalid configuration's message, which is in the error).
            var summaryReason: RetryError.Reason {
                switch self {
                case .succeeded: return .succeeded
                case .exhausted: return .exhausted
                case .deadlineExceeded: return .deadlineExceeded
                case .cancelled: return .cancelled
                case .budgetExhausted: return .budgetExhausted
                case .conditionEnded: return .conditionEnded
                case .recoveryFailed: return .recoveryFailed
                case .recoveryLimitExceeded: return .recoveryLimitExceeded
                case .stopped(let stop): return .stopped(stop)
                case .invalid: return .invalidConfiguration
                case .other(let reason): return reason
                }
            }
        }

        let reason: Reason
        let last: Last
        /// When the retrier finished (in a run of trials: since the last trial started).
        let at: Duration
        /// When the last attempt started (meaningful unless `last` is `.none`).
        let attemptStart: Duration
    }
    /// The limits, read by runners' inlined helpers (whether there is a budget) and otherwise by the machine only.
    @usableFromInline
    package let configuration: RetryConfiguration
    private var state: State = .idle
    private var attemptsRun = 0
    private var previousDelay: Duration?
    private var lastError: (any Error)?
    /// What the budget charged for the retry that led to the current attempt (`nil` for the first attempt).
    private var budgetPaid: Int?
    /// The duplicate completions (``duplicateCompleted(_:)``); `nil` until the first one (almost always).
    private var duplicateBox: DuplicateBox?
    /// A run of trials' state; `nil` for a plain retrier.
    private var trialBox: TrialBox?
    /// What the retrier knows about its recovery; `nil` until it first asks (always, without a recovery).
    private var recoveryBox: RecoveryBox?

    /// A machine for `configuration`, its timeouts bounded (see ``RetryConfiguration/bounded``).
    @usableFromInline
    package init(_ configuration: consuming RetryConfiguration) {
        // Bounded in place: `configuration.bounded` would copy the configuration (its budget and closure) once more.
        if let total = configuration.totalTimeout { configuration.totalTimeout = DelayMath.bounded(total) }
        if let attempt = configuration.attemptTimeout { configuration.attemptTimeout = DelayMath.bounded(attempt) }
        self.configuration = configuration
    }

    /// A machine for a run of trials of `configuration` (gated by a condition, repeating after each success).
    package init(_ configuration: consuming RetryConfiguration, trials: Trials) {
        self.init(configuration)
        var trials = trials
        trials.repeatDelay = trials.repeatDelay.map(DelayMath.clamp)
        trialBox = .state(TrialState(trials: trials))
    }

    /// Whether this is a plain retrier, not a run of trials: checked first on every path a plain retrier takes, so
    /// that trials cost it one comparison (their own paths are out of line). Reads the one field, never `self` as a
    /// whole: a non-mutating call on `self` from a mutating input would copy the machine (and retain its references).
    private var isPlain: Bool {
        trialBox.isNone
    }

    /// A run of trials' state, read and replaced as a whole.
    private var trialState: TrialState? {
        get {
            guard case .state(let state)? = trialBox else { return nil }
            return state
        }
        set { trialBox = newValue.map(TrialBox.state) }
    }

    /// `now` (time since the run started) as time since the current trial started: the time of every deadline,
    /// attempt and error. The same for a plain retrier.
    private func local(_ now: Duration) -> Duration {
        trialBox.isNone ? now : now - trialBox.origin
    }

    /// The attempts of every trial (the summary's count): those of the current one for a plain retrier.
    private var totalAttempts: Int {
        isPlain ? attemptsRun : trialTotalAttempts
    }

    @inline(never)
    private var trialTotalAttempts: Int {
        let (sum, overflow) = (trialState?.attemptsBefore ?? 0).addingReportingOverflow(attemptsRun)
        return overflow ? .max : sum
    }

    /// Whether the retrier has finished.
    package var isFinished: Bool {
        if case .finished = state { return true }
        return false
    }

    /// How the retrier ended, once it has (after ``Action/finish``); `nil` before.
    @usableFromInline
    package var termination: RetryTermination? {
        termination(withAttempts: true)
    }

    /// How the retrier ended, once it has; `nil` before. Without `withAttempts`, the termination has no
    /// ``RetryTermination/failedAttempt`` or ``RetryTermination/succeededAttempt`` (only the final events need them), so
    /// that a runner without an observer builds and destroys less.
    package func termination(withAttempts: Bool) -> RetryTermination? {
        guard case .finished(let ending) = state else { return nil }
        let now = ending.at
        let summary = RetrySummary(
            reason: ending.reason.summaryReason, attempts: totalAttempts,
            elapsed: isPlain ? now : now + trialBox.origin,
            recoveries: recoveryBox?.state.recoveries ?? 0, recoveryWait: recoveryBox?.state.waited ?? .zero)
        guard withAttempts else {
            return RetryTermination(
                summary: summary, error: error(of: ending), failedAttempt: nil, succeededAttempt: nil)
        }
        let attempt = RetryAttempt(
            number: attemptsRun, maxAttempts: configuration.maxAttempts, elapsed: ending.attemptStart)
        var failed: (attempt: RetryAttempt, error: any Error)?
        var succeeded: RetryAttempt?
        switch ending.last {
        case .none: break
        case .failed: failed = lastError.map { (attempt, $0) }
        case .timedOut: failed = (attempt, Self.timeoutError(attempt.number, at: now))
        case .succeeded: succeeded = attempt
        }
        return RetryTermination(
            summary: summary, error: error(of: ending), failedAttempt: failed, succeededAttempt: succeeded)
    }

    /// The error the retrier finished with (``RetryTermination/error``), once it has; `nil` before, and after a
    /// success.
    @usableFromInline
    package var finalError: (any Error)? {
        guard case .finished(let ending) = state else { return nil }
        return error(of: ending)
    }

    private func error(of ending: Ending) -> (any Error)? {
        switch ending.reason {
        case .succeeded: return nil
        case .cancelled:
            // The operation's own `CancellationError` when an attempt ended with it (see `failed`), otherwise a new one.
            guard case .failed = ending.last, let lastError else { return CancellationError() }
            return lastError
        case .deadlineExceeded: return deadlineError(at: ending.at)
        case .budgetExhausted:
            return RetryError(.budgetExhausted, lastError: lastError, attempts: attemptsRun, elapsed: ending.at)
        case .invalid(let problem): return RetryError(.invalidConfiguration(problem))
        case .conditionEnded: return RetryError(.conditionEnded, lastError: lastError, attempts: totalAttempts)
        case .recoveryFailed:
            return RetryError(
                .recoveryFailed, lastError: recoveryBox?.state.failure ?? lastError, attempts: attemptsRun,
                elapsed: ending.at)
        case .recoveryLimitExceeded:
            return RetryError(.recoveryLimitExceeded, lastError: lastError, attempts: attemptsRun, elapsed: ending.at)
        case .exhausted, .stopped, .other: return lastError  // the last attempt's own error
        }
    }

    /// The number of the current trial of a run of trials, from 1; 0 for a plain retrier. Attempts are numbered from 1 in
    /// every trial: a runner that must tell a late result of an interrupted trial's attempt from one of a later trial's
    /// attempt of the same number keeps this beside the attempt's number.
    package var currentTrial: UInt32 {
        trialBox.isNone ? 0 : trialBox.trialNumber
    }

    /// Whether the machine waits for a wait or a pause to end (``Action/retry(after:failed:error:)``,
    /// ``Action/repeatAfter(_:succeeded:)``): the only time a runner's wait timer is wanted.
    package var isWaiting: Bool {
        switch state {
        case .waiting, .pausing: return true
        case .acquiring: return configuration.totalTimeout != nil  // the wait for the recovery ends at the deadline
        default: return false
        }
    }

    /// The number of the attempt currently running, if one is.
    package var currentAttempt: Int? {
        if case .attempting(let attempt) = state { return attempt.number }
        return nil
    }

    /// Starts the retrier: runs attempt 1 (a run of trials: its first trial), or finishes at once if the configuration
    /// is invalid.
    @usableFromInline
    package mutating func start(at now: Duration) -> Action {
        guard case .idle = state else { return .none }
        if let problem = configuration.problem {
            return finish(.invalidConfiguration(problem), at: now)
        }
        guard trialBox != nil else { return begin(1, at: now) }
        return nextTrial(at: now)
    }

    /// Starts a gated run of trials with the condition as it was when the runner began observing it: open, the first
    /// trial runs; closed, the run waits for it (``Action/awaitCondition``), or finishes with
    /// ``RetryError/Reason-swift.enum/conditionEnded`` if it has ended. Otherwise ``start(at:)``.
    package mutating func start(at now: Duration, condition: RetryConditionSnapshot) -> Action {
        if case .idle = state { record(condition) }
        return start(at: now)
    }

    /// Attempt `number` succeeded. A repeating run pauses (``Action/repeatAfter(_:succeeded:)``); any other finishes.
    @usableFromInline
    package mutating func attemptSucceeded(_ number: Int, at now: Duration) -> Action {
        guard case .attempting(let attempt) = state, attempt.number == number else { return .none }
        if isPlain { return finish(.succeeded, at: now, last: .succeeded, of: attempt) }
        return trialSucceeded(attempt, at: now)
    }

    /// Attempt `number` failed with `error`. A `CancellationError` finishes the retrier with
    /// ``RetryError/Reason-swift.enum/cancelled`` and that error, without asking the strategy; any other error asks it
    /// (``Action/consultStrategy(_:error:)``) while attempts are left.
    @usableFromInline
    package mutating func attemptFailed(_ number: Int, error: any Error, at now: Duration) -> Action {
        guard case .attempting(let attempt) = state, attempt.number == number else { return .none }
        return failed(attempt, error: error, at: local(now))
    }

    /// The per-attempt timer of attempt `number` fired.
    ///
    /// Past the total deadline the retrier gives up; otherwise the attempt fails with
    /// ``RetryError/Reason-swift.enum/attemptTimedOut`` and the strategy is consulted as for any failure.
    @usableFromInline
    package mutating func attemptTimedOut(_ number: Int, at now: Duration) -> Action {
        guard case .attempting(let attempt) = state, attempt.number == number else { return .none }
        let now = local(now)
        let timeout = Self.timeoutError(attempt.number, at: now)
        if let deadline = configuration.totalTimeout, now >= deadline {
            lastError = lastError ?? timeout
            return finish(.deadlineExceeded, at: now, last: .timedOut, of: attempt)
        }
        return failed(attempt, error: timeout, at: now)
    }

    /// The strategy's resolved answer for the failure reported by ``Action/consultStrategy(_:error:)``.
    @usableFromInline
    package mutating func decide(_ decision: RetryDecision, at now: Duration) -> Action {
        guard case .deciding(let attempt) = state, let error = lastError else { return .none }
        let now = local(now)
        switch decision {
        case .stop(let reason):
            return finish(.stopped(reason), at: now, last: .failed, of: attempt)
        case .recover:
            return recover(attempt, error: error, at: now)
        case .retry(let requested), .retryAfterHint(let requested):
            // Resolved decisions are in range already; one made up by a caller of this package API is clamped too.
            let delay = DelayMath.clamp(requested)
            if let deadline = configuration.totalTimeout, now + delay >= deadline {
                return finish(.deadlineExceeded, at: now, last: .failed, of: attempt)
            }
            // A hint is not a step of the backoff chain. Set before the budget answers: a refusal finishes the
            // machine, and nothing reads the previous delay after that.
            if case .retry = decision { previousDelay = delay }
            if let budget = configuration.budget {
                let afterTimeout =
                    (error as? RetryError)?.reason == .attemptTimedOut || configuration.isTimeout?(error) == true
                state = .paying(attempt, delay: delay)
                return .withdraw(from: budget, afterTimeout: afterTimeout)
            }
            state = .waiting(nextAttempt: attempt.number + 1)
            return .retry(after: delay, failed: attempt, error: error)
        }
    }

    /// The budget's answer to ``Action/withdraw(from:afterTimeout:)``: the tokens it took for the retry, or `nil` if it
    /// refused. Paid, the retry goes ahead (``Action/retry(after:failed:error:)``); refused, the retrier finishes with
    /// ``RetryError/Reason-swift.enum/budgetExhausted``. An answer the machine is not waiting for (after a cancel, or a
    /// second one) returns ``Action/none``.
    @usableFromInline
    package mutating func budgetAnswered(_ paid: Int?, at now: Duration) -> Action {
        guard case .paying(let attempt, let delay) = state, let error = lastError else { return .none }
        guard let paid else {
            return finish(.budgetExhausted, at: local(now), last: .failed, of: attempt)
        }
        budgetPaid = paid
        state = .waiting(nextAttempt: attempt.number + 1)
        return .retry(after: delay, failed: attempt, error: error)
    }

    /// What the runner deposits into the budget once the retrier has finished with a success, or a repeating run
    /// paused after one (``RetryBudget/deposit(_:)``): the tokens the retry that led to it cost, or the budget's
    /// `successRefund` for a first-try success. `nil` without a budget, before the end, and after any other end.
    @usableFromInline
    package var budgetRefund: (budget: RetryBudget, tokens: Int)? {
        guard let budget = configuration.budget else { return nil }
        switch state {
        case .finished(let ending):
            guard case .succeeded = ending.reason else { return nil }
        case .pausing:
            break
        case .idle, .attempting, .deciding, .paying, .waiting, .acquiring, .awaitingCondition, .interrupting:
            return nil
        }
        return (budget, budgetPaid ?? budget.successRefund)
    }

    /// The wait chosen by ``decide(_:at:)``, or the pause of ``Action/repeatAfter(_:succeeded:)``, is over; or, waiting
    /// for the recovery (``Action/acquire``), the total deadline has come: the retrier gives up with
    /// ``RetryError/Reason-swift.enum/deadlineExceeded`` (its ``RetryError/lastError`` is the failure that asked for
    /// the recovery, if one did).
    @usableFromInline
    package mutating func waitElapsed(at now: Duration) -> Action {
        switch state {
        case .waiting(let next): return begin(next, at: local(now))
        case .pausing: return nextTrial(at: now)
        case .acquiring: return acquiringDeadline(at: local(now))
        default: return .none
        }
    }

    /// The retrier is cancelled. A no-op once it has finished.
    @usableFromInline
    package mutating func cancel(at now: Duration) -> Action {
        if isFinished { return .none }
        if case .acquiring = state { stopAcquiring(at: local(now)) }
        return finish(.cancelled, at: local(now))
    }

    // MARK: - Recovery

    /// The recovery's answer to ``Action/acquire`` (``RecoveryCore/acquire(newerThan:waiter:)``), whenever it comes.
    ///
    /// A credential: the next attempt runs with it at once (the time waited counts in the summary). A failed refresh:
    /// the retrier gives up with ``RetryError/Reason-swift.enum/recoveryFailed`` and the recovery's error. A refresh the
    /// recovery's window refused: ``RetryError/Reason-swift.enum/recoveryLimitExceeded``. An answer the machine is not
    /// waiting for (after a cancel or the deadline) returns ``Action/none``.
    package mutating func recoveryAnswered(_ answer: RecoveryAnswer, at now: Duration) -> Action {
        guard case .acquiring(let next, _) = state else { return .none }
        let now = local(now)
        stopAcquiring(at: now)
        switch answer {
        case .ready(let credential, let generation):
            updateRecovery { recovery in
                recovery.credential = credential
                recovery.generation = generation
                recovery.stale = nil
            }
            return run(next, at: now)
        case .failed(let error):
            updateRecovery { $0.failure = error }
            return finish(.recoveryFailed, at: now)
        case .limitExceeded:
            return finish(.recoveryLimitExceeded, at: now)
        }
    }

    /// What ``Action/acquire`` asks of the recovery: a credential newer than the generation that failed (any credential
    /// when none did), within `timeout` (what is left of the total timeout; `nil` for no limit). `nil` unless the
    /// machine is acquiring.
    package var recoveryRequest: (recovery: RecoveryCore, newerThan: UInt64?, timeout: Duration?)? {
        guard case .acquiring(_, let since) = state, let recovery = configuration.recovery else { return nil }
        var timeout: Duration?
        if let deadline = configuration.totalTimeout { timeout = Swift.max(deadline - since, .zero) }
        return (recovery, recoveryBox?.state.stale, timeout)
    }

    /// Whether the machine waits for the recovery's answer: the only time a runner's registration with the recovery is
    /// wanted.
    package var isAcquiring: Bool {
        if case .acquiring = state { return true }
        return false
    }

    /// The credential the recovery gave for the current attempt (the operation runs with it); `nil` without a recovery.
    package var credential: (any Sendable)? {
        recoveryBox?.state.credential  // one field: the whole state is not copied
    }

    /// Changes the recovery's part of the machine: in place when this machine alone holds it, otherwise in a copy.
    private mutating func updateRecovery(_ change: (inout RecoveryState) -> Void) {
        if isKnownUniquelyReferenced(&recoveryBox), let box = recoveryBox {
            change(&box.state)
            return
        }
        var state = recoveryBox?.state ?? RecoveryState()
        change(&state)
        recoveryBox = RecoveryBox(state)
    }

    /// ``waitElapsed(at:)`` while acquiring: the total deadline has come (`now` is local time), or the input is stale.
    /// Out of line, as the rest of the recovery: a retrier without one pays nothing for it on its hot paths.
    @inline(never)
    private mutating func acquiringDeadline(at now: Duration) -> Action {
        guard let deadline = configuration.totalTimeout, now >= deadline else { return .none }
        stopAcquiring(at: now)
        return finish(.deadlineExceeded, at: now)
    }

    /// Counts the wait for the recovery, if the machine is acquiring, in the summary's ``RetrySummary/recoveryWait``:
    /// the wait ends at `now` (local time), however it ends.
    @inline(never)
    private mutating func stopAcquiring(at now: Duration) {
        guard case .acquiring(_, let since) = state else { return }
        updateRecovery { $0.waited += Swift.max(now - since, .zero) }
    }

    /// Before attempt `number`, with a recovery: ask it for a credential, unless the deadline has passed.
    @inline(never)
    private mutating func acquire(_ number: Int, at now: Duration) -> Action {
        if let deadline = configuration.totalTimeout, now >= deadline {
            return finish(.deadlineExceeded, at: now)
        }
        state = .acquiring(nextAttempt: number, since: now)
        return .acquire
    }

    /// The failure of `attempt` is one the recovery recognises: ask it for a newer credential than the one that failed,
    /// then retry at once (the strategy's delays and the budget are for failures that a recovery does not answer).
    @inline(never)
    private mutating func recover(_ attempt: RetryAttempt, error: any Error, at now: Duration) -> Action {
        guard configuration.recovery != nil else {
            // Only a caller of this package API can decide `.recover` without a recovery: nothing to wait for.
            return finish(.stopped(.unspecified), at: now, last: .failed, of: attempt)
        }
        if let deadline = configuration.totalTimeout, now >= deadline {
            return finish(.deadlineExceeded, at: now, last: .failed, of: attempt)
        }
        updateRecovery { recovery in
            recovery.stale = recovery.generation
            recovery.recoveries += 1
        }
        state = .acquiring(nextAttempt: attempt.number + 1, since: now)
        return .recover(failed: attempt, error: error)
    }

    // MARK: - Trials

    /// ``attemptSucceeded(_:at:)`` in a run of trials: a repeating run pauses, any other finishes.
    @inline(never)
    private mutating func trialSucceeded(_ attempt: RetryAttempt, at now: Duration) -> Action {
        if let delay = trialState?.trials.repeatDelay {
            state = .pausing(until: now + delay)
            return .repeatAfter(delay, succeeded: attempt)
        }
        return finish(.succeeded, at: local(now), last: .succeeded, of: attempt)
    }

    /// How much of the pause after a repeating run's success (``Action/repeatAfter(_:succeeded:)``) remains at `now`
    /// (time since the run started): zero once it is over, `nil` when the run is not pausing. A runner that leaves the
    /// pause and comes back to it later (the async iterator of a repeating policy, between two calls of `next()`) waits
    /// this long, then reports ``waitElapsed(at:)``.
    package func pauseRemaining(at now: Duration) -> Duration? {
        guard case .pausing(let end) = state else { return nil }
        return Swift.max(end - now, .zero)
    }

    /// The condition of a gated run changed (``RetryConditionSnapshot``, from whatever thread changed it; a snapshot
    /// older than one already recorded is ignored).
    ///
    /// Waiting for the condition, an open one starts a trial (``Action/run(_:timeout:)`` of attempt 1) and an ended one
    /// finishes the run with ``RetryError/Reason-swift.enum/conditionEnded``. During a trial, a closed one interrupts
    /// it (``Action/interrupt(_:)``). The pause of a repeating run is not affected (the next trial waits for the
    /// condition when the pause is over). Before the start, the snapshot is recorded for ``start(at:)``. Runners may feed
    /// every snapshot as it arrives, in any order: the machine alone tells a stale one.
    package mutating func conditionChanged(_ snapshot: RetryConditionSnapshot, at now: Duration) -> Action {
        guard trialState?.trials.gated == true, record(snapshot), let trial = trialState else { return .none }
        let open = trial.open
        switch state {
        case .awaitingCondition where open || trial.ended:
            return nextTrial(at: now)
        case .attempting(let attempt) where !open, .deciding(let attempt) where !open,
            .paying(let attempt, _) where !open:
            state = .interrupting
            return .interrupt(attempt)
        case .waiting where !open, .acquiring where !open:
            stopAcquiring(at: local(now))
            state = .interrupting
            return .interrupt(nil)
        case .idle, .attempting, .deciding, .paying, .waiting, .acquiring, .awaitingCondition, .interrupting, .pausing,
            .finished:
            return .none
        }
    }

    /// The runner carried out ``Action/interrupt(_:)``: the next trial starts if the condition opened again meanwhile;
    /// otherwise the run waits for it, or finishes if it has ended.
    package mutating func interrupted(at now: Duration) -> Action {
        guard case .interrupting = state else { return .none }
        return nextTrial(at: now)
    }

    /// Records a condition snapshot; returns `false` if it is older than one already recorded (or there are no trials).
    @discardableResult
    private mutating func record(_ snapshot: RetryConditionSnapshot) -> Bool {
        guard var trial = trialState else { return false }
        if let version = trial.version, snapshot.version <= version { return false }
        trial.version = snapshot.version
        trial.open = snapshot.isOpen
        trial.ended = snapshot.ended
        trialState = trial
        return true
    }

    /// Between trials (`now` is the time since the run started): start one if the condition allows, finish if it never
    /// will again, or wait for it.
    private mutating func nextTrial(at now: Duration) -> Action {
        guard var trial = trialState else { return .none }
        if trial.trials.gated && !trial.open {
            if trial.ended { return finish(.conditionEnded, at: local(now)) }
            state = .awaitingCondition
            return .awaitCondition
        }
        let (sum, overflow) = trial.attemptsBefore.addingReportingOverflow(attemptsRun)
        trial.attemptsBefore = overflow ? .max : sum
        trial.origin = now
        trial.number = trial.number == .max ? 1 : trial.number + 1
        trialState = trial
        attemptsRun = 0
        previousDelay = nil
        budgetPaid = nil
        return begin(1, at: .zero)
    }

    // MARK: - Duplicate completions

    /// A completion of `attempt` was called again. Reported as ``RetryEvent/duplicateCompletion(_:)`` before the next
    /// `attemptStarted` or `finished` (``takeDuplicates(through:)``), as every runner reports it, or on its own.
    ///
    /// - Returns: The duplicate's sequence number, or `nil` once the retrier has finished: the duplicate is dropped
    ///   (nothing observes it any more).
    package mutating func duplicateCompleted(_ attempt: RetryAttempt) -> UInt64? {
        if isFinished { return nil }
        var (pending, last) = duplicateLog
        last &+= 1
        pending.append((last, attempt))
        duplicateBox = .log(pending: pending, last: last)
        return last
    }

    /// Whether duplicate completions wait to be reported.
    package var hasDuplicates: Bool {
        guard case .log(let pending, _)? = duplicateBox else { return false }
        return !pending.isEmpty
    }

    /// Takes the duplicate completions not reported yet, in order: all of them (for the event about to be emitted), or
    /// those up to `sequence` (later ones belong after events that are still on their way to the runner's queue).
    package mutating func takeDuplicates(through sequence: UInt64? = nil) -> [RetryAttempt] {
        guard case .log(let pending, let last)? = duplicateBox, !pending.isEmpty else { return [] }
        let due = sequence.map { sequence in pending.prefix { $0.sequence <= sequence } } ?? pending[...]
        duplicateBox = .log(pending: Array(pending.dropFirst(due.count)), last: last)
        return due.map(\.attempt)
    }

    /// The duplicate completions not taken yet and the last sequence number (none and 0 before the first).
    private var duplicateLog: (pending: [(sequence: UInt64, attempt: RetryAttempt)], last: UInt64) {
        guard case .log(let pending, let last)? = duplicateBox else { return ([], 0) }
        return (pending, last)
    }

    // MARK: - Transitions

    /// Attempt `number` is next: it runs, or, with a recovery, it first asks the recovery for a credential.
    @inline(__always)
    private mutating func begin(_ number: Int, at now: Duration) -> Action {
        if configuration.recovery == nil { return run(number, at: now) }
        return acquire(number, at: now)
    }

    @inline(__always)
    private mutating func run(_ number: Int, at now: Duration) -> Action {
        var timeout = configuration.attemptTimeout
        if let deadline = configuration.totalTimeout {
            let left = deadline - now
            if left <= .zero {
                return finish(.deadlineExceeded, at: now)
            }
            timeout = timeout.map { Swift.min($0, left) } ?? left
        }
        let attempt = RetryAttempt(number: number, maxAttempts: configuration.maxAttempts, elapsed: now)
        attemptsRun = number
        state = .attempting(attempt)
        return .run(attempt, timeout: timeout)
    }

    private mutating func failed(_ attempt: RetryAttempt, error: any Error, at now: Duration) -> Action {
        var error = error
        // A metatype comparison first: a conditional cast of an existential costs several hundred instructions, and
        // almost every failure is the operation's own error. The existential is opened (which only reads its box)
        // rather than asked for `type(of:)` (a runtime call that looks for a dynamic type).
        if Self.isRetryError(error), let missing = error as? RetryError,
            missing.reason == .missingResult || missing.reason == .completionReleased
        {
            // Made by a completion that does not know the attempt's place in the run: say which attempt, and when.
            error = RetryError(missing.reason, attempts: attempt.number, elapsed: now)
        }
        lastError = error
        // A cancellation from inside the work (a cancelled child task, a raced timeout, a cancelled request) is not a
        // transient fault: the retrier ends with it, without asking the strategy, as when the retrier is cancelled,
        // except that the attempt's failure is reported (`attemptFailed(…, next: .giveUp(.cancelled))`) and the
        // operation's own error is the one the retrier finishes with.
        if Self.isCancellation(error) {
            return finish(.cancelled, at: now, last: .failed, of: attempt)
        }
        if attempt.number >= configuration.maxAttempts {
            return finish(.exhausted, at: now, last: .failed, of: attempt)
        }
        state = .deciding(attempt)
        let context = RetryDecisionContext(retryIndex: attempt.number - 1, previousDelay: previousDelay)
        return .consultStrategy(context, error: error)
    }

    /// Whether `error`'s type is ``RetryError``: called with an `any Error`, which the call opens.
    private static func isRetryError<E: Error>(_ error: E) -> Bool {
        E.self == RetryError.self
    }

    /// Whether `error`'s type is `CancellationError`: called with an `any Error`, which the call opens (a metatype
    /// comparison, much cheaper than a conditional cast, on every failure).
    private static func isCancellation<E: Error>(_ error: E) -> Bool {
        E.self == CancellationError.self
    }

    private func deadlineError(at now: Duration) -> RetryError {
        RetryError(.deadlineExceeded, lastError: lastError, attempts: attemptsRun, elapsed: now)
    }

    private static func timeoutError(_ number: Int, at now: Duration) -> RetryError {
        RetryError(.attemptTimedOut, lastError: nil, attempts: number, elapsed: now)
    }

    /// Finishes: ``termination`` rebuilds the rest from the fields. `attempt`, if given, is the last one run, which
    /// failed with ``lastError`` (`.failed`), timed out (`.timedOut`) or succeeded.
    private mutating func finish(
        _ reason: RetryError.Reason, at now: Duration, last: Ending.Last = .none, of attempt: RetryAttempt? = nil
    ) -> Action {
        state = .finished(
            Ending(reason: Ending.Reason(reason), last: last, at: now, attemptStart: attempt?.elapsed ?? DelayMath.zero)
        )
        return .finish
    }
}

extension Optional where Wrapped == RetryStateMachine.TrialBox {
    /// Whether the machine is a plain retrier.
    @inline(__always)
    fileprivate var isNone: Bool {
        if case .none = self { return true }
        return false
    }

    /// When the current trial started (time since the run started); zero for a plain retrier. Out of line: only runs of
    /// trials ask.
    @inline(never)
    fileprivate var origin: Duration {
        guard case .state(let trial)? = self else { return .zero }
        return trial.origin
    }

    /// The current trial's number; 0 for a plain retrier. Out of line, like ``origin``.
    @inline(never)
    fileprivate var trialNumber: UInt32 {
        guard case .state(let trial)? = self else { return 0 }
        return trial.number
    }
}

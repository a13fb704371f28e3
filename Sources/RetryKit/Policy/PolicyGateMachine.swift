/// The pure state machine of a completion-handler policy run made of several trials: one trial (a whole retrier, run
/// by the callback runner) at a time, started when the condition is open, abandoned when it closes, and started
/// again after a success when repeating.
///
/// It counts no attempts and computes no delay: each trial is a `RetryStateMachine` of its own, inside the runner.
/// The machine only decides when a trial starts, when it is abandoned, and how the run ends:
///
/// ```
/// idle ──start──▶ running(1)              (no condition, or the condition is open)
///      ╰─start──▶ waiting ──open──▶ running(n+1)
/// running(n) ──closed──▶ abandoning(n) ──trial cancelled──▶ waiting, or running(n+1) if open again
/// running(n) ──trial finished──▶ finished (its result), or pausing after a success when repeating
/// pausing ──pause elapsed──▶ running(n+1), or waiting if closed
/// waiting ──condition ended──▶ finished (conditionEnded);  any phase ──cancel──▶ finished (cancelled)
/// ```
///
/// Every event that does not fit the current phase returns ``Action/none``.
struct PolicyGateMachine: Sendable {
    enum Phase: Sendable, Equatable {
        case idle
        /// Waiting for the condition to open.
        case waiting
        /// Trial `trial` runs.
        case running(trial: Int)
        /// Trial `trial` was cancelled because the condition closed; waiting for its completion.
        case abandoning(trial: Int)
        /// Waiting before the next repetition; `epoch` identifies the timer.
        case pausing(epoch: UInt64)
        case finished
    }

    /// How the run ends.
    enum Ending: Sendable, Equatable {
        /// With the result of the trial that just finished (its value, or the error its policy gave up with).
        case trialResult
        /// The condition ended while closed.
        case conditionEnded
        /// The run was cancelled.
        case cancelled
    }

    enum Action: Sendable, Equatable {
        case none
        /// Start trial `n` (numbers only identify trials).
        case startTrial(Int)
        /// Cancel the running trial.
        case cancelTrial
        /// Hand the trial's value to the repeat handler, then wait before the next repetition with timer `epoch`.
        case pause(epoch: UInt64)
        /// Stop everything (trial, timer, condition observation) and end the run.
        case finish(Ending)
    }

    /// Whether a condition gates the trials.
    let gated: Bool
    /// Whether a success starts a pause and another trial, rather than ending the run.
    let repeats: Bool

    private(set) var phase: Phase = .idle
    private var trial = 0
    private var epoch: UInt64 = 0
    private var open = false
    private var ended = false
    private var version: UInt64?

    init(gated: Bool, repeats: Bool) {
        self.gated = gated
        self.repeats = repeats
    }

    var isFinished: Bool { phase == .finished }

    /// Starts the run with the condition's state when observation began (ignored unless gated).
    mutating func start(_ snapshot: RetryConditionSnapshot?) -> Action {
        guard phase == .idle else { return .none }
        if let snapshot { record(snapshot) }
        return next()
    }

    /// The condition changed. Snapshots older than one already seen are ignored.
    mutating func conditionChanged(_ snapshot: RetryConditionSnapshot) -> Action {
        guard record(snapshot) else { return .none }
        switch phase {
        case .waiting:
            return next()
        case .running(let current) where !open:
            phase = .abandoning(trial: current)
            return .cancelTrial
        case .idle, .running, .abandoning, .pausing, .finished:
            return .none
        }
    }

    /// Trial `number` finished: succeeded, or failed; `cancelled` when it finished because it was cancelled.
    mutating func trialFinished(_ number: Int, succeeded: Bool, cancelled: Bool) -> Action {
        switch phase {
        case .abandoning(let current) where current == number && cancelled:
            return next()
        case .running(let current) where current == number, .abandoning(let current) where current == number:
            // Finished on its own (an abandoned trial may have completed before the cancel reached it).
            guard succeeded, repeats else {
                phase = .finished
                return .finish(.trialResult)
            }
            epoch &+= 1
            phase = .pausing(epoch: epoch)
            return .pause(epoch: epoch)
        case .idle, .waiting, .running, .abandoning, .pausing, .finished:
            return .none
        }
    }

    /// The pause with timer `epoch` is over.
    mutating func pauseElapsed(_ epoch: UInt64) -> Action {
        guard phase == .pausing(epoch: epoch) else { return .none }
        return next()
    }

    /// The run is cancelled. A no-op once finished.
    mutating func cancel() -> Action {
        guard phase != .finished else { return .none }
        phase = .finished
        return .finish(.cancelled)
    }

    /// Whether trial `number` is the one running (not abandoned, not finished).
    func isRunning(_ number: Int) -> Bool {
        phase == .running(trial: number)
    }

    /// Whether the pause with timer `epoch` is the current one.
    func isPausing(_ epoch: UInt64) -> Bool {
        phase == .pausing(epoch: epoch)
    }

    // MARK: - Transitions

    /// Records a snapshot; returns `false` if it is older than one already recorded.
    @discardableResult
    private mutating func record(_ snapshot: RetryConditionSnapshot) -> Bool {
        if let version, snapshot.version <= version { return false }
        version = snapshot.version
        open = snapshot.isOpen
        ended = snapshot.ended
        return true
    }

    /// Between trials: start one if the condition allows, finish if it never will again, or wait.
    private mutating func next() -> Action {
        if !gated || open {
            trial += 1
            phase = .running(trial: trial)
            return .startTrial(trial)
        }
        if ended {
            phase = .finished
            return .finish(.conditionEnded)
        }
        phase = .waiting
        return .none
    }
}

// Support for the parity tests of gated (`onlyWhen`) and repeating policies: one scripted scenario, run by a
// completion-handler policy on a `VirtualScheduler` and by an async policy on a `VirtualClock`, recorded as a
// ``ParityRun`` (events, values, result, waits) that the tests compare.

import Dispatch
import RetryKit
import RetryKitTesting
import Testing

/// The two styles a gated or repeating policy runs in.
enum PolicyParityStyle: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// `policy.execute(on:scheduler:)` with a `{ attempt, done in … }` operation, or
    /// `policy.repeating(withDelay:).execute(on:scheduler:…onValue:completion:)`.
    case callback = "callback policy"
    /// `policy.executeTask(on:scheduler:)` with an `async throws` operation, or
    /// `policy.repeating(withDelay:).executeTask(on:scheduler:…onValue:completion:)`.
    case callbackTask = "callback policy, async operation (executeTask)"
    /// The callback policy with a done-style operation, its result awaited with `handle.value` (cancel: the awaiting
    /// task).
    case handleValue = "callback policy, handle.value"
    /// `try await policy.execute(clock:)`, or `for try await value in policy.repeating(withDelay:).values(clock:)`.
    case async = "async policy"

    var testDescription: String { rawValue }
}

/// A policy scenario: a policy with a condition the test sets by hand and/or a repeating delay, what each attempt does,
/// and a script of what the driver does, step by step.
struct PolicyParityScenario: Sendable {
    /// One step of the driver.
    enum Command: Sendable, Equatable {
        /// The run waits for the condition, with no timer pending: move virtual time by this much.
        case idle(Duration)
        /// Set the condition's value.
        case set(Bool?)
        /// End the condition.
        case finish
        /// Wait until the run waits on a timer (a backoff or, when repeating, the pause after a success), then move
        /// time to its end.
        case wait
        /// Wait until the run waits on a timer, then move time through half of it (the timer stays pending).
        case halfWait
        /// Move time to the end of the timer that a ``halfWait`` left pending.
        case restOfWait
        /// Wait until an attempt hangs.
        case hang
        /// Let the run go on to its end, moving time through every timer it waits on.
        case toEnd
        /// Cancel the run: `handle.cancel()`, or cancel the task that runs it.
        case cancel
    }

    var maxAttempts: Int
    /// The condition's first value, for a gated policy (`onlyWhen`); `nil` for a policy without a condition.
    var condition: Bool??
    /// The pause after each success, for a repeating policy.
    var repeatDelay: Duration?
    /// The policy's total timeout (per trial), if any.
    var totalTimeout: Duration?
    /// The policy's attempt timeout, if any.
    var attemptTimeout: Duration?
    /// The shared budget the policy pays into (a fresh one per run, in the same state), if any.
    var budget: ParityBudget?
    /// Step `i` is what the `i + 1`-th attempt of the run (counted over all trials) does; attempts past the end fail.
    /// An attempt fails with `TestError(k)` and succeeds with `"v\(k)"`, `k` counted over all trials.
    var steps: [ParityScenario.Step]
    var script: [Command]

    /// The backoff: 1 s, 2 s, 4 s… (no jitter, so that every trial, starting afresh, waits the same).
    static let backoff = BackoffStrategy<ContinuousClock>.exponential(a: .seconds(1), b: 2)

    /// The policy, gated by `condition` if the scenario has one.
    func policy(_ condition: RetryCondition?, budget: RetryBudget?) -> RetryPlan {
        var policy = RetryPlan.backoff(Self.backoff).giveUpAfter(maxAttempts: maxAttempts)
        if let totalTimeout { policy = policy.giveUpAfter(totalTimeout: totalTimeout) }
        if let attemptTimeout { policy = policy.attemptTimeout(attemptTimeout) }
        if let budget { policy = policy.budget(budget) }
        if let condition { policy = policy.onlyWhen(condition) }
        return policy
    }

    /// The `k`-th attempt of the run as a completion-handler operation.
    func perform(_ k: Int, _ done: AttemptCompletion<String>, _ progress: ParityProgress) {
        ParityScenario.Step.of(k, in: steps).perform(k, done, progress)
    }

    /// The `k`-th attempt of the run as an async operation.
    func perform(_ k: Int, _ progress: ParityProgress) async throws -> String {
        try await ParityScenario.Step.of(k, in: steps).perform(k, progress)
    }
}

/// Counts the attempts of one run over all its trials.
private final class AttemptCounter: Sendable {
    private let count = Locked(0)

    func next() -> Int {
        count.withLock { count in
            count += 1
            return count
        }
    }
}

/// Runs `scenario` in `style` and returns its log: the events, each value (as `.result("value …")`) where it was
/// delivered, then the final result; and the timers the driver moved time through.
func runPolicyParity(_ scenario: PolicyParityScenario, _ style: PolicyParityStyle) async -> ParityRun {
    switch style {
    case .callback, .callbackTask, .handleValue: return await runPolicyOnScheduler(scenario, style)
    case .async: return await runPolicyOnClock(scenario)
    }
}

/// The completion-handler styles, on a `VirtualScheduler` that ticks `progress` whenever work is handed to it.
///
/// With a done-style operation everything runs on the driver's thread, within `advance`; with an async operation
/// (`executeTask`), an attempt completes from its task and the driver waits for the tick of that completion's hop.
private func runPolicyOnScheduler(_ scenario: PolicyParityScenario, _ style: PolicyParityStyle) async -> ParityRun {
    let progress = ParityProgress()
    defer { progress.releaseKept() }  // kept completions would keep their retrier's records alive after the test
    let scheduler = ParityScheduler(progress)
    let recorder = ParityRecorder()
    let counter = AttemptCounter()
    let finished = Locked(false)
    let queue = DispatchQueue(label: "policy-parity")
    let condition = scenario.condition.map { RetryCondition($0) }
    let budget = scenario.budget?.make()
    let policy = scenario.policy(condition, budget: budget)
    let awaitsValue = style == .handleValue
    let operation: @Sendable (RetryAttempt, AttemptCompletion<String>) -> Void = { _, done in
        scenario.perform(counter.next(), done, progress)
    }
    let taskOperation: @Sendable (RetryAttempt) async throws -> String = { _ in
        try await scenario.perform(counter.next(), progress)
    }
    let onValue: @Sendable (String) -> Void = { value in
        recorder.append(.result("value \(value)"))
        progress.milestone()  // the pause: only its timer moves the run on
    }
    let ended: @Sendable (ParityEntry) -> Void = { entry in
        if !awaitsValue { recorder.append(entry) }
        finished.withLock { $0 = true }
    }
    let observer = recorder.observer(progress)
    var handle: (cancel: @Sendable () -> Void, isFinished: @Sendable () -> Bool)
    /// The task awaiting `handle.value`, for ``PolicyParityStyle/handleValue``: how to cancel it and what it got.
    var awaiter: (cancel: @Sendable () -> Void, entry: @Sendable () async -> ParityEntry)?
    if let delay = scenario.repeatDelay {
        let repeating = policy.repeating(withDelay: delay)
        let completion: @Sendable (any Error) -> Void = { error in ended(.result("error \(error)")) }
        let started =
            style == .callbackTask
            ? repeating.executeTask(
                on: queue, scheduler: scheduler, operation: taskOperation, observer: observer, onValue: onValue,
                completion: completion)
            : repeating.execute(
                on: queue, scheduler: scheduler, operation: operation, observer: observer, onValue: onValue,
                completion: completion)
        handle = (started.cancel, { started.isFinished })
        if awaitsValue {
            let task = Task { await parityValue(of: started) }  // a repetition has no value: it ends with an error
            awaiter = (
                { task.cancel() },
                {
                    guard case .failure(let error) = await task.value else { return .result("no error") }
                    return .result("error \(error)")
                }
            )
        }
    } else {
        let completion: @Sendable (Result<String, any Error>, RetrySummary) -> Void = { result, _ in
            ended(ParityEntry(result))
        }
        let started =
            style == .callbackTask
            ? policy.executeTask(
                on: queue, scheduler: scheduler, operation: taskOperation, observer: observer, completion: completion)
            : policy.execute(
                on: queue, scheduler: scheduler, operation: operation, observer: observer, completion: completion)
        handle = (started.cancel, { started.isFinished })
        if awaitsValue {
            let task = Task { await parityValue(of: started) }
            awaiter = ({ task.cancel() }, { ParityEntry(await task.value) })
        }
    }

    var waits: [Duration] = []
    var handled = 0
    let base = scheduler.base
    /// Runs the work that is due until `ready` holds, waiting for the next tick whenever it does not yet.
    func pump(until ready: () -> Bool) async {
        while true {
            let seen = progress.ticks
            base.advance()
            if ready() { return }
            await progress.waitForTick(after: seen)
        }
    }
    /// Moves time through the timer of the next milestone (or half of it); `false` if the run ended instead.
    func throughTimer(half: Bool) async -> Bool {
        await pump { progress.milestones > handled || finished.withLock { $0 } }
        guard progress.milestones > handled, let next = base.nextDeadline else { return false }
        handled += 1
        let wait = next - base.now
        waits.append(wait)
        base.advance(by: half ? wait / 2 : wait)
        return true
    }
    await pump { true }
    for command in scenario.script {
        switch command {
        case .idle(let duration):
            base.advance()
            #expect(
                base.nextDeadline.map { $0 <= base.now } ?? true,
                "\(style): no timer while the run waits for the condition")
            base.advance(by: duration)
        case .set(let value):
            condition?.value = value
            base.advance()
        case .finish:
            condition?.finish()
            base.advance()
        case .wait, .halfWait:
            if await !throughTimer(half: command == .halfWait) {
                Issue.record("\(style): the run does not wait on a timer")
            }
        case .restOfWait:
            guard let next = base.nextDeadline else {
                Issue.record("\(style): no timer is pending")
                break
            }
            waits.append(next - base.now)
            base.advance(by: next - base.now)
        case .hang:
            await pump { progress.milestones > handled }
            handled += 1
        case .toEnd:
            while await throughTimer(half: false) {}
        case .cancel:
            if let awaiter { awaiter.cancel() } else { handle.cancel() }
            await pump { handle.isFinished() }
        }
    }
    await pump { finished.withLock { $0 } }
    if let awaiter { recorder.append(await awaiter.entry()) }
    #expect(base.pendingCount == 0, "\(style): no timer or hop is left behind")
    #expect(condition.map { $0.observerCount == 0 } ?? true, "\(style): the run stopped observing the condition")
    return ParityRun(log: recorder.log, waits: waits, tokens: budget?.availableTokens)
}

/// What `handle.value` gives.
private func parityValue<Value: Sendable>(of handle: RetryHandle<Value>) async -> Result<Value, any Error> {
    do {
        return .success(try await handle.value)
    } catch {
        return .failure(error)
    }
}

/// The async style, on a `VirtualClock`. Time moves only in the driver's commands, each after the run has reached the
/// point the command is for.
private func runPolicyOnClock(_ scenario: PolicyParityScenario) async -> ParityRun {
    let progress = ParityProgress()
    defer { progress.releaseKept() }  // kept completions would keep their retrier's records alive after the test
    let clock = VirtualClock()
    let recorder = ParityRecorder()
    let counter = AttemptCounter()
    let condition = scenario.condition.map { RetryCondition($0) }
    let budget = scenario.budget?.make()
    let policy = scenario.policy(condition, budget: budget)
    let operation: @Sendable (RetryAttempt) async throws -> String = { _ in
        try await scenario.perform(counter.next(), progress)
    }
    let task = Task {
        defer { progress.close() }
        do {
            if let delay = scenario.repeatDelay {
                for try await value in policy.repeating(withDelay: delay).values(
                    clock: clock, operation, observer: recorder.observer(progress))
                {
                    recorder.append(.result("value \(value)"))
                    progress.milestone()  // the pause: only its timer moves the run on
                }
                recorder.append(.result("end of the values"))
            } else {
                let value = try await policy.execute(
                    clock: clock, operation: operation, observer: recorder.observer(progress))
                recorder.append(.result("value \(value)"))
            }
        } catch {
            recorder.append(.result("error \(error)"))
        }
    }

    var waits: [Duration] = []
    var handled = 0
    /// Moves time through the timer of the next milestone (or half of it); `false` if the run ended instead.
    func throughTimer(half: Bool) async -> Bool {
        guard await progress.waitForMilestone(after: handled) else { return false }
        handled += 1
        guard await progress.waitForSleeper(on: clock), let next = clock.nextDeadline else { return false }
        let wait = clock.now.duration(to: next)
        waits.append(wait)
        if half {
            await clock.advance(by: wait / 2)
        } else {
            await clock.advance(to: next)
        }
        return true
    }
    for command in scenario.script {
        switch command {
        case .idle(let duration):
            // The run has started (it observes the condition) and no timer is left: an abandoned trial's wait has
            // been cancelled.
            let idle = await cbWait {
                progress.isClosed || ((condition?.observerCount ?? 1) > 0 && clock.sleeperCount == 0)
            }
            #expect(idle, "async: no timer while the run waits for the condition")
            await clock.advance(by: duration)
        case .set(let value):
            condition?.value = value
        case .finish:
            condition?.finish()
        case .wait, .halfWait:
            if await !throughTimer(half: command == .halfWait) {
                Issue.record("async: the run does not wait on a timer")
            }
        case .restOfWait:
            guard await progress.waitForSleeper(on: clock), let next = clock.nextDeadline else {
                Issue.record("async: no timer is pending")
                break
            }
            waits.append(clock.now.duration(to: next))
            await clock.advance(to: next)
        case .hang:
            if await progress.waitForMilestone(after: handled) {
                handled += 1
            } else {
                Issue.record("async: no attempt hangs")
            }
        case .toEnd:
            while await throughTimer(half: false) {}
        case .cancel:
            task.cancel()
        }
    }
    await task.value
    #expect(clock.sleeperCount == 0, "async: no sleeper is left behind")
    #expect(condition.map { $0.observerCount == 0 } ?? true, "async: the run stopped observing the condition")
    return ParityRun(log: recorder.log, waits: waits, tokens: budget?.availableTokens)
}

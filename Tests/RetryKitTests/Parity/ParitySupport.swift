// Support for the parity tests: one scripted scenario, run through every style of RetryKit on virtual time, recorded
// as a normalized log that can be compared across styles and against the core.

import Dispatch
import RetryKit
import RetryKitTesting
import Testing

// MARK: - Styles and scenarios

/// The ways to run a retrier that the parity tests compare.
enum ParityStyle: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// The completion-handler `retry(on:scheduler:)` with a `{ attempt, done in … }` operation.
    case callback = "callback retry, done-style operation"
    /// The completion-handler `retry(on:scheduler:)` with an `async throws` operation.
    case callbackAsyncOperation = "callback retry, async operation"
    /// A completion-handler retrier whose result is awaited with `handle.value` (cancel: the awaiting task).
    case handleValue = "handle.value of a callback retrier"
    /// The async bridge `withRetry(…) { attempt, done in … }`.
    case withRetry = "withRetry bridge"
    /// The observed async `retry(…operation: { attempt in … }, observer:)`.
    case observedAsync = "observed async retry"
    /// The seed-compatible async `retry(maxAttempts:clock:operation:strategy:)`: no events, no time limits.
    case seedAsync = "seed-style async retry"
    /// `RetryPlan.execute(on:scheduler:)` with a `{ attempt, done in … }` operation (no condition).
    case policyCallback = "policy execute(on:), done-style operation"
    /// `RetryPlan.executeTask(on:scheduler:)` with an `async throws` operation (no condition).
    case policyCallbackTask = "policy executeTask(on:), async operation"
    /// `try await RetryPlan.execute(clock:)` (no condition).
    case policyAsync = "policy async execute(clock:)"

    var testDescription: String { rawValue }

    /// Every style but the seed-compatible one, which has no time limits.
    static let timed = allCases.filter { $0 != .seedAsync }
    /// The styles whose operation gets a completion handler, and so can call it twice.
    static let completionHandler: [ParityStyle] = [.callback, .handleValue, .withRetry, .policyCallback]

    /// Whether the style runs on the completion-handler runner (and so on a `VirtualScheduler`).
    var isCallback: Bool {
        switch self {
        case .callback, .callbackAsyncOperation, .handleValue, .policyCallback, .policyCallbackTask: return true
        case .withRetry, .observedAsync, .seedAsync, .policyAsync: return false
        }
    }

    /// Whether the operation gets an ``AttemptCompletion`` (and so can complete an attempt twice).
    var hasCompletionHandlerOperation: Bool {
        switch self {
        case .callback, .handleValue, .withRetry, .policyCallback: return true
        case .callbackAsyncOperation, .observedAsync, .seedAsync, .policyCallbackTask, .policyAsync: return false
        }
    }
}

/// One scripted retry scenario: a configuration, what each attempt does, and how the strategy answers.
struct ParityScenario: Sendable {
    /// What one attempt does.
    enum Step: Sendable, Equatable {
        /// Fails with `TestError(n)`, n being the attempt number.
        case fail
        /// Succeeds with `"v\(n)"`.
        case succeed
        /// Never completes on its own: only a timer, a cancel or (for a gated policy) the condition closing ends it.
        /// (The async form honours cancellation.)
        case hang
        /// Calls its completion twice with `TestError(n)`; the async form fails once.
        case failTwice
        /// Calls its completion twice with `"v\(n)"` and `"again"`; the async form succeeds once.
        case succeedTwice
        /// Hangs like ``hang``, then delivers `"late v\(n)"` when cancelled: from its cancel hook (too late, the
        /// attempt is over), or by returning it (the async form ignores the cancellation).
        case hangThenLateValue
        /// Fails with a `CancellationError` of its own (a cancelled child task, say), the retrier not being cancelled.
        case throwCancellation
    }

    /// When the scenario cancels the retrier.
    enum Cancel: Sendable, Equatable {
        /// Before the first attempt: `handle.cancel()` before time moves, or a task that is cancelled when it calls.
        case beforeStart
        /// Halfway through the wait of blocking point `n` (1-based: the n-th time only a timer can move the retrier
        /// on).
        case duringWait(Int)
        /// While the attempt of blocking point `n` hangs, without moving time.
        case duringAttempt(Int)
    }

    var maxAttempts: Int
    var totalTimeout: Duration?
    var attemptTimeout: Duration?
    /// Step `i` is what attempt `i + 1` does; attempts past the end fail.
    var steps: [Step]
    /// The strategy answers `.stop` to `TestError(stopOn)`, and backs off for every other error.
    var stopOn: Int?
    /// When to cancel, if at all.
    var cancel: Cancel?
    /// The seed of the jitter's generator. Every run gets a fresh strategy with a fresh generator seeded with it.
    var seed: UInt64 = 0x5EED_2024
    /// Back off with `.none` instead: every retry starts at once, without a timer.
    var immediateRetries = false
    /// The shared budget every run pays into (a fresh one per run, in the same state), if any.
    var budget: ParityBudget?
    /// Counts the strategy's answers (``decide(_:_:)``) over every run, if set.
    var strategyCalls: ParityStrategyCalls?

    /// The backoff of every run: seeded full-jitter exponential (a fresh generator each time it is called), or `.none`
    /// for ``immediateRetries``.
    func backoff<C: Clock>(_: C.Type = C.self) -> BackoffStrategy<C> where C.Duration == Duration {
        if immediateRetries { return .none }
        return .exponential(a: .seconds(1), b: 2).jitter(using: SeededRandomNumberGenerator(seed: seed))
    }

    /// The delays the core chooses for the first `count` retries of an identically seeded ``backoff(_:)``.
    func coreDelays(_ count: Int) -> [Duration] {
        asyncCoreDelays(backoff(ContinuousClock.self), count: count)
    }

    /// The policy of the policy styles: the scenario's strategy, limits and budget (no condition).
    func policy(_ backoff: BackoffStrategy<ContinuousClock>, budget: RetryBudget?) -> RetryPlan {
        var policy = RetryPlan.strategy { error in self.decide(error, backoff) }.giveUpAfter(maxAttempts: maxAttempts)
        if let totalTimeout { policy = policy.giveUpAfter(totalTimeout: totalTimeout) }
        if let attemptTimeout { policy = policy.attemptTimeout(attemptTimeout) }
        if let budget { policy = policy.budget(budget) }
        return policy
    }

    /// The strategy's answer to `error`.
    func decide<C>(_ error: any Error, _ backoff: BackoffStrategy<C>) -> RetryStrategy<C> {
        strategyCalls?.record()
        if let stopOn, (error as? TestError)?.id == stopOn { return .stop }
        return .backoff(backoff)
    }

    /// The styles that can run this scenario: the seed style has no time limits, and only an operation with a
    /// completion handler can complete an attempt twice.
    var styles: [ParityStyle] {
        let completesTwice = steps.contains(.failTwice) || steps.contains(.succeedTwice)
        return ParityStyle.allCases.filter { style in
            if style == .seedAsync, totalTimeout != nil || attemptTimeout != nil { return false }
            if completesTwice, !style.hasCompletionHandlerOperation { return false }
            return true
        }
    }

    /// Attempt `number` as a completion-handler operation.
    func perform(_ number: Int, _ done: AttemptCompletion<String>, _ progress: ParityProgress) {
        Step.of(number, in: steps).perform(number, done, progress)
    }

    /// Attempt `number` as an async operation.
    func perform(_ number: Int, _ progress: ParityProgress) async throws -> String {
        try await Step.of(number, in: steps).perform(number, progress)
    }
}

extension ParityScenario.Step {
    /// What attempt `number` does, step `number - 1` of `steps`: attempts past the end fail.
    static func of(_ number: Int, in steps: [Self]) -> Self {
        number <= steps.count ? steps[number - 1] : .fail
    }

    /// Carries the step out as attempt `number`, a completion-handler operation.
    func perform(_ number: Int, _ done: AttemptCompletion<String>, _ progress: ParityProgress) {
        switch self {
        case .fail:
            done(.failure(TestError(number)))
        case .succeed:
            done(.success("v\(number)"))
        case .hang:
            progress.keep(done)  // never calls done: a timer, a cancel or the condition ends it
            progress.milestone()
        case .hangThenLateValue:
            progress.keep(done)
            done.onCancel { done(.success("late v\(number)")) }  // too late: the attempt is over
            progress.milestone()
        case .failTwice:
            done(.failure(TestError(number)))
            done(.failure(TestError(number)))
        case .succeedTwice:
            done(.success("v\(number)"))
            done(.success("again"))
        case .throwCancellation:
            done(.failure(CancellationError()))
        }
    }

    /// Carries the step out as attempt `number`, an async operation.
    func perform(_ number: Int, _ progress: ParityProgress) async throws -> String {
        switch self {
        case .fail, .failTwice:
            throw TestError(number)
        case .succeed, .succeedTwice:
            return "v\(number)"
        case .hang:
            progress.milestone()
            try await Task.sleep(for: .seconds(600))  // real time, but cancelled at once (timeout, cancel, condition)
            throw CancellationError()
        case .hangThenLateValue:
            progress.milestone()
            try? await Task.sleep(for: .seconds(600))  // real time, but cancelled at once (timeout, cancel, condition)
            return "late v\(number)"  // ignores the cancellation
        case .throwCancellation:
            throw CancellationError()
        }
    }
}

/// Counts the calls of a scenario's strategy, from any thread.
final class ParityStrategyCalls: Sendable {
    private let count = Locked(0)

    func record() {
        count.withLock { $0 += 1 }
    }

    var value: Int { count.withLock { $0 } }
}

/// A shared ``RetryBudget`` as a run finds it: built with these settings, then drawn on by another retrier.
struct ParityBudget: Sendable {
    var capacity: Int
    var retryCost: Int
    var timeoutRetryCost: Int
    var successRefund = 1
    /// Retries another retrier sharing the budget has paid for (failing each time) before the run starts.
    var retriesByOthers = 0

    /// A fresh budget in the state the scenario describes: `retriesByOthers` retries of another callback retrier,
    /// whose attempts all fail, have been paid from it.
    func make() -> RetryBudget {
        let budget = RetryBudget(
            capacity: capacity, retryCost: retryCost, timeoutRetryCost: timeoutRetryCost, successRefund: successRefund)
        guard retriesByOthers > 0 else { return budget }
        let scheduler = VirtualScheduler()
        let other: RetryHandle<String> = retry(
            maxAttempts: retriesByOthers + 1, budget: budget, on: DispatchQueue(label: "parity-other"),
            scheduler: scheduler, operation: { attempt, done in done(.failure(TestError(-attempt.number))) },
            completion: { (_: Result<String, any Error>, _) in })
        scheduler.run()
        #expect(other.isFinished, "the other retrier ran on virtual time")
        return budget
    }
}

// MARK: - The normalized log

/// One line of a parity log: an event with everything it carries, or the final result.
enum ParityEntry: Hashable, Sendable, CustomStringConvertible {
    case started(RetryAttempt)
    case failed(RetryAttempt, error: String, next: RetryNextStep)
    case succeeded(RetryAttempt, value: String)
    case finished(RetrySummary, error: String?)
    case duplicate(RetryAttempt)
    /// What the caller finally got: `"value …"` or `"error …"`.
    case result(String)

    init(_ event: RetryEvent<String>) {
        switch event {
        case .attemptStarted(let attempt): self = .started(attempt)
        case .attemptFailed(let attempt, let error, let next): self = .failed(attempt, error: "\(error)", next: next)
        case .attemptSucceeded(let attempt, let value): self = .succeeded(attempt, value: value)
        case .finished(let summary, let error): self = .finished(summary, error: error.map { "\($0)" })
        case .duplicateCompletion(let attempt): self = .duplicate(attempt)
        }
    }

    init(_ result: Result<String, any Error>) {
        switch result {
        case .success(let value): self = .result("value \(value)")
        case .failure(let error): self = .result("error \(error)")
        }
    }

    /// Whether the seed-style API, which has no events, can report this entry too.
    var isVisibleWithoutEvents: Bool {
        switch self {
        case .started, .result: return true
        case .failed, .succeeded, .finished, .duplicate: return false
        }
    }

    var description: String {
        func at(_ attempt: RetryAttempt) -> String {
            "\(attempt.number)/\(attempt.maxAttempts) left \(attempt.retriesLeft) at \(attempt.elapsed)"
        }
        switch self {
        case .started(let attempt):
            return "started \(at(attempt))"
        case .failed(let attempt, let error, let next):
            let step: String
            switch next {
            case .retry(let delay): step = "retry after \(delay)"
            case .giveUp(let reason): step = "give up (\(reason))"
            case .recover: step = "recover"
            }
            return "failed \(at(attempt)) with \(error), \(step)"
        case .succeeded(let attempt, let value):
            return "succeeded \(at(attempt)) with \(value)"
        case .finished(let summary, let error):
            return "finished \(summary.reason) after \(summary.attempts) at \(summary.elapsed) with \(error ?? "nil")"
        case .duplicate(let attempt):
            return "duplicate \(at(attempt))"
        case .result(let result):
            return result
        }
    }
}

extension [ParityEntry] {
    /// The events of attempts 1, 2, … of a retrier (or of a policy's trial) with `maxAttempts`, one for each of
    /// `delays`: each fails with `TestError(k)`, `k` counted from `firstError`, and is retried after its delay; each
    /// starts when the waits before it are over.
    static func failedAndRetried(_ delays: [Duration], of maxAttempts: Int, firstError: Int = 1) -> Self {
        var events: Self = []
        var elapsed = Duration.zero
        for (index, delay) in delays.enumerated() {
            let started = attempt(index + 1, of: maxAttempts, at: elapsed)
            events += [
                .started(started),
                .failed(started, error: "TestError(\(firstError + index))", next: .retry(after: delay)),
            ]
            elapsed += delay
        }
        return events
    }

    /// The events of a first attempt (of a retrier or trial with `maxAttempts`) that times out after `timeout` and is
    /// retried after `delay`.
    static func timedOutAndRetried(after timeout: Duration, of maxAttempts: Int, retryAfter delay: Duration) -> Self {
        let first = attempt(1, of: maxAttempts, at: .zero)
        return [
            .started(first),
            .failed(
                first, error: "RetryError(attempt timed out after 1 attempt in \(timeout))", next: .retry(after: delay)),
        ]
    }

    /// The last lines of a run that succeeds with `value`: its `finished` event, then the value the caller gets.
    static func endSucceeded(_ value: String, attempts: Int, elapsed: Duration) -> Self {
        [
            .finished(RetrySummary(reason: .succeeded, attempts: attempts, elapsed: elapsed), error: nil),
            .result("value \(value)"),
        ]
    }

    /// The events of a repetition's attempt that succeeds at once with `value`, then the value delivered.
    static func delivering(_ value: String, at attempt: RetryAttempt) -> Self {
        [.started(attempt), .succeeded(attempt, value: value), .result("value \(value)")]
    }

    /// The last lines of a run whose attempt `last` succeeds at once with `"v\(n)"` (`n` its number): its events, the
    /// `finished` event, then the value the caller gets.
    static func succeeding(_ last: RetryAttempt) -> Self {
        let value = "v\(last.number)"
        return [.started(last), .succeeded(last, value: value)]
            + endSucceeded(value, attempts: last.number, elapsed: last.elapsed)
    }

    /// The last lines of a run that gives up with `error`: its `finished` event, then the error the caller gets.
    static func endFailed(
        _ reason: RetryError.Reason, attempts: Int, elapsed: Duration, error: String
    ) -> Self {
        [
            .finished(RetrySummary(reason: reason, attempts: attempts, elapsed: elapsed), error: error),
            .result("error \(error)"),
        ]
    }
}

/// Attempt `number` of a retrier (or trial) with `maxAttempts`, started at `elapsed`: as the parity tests expect it.
func attempt(_ number: Int, of maxAttempts: Int, at elapsed: Duration) -> RetryAttempt {
    RetryAttempt(number: number, maxAttempts: maxAttempts, elapsed: elapsed)
}

/// What one style did with one scenario.
struct ParityRun: Sendable, Equatable {
    /// The events in order, then the result (for the seed style: the attempts as its operation saw them, then the
    /// result).
    var log: [ParityEntry]
    /// The timers the retrier waited for, in order, as the scheduler or clock reported them when the driver moved time:
    /// backoff waits and attempt timeouts (a wait that was cancelled counts with its full length).
    var waits: [Duration]
    /// The tokens left in the scenario's budget after the run, if it has one.
    var tokens: Int?

    /// What the seed style can report of this run.
    var withoutEvents: ParityRun {
        ParityRun(log: log.filter(\.isVisibleWithoutEvents), waits: waits, tokens: tokens)
    }
}

/// Collects a log from any thread.
final class ParityRecorder: Sendable {
    private let entries = Locked<[ParityEntry]>([])

    func append(_ entry: ParityEntry) {
        entries.withLock { $0.append(entry) }
    }

    var log: [ParityEntry] { entries.withLock { $0 } }

    /// Records every event, and reports a blocking point to `progress` when the retrier is about to wait.
    func observer(_ progress: ParityProgress) -> @Sendable (RetryEvent<String>) -> Void {
        { event in
            self.append(ParityEntry(event))
            if case .attemptFailed(_, _, .retry(let delay)) = event, delay > .zero {
                progress.milestone()
            }
        }
    }
}

// MARK: - Knowing when to move time

/// What the driver of a run waits for, without sleeping: *milestones* (the retrier reached a point where only a timer
/// can move it on: a backoff wait, or an attempt that hangs), *ticks* (anything happened: a milestone, work handed to
/// the scheduler) and the end of the run.
final class ParityProgress: Sendable {
    private struct Counts {
        var milestones = 0
        var ticks = 0
        var closed = false
    }

    private struct State {
        var counts = Counts()
        var waiters: [(ready: @Sendable (Counts) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []
        /// Waiters for the end of the run that their task may cancel, by id.
        var closeWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var cancelledCloseWaiters: Set<Int> = []
        var nextCloseWaiter = 0
    }

    private let state = Locked(State())
    /// The completions of hanging attempts, kept uncalled (released, they would fail their attempts).
    private let kept = Locked<[AttemptCompletion<String>]>([])

    /// Keeps a hanging attempt's completion without calling it.
    func keep(_ done: AttemptCompletion<String>) {
        kept.withLock { $0.append(done) }
    }

    /// Lets go of the kept completions (after the run: released uncalled, they change nothing any more).
    func releaseKept() {
        let released = kept.withLock { kept in
            defer { kept = [] }
            return kept
        }
        withExtendedLifetime(released) {}  // released here, outside the lock
    }

    var milestones: Int { state.withLock { $0.counts.milestones } }
    /// Whether the run is over.
    var isClosed: Bool { state.withLock { $0.counts.closed } }
    var ticks: Int { state.withLock { $0.counts.ticks } }

    /// The retrier now waits for a timer.
    func milestone() {
        update {
            $0.milestones += 1
            $0.ticks += 1
        }
    }

    /// Something happened that the driver may have to act on.
    func tick() {
        update { $0.ticks += 1 }
    }

    /// The run is over.
    func close() {
        update {
            $0.closed = true
            $0.ticks += 1
        }
    }

    /// Suspends until something happened after the driver read ``ticks`` as `seen`.
    func waitForTick(after seen: Int) async {
        await wait { $0.ticks > seen }
    }

    /// Suspends until milestone `handled + 1` is reached (returns `true`) or the run is over (returns `false`).
    func waitForMilestone(after handled: Int) async -> Bool {
        await wait { $0.milestones > handled || $0.closed }
        return milestones > handled
    }

    /// Suspends until the run is over, or the calling task is cancelled.
    func waitForClose() async {
        let id: Int? = state.withLock { state in
            if state.counts.closed { return nil }
            state.nextCloseWaiter += 1
            return state.nextCloseWaiter
        }
        guard let id else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now: Bool = state.withLock { state in
                    if state.counts.closed || state.cancelledCloseWaiters.remove(id) != nil { return true }
                    state.closeWaiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let continuation: CheckedContinuation<Void, Never>? = state.withLock { state in
                guard let continuation = state.closeWaiters.removeValue(forKey: id) else {
                    state.cancelledCloseWaiters.insert(id)
                    return nil
                }
                return continuation
            }
            continuation?.resume()
        }
    }

    /// Suspends until `clock` has a sleeper (returns `true`) or the run is over (returns `false`).
    func waitForSleeper(on clock: VirtualClock) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await clock.waitForSleepers(1)
                return true
            }
            group.addTask {
                await self.waitForClose()
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first || clock.sleeperCount > 0
        }
    }

    private func wait(until ready: @escaping @Sendable (Counts) -> Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now: Bool = state.withLock { state in
                if ready(state.counts) { return true }
                state.waiters.append((ready, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func update(_ change: (inout Counts) -> Void) {
        let ready: [CheckedContinuation<Void, Never>] = state.withLock { state in
            change(&state.counts)
            let counts = state.counts
            var ready = state.waiters.filter { $0.ready(counts) }.map(\.continuation)
            state.waiters.removeAll { $0.ready(counts) }
            if counts.closed {
                ready += state.closeWaiters.values
                state.closeWaiters = [:]
            }
            return ready
        }
        for continuation in ready {
            continuation.resume()
        }
    }
}

/// A `VirtualScheduler` that ticks a ``ParityProgress`` whenever work is handed to it, so that a driver can wait for an
/// async operation's completion (which arrives from another thread) without polling.
final class ParityScheduler: RetryScheduler {
    let base = VirtualScheduler()
    let progress: ParityProgress

    init(_ progress: ParityProgress) {
        self.progress = progress
    }

    var now: Duration { base.now }

    func execute(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) {
        base.execute(on: queue, work)
        progress.tick()
    }

    func schedule(after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void)
        -> VirtualScheduler.Token
    {
        let token = base.schedule(after: delay, on: queue, work)
        progress.tick()
        return token
    }
}

// MARK: - Running a scenario in every style

/// Runs `scenario` through `style` on virtual time and returns its log.
func runParity(_ scenario: ParityScenario, _ style: ParityStyle) async -> ParityRun {
    style.isCallback ? await runOnScheduler(scenario, style) : await runOnClock(scenario, style)
}

/// Runs `scenario` through every style that can run it.
func runParityInEveryStyle(_ scenario: ParityScenario) async -> [(style: ParityStyle, run: ParityRun)] {
    var runs: [(style: ParityStyle, run: ParityRun)] = []
    for style in scenario.styles {
        runs.append((style, await runParity(scenario, style)))
    }
    return runs
}

/// The completion-handler styles, on a `VirtualScheduler`.
///
/// The driver runs the work that is due; when the retrier reports a milestone it moves time to the next timer (or
/// halfway, then cancels); otherwise it waits for the next tick, which an async operation's completion produces.
private func runOnScheduler(_ scenario: ParityScenario, _ style: ParityStyle) async -> ParityRun {
    let progress = ParityProgress()
    defer { progress.releaseKept() }  // kept completions would keep their retrier's records alive after the test
    let scheduler = ParityScheduler(progress)
    let recorder = ParityRecorder()
    let completion = Locked<(result: Result<String, any Error>, summary: RetrySummary)?>(nil)
    let queue = DispatchQueue(label: "parity")
    let backoff = scenario.backoff(ContinuousClock.self)
    let budget = scenario.budget?.make()

    let strategy: @Sendable (any Error) -> RetryStrategy<ContinuousClock> = { scenario.decide($0, backoff) }
    let completed: @Sendable (Result<String, any Error>, RetrySummary) -> Void = { result, summary in
        completion.withLock { $0 = (result, summary) }
    }
    let handle: RetryHandle<String>
    switch style {
    case .callbackAsyncOperation:
        handle = retryTask(
            maxAttempts: scenario.maxAttempts, totalTimeout: scenario.totalTimeout,
            attemptTimeout: scenario.attemptTimeout, budget: budget, on: queue, scheduler: scheduler,
            operation: { attempt in try await scenario.perform(attempt.number, progress) },
            strategy: strategy, observer: recorder.observer(progress), completion: completed)
    case .policyCallback:
        handle = scenario.policy(backoff, budget: budget).execute(
            on: queue, scheduler: scheduler,
            operation: { attempt, done in scenario.perform(attempt.number, done, progress) },
            observer: recorder.observer(progress), completion: completed)
    case .policyCallbackTask:
        handle = scenario.policy(backoff, budget: budget).executeTask(
            on: queue, scheduler: scheduler,
            operation: { attempt in try await scenario.perform(attempt.number, progress) },
            observer: recorder.observer(progress), completion: completed)
    default:
        handle = retry(
            maxAttempts: scenario.maxAttempts, totalTimeout: scenario.totalTimeout,
            attemptTimeout: scenario.attemptTimeout, budget: budget, on: queue, scheduler: scheduler,
            operation: { attempt, done in scenario.perform(attempt.number, done, progress) },
            strategy: strategy, observer: recorder.observer(progress), completion: completed)
    }
    var awaiter: Task<String, any Error>?
    if style == .handleValue {
        awaiter = Task { try await handle.value }
    }
    let cancelling = awaiter
    /// Cancels (through the handle, or by cancelling the awaiting task) and waits until the retrier knows.
    func cancel() async {
        var seen = progress.ticks
        if let cancelling { cancelling.cancel() } else { handle.cancel() }
        while !handle.isFinished {
            await progress.waitForTick(after: seen)
            seen = progress.ticks
        }
    }
    if scenario.cancel == .beforeStart {
        await cancel()
    }

    var waits: [Duration] = []
    var handled = 0
    while true {
        let seen = progress.ticks
        scheduler.base.advance()
        if completion.withLock({ $0 != nil }) { break }
        if progress.milestones > handled {
            handled += 1
            if scenario.cancel == .duringAttempt(handled) {
                await cancel()
                continue
            }
            guard let next = scheduler.base.nextDeadline else {
                Issue.record("\(style): the retrier waits, but no timer is pending")
                break
            }
            let wait = next - scheduler.now
            waits.append(wait)
            if scenario.cancel == .duringWait(handled) {
                scheduler.base.advance(by: wait / 2)
                await cancel()
            } else {
                scheduler.base.advance(by: wait)
            }
            continue
        }
        await progress.waitForTick(after: seen)
    }

    var log = recorder.log
    guard let (result, summary) = completion.withLock({ $0 }) else {
        return ParityRun(log: log, waits: waits, tokens: budget?.availableTokens)
    }
    if case .finished(let finished, _)? = log.last {
        #expect(summary == finished, "\(style): the completion's summary is the one of the finished event")
    }
    if let awaiter {
        log.append(ParityEntry(await awaiter.result))
    } else {
        log.append(ParityEntry(result))
    }
    #expect(scheduler.base.pendingCount == 0, "\(style): no timer or hop is left behind")
    return ParityRun(log: log, waits: waits, tokens: budget?.availableTokens)
}

/// The async styles, on a `VirtualClock`.
///
/// The driver waits for a milestone, then for the retrier's sleeper, and moves time to its deadline (or halfway, then
/// cancels the task). Time never moves while an attempt runs, so a timeout racing an attempt that completes at once
/// can never fire early.
private func runOnClock(_ scenario: ParityScenario, _ style: ParityStyle) async -> ParityRun {
    let progress = ParityProgress()
    defer { progress.releaseKept() }  // kept completions would keep their retrier's records alive after the test
    let clock = VirtualClock()
    let recorder = ParityRecorder()
    let budget = scenario.budget?.make()
    let task = Task { () -> Result<String, any Error> in
        defer { progress.close() }
        if scenario.cancel == .beforeStart {
            withUnsafeCurrentTask { $0?.cancel() }
        }
        let backoff = scenario.backoff(VirtualClock.self)
        do {
            if style == .withRetry {
                return .success(
                    try await withRetry(
                        maxAttempts: scenario.maxAttempts, totalTimeout: scenario.totalTimeout,
                        attemptTimeout: scenario.attemptTimeout, budget: budget, clock: clock,
                        operation: { attempt, done in scenario.perform(attempt.number, done, progress) },
                        strategy: { scenario.decide($0, backoff) }, observer: recorder.observer(progress)))
            }
            if style == .observedAsync {
                return .success(
                    try await retry(
                        maxAttempts: scenario.maxAttempts, totalTimeout: scenario.totalTimeout,
                        attemptTimeout: scenario.attemptTimeout, budget: budget, clock: clock,
                        operation: { attempt in try await scenario.perform(attempt.number, progress) },
                        strategy: { scenario.decide($0, backoff) }, observer: recorder.observer(progress)))
            }
            if style == .policyAsync {
                return .success(
                    try await scenario.policy(scenario.backoff(ContinuousClock.self), budget: budget).execute(
                        clock: clock, operation: { attempt in try await scenario.perform(attempt.number, progress) },
                        observer: recorder.observer(progress)))
            }
            // The seed style: the operation records the attempts it sees, the strategy reports the waits (there is no
            // deadline, so a backoff always waits).
            let attempts = Locked(0)
            return .success(
                try await retry(maxAttempts: scenario.maxAttempts, budget: budget, clock: clock) {
                    () async throws -> String in
                    let number = attempts.withLock { count -> Int in
                        count += 1
                        return count
                    }
                    let elapsed = VirtualClock.Instant.zero.duration(to: clock.now)
                    recorder.append(
                        .started(RetryAttempt(number: number, maxAttempts: scenario.maxAttempts, elapsed: elapsed)))
                    return try await scenario.perform(number, progress)
                } strategy: { (error: any Error) in
                    let answer = scenario.decide(error, backoff)
                    if case .backoff = answer, !scenario.immediateRetries { progress.milestone() }
                    return answer
                })
        } catch {
            return .failure(error)
        }
    }

    var waits: [Duration] = []
    var handled = 0
    while await progress.waitForMilestone(after: handled) {
        handled += 1
        if scenario.cancel == .duringAttempt(handled) {
            task.cancel()
            continue
        }
        // The seed style reports a wait when its strategy backs off, before a budget may refuse the retry: then the
        // run ends instead of sleeping.
        guard await progress.waitForSleeper(on: clock) else { continue }
        guard let next = clock.nextDeadline else {
            Issue.record("\(style): the retrier waits, but no sleeper is pending")
            task.cancel()
            break
        }
        let wait = clock.now.duration(to: next)
        waits.append(wait)
        if scenario.cancel == .duringWait(handled) {
            await clock.advance(by: wait / 2)
            task.cancel()
        } else {
            await clock.advance(to: next)
        }
    }
    let result = await task.value
    #expect(clock.sleeperCount == 0, "\(style): no sleeper is left behind")
    return ParityRun(log: recorder.log + [ParityEntry(result)], waits: waits, tokens: budget?.availableTokens)
}

// MARK: - Checking

/// Checks that every one of `styles` rejects `scenario` as an invalid configuration saying `problem`: no attempt, no
/// wait, a `finished` event with the `RetryError`, and the same error for the caller.
func expectInvalidConfiguration(
    _ scenario: ParityScenario, problem: String, styles: [ParityStyle],
    sourceLocation: SourceLocation = #_sourceLocation
) async {
    let error = "RetryError(invalid retry configuration: \(problem) after 0 attempts)"
    let expected = ParityRun(
        log: .endFailed(.invalidConfiguration, attempts: 0, elapsed: .zero, error: error), waits: [])
    await expectParity(scenario, expected: expected, styles: styles, sourceLocation: sourceLocation)
}

/// Checks that every style's run equals the first style's (the reference), and that the reference is `expected`,
/// which the tests build from the core's delays.
///
/// `knownIssues` names the styles whose run is known to differ from the reference, with the divergence: their exact
/// comparison is expected to fail (`withKnownIssue`), and what still matches (the waits, the budget's tokens, the
/// number of log lines) is checked as usual.
func expectParity(
    _ scenario: ParityScenario, expected: ParityRun, styles: [ParityStyle],
    knownIssues: [ParityStyle: String] = [:],
    sourceLocation: SourceLocation = #_sourceLocation
) async {
    let runs = await runParityInEveryStyle(scenario)
    #expect(runs.map(\.style) == styles, "the styles that ran", sourceLocation: sourceLocation)
    guard let reference = runs.first?.run else { return }
    #expect(reference == expected, "the reference run follows the core", sourceLocation: sourceLocation)
    for (style, run) in runs.dropFirst() {
        let expectedRun = style == .seedAsync ? reference.withoutEvents : reference
        if let issue = knownIssues[style] {
            withKnownIssue(Comment(rawValue: "\(style): \(issue)"), sourceLocation: sourceLocation) {
                #expect(run == expectedRun, "\(style)", sourceLocation: sourceLocation)
            }
            #expect(run.waits == expectedRun.waits, "\(style)", sourceLocation: sourceLocation)
            #expect(run.tokens == expectedRun.tokens, "\(style)", sourceLocation: sourceLocation)
            #expect(run.log.count == expectedRun.log.count, "\(style)", sourceLocation: sourceLocation)
        } else {
            #expect(run.log == expectedRun.log, "\(style)", sourceLocation: sourceLocation)
            #expect(run.waits == expectedRun.waits, "\(style)", sourceLocation: sourceLocation)
            #expect(run.tokens == expectedRun.tokens, "\(style)", sourceLocation: sourceLocation)
        }
    }
}

// The fixed workloads of the issue-12 figures, each beside its baseline: measured under callgrind by
// `instructions.sh` (through `instr-workloads`) and asserted by `alloc-check` (allocation counts per iteration).
//
// Every workload runs `iterations` iterations one after another and blocks until the last has finished; it reports
// the operation calls and successes it saw, so that a measurement can check that the expected work was done. Every
// failure is the same pre-boxed error, so that no row pays for boxing a new error per failure.

import Dispatch
import RetryKit
import SeedStyleRetry

/// The failure every flaky operation reports.
struct Flaky: Error {}

/// Pre-boxed: no failure allocates an error box, in any workload.
let flaky: any Error = Flaky()

/// What a workload did: operation calls and successful iterations.
public struct WorkloadResult: Sendable, Equatable {
    /// Calls of the operation, over all iterations.
    public var calls = 0
    /// Iterations that ended with a success.
    public var successes = 0

    /// An empty tally.
    public init() {}
}

/// One workload: a RetryKit path or its hand-written baseline.
public enum Workload: String, CaseIterable, Sendable {
    /// Callback runner (`retry(…, on: queue, …)`), 3 attempts, fails twice then succeeds, zero delay, the operation
    /// calling back before it returns; retriers chained on one serial queue.
    case callbackRetryKit = "callback-retrykit"
    /// Baseline of `callbackRetryKit`: the hand-written recursive `requestWithRetry` (a `queue.async` per attempt).
    case callbackHand = "callback-hand"
    /// Callback runner whose first attempt succeeds: the fixed cost of a retrier.
    case callbackRetryKitOnce = "callback-retrykit-once"
    /// `withRetry` around a completion-handler operation that calls back before it returns.
    case withRetryNow = "withretry"
    /// Baseline of `withRetryNow`: a bare `withCheckedThrowingContinuation` around the same operation.
    case continuationNow = "continuation"
    /// Async `retry` (the seed-compatible overload) whose first attempt succeeds.
    case asyncSuccess = "async-success"
    /// Baseline of `asyncSuccess`: the operation called directly, once.
    case directSuccess = "direct-success"
    /// Async `retry`, default strategy (`.backoff(.none)`), fails twice then succeeds.
    case asyncFailTwice = "async-fail-twice"
    /// Baseline of `asyncFailTwice`: the seed library's documented loop (`SeedStyleRetry`), same operation.
    case seedFailTwice = "seed-fail-twice"
    /// A `RetryPlan` (3 attempts, zero delay) run by `execute(on:)`, the operation of `callbackRetryKit`.
    case callbackPlan = "callback-plan"
    /// `callbackPlan` with a `RetryRecovery` it never needs (the failures are not ones it recognises): what a
    /// recovery costs a retrier that does not use it.
    case callbackRecovering = "callback-recovering"

    /// Operation calls per iteration.
    public var callsPerIteration: Int {
        switch self {
        case .callbackRetryKit, .callbackHand, .asyncFailTwice, .seedFailTwice, .callbackPlan, .callbackRecovering: 3
        case .callbackRetryKitOnce, .withRetryNow, .continuationNow, .asyncSuccess, .directSuccess: 1
        }
    }

    /// What `run(iterations:)` must report.
    public func expected(iterations: Int) -> WorkloadResult {
        var result = WorkloadResult()
        result.calls = iterations * callsPerIteration
        result.successes = iterations
        return result
    }

    /// Runs `iterations` iterations one after another; returns when the last has finished.
    public func run(iterations: Int) -> WorkloadResult {
        guard iterations > 0 else { return WorkloadResult() }
        switch self {
        case .callbackRetryKit: return runCallback(iterations, retryKit: true, failTwiceNow)
        case .callbackHand: return runCallback(iterations, retryKit: false, failTwiceNow)
        case .callbackRetryKitOnce: return runCallback(iterations, retryKit: true, succeedNow)
        case .withRetryNow: return runAsync { await bridgeLoop(iterations, retryKit: true) }
        case .continuationNow: return runAsync { await bridgeLoop(iterations, retryKit: false) }
        case .asyncSuccess: return runAsync { await asyncLoop(iterations, succeedAt: 1, style: .retryKit) }
        case .directSuccess: return runAsync { await asyncLoop(iterations, succeedAt: 1, style: .direct) }
        case .asyncFailTwice: return runAsync { await asyncLoop(iterations, succeedAt: 3, style: .retryKit) }
        case .seedFailTwice: return runAsync { await asyncLoop(iterations, succeedAt: 3, style: .seed) }
        case .callbackPlan: return runPlanChain(iterations, recovering: false)
        case .callbackRecovering: return runPlanChain(iterations, recovering: true)
        }
    }
}

// MARK: - Callback runner against the hand-written recursion

/// The one serial queue of the callback workloads.
let callbackQueue = DispatchQueue(label: "workloads.callback")

/// Touched only on `callbackQueue` (serially); read after the chain's last completion was signalled.
nonisolated(unsafe) var callbackTally = WorkloadResult()

/// One attempt of a completion-handler API: `(attempt number, callback)`.
typealias LegacyOperation = @Sendable (Int, @escaping @Sendable (Result<Int, any Error>) -> Void) -> Void

/// Fails attempts 1 and 2, succeeds on attempt 3, calling back before it returns.
let failTwiceNow: LegacyOperation = { number, callback in
    callbackTally.calls &+= 1
    if number < 3 { callback(.failure(flaky)) } else { callback(.success(number)) }
}

/// Succeeds at once, calling back before it returns.
let succeedNow: LegacyOperation = { number, callback in
    callbackTally.calls &+= 1
    callback(.success(number))
}

/// Fails attempts 1 and 2, succeeds on attempt 3, calling back later on the queue (an API that calls back on the
/// caller's queue).
let failTwiceLater: LegacyOperation = { number, callback in
    callbackTally.calls &+= 1
    callbackQueue.async {
        if number < 3 { callback(.failure(flaky)) } else { callback(.success(number)) }
    }
}

/// The completion-handler operation of a callback chain (``runCallbackChain(_:retryKit:_:)``).
public enum CallbackOperation: Sendable {
    /// Fails attempts 1 and 2, succeeds on attempt 3, calling back before it returns.
    case failTwiceNow
    /// Succeeds at once, calling back before it returns.
    case succeedNow
    /// Fails attempts 1 and 2, succeeds on attempt 3, calling back later on the chain's queue.
    case failTwiceLater

    var body: LegacyOperation {
        switch self {
        case .failTwiceNow: Workloads.failTwiceNow
        case .succeedNow: Workloads.succeedNow
        case .failTwiceLater: Workloads.failTwiceLater
        }
    }
}

/// `iterations` retriers around `operation`, each started from the previous one's completion on one serial queue:
/// RetryKit's callback runner (3 attempts, zero delay) or the hand-written recursion. Returns when the last has
/// finished. The callback workloads run it, and so do the callback rows of the `Runners` benchmarks.
public func runCallbackChain(_ iterations: Int, retryKit: Bool, _ operation: CallbackOperation) -> WorkloadResult {
    guard iterations > 0 else { return WorkloadResult() }
    return runCallback(iterations, retryKit: retryKit, operation.body)
}

/// What both chains do with a retrier's result.
@inline(never)
func consume(_ result: Result<Int, any Error>) {
    if case .success = result { callbackTally.successes &+= 1 }
}

/// The hand-written recursion: every attempt dispatched with `queue.async`; the operation's callback recurses or
/// completes.
func requestWithRetry(
    attempt: Int, maxAttempts: Int, operation: @escaping LegacyOperation,
    completion: @escaping @Sendable (Result<Int, any Error>) -> Void
) {
    callbackQueue.async {
        operation(attempt) { result in
            if case .failure = result, attempt < maxAttempts {
                requestWithRetry(
                    attempt: attempt + 1, maxAttempts: maxAttempts, operation: operation, completion: completion)
            } else {
                completion(result)
            }
        }
    }
}

/// `remaining` hand-written retriers, each started from the previous one's completion.
func handChain(_ remaining: Int, _ operation: @escaping LegacyOperation, _ finished: DispatchSemaphore) {
    requestWithRetry(attempt: 1, maxAttempts: 3, operation: operation) { result in
        consume(result)
        if remaining > 1 { handChain(remaining - 1, operation, finished) } else { finished.signal() }
    }
}

/// `remaining` RetryKit retriers (3 attempts, default strategy: zero delay), each started from the previous one's
/// completion.
func retryKitChain(_ remaining: Int, _ operation: @escaping LegacyOperation, _ finished: DispatchSemaphore) {
    retry(maxAttempts: 3, on: callbackQueue) { (attempt: RetryAttempt, done: AttemptCompletion<Int>) in
        operation(attempt.number) { result in done(result) }
    } completion: { result, _ in
        consume(result)
        if remaining > 1 { retryKitChain(remaining - 1, operation, finished) } else { finished.signal() }
    }
}

func runCallback(_ iterations: Int, retryKit: Bool, _ operation: @escaping LegacyOperation) -> WorkloadResult {
    let finished = DispatchSemaphore(value: 0)
    callbackQueue.sync { callbackTally = WorkloadResult() }
    if retryKit {
        retryKitChain(iterations, operation, finished)
    } else {
        handChain(iterations, operation, finished)
    }
    finished.wait()
    return callbackQueue.sync { callbackTally }
}

/// The plan of the plan workloads: 3 attempts, zero delay.
let chainPlan = RetryPlan.constantDelay(.zero).giveUpAfter(maxAttempts: 3)

/// A recovery that recognises no failure of the workloads: it only gives its credential to every attempt.
let unusedRecovery = RetryRecovery<Int>(
    credential: 7, when: { _ in false }, refresh: { old, completion in completion(.success(old ?? 0)) })

/// `remaining` runs of `chainPlan` (with `unusedRecovery` when `recovering`), each started from the previous one's
/// completion, the operation failing twice then succeeding before it returns.
func planChain(_ remaining: Int, recovering: Bool, _ finished: DispatchSemaphore) {
    let completion: @Sendable (Result<Int, any Error>, RetrySummary) -> Void = { result, _ in
        consume(result)
        if remaining > 1 { planChain(remaining - 1, recovering: recovering, finished) } else { finished.signal() }
    }
    if recovering {
        chainPlan.recovering(with: unusedRecovery).execute(on: callbackQueue) {
            (_: Int, attempt: RetryAttempt, done: AttemptCompletion<Int>) in
            failTwiceNow(attempt.number) { result in done(result) }
        } completion: { result, summary in
            completion(result, summary)
        }
    } else {
        chainPlan.execute(on: callbackQueue) { (attempt: RetryAttempt, done: AttemptCompletion<Int>) in
            failTwiceNow(attempt.number) { result in done(result) }
        } completion: { result, summary in
            completion(result, summary)
        }
    }
}

func runPlanChain(_ iterations: Int, recovering: Bool) -> WorkloadResult {
    let finished = DispatchSemaphore(value: 0)
    callbackQueue.sync { callbackTally = WorkloadResult() }
    planChain(iterations, recovering: recovering, finished)
    finished.wait()
    return callbackQueue.sync { callbackTally }
}

// MARK: - Async workloads

/// Carries a task's result to the thread waiting for it.
final class ResultBox: @unchecked Sendable {
    var value = WorkloadResult()
}

/// Runs `body` in a detached task and blocks until it has finished.
func runAsync(_ body: @escaping @Sendable () async -> WorkloadResult) -> WorkloadResult {
    let box = ResultBox()
    let finished = DispatchSemaphore(value: 0)
    Task.detached {
        box.value = await body()
        finished.signal()
    }
    finished.wait()
    return box.value
}

/// An async operation that fails until its `succeedAt`-th call. Not inlined, like an operation from another module.
@inline(never)
func asyncOperation(_ calls: inout Int, succeedAt: Int) async throws -> Int {
    calls += 1
    if calls < succeedAt { throw flaky }
    return calls
}

/// Who retries the async operation.
enum AsyncStyle {
    case retryKit, direct, seed
}

func asyncLoop(_ iterations: Int, succeedAt: Int, style: AsyncStyle) async -> WorkloadResult {
    var tally = WorkloadResult()
    for _ in 0..<iterations {
        var calls = 0
        do {
            let value: Int
            switch style {
            case .retryKit: value = try await retry { try await asyncOperation(&calls, succeedAt: succeedAt) }
            case .direct: value = try await asyncOperation(&calls, succeedAt: succeedAt)
            case .seed: value = try await seedStyleRetry { try await asyncOperation(&calls, succeedAt: succeedAt) }
            }
            if value == succeedAt { tally.successes += 1 }
        } catch {}
        tally.calls += calls
    }
    return tally
}

/// Calls of `legacyLoadNow`; touched by one task at a time.
nonisolated(unsafe) var legacyCalls = 0

/// A completion-handler operation that succeeds, calling back before it returns.
@inline(never)
func legacyLoadNow(_ callback: @escaping @Sendable (Result<Int, any Error>) -> Void) {
    legacyCalls &+= 1
    callback(.success(1))
}

func bridgeLoop(_ iterations: Int, retryKit: Bool) async -> WorkloadResult {
    legacyCalls = 0
    var tally = WorkloadResult()
    for _ in 0..<iterations {
        do {
            let value: Int
            if retryKit {
                value = try await withRetry { (_: RetryAttempt, done: AttemptCompletion<Int>) in
                    legacyLoadNow { result in done(result) }
                }
            } else {
                value = try await withCheckedThrowingContinuation {
                    (continuation: CheckedContinuation<Int, any Error>) in
                    legacyLoadNow { result in continuation.resume(with: result) }
                }
            }
            if value == 1 { tally.successes += 1 }
        } catch {}
    }
    tally.calls = legacyCalls
    return tally
}

import Dispatch
import PropertyTesting
import RetryKit
import RetryKitTesting
import Testing

/// The same random retriers through every style: the callback runner on a `VirtualScheduler`, the async runners
/// (`retry`, the seed-compatible `retry`, `withRetry`) and policies on a `VirtualClock`. Properties: no trap, exactly one
/// completion, attempts never exceed `maxAttempts`, every wait lies in `[0, limit]` and under its cap.
@Suite("Properties: every style", .timeLimit(.minutes(3)))
struct RunnerProperties {
    /// Edge cases every style checks first: each extreme `Duration` as both timeouts and as a Retry-After answer.
    static let edges: [RetrierCase] =
        PropertyRandom.durationEdges.flatMap { d in
            [
                RetrierCase(
                    maxAttempts: 3, totalTimeout: d, attemptTimeout: d, strategy: .retryAfter(d),
                    script: [.fail, .hang]),
                RetrierCase(
                    maxAttempts: 2, totalTimeout: nil, attemptTimeout: d, strategy: .retryAfter(d),
                    script: [.late(.seconds(1), succeed: false)]),
            ]
        }
        + PropertyRandom.intEdges.map { n in
            RetrierCase(
                maxAttempts: n, totalTimeout: nil, attemptTimeout: nil,
                strategy: .backoff(BackoffCase(strategy: .none, description: ".none", cap: .zero)),
                script: [.fail, .fail, .fail])
        }

    @Test("callback retry on a VirtualScheduler, and its handle's async value")
    func callback() async {
        await checkProperty("callback retry", edgeCases: Self.edges, generate: RetrierCase.generate) { testCase in
            let scheduler = VirtualScheduler()
            let queue = DispatchQueue(label: "property")
            let events = AsyncLog<RetryEvent<Int>>()
            let completions = AsyncLog<RetrySummary>()
            let results = AsyncLog<Result<Int, any Error>>()
            let handle = retry(
                maxAttempts: testCase.maxAttempts, totalTimeout: testCase.totalTimeout,
                attemptTimeout: testCase.attemptTimeout, on: queue, scheduler: scheduler,
                operation: scriptedCallbackOperation(testCase, scheduler: scheduler, queue: queue),
                strategy: { error in
                    testCase.strategy.answer(afterAttempt: failedAttempt(of: error) ?? 0, on: ContinuousClock.self)
                },
                observer: { events.append($0) },
                completion: { result, summary in
                    completions.append(summary)
                    results.append(result)
                })
            scheduler.run()
            var found = eventProblems(events.values, for: testCase)
            if completions.values.count != 1 { found.append("\(completions.values.count) completions") }
            // The async bridge of the handle sees the same outcome.
            let bridged: Int? = try? await handle.value
            if let result = results.values.first, (try? result.get()) != bridged {
                found.append("handle.value \(bridged.map(String.init) ?? "threw"), completion \(result)")
            }
            if let total = testCase.totalTimeout, total >= .zero, let summary = completions.values.first,
                summary.elapsed > propertyClamp(total)
            {
                found.append("finished at \(exact(summary.elapsed)), after the total timeout")
            }
            return found
        }
    }

    @Test("async retry on a VirtualClock")
    func asyncRetry() async {
        await checkProperty("async retry", edgeCases: Self.edges, generate: RetrierCase.generate) { testCase in
            let clock = VirtualClock()
            let events = AsyncLog<RetryEvent<Int>>()
            let task = Task {
                try await retry(
                    maxAttempts: testCase.maxAttempts, totalTimeout: testCase.totalTimeout,
                    attemptTimeout: testCase.attemptTimeout, tolerance: testCase.tolerance, clock: clock,
                    operation: scriptedAsyncOperation(testCase, clock: clock),
                    strategy: { error in testCase.strategy.answer(afterAttempt: failedAttempt(of: error) ?? 0) },
                    observer: { events.append($0) })
            }
            _ = try? await clock.run(until: task)
            return eventProblems(events.values, for: testCase)
        }
    }

    @Test("withRetry on a VirtualClock")
    func withRetryBridge() async {
        await checkProperty("withRetry", edgeCases: Self.edges, generate: RetrierCase.generate) { testCase in
            let clock = VirtualClock()
            let events = AsyncLog<RetryEvent<Int>>()
            let operation = scriptedAsyncOperation(testCase, clock: clock)
            let task = Task {
                try await withRetry(
                    maxAttempts: testCase.maxAttempts, totalTimeout: testCase.totalTimeout,
                    attemptTimeout: testCase.attemptTimeout, tolerance: testCase.tolerance, clock: clock,
                    operation: { (attempt, done: AttemptCompletion<Int>) in
                        let work = Task {
                            do { done(.success(try await operation(attempt))) } catch { done(.failure(error)) }
                        }
                        done.onCancel { work.cancel() }
                    },
                    strategy: { error in testCase.strategy.answer(afterAttempt: failedAttempt(of: error) ?? 0) },
                    observer: { events.append($0) })
            }
            _ = try? await clock.run(until: task)
            return eventProblems(events.values, for: testCase)
        }
    }

    @Test("seed-compatible retry on a VirtualClock: attempts and waits, with any tolerance")
    func seedRetry() async {
        await checkProperty("seed-compatible retry", edgeCases: Self.edges, generate: RetrierCase.generate) {
            testCase in
            let clock = RecordingClock()
            let started = AsyncCounter()
            let task = Task {
                try await retry(maxAttempts: testCase.maxAttempts, tolerance: testCase.tolerance, clock: clock) {
                    () async throws(ScriptedFailure) -> Int in
                    let number = started.increment()
                    switch testCase.script(for: number) {
                    case .succeed, .late(_, succeed: true): return number
                    case .fail, .hang, .late: throw ScriptedFailure(attempt: number)
                    }
                } strategy: { error in
                    testCase.strategy.answer(afterAttempt: error.attempt)
                }
            }
            _ = try? await clock.base.run(until: task)
            var found = clock.sleeps.values.enumerated().flatMap { index, wait in
                testCase.strategy.problems(with: wait, context: "wait \(index + 1)")
            }
            if started.value > Swift.max(testCase.maxAttempts, 0) {
                found.append("\(started.value) attempts > maxAttempts")
            }
            if testCase.maxAttempts < 1, started.value != 0 { found.append("an invalid configuration ran") }
            return found
        }
    }

    @Test("RetryPlan: every factory and modifier parameter, run from async code and from callbacks")
    func policies() async {
        await checkProperty("policies", generate: PolicyCase.generate) { policyCase in
            var found: [String] = []
            let testCase = policyCase.retrier
            // Callback style, on a VirtualScheduler.
            let scheduler = VirtualScheduler()
            let queue = DispatchQueue(label: "property")
            let events = AsyncLog<RetryEvent<Int>>()
            let completions = AsyncLog<RetrySummary>()
            policyCase.policy.execute(
                on: queue, scheduler: scheduler,
                operation: scriptedCallbackOperation(testCase, scheduler: scheduler, queue: queue),
                observer: { events.append($0) }, completion: { _, summary in completions.append(summary) })
            scheduler.run()
            found += eventProblems(events.values, for: testCase).map { "callback: \($0)" }
            if completions.values.count != 1 { found.append("callback: \(completions.values.count) completions") }
            // Async style, on a VirtualClock.
            let clock = VirtualClock()
            let asyncEvents = AsyncLog<RetryEvent<Int>>()
            let task = Task {
                try await policyCase.policy.execute(
                    tolerance: testCase.tolerance, clock: clock,
                    operation: scriptedAsyncOperation(testCase, clock: clock),
                    observer: { asyncEvents.append($0) })
            }
            _ = try? await clock.run(until: task)
            found += eventProblems(asyncEvents.values, for: testCase).map { "async: \($0)" }
            return found
        }
    }

    @Test("repeating(withDelay:) pauses exactly the clamped delay between values")
    func repeating() async {
        await checkProperty(
            "repeating", edgeCases: PropertyRandom.durationEdges,
            generate: { random in random.duration() }
        ) { delay in
            let clock = RecordingClock()
            let poller = RetryPlan.noDelay.giveUpAfter(maxAttempts: 2).repeating(withDelay: delay)
            var found: [String] = []
            if poller.delay != propertyClamp(delay) {
                found.append("delay \(exact(poller.delay)), not the clamped delay")
            }
            let task = Task {
                var values: [Int] = []
                for try await value in poller.values(clock: clock, { attempt in attempt.number }) {
                    values.append(value)
                    if values.count == 3 { break }
                }
                return values
            }
            _ = try? await clock.base.run(until: task)
            let pauses = clock.sleeps.values
            let values = (try? await task.value) ?? []
            if values != [1, 1, 1] { found.append("values \(values)") }
            // A zero pause may or may not sleep, but never waits.
            let expected = [propertyClamp(delay), propertyClamp(delay)]
            if propertyClamp(delay) == .zero, pauses.allSatisfy({ $0 == .zero }) { return found }
            if pauses != expected { found.append("pauses \(pauses.map(exact)), expected \(expected.map(exact))") }
            return found
        }
    }
}

extension RunnerProperties {
    @Test("repeating(withDelay:) from callbacks arms each pause at the clamped delay")
    func repeatingCallback() {
        checkProperty(
            "repeating, callbacks", edgeCases: PropertyRandom.durationEdges,
            generate: { random in random.duration() }
        ) { delay in
            // Each attempt completes 1 ms after it starts (a zero pause after an instant success would loop forever
            // in virtual time): attempts start 1 ms + the clamped delay apart.
            let scheduler = VirtualScheduler()
            let queue = DispatchQueue(label: "property")
            let starts = AsyncLog<Duration>()
            let ended = AsyncLog<String>()
            let poller = RetryPlan.noDelay.giveUpAfter(maxAttempts: 2).repeating(withDelay: delay)
            let handle = poller.execute(
                on: queue, scheduler: scheduler,
                operation: { (attempt, done: AttemptCompletion<Int>) in
                    starts.append(scheduler.now)
                    _ = scheduler.schedule(after: .milliseconds(1), on: queue) { done(.success(attempt.number)) }
                },
                onValue: { _ in }, completion: { error in ended.append("\(error)") })
            scheduler.advance()
            var steps = 0
            while starts.values.count < 3, let deadline = scheduler.nextDeadline, steps < 20 {
                scheduler.advance(by: deadline - scheduler.now)
                steps += 1
            }
            handle.cancel()
            scheduler.run()
            var found: [String] = []
            if ended.values.count != 1 { found.append("\(ended.values.count) completions") }
            let gaps = zip(starts.values, starts.values.dropFirst()).map { $1 - $0 }
            let expected = .milliseconds(1) + propertyClamp(delay)
            if gaps != [expected, expected] {
                found.append("attempts \(gaps.map(exact)) apart, expected \(exact(expected))")
            }
            return found
        }
    }
}

/// A `VirtualClock` that records how long each sleep asked to wait.
final class RecordingClock: Clock, Sendable {
    typealias Instant = VirtualClock.Instant
    typealias Duration = Swift.Duration

    /// The clock that keeps the time and the sleepers.
    let base = VirtualClock()
    /// The wait of every sleep, from the time it was asked for.
    let sleeps = AsyncLog<Duration>()

    var now: Instant { base.now }
    var minimumResolution: Duration { .zero }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        sleeps.append(now.duration(to: deadline))
        try await base.sleep(until: deadline, tolerance: tolerance)
    }
}

/// A completion-handler operation that follows `testCase.script`, with late completions on `scheduler`.
func scriptedCallbackOperation(_ testCase: RetrierCase, scheduler: VirtualScheduler, queue: DispatchQueue)
    -> @Sendable (RetryAttempt, AttemptCompletion<Int>) -> Void
{
    { attempt, done in
        switch testCase.script(for: attempt.number) {
        case .fail: done(.failure(ScriptedFailure(attempt: attempt.number)))
        case .succeed: done(.success(attempt.number))
        case .late(let d, let succeed):
            let token = scheduler.schedule(after: d, on: queue) {
                done(succeed ? .success(attempt.number) : .failure(ScriptedFailure(attempt: attempt.number)))
            }
            done.onCancel { token.cancel() }
        case .hang: break
        }
    }
}

/// An async operation that follows `testCase.script`, sleeping on `clock` for late completions and hangs.
func scriptedAsyncOperation(_ testCase: RetrierCase, clock: VirtualClock)
    -> @Sendable (RetryAttempt) async throws -> Int
{
    { attempt in
        switch testCase.script(for: attempt.number) {
        case .fail: throw ScriptedFailure(attempt: attempt.number)
        case .succeed: return attempt.number
        case .late(let d, let succeed):
            try await clock.sleep(for: d)
            if succeed { return attempt.number }
            throw ScriptedFailure(attempt: attempt.number)
        case .hang:
            try await clock.sleep(for: .seconds(2_000_000_000))
            throw ScriptedFailure(attempt: attempt.number)
        }
    }
}

/// A random `RetryPlan` from a factory and modifiers, with the retrier case it amounts to.
struct PolicyCase: CustomStringConvertible, Sendable {
    var policy: RetryPlan
    var text: String
    var retrier: RetrierCase

    var description: String { "\(text); \(retrier)" }

    static func generate(_ random: inout PropertyRandom) -> PolicyCase {
        var policy: RetryPlan
        var text: String
        var chain: BackoffCase
        switch Int.random(in: 0..<4, using: &random) {
        case 0:
            let (initial, multiplier, maxDelay) = (random.duration(), random.double(), random.duration())
            let jitter = random.pick([RetryJitter.none, .full, .equal, .decorrelated])
            let generator = random.generator()
            policy = .exponentialBackoff(
                initialDelay: initial, multiplier: multiplier, maxDelay: maxDelay, jitter: jitter, using: generator)
            text =
                ".exponentialBackoff(initialDelay: \(exact(initial)), multiplier: \(multiplier), maxDelay: \(exact(maxDelay)), "
                + "jitter: \(jitter), using: \(generator))"
            chain = BackoffCase(strategy: .none, description: text, cap: propertyClamp(maxDelay))
        case 1:
            let d = random.duration()
            policy = .constantDelay(d)
            text = ".constantDelay(\(exact(d)))"
            chain = BackoffCase(strategy: .none, description: text, cap: nil)
        case 2:
            policy = .noDelay
            text = ".noDelay"
            chain = BackoffCase(strategy: .none, description: text, cap: .zero)
        default:
            chain = BackoffCase.generate(&random)
            policy = .backoff(chain.strategy)
            text = ".backoff(\(chain))"
        }
        var retrier = RetrierCase.generate(&random)
        retrier.strategy = .backoff(chain)
        retrier.maxAttempts = random.int(mostlyIn: 1...6)
        policy = policy.giveUpAfter(maxAttempts: retrier.maxAttempts)
        text += ".giveUpAfter(maxAttempts: \(retrier.maxAttempts))"
        if let total = retrier.totalTimeout {
            policy = policy.giveUpAfter(totalTimeout: total)
            text += ".giveUpAfter(totalTimeout: \(exact(total)))"
        }
        if let timeout = retrier.attemptTimeout {
            policy = policy.attemptTimeout(timeout)
            text += ".attemptTimeout(\(exact(timeout)))"
        }
        if random.oneIn(4) {
            // Gated by a condition that stays true: the policy runs one trial, through the gated runners.
            policy = policy.onlyWhen(RetryCondition(true))
            text += ".onlyWhen(RetryCondition(true))"
        }
        if random.oneIn(3) {
            let budget = BudgetCase.generate(&random)
            policy = policy.budget(budget.make())
            text += ".budget(\(budget))"
        }
        return PolicyCase(policy: policy, text: text, retrier: retrier)
    }
}

import Dispatch
import RetryKitTesting
import Testing

@testable import RetryKit

/// The seeded generator the policy tests use.
typealias PolicyTestRNG = SeededRandomNumberGenerator

/// An error a give-up predicate matches.
struct PolicyFatal: Error, Equatable {}

/// The delays a policy's strategy gives for `count` consecutive retries after `error`, as the core computes them.
func policyDelays(_ policy: RetryPlan, count: Int, error: any Error = CBError(code: 0)) -> [Duration?] {
    var previous: Duration?
    return (0..<count).map { index in
        let decision = RetryDecisionContext(retryIndex: index, previousDelay: previous)
            .resolve(policy.decision(for: error))
        switch decision {
        case .retry(let delay):
            previous = delay
            return delay
        case .retryAfterHint(let delay): return delay  // a hint is not the backoff chain's previous delay
        case .stop, .recover: return nil
        }
    }
}

@Suite("RetryPlan: factories, modifiers, configuration", .timeLimit(.minutes(3)))
struct RetryPlanConfigurationTests {
    @Test func exponentialBackoffWithoutJitterIsCappedDoubling() {
        let policy = RetryPlan.exponentialBackoff(jitter: .none)
        let expected: [Duration] = [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8)]
        #expect(policyDelays(policy, count: 5) == expected)
        #expect(policyDelays(policy, count: 12).last == .seconds(60), "capped at 60 s by default")
    }

    @Test func fullJitterIsTheDefaultAndStaysBelowTheCappedCurve() {
        let policy = RetryPlan.exponentialBackoff(using: PolicyTestRNG(seed: 7))
        let delays = policyDelays(policy, count: 200).compactMap { $0 }
        #expect(delays.count == 200)
        for (index, delay) in delays.enumerated() {
            let ceiling = min(Duration.milliseconds(500) * (1 << min(index, 20)), .seconds(60))
            #expect(delay >= .zero && delay < ceiling)
        }
        #expect(Set(delays).count > 190, "randomized, not constant")
        // Long delays do not bunch up at the cap (the cap applies before the draw).
        let late = delays.suffix(100)
        #expect(late.filter { $0 == .seconds(60) }.isEmpty)
        #expect(late.filter { $0 < .seconds(30) }.count > 30)
    }

    @Test func sameSeedSameDelaysAcrossRunsOfOneFactoryCall() {
        let first = policyDelays(.exponentialBackoff(using: PolicyTestRNG(seed: 3)), count: 10)
        let second = policyDelays(.exponentialBackoff(using: PolicyTestRNG(seed: 3)), count: 10)
        #expect(first == second)
    }

    @Test func equalAndDecorrelatedJitterRanges() {
        let equal = policyDelays(
            .exponentialBackoff(initialDelay: .seconds(1), jitter: .equal, using: PolicyTestRNG(seed: 1)), count: 4)
        for (index, delay) in equal.enumerated() {
            let full = Duration.seconds(1 << index)
            #expect(delay.map { $0 >= full / 2 && $0 < full } == true)
        }
        let decorrelated = policyDelays(
            .exponentialBackoff(
                initialDelay: .seconds(1), maxDelay: .seconds(10), jitter: .decorrelated,
                using: PolicyTestRNG(seed: 2)
            ), count: 50)
        #expect(decorrelated.allSatisfy { $0.map { $0 >= .seconds(1) && $0 < .seconds(10) } == true })
        // The one RetryJitter of RetryKit: proportional jitter too, below the cap.
        let proportional = policyDelays(
            .exponentialBackoff(
                initialDelay: .seconds(1), maxDelay: .seconds(4), jitter: .proportional(0.5),
                using: PolicyTestRNG(seed: 3)
            ), count: 6)
        for (index, delay) in proportional.enumerated() {
            let curve = Duration.seconds(Swift.min(1 << index, 4))
            #expect(delay.map { $0 >= curve / 2 && $0 < Swift.min(curve * 3 / 2, .seconds(4)) } == true)
        }
    }

    @Test func constantNoDelayBackoffAndHomemadePolicies() {
        #expect(policyDelays(.constantDelay(.seconds(3)), count: 3) == [.seconds(3), .seconds(3), .seconds(3)])
        #expect(policyDelays(.constantDelay(.seconds(-3)), count: 1) == [.zero])
        #expect(policyDelays(.noDelay, count: 2) == [.zero, .zero])
        #expect(
            policyDelays(.backoff(.linear(a: .seconds(1), b: .seconds(2))), count: 3) == [
                .seconds(2), .seconds(3), .seconds(4),
            ])
        let homemade = RetryPlan.strategy { error in
            (error as? CBError)?.code == 429 ? .retryAfter(.seconds(7)) : .stop
        }
        #expect(policyDelays(homemade, count: 1, error: CBError(code: 429)) == [.seconds(7)])
        #expect(policyDelays(homemade, count: 1, error: CBError(code: 500)) == [nil])
    }

    @Test func unlimitedByDefaultAndTheTightestLimitWins() {
        let policy = RetryPlan.noDelay
        #expect(policy.maxAttempts == .max)
        #expect(policy.totalTimeout == nil && policy.attemptTimeout == nil && policy.budget == nil)
        let limited = policy.giveUpAfter(maxAttempts: 10).giveUpAfter(maxAttempts: 4).giveUpAfter(maxAttempts: 7)
            .giveUpAfter(totalTimeout: .seconds(30)).giveUpAfter(totalTimeout: .seconds(40))
            .attemptTimeout(.seconds(5)).attemptTimeout(.seconds(2))
        #expect(limited.maxAttempts == 4)
        #expect(limited.totalTimeout == .seconds(30))
        #expect(limited.attemptTimeout == .seconds(2))
        let budget = RetryBudget()
        #expect(limited.budget(RetryBudget()).budget(budget).budget === budget, "a later budget replaces")
    }

    @Test func giveUpPredicatesCombineWithOr() {
        let policy = RetryPlan.constantDelay(.seconds(1))
            .giveUpOnErrors { $0 is PolicyFatal }
            .giveUpOnErrors { ($0 as? CBError)?.code == 401 }
        #expect(policyDelays(policy, count: 1, error: PolicyFatal()) == [nil])
        #expect(policyDelays(policy, count: 1, error: CBError(code: 401)) == [nil])
        #expect(policyDelays(policy, count: 1, error: CBError(code: 500)) == [.seconds(1)])
    }

    @Test func aStrategyRetaggedForAnotherClockSharesItsGenerator() {
        let strategy = BackoffStrategy<ContinuousClock>.exponential(a: .seconds(1), b: 2).max(.seconds(30))
            .jitter(using: PolicyTestRNG(seed: 11))
        let reference = BackoffStrategy<ContinuousClock>.exponential(a: .seconds(1), b: 2).max(.seconds(30))
            .jitter(using: PolicyTestRNG(seed: 11))
        let onTestClock: BackoffStrategy<VirtualClock> = strategy.retagged()
        // Alternating draws from the two copies continue one sequence: the reference's.
        var mixed: [Duration] = []
        for x in 0..<6 {
            mixed.append(x.isMultiple(of: 2) ? strategy.delay(forRetry: x) : onTestClock.delay(forRetry: x))
        }
        #expect(mixed == (0..<6).map { reference.delay(forRetry: $0) })
        let decorrelated = BackoffStrategy<ContinuousClock>.decorrelatedJitter(
            base: .seconds(1), cap: .seconds(9), using: PolicyTestRNG(seed: 5))
        let decorrelatedReference = BackoffStrategy<InstantClock>.decorrelatedJitter(
            base: .seconds(1), cap: .seconds(9), using: PolicyTestRNG(seed: 5))
        let retagged: BackoffStrategy<InstantClock> = decorrelated.retagged()
        #expect(
            retagged.delay(forRetry: 3, previous: .seconds(2))
                == decorrelatedReference.delay(forRetry: 3, previous: .seconds(2)))
        let custom = BackoffStrategy<ContinuousClock>.custom { .seconds($0) }.min(.seconds(2))
        #expect((custom.retagged() as BackoffStrategy<VirtualClock>).delay(forRetry: 5) == .seconds(5))
        #expect(
            (RetryStrategy<ContinuousClock>.retryAfter(.seconds(3)).retagged() as RetryStrategy<VirtualClock>)
                .isRetryAfter(.seconds(3)))
    }
}

extension RetryStrategy where C.Duration == Duration {
    fileprivate func isRetryAfter(_ delay: Duration) -> Bool {
        if case .retryAfter(let d) = self { return d == delay }
        return false
    }
}

@Suite("RetryPlan: invalid values never trap", .timeLimit(.minutes(3)))
struct RetryPlanInvalidTests {
    static let invalid: [(String, RetryPlan)] = [
        ("maxAttempts 0", RetryPlan.noDelay.giveUpAfter(maxAttempts: 0)),
        ("maxAttempts -5", RetryPlan.noDelay.giveUpAfter(maxAttempts: -5)),
        ("negative timeout", RetryPlan.noDelay.giveUpAfter(totalTimeout: .seconds(-1))),
        ("zero attempt timeout", RetryPlan.noDelay.attemptTimeout(.zero)),
        ("gated and invalid", RetryPlan.noDelay.giveUpAfter(maxAttempts: 0).onlyWhen(RetryCondition(false))),
    ]

    @Test(arguments: 0..<invalid.count)
    func callbackStyleFinishesWithInvalidConfiguration(index: Int) {
        let (name, policy) = Self.invalid[index]
        let scheduler = VirtualScheduler()
        let recorder = CBRecorder<Int>()
        let calls = CBCounter()
        policy.execute(
            on: DispatchQueue(label: "invalid"), scheduler: scheduler,
            operation: { _, done in
                calls.increment()
                done(.success(1))
            }, observer: recorder.observer, completion: recorder.completion)
        scheduler.run()
        #expect(calls.count == 0, "\(name)")
        guard case .invalidConfiguration = (recorder.onlyResult?.cbError as? RetryError)?.reason else {
            Issue.record("\(name): \(String(describing: recorder.onlyResult))")
            return
        }
        #expect(recorder.onlySummary?.reason == .invalidConfiguration)
    }

    @Test(arguments: 0..<invalid.count)
    func asyncStyleThrowsInvalidConfiguration(index: Int) async {
        let (name, policy) = Self.invalid[index]
        let calls = AsyncCounter()
        do {
            _ = try await policy.execute(clock: InstantClock()) { _ in calls.increment() }
            Issue.record("\(name): no error")
        } catch let error as RetryError {
            guard case .invalidConfiguration = error.reason else {
                Issue.record("\(name): \(error)")
                return
            }
        } catch {
            Issue.record("\(name): \(error)")
        }
        #expect(calls.value == 0)
    }

    @Test func repeatingWithAnInvalidPolicyEndsAtOnce() async throws {
        let scheduler = VirtualScheduler()
        let errors = Locked<[any Error]>([])
        RetryPlan.noDelay.giveUpAfter(maxAttempts: 0).repeating(withDelay: .seconds(1)).execute(
            on: DispatchQueue(label: "invalid-repeat"), scheduler: scheduler,
            operation: { (_: RetryAttempt, done: AttemptCompletion<Int>) in done(.success(1)) },
            onValue: { _ in Issue.record("no value expected") },
            completion: { error in errors.withLock { $0.append(error) } })
        scheduler.run()
        #expect(errors.withLock { $0.count } == 1)
        var iterator = RetryPlan.noDelay.giveUpAfter(totalTimeout: .seconds(-1)).repeating(withDelay: .zero)
            .values(clock: InstantClock()) { _ in 1 }.makeAsyncIterator()
        await #expect(throws: RetryError.self) { _ = try await iterator.next() }
        #expect(try await iterator.next() == nil)
    }
}

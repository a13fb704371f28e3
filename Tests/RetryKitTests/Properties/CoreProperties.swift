import PropertyTesting
import RetryKit
import RetryKitTesting
import Testing

/// Properties of the pure parts: every backoff strategy and modifier over every parameter, and the state machine
/// driven directly (no clock, no runner).
@Suite("Properties: strategies and the state machine")
struct CoreProperties {
    @Test("a strategy's delay is never negative, never above the saturation limit, never above its cap")
    func strategyDelays() {
        checkProperty("strategy delays") { random in
            (
                BackoffCase.generate(&random),
                (0..<4).map { _ in (random.int(), random.oneIn(2) ? nil : random.duration()) }
            )
        } property: { chain, calls in
            calls.flatMap { x, previous in
                chain.problems(
                    with: chain.strategy.delay(forRetry: x, previous: previous),
                    context: "for \(chain) at x = \(x), previous \(exact(previous))")
            }
        }
    }

    @Test("a cap holds exactly whatever modifiers follow it (issue 13.2)")
    func capFollowedByModifiers() {
        let caps = [propertyLimit - .nanoseconds(1), .seconds(8_388_607) + .nanoseconds(999_999_999)]
        let top = PropertyGenerator(.constant(.max))
        let edges = caps.flatMap { cap in
            let capped = BackoffStrategy<ContinuousClock>.constant(.seconds(Int64.max)).max(cap)
            return [
                BackoffCase(
                    strategy: capped.min(.nanoseconds(1)), description: ".max(\(exact(cap))).min(1 ns)", cap: cap),
                BackoffCase(
                    strategy: capped.min(.seconds(Int64.max)), description: ".max(\(exact(cap))).min(max)", cap: cap),
                BackoffCase(
                    strategy: capped.jitter(using: top), description: ".max(\(exact(cap))).jitter(top)", cap: cap),
                BackoffCase(
                    strategy: capped.equalJitter(using: top), description: ".max(\(exact(cap))).equalJitter(top)",
                    cap: cap),
                BackoffCase(
                    strategy: capped.proportionalJitter(1, using: top),
                    description: ".max(\(exact(cap))).proportionalJitter(1, top)", cap: cap),
            ]
        }
        checkProperty("cap followed by modifiers", edgeCases: edges) { random in
            var chain = BackoffCase.generate(&random)
            while chain.cap == nil { chain = BackoffCase.generate(&random) }
            return chain
        } property: { chain in
            [0, 1, 30, Int.max].flatMap { x in
                chain.problems(with: chain.strategy.delay(forRetry: x), context: "for \(chain) at x = \(x)")
            }
        }
    }

    @Test("the state machine: attempts never exceed maxAttempts, every wait and timeout lies in [0, limit]")
    func stateMachine() {
        let edges = PropertyRandom.durationEdges.map { d in
            RetrierCase(
                maxAttempts: 3, totalTimeout: d, attemptTimeout: d, strategy: .retryAfter(d), script: [.fail, .hang])
        }
        checkProperty("state machine", edgeCases: edges, generate: RetrierCase.generate) { testCase in
            runMachine(testCase)
        }
    }
}

/// Drives a `RetryStateMachine` through `testCase` on simulated time and returns the problems found.
private func runMachine(_ testCase: RetrierCase) -> [String] {
    var machine = RetryStateMachine(
        RetryConfiguration(
            maxAttempts: testCase.maxAttempts, totalTimeout: testCase.totalTimeout,
            attemptTimeout: testCase.attemptTimeout))
    var now = Duration.zero
    var found: [String] = []
    var attempts = 0
    var action = machine.start(at: now)
    for _ in 0..<1_000 {
        switch action {
        case .run(let attempt, let timeout):
            attempts += 1
            if attempt.number > testCase.maxAttempts { found.append("attempt \(attempt.number) > maxAttempts") }
            if let timeout, timeout <= .zero || timeout > propertyLimit {
                found.append("attempt \(attempt.number) timeout \(exact(timeout)) outside (0, limit]")
            }
            switch testCase.script(for: attempt.number) {
            case .fail:
                action = machine.attemptFailed(attempt.number, error: ScriptedFailure(attempt: attempt.number), at: now)
            case .succeed:
                action = machine.attemptSucceeded(attempt.number, at: now)
            case .late(let d, let succeed):
                if let timeout, timeout <= d {
                    now += timeout
                    action = machine.attemptTimedOut(attempt.number, at: now)
                } else {
                    now += d
                    action =
                        succeed
                        ? machine.attemptSucceeded(attempt.number, at: now)
                        : machine.attemptFailed(
                            attempt.number, error: ScriptedFailure(attempt: attempt.number), at: now)
                }
            case .hang:
                guard let timeout else { return found + ["attempt \(attempt.number) hangs without a timeout"] }
                now += timeout
                action = machine.attemptTimedOut(attempt.number, at: now)
            }
        case .consultStrategy(let context, let error):
            let number = failedAttempt(of: error) ?? context.retryIndex + 1
            action = machine.decide(
                context.resolve(testCase.strategy.answer(afterAttempt: number, on: ContinuousClock.self)), at: now)
        case .withdraw:
            return found + ["a withdrawal without a budget"]
        case .awaitCondition, .interrupt, .repeatAfter, .recover, .acquire:
            return found + ["a trial's or a recovery's action in a plain retrier"]
        case .retry(let delay, let failed, _):
            found += testCase.strategy.problems(with: delay, context: "after attempt \(failed.number)")
            now += delay
            action = machine.waitElapsed(at: now)
        case .finish:
            guard let termination = machine.termination else { return found + ["finished without a termination"] }
            if termination.summary.attempts != attempts {
                found.append("summary counts \(termination.summary.attempts), \(attempts) ran")
            }
            if testCase.isInvalid, attempts != 0 { found.append("an invalid configuration ran \(attempts) attempts") }
            if let total = testCase.totalTimeout, total >= .zero, termination.summary.elapsed > propertyClamp(total) {
                found.append("finished at \(exact(termination.summary.elapsed)), after the total timeout")
            }
            return found
        case .none:
            return found + ["the machine returned .none"]
        }
    }
    return found + ["no end after 1,000 steps"]
}

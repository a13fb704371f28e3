import PropertyTesting
import RetryKit
import RetryKitTesting

/// The bound every delay and timeout is clamped to.
let propertyLimit = BackoffStrategy<ContinuousClock>.saturationLimit

/// `d` clamped to `[0, saturationLimit]`.
func propertyClamp(_ d: Duration) -> Duration {
    Swift.min(Swift.max(d, .zero), propertyLimit)
}

/// A random backoff chain: a base curve and up to three modifiers, with its description and the cap it promises.
struct BackoffCase: CustomStringConvertible, Sendable {
    var strategy: BackoffStrategy<ContinuousClock>
    var description: String
    /// The most the chain may answer: the smallest `.max(M)` of the chain or a decorrelated jitter's cap, which hold
    /// exactly whatever modifiers follow (issue 13.2).
    var cap: Duration?

    static func generate(_ random: inout PropertyRandom) -> BackoffCase {
        var chain: BackoffCase
        switch Int.random(in: 0..<8, using: &random) {
        case 0:
            chain = BackoffCase(strategy: .none, description: ".none")
        case 1:
            let c = random.duration()
            chain = BackoffCase(strategy: .constant(c), description: ".constant(\(exact(c)))")
        case 2:
            let (a, b) = (random.duration(), random.duration())
            chain = BackoffCase(strategy: .linear(a: a, b: b), description: ".linear(a: \(exact(a)), b: \(exact(b)))")
        case 3:
            let (a, b) = (random.duration(), random.double())
            chain = BackoffCase(
                strategy: .exponential(a: a, b: b), description: ".exponential(a: \(exact(a)), b: \(b))")
        case 4:
            let (scale, base) = (random.double(), random.double())
            chain = BackoffCase(
                strategy: .exponential(scale: scale, base: base),
                description: ".exponential(scale: \(scale), base: \(base))")
        case 5:
            let (base, cap, generator) = (random.duration(), random.duration(), random.generator())
            chain = BackoffCase(
                strategy: .decorrelatedJitter(base: base, cap: cap, using: generator),
                description: ".decorrelatedJitter(base: \(exact(base)), cap: \(exact(cap)), using: \(generator))",
                cap: propertyClamp(cap))
        case 6:
            let d = random.duration()
            chain = BackoffCase(strategy: .custom { _ in d }, description: ".custom { _ in \(exact(d)) }")
        default:
            // Grows with x up to `Int64.max` ms (far past the limit); cannot overflow `Duration`.
            let scale = Int64.random(in: 0...1_000, using: &random)
            chain = BackoffCase(
                strategy: .custom { x in .milliseconds(Int64(truncatingIfNeeded: x)) * scale },
                description: ".custom { x in x ms * \(scale) }")
        }
        for _ in 0..<Int.random(in: 0...3, using: &random) {
            switch Int.random(in: 0..<5, using: &random) {
            case 0:
                let m = random.duration()
                chain.strategy = chain.strategy.min(m)
                chain.description += ".min(\(exact(m)))"
            case 1:
                let m = random.duration()
                chain.strategy = chain.strategy.max(m)
                chain.description += ".max(\(exact(m)))"
                chain.cap = Swift.min(chain.cap ?? propertyLimit, propertyClamp(m))
            case 2:
                let generator = random.generator()
                chain.strategy = chain.strategy.jitter(using: generator)
                chain.description += ".jitter(using: \(generator))"
            case 3:
                let generator = random.generator()
                chain.strategy = chain.strategy.equalJitter(using: generator)
                chain.description += ".equalJitter(using: \(generator))"
            default:
                let (p, generator) = (random.double(), random.generator())
                chain.strategy = chain.strategy.proportionalJitter(p, using: generator)
                chain.description += ".proportionalJitter(\(p), using: \(generator))"
            }
        }
        return chain
    }

    /// The problems with `delay` as an answer of this chain.
    func problems(with delay: Duration, context: String) -> [String] {
        var found: [String] = []
        if delay < .zero { found.append("negative delay \(exact(delay)) \(context)") }
        if delay > propertyLimit { found.append("delay \(exact(delay)) above the saturation limit \(context)") }
        if let cap, delay > cap {
            found.append("delay \(exact(delay)) above the cap \(exact(cap)) by \(exact(delay - cap)) \(context)")
        }
        return found
    }
}

/// What a scripted strategy answers after a failure.
enum StrategyCase: CustomStringConvertible, Sendable {
    case backoff(BackoffCase)
    case retryAfter(Duration)
    case stopAfter(Int, BackoffCase)

    static func generate(_ random: inout PropertyRandom) -> StrategyCase {
        switch Int.random(in: 0..<5, using: &random) {
        case 0: return .retryAfter(random.duration())
        case 1: return .stopAfter(Int.random(in: 1...4, using: &random), BackoffCase.generate(&random))
        default: return .backoff(BackoffCase.generate(&random))
        }
    }

    var description: String {
        switch self {
        case .backoff(let chain): return ".backoff(\(chain))"
        case .retryAfter(let d): return ".retryAfter(\(exact(d)))"
        case .stopAfter(let n, let chain): return ".stop after attempt \(n), else .backoff(\(chain))"
        }
    }

    /// The answer after attempt `number` failed.
    func answer<C: Clock>(afterAttempt number: Int, on clock: C.Type = C.self) -> RetryStrategy<C>
    where C.Duration == Duration {
        let answer: RetryStrategy<ContinuousClock>
        switch self {
        case .backoff(let chain): answer = .backoff(chain.strategy)
        case .retryAfter(let d): answer = .retryAfter(d)
        case .stopAfter(let n, let chain): answer = number >= n ? .stop : .backoff(chain.strategy)
        }
        return answer.retagged(for: C.self)
    }

    /// The problems with a delay chosen after a failure.
    func problems(with delay: Duration, context: String) -> [String] {
        switch self {
        case .backoff(let chain), .stopAfter(_, let chain):
            return chain.problems(with: delay, context: context)
        case .retryAfter(let d):
            return delay == propertyClamp(d)
                ? [] : ["retryAfter(\(exact(d))) waited \(exact(delay)), not \(exact(propertyClamp(d))) \(context)"]
        }
    }

}

/// What one attempt of a scripted operation does.
enum AttemptScript: Sendable, CustomStringConvertible {
    case fail
    case succeed
    /// Completes (failing, or succeeding) after this long on the test's clock or scheduler.
    case late(Duration, succeed: Bool)
    /// Never completes (only scripted when a timeout ends it).
    case hang

    var description: String {
        switch self {
        case .fail: return "fail"
        case .succeed: return "succeed"
        case .late(let d, let succeed): return "\(succeed ? "succeed" : "fail") after \(exact(d))"
        case .hang: return "hang"
        }
    }
}

/// A random retrier: limits, strategy, and what each attempt does. Attempts past the script succeed, so every case
/// ends, whatever `maxAttempts` is.
struct RetrierCase: CustomStringConvertible, Sendable {
    var maxAttempts: Int
    var totalTimeout: Duration?
    var attemptTimeout: Duration?
    var strategy: StrategyCase
    var script: [AttemptScript]
    /// The tolerance handed to the clock (ignored by the test clock, but it must not trap).
    var tolerance: Duration? = nil

    static func generate(_ random: inout PropertyRandom) -> RetrierCase {
        let maxAttempts = random.int(mostlyIn: 1...6)
        let totalTimeout: Duration? = random.oneIn(2) ? nil : random.duration()
        let attemptTimeout: Duration? = random.oneIn(2) ? nil : random.duration()
        let timed = totalTimeout.map { $0 >= .zero } == true || attemptTimeout.map { $0 > .zero } == true
        var script: [AttemptScript] = []
        for _ in 0..<Int.random(in: 0...5, using: &random) {
            switch Int.random(in: 0..<6, using: &random) {
            case 0, 1: script.append(.fail)
            case 2: script.append(.succeed)
            case 3, 4: script.append(.late(random.shortDuration(), succeed: random.oneIn(3)))
            default: script.append(timed ? .hang : .fail)
            }
        }
        return RetrierCase(
            maxAttempts: maxAttempts, totalTimeout: totalTimeout, attemptTimeout: attemptTimeout,
            strategy: StrategyCase.generate(&random), script: script,
            tolerance: random.oneIn(2) ? nil : random.duration())
    }

    var description: String {
        "maxAttempts: \(maxAttempts), totalTimeout: \(exact(totalTimeout)), "
            + "attemptTimeout: \(exact(attemptTimeout)), tolerance: \(exact(tolerance)), strategy: \(strategy), script: \(script)"
    }

    /// What attempt `number` does.
    func script(for number: Int) -> AttemptScript {
        number >= 1 && number <= script.count ? script[number - 1] : .succeed
    }

    /// Whether the configuration is one the retrier rejects.
    var isInvalid: Bool {
        maxAttempts < 1 || totalTimeout.map { $0 < .zero } == true || attemptTimeout.map { $0 <= .zero } == true
    }
}

/// The error scripted attempts fail with: the attempt number.
struct ScriptedFailure: Error, CustomStringConvertible {
    let attempt: Int
    var description: String { "ScriptedFailure(\(attempt))" }
}

/// The number of the attempt an error reports: a scripted failure's, or `nil` (a timeout, say).
func failedAttempt(of error: any Error) -> Int? {
    (error as? ScriptedFailure)?.attempt
}

/// The problems with the events of one retrier run for `testCase`.
func eventProblems<Value>(_ events: [RetryEvent<Value>], for testCase: RetrierCase) -> [String] {
    var found: [String] = []
    var started = 0
    var finished: [RetrySummary] = []
    for event in events {
        switch event {
        case .attemptStarted(let attempt):
            started += 1
            if attempt.number != started { found.append("attempt \(attempt.number) started as the \(started)th") }
            if attempt.number > testCase.maxAttempts { found.append("attempt \(attempt.number) > maxAttempts") }
            if attempt.elapsed < .zero { found.append("negative elapsed \(attempt.elapsed)") }
        case .attemptFailed(let attempt, _, .retry(let delay)):
            found += testCase.strategy.problems(with: delay, context: "after attempt \(attempt.number)")
        case .finished(let summary, _):
            finished.append(summary)
        default:
            break
        }
    }
    if testCase.isInvalid, started != 0 { found.append("\(started) attempts ran for an invalid configuration") }
    if finished.count != 1 { found.append("\(finished.count) finished events") }
    if let summary = finished.first {
        if summary.attempts > Swift.max(testCase.maxAttempts, 0) {
            found.append("summary counts \(summary.attempts) attempts > maxAttempts")
        }
        if summary.attempts != started { found.append("summary counts \(summary.attempts), \(started) started") }
        if summary.elapsed < .zero { found.append("negative elapsed \(summary.elapsed)") }
    }
    if case .finished = events.last {} else { found.append("the last event is not finished") }
    return found
}

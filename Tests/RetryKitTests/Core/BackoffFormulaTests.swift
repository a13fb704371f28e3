import RetryKit
import RetryKitTesting
import Testing

/// One row of the formula table: a strategy and its hand-computed delays at x = 0…5.
struct FormulaCase: Sendable, CustomTestStringConvertible {
    let name: String
    let strategy: BackoffStrategy<ContinuousClock>
    let expected: [Duration]

    init(_ name: String, _ strategy: BackoffStrategy<ContinuousClock>, _ expected: [Duration]) {
        self.name = name
        self.strategy = strategy
        self.expected = expected
    }

    var testDescription: String { name }
}

private func ms(_ values: Int64...) -> [Duration] { values.map { .milliseconds($0) } }
private func s(_ values: Int64...) -> [Duration] { values.map { .seconds($0) } }

/// f(x) at x = 0…5, computed by hand from the formulas in BackoffStrategy's documentation.
let formulaTable: [FormulaCase] = [
    FormulaCase(".none", .none, s(0, 0, 0, 0, 0, 0)),
    FormulaCase(".constant(2 s)", .constant(.seconds(2)), s(2, 2, 2, 2, 2, 2)),
    FormulaCase(".constant(1.5 s)", .constant(.milliseconds(1500)), ms(1500, 1500, 1500, 1500, 1500, 1500)),
    FormulaCase(".constant(-1 s) counts as 0", .constant(.seconds(-1)), s(0, 0, 0, 0, 0, 0)),
    FormulaCase(
        ".linear(a: 250 ms, b: 1 s)", .linear(a: .milliseconds(250), b: .seconds(1)),
        ms(1000, 1250, 1500, 1750, 2000, 2250)),
    FormulaCase(".linear(a: 1 s, b: 0)", .linear(a: .seconds(1), b: .zero), s(0, 1, 2, 3, 4, 5)),
    FormulaCase(".linear(a: 0, b: 3 s)", .linear(a: .zero, b: .seconds(3)), s(3, 3, 3, 3, 3, 3)),
    FormulaCase(
        ".exponential(a: 100 ms, b: 2)", .exponential(a: .milliseconds(100), b: 2),
        ms(100, 200, 400, 800, 1600, 3200)),
    FormulaCase(".exponential(a: 1 s, b: 3)", .exponential(a: .seconds(1), b: 3), s(1, 3, 9, 27, 81, 243)),
    FormulaCase(
        ".exponential(a: 1 s, b: 1.5)", .exponential(a: .seconds(1), b: 1.5),
        [
            .seconds(1), .milliseconds(1500), .milliseconds(2250), .milliseconds(3375), .nanoseconds(5_062_500_000),
            .nanoseconds(7_593_750_000),
        ]),
    FormulaCase(
        ".exponential(a: 8 s, b: 0.5)", .exponential(a: .seconds(8), b: 0.5), ms(8000, 4000, 2000, 1000, 500, 250)),
    FormulaCase(".exponential(a: 2 s, b: 1)", .exponential(a: .seconds(2), b: 1), s(2, 2, 2, 2, 2, 2)),
    FormulaCase(".exponential(a: 2 s, b: 0)", .exponential(a: .seconds(2), b: 0), s(2, 0, 0, 0, 0, 0)),
    FormulaCase(
        ".exponential(a: 2 s, b: NaN) counts b as 1", .exponential(a: .seconds(2), b: .nan), s(2, 2, 2, 2, 2, 2)),
    FormulaCase(".exponential(a: 2 s, b: -3) counts b as 1", .exponential(a: .seconds(2), b: -3), s(2, 2, 2, 2, 2, 2)),
    FormulaCase(
        ".exponential(scale: 0.5, base: 2) (Alamofire)", .exponential(scale: 0.5, base: 2),
        ms(500, 1000, 2000, 4000, 8000, 16000)),
    FormulaCase(
        ".exponential(scale: 0.25, base: 3)", .exponential(scale: 0.25, base: 3),
        ms(250, 750, 2250, 6750, 20250, 60750)),
    FormulaCase(".exponential(scale: NaN, base: 2) is 0", .exponential(scale: .nan, base: 2), s(0, 0, 0, 0, 0, 0)),
    FormulaCase(
        ".exponential(a: 100 ms, b: 2).min(500 ms)", .exponential(a: .milliseconds(100), b: 2).min(.milliseconds(500)),
        ms(500, 500, 500, 800, 1600, 3200)),
    FormulaCase(
        ".exponential(a: 100 ms, b: 2).max(1 s)", .exponential(a: .milliseconds(100), b: 2).max(.seconds(1)),
        ms(100, 200, 400, 800, 1000, 1000)),
    FormulaCase(
        ".exponential(a: 100 ms, b: 2).min(300 ms).max(1 s)",
        .exponential(a: .milliseconds(100), b: 2).min(.milliseconds(300)).max(.seconds(1)),
        ms(300, 300, 400, 800, 1000, 1000)),
    FormulaCase(
        ".linear(a: 1 s, b: 0).max(4 s).min(2 s)", .linear(a: .seconds(1), b: .zero).max(.seconds(4)).min(.seconds(2)),
        s(2, 2, 2, 3, 4, 4)),
    FormulaCase(
        ".constant(3 s).min(5 s).max(2 s): the later max wins",
        .constant(.seconds(3)).min(.seconds(5)).max(.seconds(2)),
        s(2, 2, 2, 2, 2, 2)),
    FormulaCase(
        ".constant(3 s).max(2 s).min(5 s): a cap is a cap, a later min does not lift it",
        .constant(.seconds(3)).max(.seconds(2)).min(.seconds(5)),
        s(2, 2, 2, 2, 2, 2)),
    FormulaCase(".constant(3 s).max(-1 s) caps at 0", .constant(.seconds(3)).max(.seconds(-1)), s(0, 0, 0, 0, 0, 0)),
    FormulaCase(".custom { 10 ms · x² }", .custom { .milliseconds(10 * $0 * $0) }, ms(0, 10, 40, 90, 160, 250)),
    FormulaCase(".custom { -x s } counts as 0", .custom { .seconds(-$0) }, s(0, 0, 0, 0, 0, 0)),
    FormulaCase(
        ".custom { x s }.max(3 s)", .custom { .seconds($0) }.max(.seconds(3)), s(0, 1, 2, 3, 3, 3)),
    FormulaCase(".none.jitter()", .none.jitter(using: SeededRandomNumberGenerator(seed: 1)), s(0, 0, 0, 0, 0, 0)),
    FormulaCase(
        ".none.equalJitter()", .none.equalJitter(using: SeededRandomNumberGenerator(seed: 1)), s(0, 0, 0, 0, 0, 0)),
    FormulaCase(
        ".none.proportionalJitter()", .none.proportionalJitter(using: SeededRandomNumberGenerator(seed: 1)),
        s(0, 0, 0, 0, 0, 0)),
    FormulaCase(
        ".exponential(a: 100 ms, b: 2).proportionalJitter(0) is exact",
        .exponential(a: .milliseconds(100), b: 2).proportionalJitter(0, using: SeededRandomNumberGenerator(seed: 1)),
        ms(100, 200, 400, 800, 1600, 3200)),
    FormulaCase(
        ".constant(1 s).proportionalJitter(NaN) counts p as 0",
        .constant(.seconds(1)).proportionalJitter(.nan, using: SeededRandomNumberGenerator(seed: 1)),
        s(1, 1, 1, 1, 1, 1)),
    FormulaCase(
        ".decorrelatedJitter(base: 1 s, cap: 1 s)",
        .decorrelatedJitter(base: .seconds(1), cap: .seconds(1), using: SeededRandomNumberGenerator(seed: 1)),
        s(1, 1, 1, 1, 1, 1)),
    FormulaCase(
        ".decorrelatedJitter(base: 2 s, cap: 1 s): cap < base gives cap",
        .decorrelatedJitter(base: .seconds(2), cap: .seconds(1), using: SeededRandomNumberGenerator(seed: 1)),
        s(1, 1, 1, 1, 1, 1)),
    FormulaCase(
        ".decorrelatedJitter(base: 0, cap: 1 s) stays 0",
        .decorrelatedJitter(base: .zero, cap: .seconds(1), using: SeededRandomNumberGenerator(seed: 1)),
        s(0, 0, 0, 0, 0, 0)),
]

@Suite("Core: backoff formula table")
struct BackoffFormulaTests {
    @Test("f(x) at x = 0…5 matches the hand-computed table", arguments: formulaTable)
    func table(_ row: FormulaCase) {
        #expect(row.expected.count == 6)
        let actual = (0...5).map { row.strategy.delay(forRetry: $0) }
        #expect(actual == row.expected)
    }

    @Test("RetryDecisionContext.resolve(.backoff) retries after the strategy's f(x)", arguments: formulaTable)
    func resolveBackoff(_ row: FormulaCase) {
        for x in 0...5 {
            let context = RetryDecisionContext(retryIndex: x, previousDelay: x == 0 ? nil : row.expected[x - 1])
            #expect(context.resolve(RetryStrategy.backoff(row.strategy)) == .retry(after: row.expected[x]))
        }
    }

    @Test(
        "resolve(.retryAfter(d)) is exactly d at every retry index, clamped to [0, saturationLimit]",
        arguments: [
            (Duration.milliseconds(1500), Duration.milliseconds(1500)),
            (.seconds(120), .seconds(120)),
            (.zero, .zero),
            (.seconds(-3), .zero),
            (.seconds(Int64.min), .zero),
            (.seconds(Int64.max), BackoffStrategy<ContinuousClock>.saturationLimit),
            (.seconds(2_000_000_000), BackoffStrategy<ContinuousClock>.saturationLimit),
        ])
    func resolveRetryAfter(_ hint: Duration, _ expected: Duration) {
        for x in 0...5 {
            let context = RetryDecisionContext(retryIndex: x, previousDelay: x == 0 ? nil : .seconds(7))
            #expect(context.resolve(RetryStrategy<ContinuousClock>.retryAfter(hint)) == .retryAfterHint(expected))
        }
    }

    @Test("resolve(.stop) stops at every retry index")
    func resolveStop() {
        for x in 0...5 {
            let context = RetryDecisionContext(retryIndex: x, previousDelay: nil)
            #expect(context.resolve(RetryStrategy<ContinuousClock>.stop) == .stop)
        }
    }

    @Test("delays are rounded to the nearest nanosecond")
    func nanosecondRounding() {
        let below: BackoffStrategy<ContinuousClock> = .custom { _ in
            Duration(secondsComponent: 0, attosecondsComponent: 1_400_000_000)
        }
        let above: BackoffStrategy<ContinuousClock> = .custom { _ in
            Duration(secondsComponent: 0, attosecondsComponent: 1_600_000_000)
        }
        let tiny: BackoffStrategy<ContinuousClock> = .constant(Duration(secondsComponent: 0, attosecondsComponent: 1))
        #expect(below.delay(forRetry: 0) == .nanoseconds(1))
        #expect(above.delay(forRetry: 0) == .nanoseconds(2))
        #expect(tiny.delay(forRetry: 0) == .zero)
        #expect(
            BackoffStrategy<ContinuousClock>.constant(.nanoseconds(123_456_789)).delay(forRetry: 0)
                == .nanoseconds(123_456_789))
    }

    @Test("exponential growth is exact up to the saturation limit, then saturates")
    func saturationBoundary() {
        let doubling: BackoffStrategy<ContinuousClock> = .exponential(a: .seconds(1), b: 2)
        #expect(BackoffStrategy<ContinuousClock>.saturationLimit == .seconds(1_000_000_000))
        #expect(doubling.delay(forRetry: 29) == .seconds(536_870_912))  // 2^29 s < 10^9 s
        #expect(doubling.delay(forRetry: 30) == BackoffStrategy<ContinuousClock>.saturationLimit)
        #expect(doubling.delay(forRetry: 67) == BackoffStrategy<ContinuousClock>.saturationLimit)
        #expect(doubling.delay(forRetry: 68) == BackoffStrategy<ContinuousClock>.saturationLimit)
    }

    @Test("a negative retry index counts as 0")
    func negativeIndex() {
        let strategy: BackoffStrategy<ContinuousClock> = .linear(a: .seconds(1), b: .seconds(2))
        #expect(strategy.delay(forRetry: -1) == .seconds(2))
        #expect(strategy.delay(forRetry: Int.min) == .seconds(2))
        let custom: BackoffStrategy<ContinuousClock> = .custom { .seconds($0 + 1) }
        #expect(custom.delay(forRetry: -5) == .seconds(1))
    }
}

import RetryKit
import Testing

/// Durations around every boundary the comparisons of `DelayMath` look at: zero, one attosecond either side, the sign
/// and carry between the two 64-bit halves of the count of attoseconds, the saturation limit, and the extremes.
private let durations: [Duration] = {
    let limit = BackoffStrategy<ContinuousClock>.saturationLimit
    let attosecond = Duration(secondsComponent: 0, attosecondsComponent: 1)
    let halves = Duration(_high: 0, low: .max)
    var values: [Duration] = [
        .zero, attosecond, .zero - attosecond, .nanoseconds(1), .nanoseconds(-1), .seconds(1), .seconds(-1),
        halves, halves + attosecond, .zero - halves, .zero - halves - attosecond, limit, limit - attosecond,
        limit + attosecond, .seconds(Int64.max), .seconds(Int64.min), Duration(_high: .max, low: .max),
        Duration(_high: .min, low: 0),
    ]
    values += values.map { $0 / 3 }
    return values
}()

/// The runners' calls-free comparisons give the standard library's answers.
@Suite struct DurationComparisonTests {
    @Test func zeroIsTheStandardLibrarysZero() {
        #expect(DelayMath.zero == .zero)
    }

    @Test func comparisonsAgreeWithTheStandardLibrary() {
        for a in durations {
            #expect(DelayMath.isZero(a) == (a == .zero), "\(a)")
            #expect(DelayMath.isPositive(a) == (a > .zero), "\(a)")
            for b in durations {
                #expect(DelayMath.isLess(a, than: b) == (a < b), "\(a) < \(b)")
            }
        }
    }

    @Test func clampAndBoundAgreeWithTheirDefinitions() {
        let limit = BackoffStrategy<ContinuousClock>.saturationLimit
        #expect(DelayMath.limit == limit)
        for d in durations {
            #expect(DelayMath.clamp(d) == Swift.min(Swift.max(d, .zero), limit), "\(d)")
            #expect(DelayMath.bounded(d) == Swift.min(d, limit), "\(d)")
        }
    }
}

import Dispatch
import Testing

@testable import RetryKit

/// The conversions of durations to Dispatch's integer counts, run with `Int32` as the target type: what a 32-bit `Int`
/// (arm64_32, Apple Watch hardware) holds, checked on this 64-bit machine. `Int32.max` nanoseconds is 2.147483647 s.
@Suite struct DurationConversionTests {
    private typealias Conversion = DurationConversion

    /// `d` spelled as its case and count, so that `.seconds(2)` and `.nanoseconds(2_000_000_000)` differ.
    private static func spelled(_ interval: DispatchTimeInterval?) -> String {
        switch interval {
        case nil: return "nil"
        case .seconds(let n)?: return "seconds(\(n))"
        case .milliseconds(let n)?: return "milliseconds(\(n))"
        case .microseconds(let n)?: return "microseconds(\(n))"
        case .nanoseconds(let n)?: return "nanoseconds(\(n))"
        case .never?: return "never"
        @unknown default: return "unknown"
        }
    }

    /// The nanoseconds an interval stands for.
    private static func nanoseconds(_ interval: DispatchTimeInterval?) -> Int64 {
        switch interval {
        case nil: return 0
        case .seconds(let n)?: return Int64(n) * 1_000_000_000
        case .milliseconds(let n)?: return Int64(n) * 1_000_000
        case .microseconds(let n)?: return Int64(n) * 1_000
        case .nanoseconds(let n)?: return Int64(n)
        case .never?: return .max
        @unknown default: return .max
        }
    }

    private static let int32MaxNanoseconds = Duration.nanoseconds(Int64(Int32.max))

    @Test("nanoseconds as Int32: exact up to Int32.max ns (2.147 s), saturating beyond, zero for negative")
    func nanosecondsAtInt32Bounds() {
        #expect(Conversion.nanosecondsRoundingUp(.zero, as: Int32.self) == 0)
        #expect(Conversion.nanosecondsRoundingUp(.nanoseconds(-1), as: Int32.self) == 0)
        #expect(Conversion.nanosecondsRoundingUp(.seconds(-1_000_000_000), as: Int32.self) == 0)
        #expect(Conversion.nanosecondsRoundingUp(.seconds(Int64.min), as: Int32.self) == 0)
        #expect(Conversion.nanosecondsRoundingUp(.seconds(2), as: Int32.self) == 2_000_000_000)
        #expect(Conversion.nanosecondsRoundingUp(Self.int32MaxNanoseconds, as: Int32.self) == Int32.max)
        #expect(
            Conversion.nanosecondsRoundingUp(Self.int32MaxNanoseconds + .nanoseconds(1), as: Int32.self) == Int32.max)
        #expect(Conversion.nanosecondsRoundingUp(.milliseconds(2_150), as: Int32.self) == Int32.max)
        #expect(Conversion.nanosecondsRoundingUp(.seconds(1_000_000_000), as: Int32.self) == Int32.max)
        #expect(Conversion.nanosecondsRoundingUp(.seconds(Int64.max), as: Int32.self) == Int32.max)
        // The same values where 64 bits hold them.
        #expect(Conversion.nanosecondsRoundingUp(.milliseconds(2_150), as: Int64.self) == 2_150_000_000)
        #expect(Conversion.nanosecondsRoundingUp(.seconds(1_000_000_000), as: Int64.self) == 1_000_000_000_000_000_000)
        #expect(Conversion.nanosecondsRoundingUp(.seconds(Int64.max), as: Int64.self) == Int64.max)
        #expect(Conversion.nanosecondsRoundingUp(.seconds(Int64.max), as: UInt64.self) == UInt64.max)
        #expect(Conversion.nanosecondsRoundingUp(.seconds(Int64.max) + .seconds(Int64.max), as: UInt64.self) == .max)
    }

    @Test("nanoseconds round up: a timer is never armed early")
    func nanosecondsRoundUp() {
        let oneAttosecond = Duration(secondsComponent: 0, attosecondsComponent: 1)
        #expect(Conversion.nanosecondsRoundingUp(oneAttosecond, as: Int32.self) == 1)
        let almostTwo = Duration(secondsComponent: 1, attosecondsComponent: 999_999_999_000_000_001)
        #expect(Conversion.nanosecondsRoundingUp(almostTwo, as: Int32.self) == 2_000_000_000)
        let justOverMax = Self.int32MaxNanoseconds - .nanoseconds(1) + oneAttosecond
        #expect(Conversion.nanosecondsRoundingUp(justOverMax, as: Int32.self) == Int32.max)
    }

    @Test("seconds and nanoseconds as Int32: every delay up to Int32.max s, the rest below 10⁹ ns")
    func secondsAndNanosecondsAtInt32Bounds() {
        func parts(_ d: Duration) -> [Int32] {
            let p = Conversion.secondsAndNanosecondsRoundingUp(d, as: Int32.self)
            return [p.seconds, p.nanoseconds]
        }
        #expect(parts(.zero) == [0, 0])
        #expect(parts(.seconds(-3)) == [0, 0])
        #expect(parts(.milliseconds(2_150)) == [2, 150_000_000])
        #expect(parts(Self.int32MaxNanoseconds) == [2, 147_483_647])
        #expect(parts(Self.int32MaxNanoseconds + .nanoseconds(1)) == [2, 147_483_648])
        #expect(parts(.seconds(1_000_000_000)) == [1_000_000_000, 0])
        #expect(parts(.seconds(Int64(Int32.max)) + .milliseconds(500)) == [Int32.max, 500_000_000])
        #expect(parts(.seconds(Int64(Int32.max) + 1)) == [Int32.max, 0])
        #expect(parts(.seconds(Int64.max)) == [Int32.max, 0])
        // Rounding up carries into the seconds.
        #expect(parts(Duration(secondsComponent: 1, attosecondsComponent: 999_999_999_000_000_001)) == [2, 0])
    }

    @Test("Dispatch intervals with Int32 counts: one .nanoseconds up to 2.147 s, then .seconds and the rest")
    func dispatchIntervalsAtInt32Bounds() {
        func spelled(_ d: Duration) -> [String] {
            let (first, rest) = Conversion.dispatchIntervals(d, as: Int32.self)
            return [Self.spelled(first), Self.spelled(rest)]
        }
        #expect(spelled(.zero) == ["nanoseconds(0)", "nil"])
        #expect(spelled(.seconds(-5)) == ["nanoseconds(0)", "nil"])
        #expect(spelled(.seconds(2)) == ["nanoseconds(2000000000)", "nil"])
        #expect(spelled(Self.int32MaxNanoseconds) == ["nanoseconds(2147483647)", "nil"])
        #expect(spelled(Self.int32MaxNanoseconds + .nanoseconds(1)) == ["seconds(2)", "nanoseconds(147483648)"])
        #expect(spelled(.milliseconds(2_150)) == ["seconds(2)", "nanoseconds(150000000)"])
        #expect(spelled(.seconds(3)) == ["seconds(3)", "nil"])
        #expect(spelled(.seconds(1_000_000_000)) == ["seconds(1000000000)", "nil"])
        #expect(spelled(.seconds(Int64.max)) == ["seconds(2147483647)", "nil"])
    }

    @Test("Dispatch intervals with Int64 counts: always one .nanoseconds within 10⁹ s")
    func dispatchIntervalsWithInt64() {
        let (first, rest) = Conversion.dispatchIntervals(.milliseconds(2_150), as: Int64.self)
        #expect(Self.spelled(first) == "nanoseconds(2150000000)")
        #expect(rest == nil)
        let (far, farRest) = Conversion.dispatchIntervals(.seconds(1_000_000_000), as: Int64.self)
        #expect(Self.spelled(far) == "nanoseconds(1000000000000000000)")
        #expect(farRest == nil)
    }

    @Test("Dispatch intervals add up to the duration, rounded up, for Int32 and Int64 counts")
    func dispatchIntervalsAddUp() {
        var durations: [Duration] = [.zero, .nanoseconds(1), .seconds(1_000_000_000)]
        for base in [Self.int32MaxNanoseconds, .seconds(1), .seconds(2), .milliseconds(2_150), .seconds(4_294)] {
            for offset: Int64 in [-1_000_000_001, -1, 0, 1, 999_999_999, 1_000_000_000] {
                durations.append(base + .nanoseconds(offset))
            }
            durations.append(base + Duration(secondsComponent: 0, attosecondsComponent: 1))
        }
        for d in durations {
            let expected = Int64(Conversion.nanosecondsRoundingUp(d, as: UInt64.self))
            let narrow = Conversion.dispatchIntervals(d, as: Int32.self)
            #expect(Self.nanoseconds(narrow.first) + Self.nanoseconds(narrow.rest) == expected, "\(d) with Int32")
            let wide = Conversion.dispatchIntervals(d, as: Int64.self)
            #expect(Self.nanoseconds(wide.first) == expected && wide.rest == nil, "\(d) with Int64")
        }
    }

    @Test("the scheduler's deadline is now plus the clamped delay, rounded up; split intervals reach the same instant")
    func schedulerDeadline() {
        let now = DispatchWallTime.now()
        func deadline(_ d: Duration) -> UInt64 { DispatchTimerScheduler.deadline(after: d, from: now).rawValue }
        #expect(deadline(.milliseconds(2_150)) == (now + .nanoseconds(2_150_000_000)).rawValue)
        #expect(deadline(.milliseconds(2_150)) == (now + .seconds(2) + .nanoseconds(150_000_000)).rawValue)
        #expect(deadline(.seconds(-1)) == now.rawValue)
        #expect(deadline(.seconds(Int64.max)) == (now + .seconds(1_000_000_000)).rawValue)
        let oneAttosecond = Duration(secondsComponent: 0, attosecondsComponent: 1)
        #expect(deadline(.seconds(3) + oneAttosecond) == (now + .nanoseconds(3_000_000_001)).rawValue)
        // What a 32-bit `Int` arms: the same instant as one interval of 64-bit nanoseconds.
        let (first, rest) = DurationConversion.dispatchIntervals(.seconds(86_400) + .nanoseconds(7), as: Int32.self)
        #expect(rest != nil)
        #expect((now + first + (rest ?? .nanoseconds(0))).rawValue == (now + .nanoseconds(86_400_000_000_007)).rawValue)
    }
}

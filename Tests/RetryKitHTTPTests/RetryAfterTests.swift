import Foundation
import RetryKitHTTP
import RetryKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110's example date, in seconds since 1970.
private let exampleSeconds: TimeInterval = 784_111_777
private let limit = BackoffStrategy<ContinuousClock>.saturationLimit

/// The instant of a UTC date, computed with Foundation's calendar: an oracle independent of the parser.
private func utc(_ year: Int, _ month: Int, _ day: Int, _ hour: Int = 0, _ minute: Int = 0, _ second: Int = 0) -> Date?
{
    var calendar = Calendar(identifier: .gregorian)
    guard let zone = TimeZone(identifier: "UTC") else { return nil }
    calendar.timeZone = zone
    let components = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    return calendar.date(from: components)
}

@Suite struct RetryAfterTests {
    private let now = Date(timeIntervalSince1970: exampleSeconds - 100)

    // MARK: delay-seconds

    @Test(arguments: [
        ("120", 120), ("0", 0), ("1", 1), ("007", 7), (" 120", 120), ("120 ", 120), ("\t 5 \t", 5),
        ("999999999", 999_999_999),
    ])
    func delaySeconds(value: String, seconds: Int64) {
        #expect(RetryAfter.delay(value, now: now) == .seconds(seconds))
    }

    @Test(arguments: [
        "1000000000", "1000000001", "99999999999999999999", "9223372036854775807", "9223372036854775808",
        "18446744073709551616", String(repeating: "9", count: 500),
    ])
    func hugeDelaySecondsSaturate(value: String) {
        #expect(RetryAfter.delay(value, now: now) == limit)
    }

    @Test(arguments: [
        "", " ", "\t", "-1", "-0", "+5", "1.5", "0.5", "1e3", "0x10", "abc", "12abc", "1 2", "1,2", "١٢", "１２",
        "120 seconds", "\n120", "120\r\n", "NaN", "inf", "-9223372036854775809",
    ])
    func garbageAndNegativeValuesAreRejected(value: String) {
        #expect(RetryAfter.delay(value, now: now) == nil)
    }

    // MARK: HTTP-date, all three forms

    @Test(arguments: [
        "Sun, 06 Nov 1994 08:49:37 GMT",  // IMF-fixdate
        "Sunday, 06-Nov-94 08:49:37 GMT",  // RFC 850
        "Sun Nov  6 08:49:37 1994",  // asctime
        "sun, 06 nov 1994 08:49:37 gmt",  // case-insensitive
        "SUNDAY, 06-NOV-94 08:49:37 GMT",
        "  Sun, 06 Nov 1994 08:49:37 GMT\t",  // surrounding whitespace
        "Sun, 6 Nov 1994 08:49:37 GMT",  // one-digit day
        "Sunday, 06-Nov-1994 08:49:37 GMT",  // RFC 850 with a four-digit year
    ])
    func theThreeDateFormsGiveTheSameDelay(value: String) {
        #expect(RetryAfter.delay(value, now: now) == .seconds(100))
        #expect(RetryAfter.date(value, now: now) == Date(timeIntervalSince1970: exampleSeconds))
    }

    @Test func asctimeWithATwoDigitDay() {
        #expect(RetryAfter.date("Wed Nov 16 08:49:37 1994", now: now) == utc(1994, 11, 16, 8, 49, 37))
    }

    @Test func pastAndPresentDatesGiveZero() {
        let date = "Sun, 06 Nov 1994 08:49:37 GMT"
        #expect(RetryAfter.delay(date, now: Date(timeIntervalSince1970: exampleSeconds)) == .zero)
        #expect(RetryAfter.delay(date, now: Date(timeIntervalSince1970: exampleSeconds + 0.5)) == .zero)
        #expect(RetryAfter.delay(date, now: Date(timeIntervalSince1970: exampleSeconds + 86_400 * 365)) == .zero)
        #expect(RetryAfter.delay("Thu, 01 Jan 1970 00:00:00 GMT", now: now) == .zero)
        #expect(RetryAfter.delay("Sat, 01 Jan 0000 00:00:00 GMT", now: now) == .zero)
        #expect(RetryAfter.delay(date, now: .distantFuture) == .zero)
    }

    @Test func fractionalNowGivesSubSecondDelays() {
        let now = Date(timeIntervalSince1970: exampleSeconds - 0.25)
        #expect(RetryAfter.delay("Sun, 06 Nov 1994 08:49:37 GMT", now: now) == .milliseconds(250))
    }

    @Test func farFutureDatesSaturate() {
        #expect(RetryAfter.delay("Fri, 31 Dec 9999 23:59:59 GMT", now: now) == limit)
        #expect(RetryAfter.delay("Fri, 31 Dec 9999 23:59:59 GMT", now: .distantPast) == limit)
        // Just inside the limit: 10⁹ − 1 seconds after `now`.
        let start = Date(timeIntervalSince1970: exampleSeconds)
        let inside = Date(timeIntervalSince1970: exampleSeconds + 999_999_999)
        #expect(RetryAfter.delay(format(inside), now: start) == .seconds(999_999_999))
    }

    @Test func nonFiniteNowRejectsDatesButKeepsSeconds() {
        let nan = Date(timeIntervalSince1970: .nan)
        #expect(RetryAfter.delay("Sun, 06 Nov 1994 08:49:37 GMT", now: nan) == nil)
        #expect(RetryAfter.delay("5", now: nan) == .seconds(5))
        #expect(RetryAfter.delay("Sun, 06 Nov 1994 08:49:37 GMT", now: Date(timeIntervalSince1970: .infinity)) == nil)
    }

    @Test(arguments: [
        "Sun, 31 Feb 1994 08:49:37 GMT",  // no such day
        "Sun, 29 Feb 2023 08:49:37 GMT",  // not a leap year
        "Sun, 29 Feb 1900 08:49:37 GMT",  // not a leap year (century)
        "Sun, 00 Nov 1994 08:49:37 GMT",
        "Sun, 32 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 06 Nov 1994 08:49:61 GMT",
        "Sun, 06 Nov 1994 8:49:37 GMT",  // one-digit hour
        "Sun, 06 Nov 1994 08:49:37",  // no zone
        "Sun, 06 Nov 1994 08:49:37 PST",
        "Sun, 06 Nov 1994 08:49:37 +0000",
        "Sun, 06 Nov 94 08:49:37 GMT",  // IMF-fixdate needs four digits
        "Sun, 06 Nov 19945 08:49:37 GMT",
        "Sunday, 06-Nov-994 08:49:37 GMT",  // RFC 850 with three digits
        "Xyz, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Foo 1994 08:49:37 GMT",
        "Sun 06 Nov 1994 08:49:37 GMT",  // no comma
        "Sun,06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT x",
        "Sun, 06 Nov 1994 08:49:37 GMT, Mon, 07 Nov 1994 08:49:37 GMT",
        "Sun Nov  6 08:49:37 94",  // asctime needs four digits
        "Sun Nov  6 08:49:37 1994 GMT",
        "Sun Nov   6 08:49:37 1994",
        "2024-01-01T00:00:00Z",
        "Sun, 06 Nov 1994 08:49:37 GMT\u{0}",
        "Ｓun, 06 Nov 1994 08:49:37 GMT",
    ])
    func malformedDatesAreRejected(value: String) {
        #expect(RetryAfter.delay(value, now: now) == nil)
        #expect(RetryAfter.date(value, now: now) == nil)
    }

    @Test func leapDaysAndLeapSeconds() {
        #expect(RetryAfter.date("Thu, 29 Feb 2024 12:00:00 GMT", now: now) == utc(2024, 2, 29, 12))
        #expect(RetryAfter.date("Tue, 29 Feb 2000 12:00:00 GMT", now: now) == utc(2000, 2, 29, 12))
        // A leap second reads as the first second of the next minute.
        #expect(RetryAfter.date("Sat, 31 Dec 2016 23:59:60 GMT", now: now) == utc(2017, 1, 1))
    }

    @Test func rfc850TwoDigitYearsAreAtMostFiftyYearsAhead() throws {
        let in2025 = try #require(utc(2025, 6, 1))
        #expect(RetryAfter.date("Sunday, 06-Nov-94 08:49:37 GMT", now: in2025) == utc(1994, 11, 6, 8, 49, 37))
        #expect(RetryAfter.date("Friday, 01-Jan-30 00:00:00 GMT", now: in2025) == utc(2030, 1, 1))
        #expect(RetryAfter.date("Friday, 01-Jan-75 00:00:00 GMT", now: in2025) == utc(2075, 1, 1))
        #expect(RetryAfter.date("Friday, 01-Jan-76 00:00:00 GMT", now: in2025) == utc(1976, 1, 1))
        let in2099 = try #require(utc(2099, 6, 1))
        #expect(RetryAfter.date("Friday, 01-Jan-01 00:00:00 GMT", now: in2099) == utc(2101, 1, 1))
        #expect(RetryAfter.date("Friday, 01-Jan-50 00:00:00 GMT", now: in2099) == utc(2050, 1, 1))
        // Far-away or non-finite clocks never trap.
        #expect(RetryAfter.date("Friday, 01-Jan-01 00:00:00 GMT", now: .distantFuture) != nil)
        #expect(RetryAfter.date("Friday, 01-Jan-01 00:00:00 GMT", now: .distantPast) != nil)
    }

    /// 2,000 random instants from 1601 (after the Julian–Gregorian cutover Foundation's calendar applies) to 9999, formatted with Foundation's calendar in all three forms, parse
    /// back to the same instant.
    @Test func randomDatesRoundTripAgainstFoundationsCalendar() throws {
        var generator = SeededRandomNumberGenerator(seed: 0x5EED)
        for _ in 0..<2_000 {
            let seconds = Double(Int64.random(in: -11_644_473_600...253_402_300_799, using: &generator))
            let date = Date(timeIntervalSince1970: seconds)
            let imf = format(date)
            #expect(RetryAfter.date(imf, now: now) == date, "\(imf)")
            let asctime = format(date, style: .asctime)
            #expect(RetryAfter.date(asctime, now: now) == date, "\(asctime)")
        }
    }

    @Test func headerLookupInAResponse() {
        let response = makeResponse(503, headers: ["retry-after": " 7 "])
        #expect(RetryAfter.delay(in: response, now: now) == .seconds(7))
        #expect(RetryAfter.delay(in: makeResponse(503), now: now) == nil)
        #expect(RetryAfter.delay(in: makeResponse(503, headers: ["Retry-After": "later"]), now: now) == nil)
    }
}

// MARK: - Helpers

private enum DateStyle {
    case imf
    case asctime
}

/// Formats `date` as an HTTP-date with Foundation's calendar in UTC (the test's oracle, independent of the parser).
private func format(_ date: Date, style: DateStyle = .imf) -> String {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
    let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .weekday], from: date)
    let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    let day = days[((c.weekday ?? 1) - 1) % 7]
    let month = months[((c.month ?? 1) - 1) % 12]
    func two(_ value: Int?) -> String { value.map { $0 < 10 ? "0\($0)" : "\($0)" } ?? "00" }
    func four(_ value: Int?) -> String {
        let text = "\(value ?? 0)"
        return String(repeating: "0", count: max(0, 4 - text.count)) + text
    }
    let time = "\(two(c.hour)):\(two(c.minute)):\(two(c.second))"
    switch style {
    case .imf:
        return "\(day), \(two(c.day)) \(month) \(four(c.year)) \(time) GMT"
    case .asctime:
        let paddedDay = (c.day ?? 1) < 10 ? " \(c.day ?? 1)" : "\(c.day ?? 1)"
        return "\(day) \(month) \(paddedDay) \(time) \(four(c.year))"
    }
}

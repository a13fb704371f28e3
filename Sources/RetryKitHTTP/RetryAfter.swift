import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Parsing of the `Retry-After` response header field (RFC 9110 §10.2.3): how long the server asks the client to wait.
///
/// ```
/// Retry-After = HTTP-date / delay-seconds
/// ```
///
/// ```swift
/// RetryAfter.delay("120", now: now)                             // 120 s
/// RetryAfter.delay("Fri, 31 Dec 1999 23:59:59 GMT", now: now)   // the time until then, or zero if it has passed
/// RetryAfter.delay("soon", now: now)                            // nil
/// ```
///
/// The rules, chosen so that a hint never traps and a malformed hint is ignored rather than guessed at:
///
/// - **delay-seconds** is one or more ASCII digits. Spaces and tabs around the value are ignored. A sign (`-5`, `+5`),
///   a fraction (`1.5`), an exponent or any other character makes the value invalid (`nil`): the grammar is
///   `1*DIGIT`, and a client that rounded `1.5` either way would be guessing what the server meant. Leading zeros are
///   fine. Values beyond `BackoffStrategy.saturationLimit` (10⁹ s), however many digits, saturate at that limit.
/// - **HTTP-date** is accepted in all three forms recipients must accept (RFC 9110 §5.6.7), case-insensitively:
///   - IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`
///   - obsolete RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT`; a two-digit year is read as the year with those last two
///     digits that is at most 50 years after `now`'s year (so `94` is 1994 and `30` is 2030 when `now` is in 2025);
///     a four-digit year is accepted too
///   - obsolete asctime: `Sun Nov  6 08:49:37 1994`
///
///   The day name must be a valid (short or long) English day name but need not match the date. The date must exist
///   (no 30 February); hours 0–23, minutes 0–59, seconds 0–60 (a leap second counts as the next second). The delay is
///   the time from `now` to that instant; a date in the past (or equal to `now`) gives zero; a date further away than
///   the saturation limit saturates.
/// - Anything else, including an empty value or several comma-separated values, is `nil`.
///
/// The parser is a small hand-written scanner over UTF-8 bytes: no `DateFormatter`, no locale, no time zone database.
public enum RetryAfter {
    /// The delay a `Retry-After` value asks for, measured from `now`, or `nil` if the value is not valid.
    ///
    /// - Parameters:
    ///   - value: The field value, for example `"120"` or `"Sun, 06 Nov 1994 08:49:37 GMT"`.
    ///   - now: The current time; HTTP-dates are measured from it, and RFC 850 two-digit years are resolved with it.
    ///     A non-finite `now` makes every HTTP-date invalid.
    /// - Returns: A delay in `[0, BackoffStrategy.saturationLimit]`, or `nil`.
    public static func delay(_ value: String, now: Date) -> Duration? {
        let trimmed = trimmedBytes(value)
        guard !trimmed.isEmpty else { return nil }
        if trimmed.allSatisfy(isDigit) {
            return .seconds(saturatingSeconds(trimmed))
        }
        guard let date = HTTPDateScanner(trimmed, now: now)?.secondsSince1970 else { return nil }
        return delay(until: date, now: now)
    }

    /// The delay the `Retry-After` header of `response` asks for, measured from `now`, or `nil` if the response has no
    /// such header or its value is not valid (see ``delay(_:now:)``).
    package static func delay(in response: HTTPURLResponse, now: Date) -> Duration? {
        guard let value = response.value(forHTTPHeaderField: "Retry-After") else { return nil }
        return delay(value, now: now)
    }

    /// Parses an HTTP-date in any of its three forms (see ``RetryAfter``), or returns `nil`.
    ///
    /// - Parameters:
    ///   - value: The date text; spaces and tabs around it are ignored.
    ///   - now: Resolves RFC 850 two-digit years.
    package static func date(_ value: String, now: Date) -> Date? {
        guard let seconds = HTTPDateScanner(trimmedBytes(value), now: now)?.secondsSince1970 else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    // MARK: - Helpers

    /// The UTF-8 bytes of `value` without the spaces and tabs around them.
    private static func trimmedBytes(_ value: String) -> ArraySlice<UInt8> {
        let bytes = Array(value.utf8)
        var start = 0
        var end = bytes.count
        while start < end, isWhitespace(bytes[start]) { start += 1 }
        while end > start, isWhitespace(bytes[end - 1]) { end -= 1 }
        return bytes[start..<end]
    }

    /// The largest number of seconds a hint can ask for: `BackoffStrategy.saturationLimit`.
    static var limitSeconds: Int64 {
        BackoffStrategy<ContinuousClock>.saturationLimit.components.seconds
    }

    private static func saturatingSeconds(_ digits: ArraySlice<UInt8>) -> Int64 {
        var value: Int64 = 0
        for digit in digits {
            value = value * 10 + Int64(digit - 48)
            if value >= limitSeconds { return limitSeconds }  // no overflow: value < 10⁹ before multiplying
        }
        return value
    }

    private static func delay(until target: Int64, now: Date) -> Duration? {
        let nowSeconds = now.timeIntervalSince1970
        guard nowSeconds.isFinite else { return nil }
        let difference = Double(target) - nowSeconds  // both well inside Double's exact integer range
        guard difference > 0 else { return .zero }
        guard difference < Double(limitSeconds) else { return .seconds(limitSeconds) }
        let whole = difference.rounded(.down)
        let nanoseconds = ((difference - whole) * 1e9).rounded()
        return .seconds(Int64(whole)) + .nanoseconds(Int64(nanoseconds))
    }

    static func isWhitespace(_ byte: UInt8) -> Bool { byte == 32 || byte == 9 }
    static func isDigit(_ byte: UInt8) -> Bool { byte >= 48 && byte <= 57 }
}

/// Scans one HTTP-date (IMF-fixdate, RFC 850 or asctime) into seconds since 1970-01-01T00:00:00Z.
struct HTTPDateScanner {
    private static let shortDays = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    private static let longDays = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    private(set) var secondsSince1970: Int64

    private let bytes: ArraySlice<UInt8>
    private var index: Int

    init?(_ bytes: ArraySlice<UInt8>, now: Date) {
        self.bytes = bytes
        self.index = bytes.startIndex
        self.secondsSince1970 = 0
        guard let seconds = scan(now: now) else { return nil }
        self.secondsSince1970 = seconds
    }

    private mutating func scan(now: Date) -> Int64? {
        guard let dayName = letters()?.lowercased(),
            Self.shortDays.contains(dayName) || Self.longDays.contains(dayName)
        else { return nil }

        let year: Int64
        let month: Int64
        let day: Int64
        let time: (hour: Int64, minute: Int64, second: Int64)
        if take(44) {  // ","  → IMF-fixdate or RFC 850
            guard take(32), let d = digits(1...2) else { return nil }
            day = d
            if take(45) {  // "-" → RFC 850: DD-Mon-YY
                guard let m = monthName(), take(45) else { return nil }
                let yearStart = index
                guard let y = digits(2...4), index - yearStart != 3 else { return nil }
                month = m
                // Two digits as the grammar says; four digits accepted too, since some servers send them.
                year = index - yearStart == 2 ? Self.resolveTwoDigitYear(y, now: now) : y
            } else {  // IMF-fixdate: DD Mon YYYY
                guard take(32), let m = monthName(), take(32), let y = digits(4...4) else { return nil }
                month = m
                year = y
            }
            guard take(32), let t = timeOfDay(), take(32), letters()?.lowercased() == "gmt" else { return nil }
            time = t
        } else {  // asctime: Mon DD HH:MM:SS YYYY, the day padded with a space
            guard take(32), let m = monthName(), take(32) else { return nil }
            _ = take(32)
            guard let d = digits(1...2), take(32), let t = timeOfDay(), take(32), let y = digits(4...4) else {
                return nil
            }
            month = m
            day = d
            year = y
            time = t
        }
        guard index == bytes.endIndex else { return nil }
        guard day >= 1, day <= Self.daysIn(month: month, year: year) else { return nil }
        guard time.hour <= 23, time.minute <= 59, time.second <= 60 else { return nil }
        let days = Self.daysSince1970(year: year, month: month, day: day)
        return days * 86_400 + time.hour * 3_600 + time.minute * 60 + time.second
    }

    // MARK: Tokens

    private mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.endIndex, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private mutating func letters() -> String? {
        let start = index
        while index < bytes.endIndex, (65...90).contains(bytes[index]) || (97...122).contains(bytes[index]) {
            index += 1
        }
        return index > start ? String(decoding: bytes[start..<index], as: UTF8.self) : nil
    }

    private mutating func digits(_ count: ClosedRange<Int>) -> Int64? {
        let start = index
        var value: Int64 = 0
        while index < bytes.endIndex, index - start < count.upperBound, RetryAfter.isDigit(bytes[index]) {
            value = value * 10 + Int64(bytes[index] - 48)
            index += 1
        }
        guard count.contains(index - start) else { return nil }
        // A longer run of digits than allowed is invalid, not truncated.
        if index < bytes.endIndex, RetryAfter.isDigit(bytes[index]) { return nil }
        return value
    }

    private mutating func monthName() -> Int64? {
        guard let name = letters()?.lowercased(), let position = Self.months.firstIndex(of: name) else { return nil }
        return Int64(position + 1)
    }

    private mutating func timeOfDay() -> (hour: Int64, minute: Int64, second: Int64)? {
        guard let hour = digits(2...2), take(58), let minute = digits(2...2), take(58), let second = digits(2...2)
        else { return nil }
        return (hour, minute, second)
    }

    // MARK: Calendar arithmetic (proleptic Gregorian, UTC)

    /// The year ending in `twoDigits` that is at most 50 years after the current year (RFC 9110 §5.6.7).
    static func resolveTwoDigitYear(_ twoDigits: Int64, now: Date) -> Int64 {
        let seconds = now.timeIntervalSince1970
        // Clamped so that the conversion cannot trap; NaN becomes 0 (1970).
        let clamped = seconds > -1e13 ? Swift.min(seconds, 1e13) : -1e13
        let days = Int64((clamped / 86_400).rounded(.down))
        let currentYear = civilYear(daysSince1970: days)
        let latest = currentYear + 50
        let remainder = ((latest - twoDigits) % 100 + 100) % 100
        return latest - remainder
    }

    static func isLeap(_ year: Int64) -> Bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to the given date (negative before it).
    static func daysSince1970(year: Int64, month: Int64, day: Int64) -> Int64 {
        // Counting from 1 March of year 0 puts the leap day at the end of each counted year.
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let shiftedMonth = month > 2 ? month - 3 : month + 9
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The Gregorian year containing the day `daysSince1970`.
    static func civilYear(daysSince1970 days: Int64) -> Int64 {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    }
}

import Foundation

/// IMF-fixdate (RFC 9110 §5.6.7) for whole seconds since 1970, printed and parsed exactly.
///
/// Parsing accepts only the exact text printing produces (right weekday, two-digit day, `GMT`),
/// so `print(parse(s)) == s` for every accepted `s`.
public enum HTTPDate {
    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    /// The last second IMF-fixdate can show: 9999-12-31 23:59:59 GMT.
    public static let maximumSeconds: UInt64 = 253_402_300_799

    /// The whole seconds since 1970 now, as a `Date` header counts them.
    public static var currentSeconds: UInt64 { UInt64(max(0, Date().timeIntervalSince1970)) }

    /// The IMF-fixdate of now: a `Date` header's value.
    public static var now: String { format(currentSeconds) }

    /// The IMF-fixdate for `seconds` after 1970-01-01 00:00:00 GMT, e.g. `Thu, 01 Jan 1970 00:00:07 GMT`.
    public static func format(_ seconds: UInt64) -> String {
        precondition(seconds <= maximumSeconds, "HTTPDate.format: \(seconds) is past year 9999")
        let days = Int(seconds / 86_400)
        let secondOfDay = Int(seconds % 86_400)
        let (year, month, day) = civil(fromDays: days)
        return "\(weekdays[days % 7]), \(pad(day, 2)) \(months[month - 1]) \(pad(year, 4)) "
            + "\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2)) GMT"
    }

    /// The seconds since 1970 named by an IMF-fixdate, or nil when `text` is not exactly one.
    public static func parse(_ text: String) -> UInt64? {
        let bytes = Array(text.utf8)
        // "Sun, 06 Nov 1994 08:49:37 GMT" is always 29 bytes.
        guard bytes.count == 29, text.hasSuffix(" GMT"), bytes[3] == UInt8(ascii: ","), bytes[4] == 0x20,
            bytes[7] == 0x20, bytes[11] == 0x20, bytes[16] == 0x20, bytes[19] == UInt8(ascii: ":"),
            bytes[22] == UInt8(ascii: ":")
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        let monthName = String(decoding: bytes[8..<11], as: UTF8.self)
        guard let day = number(5..<7), let year = number(12..<16), let hour = number(17..<19),
            let minute = number(20..<22), let second = number(23..<25),
            let monthIndex = months.firstIndex(of: monthName),
            year >= 1970, hour < 24, minute < 60, second < 60, day >= 1, day <= daysIn(month: monthIndex + 1, year: year)
        else { return nil }
        let days = daysFromCivil(year: year, month: monthIndex + 1, day: day)
        let seconds = UInt64(days) * 86_400 + UInt64(hour * 3600 + minute * 60 + second)
        // Reject a wrong weekday (and anything else not printed exactly this way).
        return format(seconds) == text ? seconds : nil
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    // Howard Hinnant's civil-from-days and days-from-civil, for the proleptic Gregorian calendar.
    private static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = z / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}

import FoundationEssentials

/// A calendar date (proleptic Gregorian), no time or time zone.
public struct BirthDate: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let year: Int
    public let month: Int
    public let day: Int

    /// No validation: use `valid(year:month:day:)` for untrusted input.
    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// The date if it exists in the calendar.
    public static func valid(year: Int, month: Int, day: Int) -> BirthDate? {
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        return BirthDate(year: year, month: month, day: day)
    }

    /// Parses `YYYY-MM-DD` (the OpenID Connect `birthdate` claim).
    public init?(iso text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]),
              let date = BirthDate.valid(year: y, month: m, day: d)
        else { return nil }
        self = date
    }

    public static func isLeap(_ year: Int) -> Bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    public static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Whole years completed on `date`. Someone born on 29 February
    /// completes a year on 1 March in common years. Negative ages (a date
    /// before the birth) come out as -1, -2, …
    public func age(on date: BirthDate) -> Int {
        var years = date.year - year
        if (date.month, date.day) < (month, day) { years -= 1 }
        return years
    }

    /// Today's date in `timeZone` (Norway's by default: an age limit is about
    /// the Norwegian calendar day).
    public static func today(at instant: Date = Date(), timeZone: TimeZone? = nil) -> BirthDate {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone ?? TimeZone(identifier: "Europe/Oslo") ?? .current
        let c = calendar.dateComponents([.year, .month, .day], from: instant)
        return BirthDate(year: c.year ?? 1970, month: c.month ?? 1, day: c.day ?? 1)
    }

    public static func < (lhs: BirthDate, rhs: BirthDate) -> Bool {
        (lhs.year, lhs.month, lhs.day) < (rhs.year, rhs.month, rhs.day)
    }

    /// `YYYY-MM-DD`.
    public var description: String {
        func pad(_ n: Int, _ width: Int) -> String {
            let s = String(n)
            return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))"
    }
}

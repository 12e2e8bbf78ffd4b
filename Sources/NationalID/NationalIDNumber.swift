import SodiumKit

/// A validated Norwegian national identity number (fødselsnummer, D-number,
/// H-number or a synthetic test number).
///
/// The eleven digits live in libsodium guarded memory (`SecureBytes`) and are
/// never part of a `String` this type makes: `description`, `debugDescription`
/// and the reflection mirror all show the masked form `DDMMYY*****`. Hand the
/// digits to a member registry with `withUnsafeDigits` or `secureDigits`;
/// compare two numbers with `==` (constant time); index or log them with
/// `keyedHash(key:)`.
///
/// Layout: `D1 D2 M1 M2 Y1 Y2 I1 I2 I3 K1 K2` — day, month, two-digit year,
/// individual number, two mod-11 check digits.
public struct NationalIDNumber: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// What the number is, from the offsets on day and month.
    public enum Kind: Sendable, Equatable, Hashable {
        /// An ordinary fødselsnummer.
        case fodselsnummer
        /// D-number: first digit + 4 (day 41–71), for people not resident.
        case dNumber
        /// H-number (hjelpenummer): month + 40 (41–52).
        case hNumber
        /// A synthetic test number. A synthetic D-number is still synthetic;
        /// see `isDNumber`.
        case synthetic(SyntheticSource)
    }

    /// Who marks synthetic numbers how.
    public enum SyntheticSource: Sendable, Equatable, Hashable {
        /// Skatteetaten's test register (Tenor): month + 80 (81–92).
        case skatteetaten
        /// NAV's test data (Dolly): month + 40, the same offset as an
        /// H-number; read that way only when `ParseOptions.monthPlus40` says so.
        case nav
    }

    /// Which check-digit rule the number satisfies.
    public enum CheckRule: Sendable, Equatable, Hashable {
        /// The rule for every number issued before 2032: the first check
        /// digit's weighted remainder is 0. Such numbers encode the century in
        /// the individual number (Skatteetaten's table), so the birth date is
        /// known.
        case classic
        /// Only the rule for numbers issued from 1 January 2032: remainder 1,
        /// 2 or 3. These numbers no longer encode the century (nor gender):
        /// `birthDate` is nil, the register has the date.
        case from2032
    }

    private let digits: SecureBytes
    public let kind: Kind
    /// True for D-numbers, including synthetic D-numbers.
    public let isDNumber: Bool
    public let checkRule: CheckRule
    /// The birth date when the number still encodes it: a classic-rule
    /// number whose individual number falls in one of Skatteetaten's century
    /// ranges. Nil for numbers that validate only under the 2032 rule and for
    /// combinations the century table does not cover.
    public let birthDate: BirthDate?
    /// `DDMMYY*****`: the first six digits as written (D/H/synthetic offsets
    /// included), the personal number hidden. This is the only form of the
    /// number that may appear in logs, audit entries and messages.
    public let masked: String

    /// Parses and validates eleven ASCII digits (no spaces or separators).
    /// The text is copied into secure memory; the caller's `String` cannot be
    /// wiped, so prefer `init(secure:)` where the number already is in
    /// secure memory.
    public init(_ text: String, options: ParseOptions = .default) throws(NationalIDError) {
        var bytes = Array(text.utf8)
        let secure: SecureBytes
        do {
            secure = try SecureBytes.consuming(&bytes)
        } catch {
            throw .secureMemory
        }
        try self.init(secure: secure, options: options)
    }

    /// Parses and validates eleven ASCII digits held in secure memory (e.g.
    /// `VerifiedLogin.nationalID`). The number keeps its own copy.
    public init(secure: SecureBytes, options: ParseOptions = .default) throws(NationalIDError) {
        let analysis = secure.withUnsafeBytes { Self.analyse($0, options: options) }
        let a = try analysis.get()
        let copy: SecureBytes
        do {
            copy = try SecureBytes(count: secure.count) { out in
                secure.withUnsafeBytes { out.copyMemory(from: $0) }
            }
        } catch {
            throw .secureMemory
        }
        digits = copy
        kind = a.kind
        isDNumber = a.isDNumber
        checkRule = a.rule
        birthDate = a.birthDate
        masked = a.masked
    }

    // MARK: - Output that never shows the digits

    public var description: String { masked }
    public var debugDescription: String { "NationalIDNumber(\(masked))" }
    public var customMirror: Mirror {
        Mirror(self, children: ["masked": masked, "kind": kind], displayStyle: .struct)
    }

    /// BLAKE2b-256 keyed with `key` (16–64 bytes) over a domain label and the
    /// eleven digits, as lowercase hex. Stable for the same key, so it can
    /// index and correlate ("is this the number we saw before?") without the
    /// number; useless without the key.
    public func keyedHash(key: SecureBytes) throws(SodiumError) -> String {
        let hash = try KeyDerivation.derive(key: key, parts: [.label("sessionvault/national-id/v1"), .secret(digits)])
        var bytes = hash.unsafeCopyToArray()
        defer { Sodium.wipe(&bytes) }
        return Digest.hex(bytes)
    }

    /// The age in whole years on `date`, when the number encodes the birth date.
    public func age(on date: BirthDate) -> Int? {
        birthDate?.age(on: date)
    }

    /// The eleven ASCII digits, for the few places that must send them to the
    /// member record. Do not copy them into a `String` or an unwiped array.
    public func withUnsafeDigits<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try digits.withUnsafeBytes(body)
    }

    /// The digits in secure memory (e.g. to seal them into a queued job).
    public var secureDigits: SecureBytes { digits }

    /// Constant-time comparison of the digits.
    public static func == (lhs: NationalIDNumber, rhs: NationalIDNumber) -> Bool {
        lhs.digits.constantTimeEquals(rhs.digits)
    }

    // MARK: - Validation

    struct Analysis {
        var kind: Kind
        var isDNumber: Bool
        var rule: CheckRule
        var birthDate: BirthDate?
        var masked: String
    }

    static let weights1 = [3, 7, 6, 1, 8, 9, 4, 5, 2]
    static let weights2 = [5, 4, 3, 2, 7, 6, 5, 4, 3, 2]

    /// Reads the digits straight from the buffer: no copy of the number is made.
    static func analyse(_ p: UnsafeRawBufferPointer, options: ParseOptions) -> Result<Analysis, NationalIDError> {
        guard p.count == 11 else { return .failure(.wrongLength(p.count)) }
        for byte in p where byte < 0x30 || byte > 0x39 {
            return .failure(.notDigits)
        }
        func d(_ i: Int) -> Int { Int(p[i]) - 0x30 }

        // Check digits. Classic rule: (Σ w1·d + K1) mod 11 == 0, which is the
        // textbook K1 = 11 − (Σ mod 11), 11 → 0, 10 → discarded. From 2032 the
        // remainder may also be 1, 2 or 3. K2 is unchanged: remainder 0.
        var sum1 = d(9)
        for i in 0..<9 { sum1 += weights1[i] * d(i) }
        let remainder1 = sum1 % 11
        let rule: CheckRule
        switch remainder1 {
        case 0: rule = .classic
        case 1...3 where options.accept2032Rule: rule = .from2032
        default: return .failure(.checkDigit1)
        }
        var sum2 = d(10)
        for i in 0..<10 { sum2 += weights2[i] * d(i) }
        guard sum2 % 11 == 0 else { return .failure(.checkDigit2) }

        // Kind, from the offsets.
        var day = d(0) * 10 + d(1)
        var month = d(2) * 10 + d(3)
        let yearOfCentury = d(4) * 10 + d(5)
        let individual = d(6) * 100 + d(7) * 10 + d(8)

        var isDNumber = false
        if day > 40 {
            day -= 40
            isDNumber = true
        }
        var kind: Kind = isDNumber ? .dNumber : .fodselsnummer
        switch month {
        case 1...12:
            break
        case 41...52:
            month -= 40
            switch options.monthPlus40 {
            case .hNumber:
                // An H-number is never also a D-number.
                if isDNumber { return .failure(.invalidDate) }
                kind = .hNumber
            case .navSynthetic:
                kind = .synthetic(.nav)
            }
        case 81...92:
            month -= 80
            kind = .synthetic(.skatteetaten)
        default:
            return .failure(.invalidDate)
        }

        // Century (classic numbers only; from 2032 the individual number no
        // longer encodes it).
        let century: Int? = rule == .classic ? Self.century(individual: individual, yearOfCentury: yearOfCentury) : nil
        if century == nil, rule == .classic, options.requireKnownCentury {
            return .failure(.centuryUnknown)
        }

        // The date must exist. Without a century, 29 February is allowed in any
        // year of century divisible by 4 (2000 was a leap year).
        let maxDay: Int
        if let century {
            maxDay = BirthDate.daysIn(month: month, year: century + yearOfCentury)
        } else {
            maxDay = month == 2 ? (yearOfCentury % 4 == 0 ? 29 : 28) : BirthDate.daysIn(month: month, year: 2001)
        }
        guard day >= 1, day <= maxDay else { return .failure(.invalidDate) }

        switch kind {
        case .fodselsnummer: break
        case .dNumber: if !options.acceptDNumbers { return .failure(.kindNotAccepted) }
        case .hNumber: if !options.acceptHNumbers { return .failure(.kindNotAccepted) }
        case .synthetic: if !options.acceptSynthetic { return .failure(.kindNotAccepted) }
        }
        if isDNumber, !options.acceptDNumbers { return .failure(.kindNotAccepted) }

        var masked = ""
        masked.reserveCapacity(11)
        for i in 0..<6 { masked.append(Character(Unicode.Scalar(p[i]))) }
        masked += "*****"

        let birthDate = century.map { BirthDate(year: $0 + yearOfCentury, month: month, day: day) }
        return .success(Analysis(kind: kind, isDNumber: isDNumber, rule: rule, birthDate: birthDate, masked: masked))
    }

    /// Skatteetaten's table: which century an individual number belongs to,
    /// given the two-digit year.
    ///
    /// | individual | year  | born      |
    /// |------------|-------|-----------|
    /// | 000–499    | 00–99 | 1900–1999 |
    /// | 500–749    | 54–99 | 1854–1899 |
    /// | 500–999    | 00–39 | 2000–2039 |
    /// | 900–999    | 40–99 | 1940–1999 |
    ///
    /// Anything else (500–749 with 40–53, 750–899 with 40–99) is not covered:
    /// nil.
    public static func century(individual: Int, yearOfCentury: Int) -> Int? {
        switch (individual, yearOfCentury) {
        case (0...499, 0...99): return 1900
        case (500...999, 0...39): return 2000
        case (500...749, 54...99): return 1800
        case (900...999, 40...99): return 1900
        default: return nil
        }
    }
}

/// How to read and what to accept.
public struct ParseOptions: Sendable, Equatable {
    /// Month + 40 means an H-number in production registers and a synthetic
    /// number in NAV's test data. The number alone cannot tell.
    public enum MonthPlus40: Sendable, Equatable {
        case hNumber
        case navSynthetic
    }

    public var monthPlus40: MonthPlus40
    public var acceptDNumbers: Bool
    public var acceptHNumbers: Bool
    /// Synthetic test numbers (Tenor month + 80; NAV month + 40 when
    /// `monthPlus40 == .navSynthetic`).
    public var acceptSynthetic: Bool
    /// Numbers issued from 2032 (first check digit remainder 1, 2 or 3).
    public var accept2032Rule: Bool
    /// Reject a classic-rule number whose individual number and year fall
    /// outside the century table. Off by default: a number issued from 2032
    /// may satisfy the classic rule too (remainder 0) and then carries no
    /// century either.
    public var requireKnownCentury: Bool

    public init(monthPlus40: MonthPlus40 = .hNumber, acceptDNumbers: Bool = true, acceptHNumbers: Bool = true,
                acceptSynthetic: Bool = true, accept2032Rule: Bool = true, requireKnownCentury: Bool = false) {
        self.monthPlus40 = monthPlus40
        self.acceptDNumbers = acceptDNumbers
        self.acceptHNumbers = acceptHNumbers
        self.acceptSynthetic = acceptSynthetic
        self.accept2032Rule = accept2032Rule
        self.requireKnownCentury = requireKnownCentury
    }

    /// Everything valid; month + 40 is an H-number.
    public static let `default` = ParseOptions()
    /// For NAV's test environments: month + 40 is a synthetic number.
    public static let navTestData = ParseOptions(monthPlus40: .navSynthetic)
    /// Production with real people only: no synthetic numbers.
    public static let productionOnly = ParseOptions(acceptSynthetic: false)
}

/// Why a number was rejected. Never carries the number or any of its digits.
public enum NationalIDError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not eleven characters (the count is given).
    case wrongLength(Int)
    /// Something other than the ASCII digits 0–9.
    case notDigits
    /// Day or month is not a date, after removing the D/H/synthetic offsets.
    case invalidDate
    /// The first mod-11 check digit does not match (either rule).
    case checkDigit1
    /// The second mod-11 check digit does not match.
    case checkDigit2
    /// `requireKnownCentury` is set and the individual number and year fall
    /// outside the century table.
    case centuryUnknown
    /// A D-number, H-number or synthetic number the options exclude.
    case kindNotAccepted
    /// Secure memory could not be allocated.
    case secureMemory

    public var description: String {
        switch self {
        case .wrongLength(let n): return "a national identity number has 11 digits, not \(n)"
        case .notDigits: return "a national identity number has only digits"
        case .invalidDate: return "the national identity number does not start with a valid date"
        case .checkDigit1: return "the national identity number's first check digit is wrong"
        case .checkDigit2: return "the national identity number's second check digit is wrong"
        case .centuryUnknown: return "the national identity number's individual number does not fit its year"
        case .kindNotAccepted: return "this kind of national identity number is not accepted here"
        case .secureMemory: return "secure memory could not be allocated"
        }
    }

    /// A short stable code for audit details.
    public var code: String {
        switch self {
        case .wrongLength: return "wrong_length"
        case .notDigits: return "not_digits"
        case .invalidDate: return "invalid_date"
        case .checkDigit1: return "check_digit_1"
        case .checkDigit2: return "check_digit_2"
        case .centuryUnknown: return "century_unknown"
        case .kindNotAccepted: return "kind_not_accepted"
        case .secureMemory: return "secure_memory"
        }
    }
}

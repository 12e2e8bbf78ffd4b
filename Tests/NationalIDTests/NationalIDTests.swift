import Foundation
import NationalID
import SodiumKit
import XCTest

// Every number here is built by `make` from a date and an individual number,
// or is one of Skatteetaten's published examples for numbers issued from 2032;
// none is taken from a real person. Most tests use dates in the 1850s/1860s or
// synthetic months so that no living person can hold them.

/// Builds an 11-digit number from its parts, choosing the first check digit so
/// that the weighted remainder is `remainder` (0 = the classic rule, 1–3 = the
/// rule from 2032). Nil when no digit fits (a check digit of 10).
func make(day: Int, month: Int, yy: Int, individual: Int, remainder: Int = 0) -> String? {
    var d = [day / 10, day % 10, month / 10, month % 10, yy / 10, yy % 10,
             individual / 100, (individual / 10) % 10, individual % 10]
    let w1 = [3, 7, 6, 1, 8, 9, 4, 5, 2]
    let w2 = [5, 4, 3, 2, 7, 6, 5, 4, 3, 2]
    let s1 = zip(w1, d).map { $0 * $1 }.reduce(0, +)
    let k1 = ((remainder - s1) % 11 + 11) % 11
    guard k1 < 10 else { return nil }
    d.append(k1)
    let s2 = zip(w2, d).map { $0 * $1 }.reduce(0, +)
    let k2 = (11 - s2 % 11) % 11
    guard k2 < 10 else { return nil }
    d.append(k2)
    return d.map(String.init).joined()
}

/// The first individual number in `range` for which both check digits exist.
func makeAny(day: Int, month: Int, yy: Int, individuals: ClosedRange<Int>, remainder: Int = 0) -> (String, Int)? {
    for i in individuals {
        if let n = make(day: day, month: month, yy: yy, individual: i, remainder: remainder) { return (n, i) }
    }
    return nil
}

/// A small deterministic generator (SplitMix64), so property runs repeat.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func expectError(_ text: String, _ expected: NationalIDError, options: ParseOptions = .default,
                 file: StaticString = #filePath, line: UInt = #line) {
    do {
        let n = try NationalIDNumber(text, options: options)
        XCTFail("accepted an invalid number (\(n.masked)), expected \(expected)", file: file, line: line)
    } catch {
        XCTAssertEqual(error, expected, file: file, line: line)
    }
}

final class NationalIDTests: XCTestCase {
    // MARK: - Valid numbers

    func testClassicFodselsnummer() throws {
        let (text, _) = try XCTUnwrap(makeAny(day: 15, month: 3, yy: 60, individuals: 500...749))
        let n = try NationalIDNumber(text)
        XCTAssertEqual(n.kind, .fodselsnummer)
        XCTAssertFalse(n.isDNumber)
        XCTAssertEqual(n.checkRule, .classic)
        XCTAssertEqual(n.birthDate, BirthDate(year: 1860, month: 3, day: 15))
        XCTAssertEqual(n.masked, "150360*****")
    }

    func testFromSecureBytesEqualsFromString() throws {
        let (text, _) = try XCTUnwrap(makeAny(day: 1, month: 12, yy: 55, individuals: 500...749))
        let a = try NationalIDNumber(text)
        let b = try NationalIDNumber(secure: SecureBytes.utf8(text))
        XCTAssertTrue(a == b)
        let (other, _) = try XCTUnwrap(makeAny(day: 2, month: 12, yy: 55, individuals: 500...749))
        XCTAssertFalse(a == (try NationalIDNumber(other)))
        a.withUnsafeDigits { XCTAssertEqual($0.count, 11) }
        XCTAssertEqual(a.secureDigits.count, 11)
    }

    func testCenturyRanges() throws {
        // (two-digit year, individual range, expected century or nil)
        let cases: [(Int, ClosedRange<Int>, Int?)] = [
            (0, 0...499, 1900), (99, 0...499, 1900), (54, 400...499, 1900),
            (54, 500...749, 1800), (99, 500...749, 1800), (75, 600...749, 1800),
            (0, 500...999, 2000), (39, 500...599, 2000), (39, 900...999, 2000), (10, 700...749, 2000),
            (40, 900...999, 1900), (99, 900...999, 1900),
            // Not in the table: 500–749 with 40–53, 750–899 with 40–99.
            (40, 500...749, nil), (53, 500...749, nil), (40, 750...899, nil), (99, 750...899, nil),
        ]
        for (yy, range, century) in cases {
            var found = 0
            for individual in range {
                guard let text = make(day: 10, month: 6, yy: yy, individual: individual) else { continue }
                let n = try NationalIDNumber(text)
                XCTAssertEqual(NationalIDNumber.century(individual: individual, yearOfCentury: yy), century)
                if let century {
                    XCTAssertEqual(n.birthDate, BirthDate(year: century + yy, month: 6, day: 10),
                                   "yy \(yy) individual \(individual)")
                } else {
                    XCTAssertNil(n.birthDate, "yy \(yy) individual \(individual)")
                    XCTAssertThrowsError(try NationalIDNumber(text, options: ParseOptions(requireKnownCentury: true))) {
                        XCTAssertEqual($0 as? NationalIDError, .centuryUnknown)
                    }
                }
                found += 1
            }
            XCTAssertGreaterThan(found, 0, "no valid number for yy \(yy) in \(range)")
        }
        // Edges of the table.
        XCTAssertEqual(NationalIDNumber.century(individual: 499, yearOfCentury: 45), 1900)
        XCTAssertEqual(NationalIDNumber.century(individual: 500, yearOfCentury: 39), 2000)
        XCTAssertEqual(NationalIDNumber.century(individual: 500, yearOfCentury: 40), nil)
        XCTAssertEqual(NationalIDNumber.century(individual: 749, yearOfCentury: 54), 1800)
        XCTAssertEqual(NationalIDNumber.century(individual: 750, yearOfCentury: 54), nil)
        XCTAssertEqual(NationalIDNumber.century(individual: 899, yearOfCentury: 60), nil)
        XCTAssertEqual(NationalIDNumber.century(individual: 900, yearOfCentury: 40), 1900)
        XCTAssertEqual(NationalIDNumber.century(individual: 999, yearOfCentury: 0), 2000)
    }

    func testDNumber() throws {
        let (text, _) = try XCTUnwrap(makeAny(day: 31 + 40, month: 12, yy: 62, individuals: 500...749))
        XCTAssertTrue(text.hasPrefix("7112"))
        let n = try NationalIDNumber(text)
        XCTAssertEqual(n.kind, .dNumber)
        XCTAssertTrue(n.isDNumber)
        XCTAssertEqual(n.birthDate, BirthDate(year: 1862, month: 12, day: 31))
        XCTAssertEqual(n.masked, "711262*****")
        XCTAssertThrowsError(try NationalIDNumber(text, options: ParseOptions(acceptDNumbers: false))) {
            XCTAssertEqual($0 as? NationalIDError, .kindNotAccepted)
        }
        // Day 32 + 40 is no date; nor is 80 (an old FH-number style first digit).
        let (bad, _) = try XCTUnwrap(makeAny(day: 72, month: 1, yy: 62, individuals: 500...749))
        expectError(bad, .invalidDate)
        let (fh, _) = try XCTUnwrap(makeAny(day: 81, month: 1, yy: 62, individuals: 500...749))
        expectError(fh, .invalidDate)
    }

    func testHNumberAndNAVSynthetic() throws {
        let (text, _) = try XCTUnwrap(makeAny(day: 5, month: 2 + 40, yy: 58, individuals: 500...749))
        let h = try NationalIDNumber(text)
        XCTAssertEqual(h.kind, .hNumber)
        XCTAssertEqual(h.birthDate, BirthDate(year: 1858, month: 2, day: 5))
        XCTAssertThrowsError(try NationalIDNumber(text, options: ParseOptions(acceptHNumbers: false))) {
            XCTAssertEqual($0 as? NationalIDError, .kindNotAccepted)
        }
        // The same digits in NAV's test data are a synthetic number.
        let nav = try NationalIDNumber(text, options: .navTestData)
        XCTAssertEqual(nav.kind, .synthetic(.nav))
        XCTAssertEqual(nav.birthDate, BirthDate(year: 1858, month: 2, day: 5))
        // NAV synthetic D-numbers exist; an H-number that is also a D-number does not.
        let (dh, _) = try XCTUnwrap(makeAny(day: 45, month: 2 + 40, yy: 58, individuals: 500...749))
        expectError(dh, .invalidDate)
        let navD = try NationalIDNumber(dh, options: .navTestData)
        XCTAssertEqual(navD.kind, .synthetic(.nav))
        XCTAssertTrue(navD.isDNumber)
        // Month 53 + is no month.
        let (m53, _) = try XCTUnwrap(makeAny(day: 5, month: 53, yy: 58, individuals: 500...749))
        expectError(m53, .invalidDate)
    }

    func testSkatteetatenSynthetic() throws {
        let (text, _) = try XCTUnwrap(makeAny(day: 17, month: 5 + 80, yy: 90, individuals: 0...499))
        let n = try NationalIDNumber(text)
        XCTAssertEqual(n.kind, .synthetic(.skatteetaten))
        XCTAssertFalse(n.isDNumber)
        XCTAssertEqual(n.birthDate, BirthDate(year: 1990, month: 5, day: 17))
        XCTAssertEqual(n.masked, "178590*****")
        XCTAssertThrowsError(try NationalIDNumber(text, options: .productionOnly)) {
            XCTAssertEqual($0 as? NationalIDError, .kindNotAccepted)
        }
        // A synthetic D-number.
        let (sd, _) = try XCTUnwrap(makeAny(day: 17 + 40, month: 5 + 80, yy: 5, individuals: 500...999))
        let d = try NationalIDNumber(sd)
        XCTAssertEqual(d.kind, .synthetic(.skatteetaten))
        XCTAssertTrue(d.isDNumber)
        XCTAssertEqual(d.birthDate, BirthDate(year: 2005, month: 5, day: 17))
        // Month 93 and 80 are not months.
        for month in [80, 93, 99, 13, 0, 20, 40, 53, 60] {
            let (bad, _) = try XCTUnwrap(makeAny(day: 17, month: month, yy: 90, individuals: 0...499))
            expectError(bad, .invalidDate)
        }
    }

    // MARK: - The rule from 2032

    func testSkatteetatensPublished2032Examples() throws {
        // From Skatteetaten's description of the new check digits (examples for
        // numbers to be issued from 2032): our helper reproduces them.
        XCTAssertEqual(make(day: 2, month: 1, yy: 32, individual: 999, remainder: 0), "02013299997")
        XCTAssertEqual(make(day: 2, month: 1, yy: 32, individual: 999, remainder: 2), "02013299903")
        XCTAssertEqual(make(day: 30, month: 10, yy: 82, individual: 999, remainder: 0), "30108299920")
        XCTAssertEqual(make(day: 30, month: 10, yy: 82, individual: 999, remainder: 1), "30108299939")

        let classic = try NationalIDNumber("30108299920")
        XCTAssertEqual(classic.checkRule, .classic)
        XCTAssertEqual(classic.birthDate, BirthDate(year: 1982, month: 10, day: 30))
        let new = try NationalIDNumber("30108299939")
        XCTAssertEqual(new.checkRule, .from2032)
        XCTAssertNil(new.birthDate, "numbers from 2032 no longer encode the century")
        XCTAssertEqual(new.masked, "301082*****")
        XCTAssertEqual(try NationalIDNumber("02013299903").checkRule, .from2032)
        expectError("30108299939", .checkDigit1, options: ParseOptions(accept2032Rule: false))
    }

    func test2032RuleRemainders() throws {
        var rng = SplitMix(state: 2032)
        var checked = 0
        while checked < 300 {
            let day = Int.random(in: 1...28, using: &rng)
            let month = Int.random(in: 1...12, using: &rng)
            let yy = Int.random(in: 0...99, using: &rng)
            let individual = Int.random(in: 0...999, using: &rng)
            for remainder in 0...10 {
                guard let text = make(day: day, month: month, yy: yy, individual: individual, remainder: remainder) else {
                    continue
                }
                switch remainder {
                case 0:
                    XCTAssertEqual(try NationalIDNumber(text).checkRule, .classic)
                case 1...3:
                    let n = try NationalIDNumber(text)
                    XCTAssertEqual(n.checkRule, .from2032)
                    XCTAssertNil(n.birthDate)
                    XCTAssertNil(n.age(on: BirthDate(year: 2040, month: 1, day: 1)))
                    expectError(text, .checkDigit1, options: ParseOptions(accept2032Rule: false))
                default:
                    expectError(text, .checkDigit1)
                }
                checked += 1
            }
        }
    }

    // MARK: - Invalid input

    func testMalformedInput() throws {
        let (valid, _) = try XCTUnwrap(makeAny(day: 15, month: 3, yy: 60, individuals: 500...749))
        expectError("", .wrongLength(0))
        expectError(String(valid.dropLast()), .wrongLength(10))
        expectError(valid + "0", .wrongLength(12))
        expectError(" " + valid.dropFirst(), .notDigits)
        expectError(String(valid.dropLast()) + "a", .notDigits)
        expectError("150360 4567", .notDigits)
        expectError("150360-4567", .notDigits)
        expectError(String(valid.dropLast()) + "\u{0661}", .wrongLength(12))  // Arabic-Indic one: two UTF-8 bytes
        expectError("+" + valid.dropFirst(), .notDigits)
    }

    func testInvalidDates() throws {
        // Day 0 and 32, month 0 and 13, 31 April, 30 February.
        for (day, month) in [(0, 1), (32, 1), (1, 0), (1, 13), (31, 4), (30, 2), (31, 6), (31, 11)] {
            let (text, _) = try XCTUnwrap(makeAny(day: day, month: month, yy: 60, individuals: 500...749))
            expectError(text, .invalidDate)
        }
        // 29 February: 1900 was no leap year, 2000 was, 1856 was.
        let (y1900, _) = try XCTUnwrap(makeAny(day: 29, month: 2, yy: 0, individuals: 0...499))
        expectError(y1900, .invalidDate)
        let (y2000, _) = try XCTUnwrap(makeAny(day: 29, month: 2, yy: 0, individuals: 500...999))
        XCTAssertEqual(try NationalIDNumber(y2000).birthDate, BirthDate(year: 2000, month: 2, day: 29))
        let (y1856, _) = try XCTUnwrap(makeAny(day: 29, month: 2, yy: 56, individuals: 500...749))
        XCTAssertEqual(try NationalIDNumber(y1856).birthDate, BirthDate(year: 1856, month: 2, day: 29))
        let (y1857, _) = try XCTUnwrap(makeAny(day: 29, month: 2, yy: 57, individuals: 500...749))
        expectError(y1857, .invalidDate)
    }

    func testWrongCheckDigits() throws {
        let (valid, _) = try XCTUnwrap(makeAny(day: 15, month: 3, yy: 60, individuals: 500...749))
        var digits = Array(valid)
        let k2 = digits[10].wholeNumberValue!
        digits[10] = Character(String((k2 + 1) % 10))
        expectError(String(digits), .checkDigit2)
        expectError("00000000000", .invalidDate)  // check digits fine (all zero), day 0
        // Remainder 2 on the first check digit: fine from 2032, wrong before.
        expectError("11111111111", .checkDigit2)
        expectError("11111111111", .checkDigit1, options: ParseOptions(accept2032Rule: false))
    }

    /// The classic check digits catch every single-digit error: for many
    /// valid classic numbers, every change of one digit to any other value is
    /// rejected (by a check digit, or as no date), even with the 2032 rule
    /// accepted — its looser first check digit is covered by the second.
    func testEverySingleDigitChangeIsRejected() throws {
        var rng = SplitMix(state: 0x5eed)
        var numbers: [String] = []
        while numbers.count < 400 {
            let yy = Int.random(in: 0...99, using: &rng)
            let individual = Int.random(in: 0...999, using: &rng)
            let month = Int.random(in: 1...12, using: &rng)
            let day = Int.random(in: 1...28, using: &rng)
            // All kinds: plain, D (+40 day), H (+40 month), Tenor synthetic (+80 month).
            let offsets = [(0, 0), (40, 0), (0, 40), (0, 80), (40, 80)]
            let (dayOffset, monthOffset) = offsets[Int.random(in: 0..<offsets.count, using: &rng)]
            if let n = make(day: day + dayOffset, month: month + monthOffset, yy: yy, individual: individual) {
                numbers.append(n)
            }
        }
        var mutants = 0
        for text in numbers {
            let valid = try NationalIDNumber(text)
            XCTAssertEqual(valid.checkRule, .classic)
            let original = Array(text.utf8)
            for position in 0..<11 {
                for value in UInt8(ascii: "0")...UInt8(ascii: "9") where value != original[position] {
                    var changed = original
                    changed[position] = value
                    let changedText = String(decoding: changed, as: UTF8.self)
                    XCTAssertThrowsError(try NationalIDNumber(changedText), "position \(position)")
                    mutants += 1
                }
            }
        }
        XCTAssertEqual(mutants, 400 * 11 * 9)
    }

    // MARK: - Never printing the digits

    func testDescriptionsAreMasked() throws {
        let (text, _) = try XCTUnwrap(makeAny(day: 24, month: 12, yy: 61, individuals: 500...749))
        let n = try NationalIDNumber(text)
        var dumped = ""
        dump(n, to: &dumped)
        let renderings = [
            n.description, n.debugDescription, "\(n)", String(describing: n), String(reflecting: n), dumped,
            "\([n])", "\(Optional(n) as Any)",
        ]
        let personal = String(text.suffix(5))
        for r in renderings {
            XCTAssertFalse(r.contains(text))
            XCTAssertFalse(r.contains(personal), "the personal number shows in a rendering")
            XCTAssertTrue(r.contains("241261*****"))
        }
        for error: NationalIDError in [.wrongLength(3), .notDigits, .invalidDate, .checkDigit1, .checkDigit2,
                                       .centuryUnknown, .kindNotAccepted, .secureMemory] {
            XCTAssertFalse(error.description.isEmpty)
            XCTAssertFalse(error.code.isEmpty)
        }
    }

    func testKeyedHash() throws {
        let (a, _) = try XCTUnwrap(makeAny(day: 24, month: 12, yy: 61, individuals: 500...749))
        let (b, _) = try XCTUnwrap(makeAny(day: 25, month: 12, yy: 61, individuals: 500...749))
        let key1 = try SecureBytes.random(count: 32)
        let key2 = try SecureBytes.random(count: 32)
        let na = try NationalIDNumber(a)
        let h1 = try na.keyedHash(key: key1)
        XCTAssertEqual(h1.count, 64)
        XCTAssertTrue(h1.allSatisfy { $0.isHexDigit })
        XCTAssertEqual(h1, try NationalIDNumber(a).keyedHash(key: key1))
        XCTAssertNotEqual(h1, try na.keyedHash(key: key2))
        XCTAssertNotEqual(h1, try NationalIDNumber(b).keyedHash(key: key1))
        XCTAssertThrowsError(try na.keyedHash(key: SecureBytes.random(count: 8)))
    }

    // MARK: - Age

    func testAge() throws {
        let (leapling, _) = try XCTUnwrap(makeAny(day: 29, month: 2, yy: 0, individuals: 500...999))
        let n = try NationalIDNumber(leapling)
        XCTAssertEqual(n.age(on: BirthDate(year: 2018, month: 2, day: 28)), 17)
        XCTAssertEqual(n.age(on: BirthDate(year: 2018, month: 3, day: 1)), 18)
        XCTAssertEqual(n.age(on: BirthDate(year: 2020, month: 2, day: 28)), 19)
        XCTAssertEqual(n.age(on: BirthDate(year: 2020, month: 2, day: 29)), 20)
        XCTAssertEqual(n.age(on: BirthDate(year: 2000, month: 2, day: 29)), 0)
        XCTAssertEqual(n.age(on: BirthDate(year: 1999, month: 12, day: 31)), -1)

        let birthday = BirthDate(year: 2008, month: 6, day: 15)
        XCTAssertEqual(birthday.age(on: BirthDate(year: 2026, month: 6, day: 14)), 17)
        XCTAssertEqual(birthday.age(on: BirthDate(year: 2026, month: 6, day: 15)), 18)
        XCTAssertEqual(birthday.age(on: BirthDate(year: 2026, month: 12, day: 31)), 18)
    }

    func testBirthDateHelpers() throws {
        XCTAssertEqual(BirthDate(iso: "2008-06-15"), BirthDate(year: 2008, month: 6, day: 15))
        XCTAssertNil(BirthDate(iso: "2008-02-30"))
        XCTAssertNil(BirthDate(iso: "2008-6-15"))
        XCTAssertNil(BirthDate(iso: "not a date"))
        XCTAssertEqual(BirthDate(year: 987, month: 1, day: 2).description, "0987-01-02")
        XCTAssertTrue(BirthDate(year: 2000, month: 1, day: 1) < BirthDate(year: 2000, month: 1, day: 2))
        // 23:30 UTC on New Year's Eve is already New Year's Day in Norway.
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        let instant = try XCTUnwrap(utc.date(from: DateComponents(year: 2026, month: 12, day: 31, hour: 23, minute: 30)))
        XCTAssertEqual(BirthDate.today(at: instant), BirthDate(year: 2027, month: 1, day: 1))
        XCTAssertEqual(BirthDate.today(at: instant, timeZone: TimeZone(identifier: "UTC")),
                       BirthDate(year: 2026, month: 12, day: 31))
    }
}

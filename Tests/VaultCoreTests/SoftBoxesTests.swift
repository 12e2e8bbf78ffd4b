import SodiumKit
import VaultFactor
import XCTest
@testable import VaultCore

/// The soft boxes' rules on their own: no factor, no store, no clock
/// (FingerprintAcrossUnlocksTests shows the same through a vault and a scripted reader).
final class SoftBoxesTests: XCTestCase {
    func box(since: Double) throws -> SoftUnlock {
        try SoftUnlock(vaultKey: try SecureBytes.random(count: 32), factor: .fingerprint, digest: [1, 2, 3], since: since)
    }

    func testABoxLivesItsHoursFromThePINThenGoesAndSaysSo() throws {
        var boxes = SoftBoxes()
        boxes[.fingerprint] = try box(since: 1_000)
        XCTAssertNotNil(boxes.live(.fingerprint, now: 1_000 + 3_599, maxSeconds: 3_600).box)
        XCTAssertNotNil(boxes.live(.fingerprint, now: 1_000_000, maxSeconds: 0).box, "0: no limit")
        let gone = boxes.live(.fingerprint, now: 1_000 + 3_600, maxSeconds: 3_600)
        XCTAssertNil(gone.box)
        XCTAssertTrue(gone.expired, "said once, for the audit")
        XCTAssertTrue(boxes.isEmpty)
        XCTAssertFalse(boxes.live(.fingerprint, now: 1_000 + 3_600, maxSeconds: 3_600).expired, "not again")
    }

    func testFailedScansGoBackOnlyIntoTheBoxTheyWereCountedAgainst() throws {
        var boxes = SoftBoxes()
        let first = try box(since: 1)
        boxes[.fingerprint] = first
        boxes.keep(2, countedAgainst: first, of: .fingerprint)
        XCTAssertEqual(boxes[.fingerprint]?.failedScans, 2)
        boxes.keep(1, countedAgainst: first, of: .fingerprint)
        XCTAssertEqual(boxes[.fingerprint]?.failedScans, 2, "a scan that read an older count never lowers it")
        // The PIN made a new box while a scan ran: its count starts at zero.
        boxes[.fingerprint] = try box(since: 2)
        boxes.keep(3, countedAgainst: first, of: .fingerprint)
        XCTAssertEqual(boxes[.fingerprint]?.failedScans, 0)
        boxes.keep(3, countedAgainst: nil, of: .fingerprint)
        XCTAssertEqual(boxes[.fingerprint]?.failedScans, 0, "a scan counted against no box")
        let current = try XCTUnwrap(boxes[.fingerprint])
        boxes.keep(2, countedAgainst: current, of: .fingerprint)
        boxes.matched(.fingerprint)
        XCTAssertEqual(boxes[.fingerprint]?.failedScans, 0, "a match forgives them (model/unlock.pml: fp_fails = 0)")
    }
}

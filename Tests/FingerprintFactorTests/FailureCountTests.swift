import XCTest
@testable import FingerprintFactor
import VaultFactor
import VaultTestSupport

/// The factor's side of failed scans counted across unlocks (issue 21): it
/// starts from the count the vault hands it, adds each miss at once (so Cancel
/// or a timeout after it keeps it), and says the tries left across unlocks.
final class FailureCountTests: TempDirTestCase {
    func testEachMissIsCountedBeforeACancel() async throws {
        try pluggedReader()
        try queue(ScriptedScan(.noMatch), ScriptedScan(.noMatch), ScriptedScan(.cancel))
        let tally = FailureTally()
        let error = await factorError { () async throws(FactorError) in try await factor().verify(ScriptedConversation(), slot: EnrolledSlot(factor: .fingerprint, binding: [:], failures: tally)) }
        XCTAssertEqual(error, .cancelled)
        XCTAssertEqual(tally.failures, 2)
    }

    func testEarlierMissesLeaveFewerTries() async throws {
        try pluggedReader()
        try queue(ScriptedScan(.noMatch))
        let tally = FailureTally(2)
        let c = ScriptedConversation()
        let error = await factorError { () async throws(FactorError) in try await factor().verify(c, slot: EnrolledSlot(factor: .fingerprint, binding: [:], failures: tally)) }
        XCTAssertEqual(error, .tooManyAttempts, "the third miss, counted across unlocks")
        XCTAssertEqual(tally.failures, 3)
        XCTAssertEqual(c.shownTexts.first, Text.touchToUnlock(left: 1))
        XCTAssertEqual(c.shownTexts.first?.nb, "Berør fingeravtrykkleseren for å låse opp (1 forsøk igjen).")
        XCTAssertEqual(c.shownTexts.last, Text.lastFailure)
    }

    func testNoTriesLeftMeansNoScan() async throws {
        try pluggedReader()
        try queue(ScriptedScan(.match, finger: "right-index-finger"))
        let error = await factorError { () async throws(FactorError) in
            try await factor().verify(ScriptedConversation(), slot: EnrolledSlot(factor: .fingerprint, binding: [:], failures: FailureTally(3)))
        }
        XCTAssertEqual(error, .tooManyAttempts)
        XCTAssertEqual(try reader().load()?.queue.count, 1, "the reader was not asked")
    }
}

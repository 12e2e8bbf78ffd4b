import Foundation
import XCTest
@testable import FingerprintFactor
import VaultFactor
import VaultTestSupport

final class FingerprintFactorTests: TempDirTestCase {
    // MARK: Descriptor and probe

    func testDescriptor() {
        let d = factor().descriptor
        XCTAssertEqual(d.id, .fingerprint)
        XCTAssertEqual(d.rank, 10)
        XCTAssertEqual(d.contribution, .presenceOnly)
        XCTAssertNil(d.throttle)
        XCTAssertEqual(d.displayName, LocalizedText(en: "Fingerprint", nb: "Fingeravtrykk"))
        let defaults = FingerprintFactor(reader: reader())
        XCTAssertEqual(defaults.scanTimeout, .seconds(30))
        XCTAssertEqual(defaults.attempts, 3)
    }

    func testProbeWithoutAReader() async throws {
        let presence = await factor().probe()
        guard case .unavailable(let why) = presence else { return XCTFail("\(presence)") }
        XCTAssertTrue(why.en.hasPrefix("Fingerprint reader not found"))
        XCTAssertTrue(why.nb.hasPrefix("Fant ingen fingeravtrykkleser"))
    }

    func testProbeWithAnUnpluggedReader() async throws {
        try pluggedReader().unplug()
        let presence = await factor().probe()
        guard case .unavailable(let why) = presence else { return XCTFail("\(presence)") }
        XCTAssertTrue(why.en.hasPrefix("Fingerprint reader not found"))
    }

    /// A plugged reader with no fingers is available (so a stale slot is found),
    /// enrollment says how to add a finger, and verify hands back the empty
    /// enrollment at once, without waiting for a touch that can never match.
    func testNoFingersEnrollExplainsAndVerifyReportsTheEmptyEnrollment() async throws {
        try pluggedReader(fingers: [])
        let presence = await factor().probe()
        XCTAssertEqual(presence, .available)
        do {
            _ = try await factor().enroll(ScriptedConversation())
            XCTFail("enroll must refuse an empty reader")
        } catch {
            guard case .unavailable(let why) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(why.en.contains("Add a finger"), why.en)
            XCTAssertTrue(why.nb.contains("Legg til en finger"), why.nb)
        }
        let proof = try await factor().verify(ScriptedConversation(), slot: EnrolledSlot(factor: .fingerprint, binding: [:]))
        XCTAssertEqual(proof.enrollmentState, FingerprintFactor.enrollmentDigest([]))
    }

    func testProbeWithABrokenReader() async throws {
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: statePath))
        let presence = await factor().probe()
        XCTAssertEqual(presence, .unavailable(Text.readerBroken))
    }

    func testProbeAvailable() async throws {
        try pluggedReader()
        let presence = await factor().probe()
        XCTAssertEqual(presence, .available)
    }

    // MARK: Verify

    func testVerifyMatchGivesTheEnrollmentDigest() async throws {
        try pluggedReader(fingers: ["right-index-finger", "left-thumb"])
        try queue(ScriptedScan(.match, finger: "left-thumb"))
        let c = ScriptedConversation()
        let proof = try await factor().verify(c, slot: slot)
        XCTAssertEqual(proof.enrollmentState, try currentDigest())
        XCTAssertNil(proof.contribution)
        XCTAssertEqual(c.shown, ["Touch the fingerprint reader to unlock."])
    }

    func testVerifyTwoFailuresThenMatch() async throws {
        try pluggedReader()
        try queue(ScriptedScan(.noMatch), ScriptedScan(.retry), ScriptedScan(.noMatch), ScriptedScan(.match))
        let c = ScriptedConversation()
        let proof = try await factor().verify(c, slot: slot)
        XCTAssertEqual(proof.enrollmentState, try currentDigest())
        XCTAssertEqual(c.shown.count, 4)
        XCTAssertEqual(c.shown[1], "Not recognised — try again (2 tries left).")
        XCTAssertTrue(c.shown[2].contains("lift your finger") && c.shown[2].contains("2 tries left"), "an unclear scan is not counted: \(c.shown[2])")
        XCTAssertEqual(c.shown[3], "Not recognised — try again (1 try left).")
        XCTAssertEqual(c.shownTexts[1].nb, "Ikke gjenkjent — prøv igjen (2 forsøk igjen).")
    }

    func testVerifyThreeFailuresInARowIsTooManyAttempts() async throws {
        try pluggedReader()
        try queue(ScriptedScan(.noMatch), ScriptedScan(.noMatch), ScriptedScan(.noMatch), ScriptedScan(.match))
        let c = ScriptedConversation()
        let error = await factorError { () async throws(FactorError) in try await factor().verify(c, slot: slot) }
        XCTAssertEqual(error, .tooManyAttempts)
        let failures = Array(c.shown.dropFirst())
        XCTAssertEqual(failures.count, 3, "\(c.shown)")
        XCTAssertTrue(failures[0].contains("2 tries left"))
        XCTAssertTrue(failures[1].contains("1 try left"))
        XCTAssertTrue(failures[2].contains("last try") && failures[2].contains("PIN"), failures[2])
        XCTAssertEqual(try reader().load()?.queue, [ScriptedScan(.match)], "a fourth scan was not taken")
    }

    func testUnclearScansAreAskedAgainButNotForEver() async throws {
        try pluggedReader()
        for _ in 0..<FingerprintFactor.maxUnclearScans { try queue(ScriptedScan(.retry)) }
        try queue(ScriptedScan(.match))
        let c = ScriptedConversation()
        let error = await factorError { () async throws(FactorError) in try await factor().verify(c, slot: slot) }
        XCTAssertEqual(error, .tooManyAttempts, "a sensor that never reads a finger ends in the fallback")
        XCTAssertTrue(c.shown.last?.contains("last try") == true, "\(c.shown)")
    }

    func testAttemptsAreConfigurable() async throws {
        try pluggedReader()
        try queue(ScriptedScan(.noMatch), ScriptedScan(.noMatch), ScriptedScan(.noMatch), ScriptedScan(.match))
        let c = ScriptedConversation()
        _ = try await factor(attempts: 4).verify(c, slot: slot)
        XCTAssertTrue(c.shown[1].contains("3 tries left"))

        try queue(ScriptedScan(.noMatch))
        let error = await factorError { () async throws(FactorError) in
            try await factor(attempts: 1).verify(ScriptedConversation(), slot: slot)
        }
        XCTAssertEqual(error, .tooManyAttempts)
    }

    func testVerifyHardwareErrorIsUnavailableAtOnce() async throws {
        try pluggedReader()
        try queue(ScriptedScan(.error), ScriptedScan(.match))
        let start = ContinuousClock.now
        let error = await factorError { () async throws(FactorError) in
            try await factor(timeout: .seconds(30)).verify(ScriptedConversation(), slot: slot)
        }
        let elapsed = seconds(since: start)
        print("hardware error → unavailable after \(elapsed * 1000) ms")
        XCTAssertEqual(error, .unavailable(Text.readerBroken))
        XCTAssertLessThan(elapsed, 1.0)
    }

    func testVerifyScriptedDisconnectIsUnavailable() async throws {
        try pluggedReader()
        try queue(ScriptedScan(.disconnect))
        let error = await factorError { () async throws(FactorError) in try await factor().verify(ScriptedConversation(), slot: slot) }
        XCTAssertEqual(error, .unavailable(Text.readerGone))
    }

    func testVerifyUnplugWhileWaitingIsUnavailableQuickly() async throws {
        try pluggedReader()
        let path = statePath
        // The person is asked to touch the reader; instead the reader is pulled out.
        let c = ScriptedConversation { _ in
            Task {
                try? await Task.sleep(for: .milliseconds(150))
                try? StubReader(path: path).unplug()
            }
        }
        let start = ContinuousClock.now
        let error = await factorError { () async throws(FactorError) in
            try await factor(timeout: .seconds(30)).verify(c, slot: slot)
        }
        let elapsed = seconds(since: start)
        print("unplug during verify → unavailable after \(elapsed * 1000) ms (150 ms of it before the unplug)")
        XCTAssertEqual(error, .unavailable(Text.readerGone))
        XCTAssertLessThan(elapsed, 1.0)
    }

    func testVerifyCancel() async throws {
        try pluggedReader()
        try queue(ScriptedScan(.noMatch), ScriptedScan(.cancel))
        let error = await factorError { () async throws(FactorError) in try await factor().verify(ScriptedConversation(), slot: slot) }
        XCTAssertEqual(error, .cancelled)
    }

    func testVerifyTimeout() async throws {
        try pluggedReader()
        let start = ContinuousClock.now
        let error = await factorError { () async throws(FactorError) in
            try await factor(timeout: .milliseconds(150)).verify(ScriptedConversation(), slot: slot)
        }
        XCTAssertEqual(error, .timeout)
        XCTAssertLessThan(seconds(since: start), 1.0)

        try queue(ScriptedScan(.timeout))
        let scripted = await factorError { () async throws(FactorError) in try await factor().verify(ScriptedConversation(), slot: slot) }
        XCTAssertEqual(scripted, .timeout)
    }

    func testVerifyAfterTheEnrollmentChangedGivesAnotherDigest() async throws {
        try pluggedReader()
        try queue(ScriptedScan(.match))
        let enrolled = try await factor().enroll(ScriptedConversation())

        try queue(ScriptedScan(.match))
        let same = try await factor().verify(ScriptedConversation(), slot: slot)
        XCTAssertEqual(same.enrollmentState, enrolled.enrollmentState, "nothing changed: the slot opens")

        func expectChanged(_ what: String) async throws {
            try queue(ScriptedScan(.match, finger: "right-index-finger"))
            let proof = try await factor().verify(ScriptedConversation(), slot: slot)
            XCTAssertNotEqual(proof.enrollmentState, enrolled.enrollmentState, what)
            XCTAssertEqual(proof.enrollmentState, try currentDigest(), what)
        }
        try reader().enrollFinger("left-thumb")
        try await expectChanged("finger added")
        try reader().removeFinger("left-thumb")
        try reader().removeFinger("right-index-finger")
        try reader().enrollFinger("right-index-finger")
        try await expectChanged("same finger removed and added again")
    }

    func testVerifyReadsTheEnrollmentRightAfterTheMatch() async throws {
        try pluggedReader()
        let before = try currentDigest()
        let path = statePath
        // While the factor waits for a touch, a finger is added; then the touch comes.
        let c = ScriptedConversation { _ in
            Task {
                try? await Task.sleep(for: .milliseconds(80))
                let r = StubReader(path: path)
                _ = try? r.enrollFinger("left-thumb")
                try? r.enqueue(ScriptedScan(.match, finger: "right-index-finger"))
            }
        }
        let proof = try await factor().verify(c, slot: slot)
        XCTAssertNotEqual(proof.enrollmentState, before)
        XCTAssertEqual(proof.enrollmentState, try currentDigest())
    }

    // MARK: Enroll

    func testEnrollMatchGivesTheEnrollmentDigest() async throws {
        try pluggedReader(fingers: ["right-index-finger", "left-thumb"])
        let path = statePath
        // The person touches the reader once asked to.
        let touching = ScriptedConversation { text in
            if text.en.hasPrefix("Touch the fingerprint reader") { try? StubReader(path: path).enqueue(ScriptedScan(.match)) }
        }
        let proof = try await factor().enroll(touching)
        XCTAssertEqual(proof.enrollmentState, try currentDigest())
        XCTAssertNil(proof.contribution)
        XCTAssertTrue(proof.binding.isEmpty)
        XCTAssertEqual(touching.shown, ["Touch the fingerprint reader to turn on fingerprint login."])
        XCTAssertEqual(touching.shownTexts[0].nb, "Berør fingeravtrykkleseren for å slå på fingeravtrykkpålogging.")
    }

    func testEnrollRetriesThenMatches() async throws {
        try pluggedReader()
        try queue(ScriptedScan(.retry), ScriptedScan(.match, finger: "left-thumb"), ScriptedScan(.match))
        let c = ScriptedConversation()
        let proof = try await factor().enroll(c)
        XCTAssertEqual(proof.enrollmentState, try currentDigest())
        XCTAssertEqual(c.shown.count, 3)
        XCTAssertTrue(c.shown[1].contains("not clear"))
        XCTAssertTrue(c.shown[2].contains("not known to the reader"))
    }

    func testEnrollGivesUpAfterThreeFailures() async throws {
        try pluggedReader()
        try queue(ScriptedScan(.noMatch), ScriptedScan(.retry), ScriptedScan(.noMatch), ScriptedScan(.noMatch))
        let error = await factorError { () async throws(FactorError) in try await factor().enroll(ScriptedConversation()) }
        guard case .rejected(let why) = error else { return XCTFail("\(String(describing: error))") }
        XCTAssertTrue(why.en.contains("try again"), why.en)
        XCTAssertTrue(why.nb.contains("prøv igjen"), why.nb)
    }

    func testEnrollFailures() async throws {
        try pluggedReader()
        let cases: [(ScriptedScan, FactorError)] = [
            (ScriptedScan(.error), .unavailable(Text.readerBroken)),
            (ScriptedScan(.disconnect), .unavailable(Text.readerGoneDuringEnroll)),
            (ScriptedScan(.cancel), .cancelled),
            (ScriptedScan(.timeout), .timeout),
        ]
        for (scan, expected) in cases {
            try reader().clearQueue()
            try queue(scan)
            let error = await factorError { () async throws(FactorError) in try await factor().enroll(ScriptedConversation()) }
            XCTAssertEqual(error, expected, scan.label)
        }
        try reader().clearQueue()
        let timedOut = await factorError { () async throws(FactorError) in
            try await factor(timeout: .milliseconds(100)).enroll(ScriptedConversation())
        }
        XCTAssertEqual(timedOut, .timeout)
    }

    func testEnrollWithoutFingersOrReaderDoesNotScan() async throws {
        let absent = await factorError { () async throws(FactorError) in try await factor().enroll(ScriptedConversation()) }
        XCTAssertEqual(absent, .unavailable(Text.readerNotFound))

        try pluggedReader(fingers: [])
        try queue(ScriptedScan(.match))
        let c = ScriptedConversation()
        let none = await factorError { () async throws(FactorError) in try await factor().enroll(c) }
        XCTAssertEqual(none, .unavailable(Text.noFingers))
        XCTAssertEqual(c.shown, [])
        XCTAssertEqual(try reader().load()?.queue.count, 1, "no scan was taken")
    }

    // MARK: Texts

    func testEveryTextIsBilingualWithANextStep() {
        let texts: [LocalizedText] = [
            Text.readerNotFound, Text.noFingers, Text.readerBroken, Text.readerGone, Text.readerGoneDuringEnroll,
            Text.touchToEnroll, Text.touchToUnlock, Text.enrollNoMatch, Text.enrollGaveUp(3), Text.notRecognised(left: 2),
            Text.notRecognised(left: 1), Text.unclearScan(left: nil), Text.unclearScan(left: 2), Text.lastFailure,
        ]
        for t in texts {
            XCTAssertFalse(t.en.isEmpty)
            XCTAssertFalse(t.nb.isEmpty)
            XCTAssertNotEqual(t.en, t.nb)
            XCTAssertTrue(t.en.hasSuffix("."), t.en)
            XCTAssertTrue(t.nb.hasSuffix("."), t.nb)
        }
        for t in [Text.readerNotFound, Text.readerBroken, Text.readerGone, Text.lastFailure] {
            XCTAssertTrue(t.en.contains("BankID or Vipps"), t.en)
            XCTAssertTrue(t.nb.contains("BankID eller Vipps"), t.nb)
        }
    }
}

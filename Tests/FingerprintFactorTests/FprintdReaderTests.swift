import Foundation
import Locking
import XCTest
@testable import FingerprintFactor
import VaultFactor
import VaultTestSupport

/// The real fprintd (Debian's 1.94) with libfprint's virtual_device, on a private
/// system bus with polkit answered by python3-dbusmock (Tests/fprintd/fprintd-ctl
/// starts and stops all of it). Fingers are enrolled through fprintd's own
/// EnrollStart API; scans are `SCAN <id>` lines written to the virtual device.
final class FprintdReaderTests: XCTestCase {
    var fixture: FprintdFixture!

    override func setUpWithError() throws {
        fixture = try FprintdFixture()
    }

    override func tearDownWithError() throws {
        fixture?.down()
    }

    let reader = FprintdReader()

    func factor(attempts: Int = 3, timeout: Duration = .seconds(10)) -> FingerprintFactor {
        FingerprintFactor(reader: reader, scanTimeout: timeout, attempts: attempts)
    }

    /// A conversation that answers every prompt in `answers` (in order) by
    /// sending those commands to the virtual device, off the factor's path (the
    /// socket appears only once the next scan has claimed the device).
    func conversation(_ answers: [[String]]) -> ScriptedConversation {
        let queue = Locked(answers)
        let fixture = self.fixture!
        return ScriptedConversation { _ in
            let next: [String]? = queue.withLock { $0.isEmpty ? nil : $0.removeFirst() }
            guard let next else { return }
            Thread.detachNewThread { _ = try? fixture.ctl(["send"] + next) }
        }
    }

    /// Starts a scan, sends `commands` once the device is claimed, and returns the outcome and how long it took.
    func scan(sending commands: [String], timeout: Duration = .seconds(10)) async throws -> (ScanOutcome, Duration) {
        let started = ContinuousClock.now
        let task = Task { [reader] in await reader.scan(timeout: timeout) }
        if !commands.isEmpty { try fixture.ctl(["send"] + commands) }
        return (await task.value, ContinuousClock.now - started)
    }

    // MARK: - The reader

    func testDeviceAndEnrolledFingers() async throws {
        let presence = await reader.presence()
        XCTAssertEqual(presence, .present)
        let name = await reader.deviceName()
        XCTAssertEqual(name, "Virtual device for debugging")
        let none = try await reader.enrolledFingers()
        XCTAssertEqual(none, [], "no finger yet: NoEnrolledPrints is an empty list")
        try fixture.ctl(["enroll", "right-index-finger", "left-thumb"])
        let fingers = try await reader.enrolledFingers()
        XCTAssertEqual(fingers.map(\.name), ["left-thumb", "right-index-finger"])
        XCTAssertEqual(fingers.map(\.templateID), fingers.map(\.name), "fprintd shows names only: the name is the id")
    }

    func testMatchAndNoMatch() async throws {
        try fixture.ctl(["enroll", "right-index-finger"])
        let (match, _) = try await scan(sending: ["SCAN print-right-index-finger"])
        XCTAssertEqual(match, .match(finger: "right-index-finger"))
        let (noMatch, _) = try await scan(sending: ["SCAN print-left-thumb"])
        XCTAssertEqual(noMatch, .noMatch)
        // Both scans released the device: another program can claim it now.
        try fixture.assertClaimable()
    }

    func testRetryResultsAreTheirOwnOutcomes() async throws {
        try fixture.ctl(["enroll", "right-index-finger"])
        let expected: [(String, ScanOutcome)] = [
            ("RETRY 0", .retry), ("RETRY 1", .unclear(.tooShort)), ("RETRY 2", .unclear(.notCentered)),
            ("RETRY 3", .unclear(.removeAndRetry)),
        ]
        for (command, outcome) in expected {
            let (got, _) = try await scan(sending: [command])
            XCTAssertEqual(got, outcome, command)
        }
    }

    func testDeviceErrorsEndTheScanWithinASecond() async throws {
        try fixture.ctl(["enroll", "right-index-finger"])
        // FP_DEVICE_ERROR_PROTO is fprintd's verify-disconnected; GENERAL is verify-unknown-error.
        for (command, outcome) in [("ERROR 5", ScanOutcome.disconnected), ("ERROR 0", .hardwareError)] {
            let task = Task { [reader] in await reader.scan(timeout: .seconds(30)) }
            try fixture.ctl(["send", command])
            let sent = ContinuousClock.now
            let got = await task.value
            XCTAssertEqual(got, outcome, command)
            XCTAssertLessThan(ContinuousClock.now - sent, .seconds(1), command)
        }
        try fixture.assertClaimable()
    }

    func testUnplugMidScanEndsItWithinASecond() async throws {
        try fixture.ctl(["enroll", "right-index-finger"])
        let task = Task { [reader] in await reader.scan(timeout: .seconds(30)) }
        try fixture.ctl(["send", "UNPLUG"])
        let sent = ContinuousClock.now
        let got = await task.value
        XCTAssertLessThan(ContinuousClock.now - sent, .seconds(1))
        XCTAssertTrue([.disconnected, .hardwareError, .refused(.noDevice)].contains(got), "\(got)")
    }

    func testAnotherProgramHoldingTheDevice() async throws {
        try fixture.ctl(["enroll", "right-index-finger"])
        let holder = try fixture.hold()
        let (got, _) = try await scan(sending: [])
        XCTAssertEqual(got, .refused(.inUse))
        holder.release()
        let (match, _) = try await scan(sending: ["SCAN print-right-index-finger"])
        XCTAssertEqual(match, .match(finger: "right-index-finger"))
    }

    func testNoEnrolledPrints() async throws {
        let (got, _) = try await scan(sending: [])
        XCTAssertEqual(got, .refused(.noEnrolledPrints))
        try fixture.assertClaimable()
    }

    func testPermissionDenied() async throws {
        try fixture.ctl(["enroll", "right-index-finger"])
        try fixture.ctl(["polkit", "deny"])
        do {
            _ = try await reader.enrolledFingers()
            XCTFail("polkit said no")
        } catch {
            XCTAssertEqual(error, .refused(.permissionDenied))
        }
        let (got, _) = try await scan(sending: [])
        XCTAssertEqual(got, .refused(.permissionDenied))
    }

    func testFprintdKilledMidScanDoesNotHang() async throws {
        try fixture.ctl(["enroll", "right-index-finger"])
        fixture.forgetSocket()
        let task = Task { [reader] in await reader.scan(timeout: .seconds(30)) }
        try fixture.waitUntilClaimed()
        try fixture.ctl(["kill-fprintd"])
        let killed = ContinuousClock.now
        let got = await task.value
        XCTAssertEqual(got, .refused(.serviceStopped))
        XCTAssertLessThan(ContinuousClock.now - killed, .seconds(1))
        // Gone from the bus: no reader, no fingers, no error.
        let presence = await reader.presence()
        XCTAssertEqual(presence, .absent)
        do {
            _ = try await reader.enrolledFingers()
            XCTFail("no fprintd")
        } catch {
            XCTAssertEqual(error, .absent)
        }
        // Started again, it has kept the fingers and scans.
        try fixture.ctl(["start-fprintd"])
        let (match, _) = try await scan(sending: ["SCAN print-right-index-finger"])
        XCTAssertEqual(match, .match(finger: "right-index-finger"))
    }

    /// The attacker of issue 21: another client of the system bus sends
    /// `VerifyStatus("verify-match", true)` on the device's path while a scan
    /// waits with no finger on the reader. Only fprintd's own unique name speaks
    /// for the device: the scan times out, the forged signal is counted in the
    /// debug log, and a real match afterwards still works.
    func testAForgedMatchFromAnotherBusClientIsIgnored() async throws {
        try fixture.ctl(["enroll", "right-index-finger"])
        let logged = Locked<[String]>([])
        let reader = FprintdReader(log: { line in logged.withLock { $0.append(line) } })
        fixture.forgetSocket()
        let task = Task { await reader.scan(timeout: .seconds(3)) }
        // Claimed: subscribed and waiting (the subscriptions come before Claim).
        try fixture.waitUntilClaimed()
        let forger = try fixture.ctl(["forge", "verify-match"]).trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(forger.hasPrefix(":"), forger)
        let got = await task.value
        XCTAssertEqual(got, .timeout, "a VerifyStatus from \(forger), not from fprintd, decided the scan")
        let lines = logged.withLock { $0 }
        XCTAssertEqual(lines.count, 1, "\(lines)")
        XCTAssertTrue(lines.first?.contains("ignored 1 signal(s)") == true && lines.first?.contains(forger) == true, "\(lines)")
        XCTAssertFalse(lines.joined().contains("verify-match"), "the log names senders and counts, not what they said")
        try fixture.assertClaimable()

        // fprintd's own verdict is still heard, and nothing was ignored this time.
        let real = Task { await reader.scan(timeout: .seconds(10)) }
        try fixture.ctl(["send", "SCAN print-right-index-finger"])
        let match = await real.value
        // (Which finger fprintd names is testMatchAndNoMatch's business: here, that its match is heard.)
        guard case .match = match else { return XCTFail("fprintd's own match was not heard: \(match)") }
        XCTAssertEqual(logged.withLock { $0.count }, 1)
    }

    func testCancelAndTimeoutReleaseTheDevice() async throws {
        try fixture.ctl(["enroll", "right-index-finger"])
        fixture.forgetSocket()
        let task = Task { [reader] in await reader.scan(timeout: .seconds(30)) }
        try fixture.waitUntilClaimed()
        let cancelled = ContinuousClock.now
        task.cancel()
        let got = await task.value
        XCTAssertEqual(got, .cancelled)
        XCTAssertLessThan(ContinuousClock.now - cancelled, .seconds(1))
        try fixture.assertClaimable()

        let (timedOut, took) = try await scan(sending: [], timeout: .milliseconds(400))
        XCTAssertEqual(timedOut, .timeout)
        XCTAssertLessThan(took, .seconds(2))
        try fixture.assertClaimable()
    }

    // MARK: - The factor on fprintd

    func testFactorMatchAfterAnUnclearScanAndANoMatch() async throws {
        try fixture.ctl(["enroll", "right-index-finger"])
        let c = conversation([["RETRY 1"], ["SCAN print-left-thumb"], ["SCAN print-right-index-finger"]])
        let proof = try await factor().verify(c, slot: EnrolledSlot(factor: .fingerprint, binding: [:]))
        XCTAssertEqual(proof.enrollmentState, FingerprintFactor.enrollmentDigest([EnrolledFinger(name: "right-index-finger", templateID: "right-index-finger")]))
        XCTAssertEqual(c.shown.count, 3, "\(c.shown)")
        XCTAssertTrue(c.shown[1].contains("too short") && c.shown[1].contains("3 tries left"), "an unclear scan is not counted: \(c.shown[1])")
        XCTAssertTrue(c.shownTexts[1].nb.contains("for kort"), c.shownTexts[1].nb)
        XCTAssertEqual(c.shown[2], "Not recognised — try again (2 tries left).")
    }

    func testFactorThreeNoMatchesFallBack() async throws {
        try fixture.ctl(["enroll", "right-index-finger"])
        let other = ["SCAN print-left-thumb"]
        let c = conversation([other, other, other])
        let error = await factorError { () async throws(FactorError) in
            try await self.factor().verify(c, slot: EnrolledSlot(factor: .fingerprint, binding: [:]))
        }
        XCTAssertEqual(error, .tooManyAttempts)
        XCTAssertTrue(c.shown.last?.contains("last try") == true, "\(c.shown)")
        try fixture.assertClaimable()
    }

    func testFactorRefusalsSayWhatToDo() async throws {
        // No finger: enroll says where to add one; no scan waits.
        let none = await factorError { () async throws(FactorError) in _ = try await self.factor().enroll(ScriptedConversation()) }
        guard case .unavailable(let why) = none else { return XCTFail("\(String(describing: none))") }
        XCTAssertTrue(why.en.contains("settings"), why.en)

        try fixture.ctl(["enroll", "right-index-finger"])
        let holder = try fixture.hold()
        let busy = await factorError { () async throws(FactorError) in
            try await self.factor().verify(ScriptedConversation(), slot: EnrolledSlot(factor: .fingerprint, binding: [:]))
        }
        XCTAssertEqual(busy, .unavailable(FingerprintMessages.readerInUse))
        holder.release()

        try fixture.ctl(["polkit", "deny"])
        let presence = await factor().probe()
        XCTAssertEqual(presence, .unavailable(FingerprintMessages.permissionDenied))
    }

    func testFactorUnplugAndDeathFallBackQuickly() async throws {
        try fixture.ctl(["enroll", "right-index-finger"])
        for (command, expected) in [(["ERROR 5"], Text.readerGone), (["ERROR 0"], Text.readerBroken)] {
            let c = conversation([command])
            let started = ContinuousClock.now
            let error = await factorError { () async throws(FactorError) in
                try await self.factor().verify(c, slot: EnrolledSlot(factor: .fingerprint, binding: [:]))
            }
            XCTAssertEqual(error, .unavailable(expected))
            XCTAssertLessThan(ContinuousClock.now - started, .seconds(2))
        }
        fixture.forgetSocket()
        let f = factor()
        let task = Task { () -> FactorError? in
            await factorError { () async throws(FactorError) in
                try await f.verify(ScriptedConversation(), slot: EnrolledSlot(factor: .fingerprint, binding: [:]))
            }
        }
        try fixture.waitUntilClaimed()
        try fixture.ctl(["kill-fprintd"])
        let error = await task.value
        XCTAssertEqual(error, .unavailable(FingerprintMessages.serviceStopped))
    }

    func testEnrollmentDigestFollowsFprintd() async throws {
        try fixture.ctl(["enroll", "right-index-finger"])
        func digest() async throws -> [UInt8] { FingerprintFactor.enrollmentDigest(try await reader.enrolledFingers()) }
        let one = try await digest()
        try fixture.ctl(["enroll", "left-thumb"])
        let two = try await digest()
        XCTAssertNotEqual(one, two, "a finger added is a change")
        try fixture.ctl(["delete", "left-thumb"])
        let back = try await digest()
        XCTAssertEqual(back, one)
        try fixture.ctl(["delete", "right-index-finger"])
        let empty = try await digest()
        XCTAssertNotEqual(empty, one, "a finger removed is a change")
        // The limit fprintd sets: the same finger enrolled again looks the same (docs/threat-model.md).
        try fixture.ctl(["enroll", "right-index-finger"])
        let again = try await digest()
        XCTAssertEqual(again, one)
    }
}

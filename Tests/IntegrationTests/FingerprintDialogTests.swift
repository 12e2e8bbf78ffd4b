import Foundation
import VaultProtocol
import VaultWire
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The fingerprint dialog with `"prompter": "vault"`, through a real vaultd,
/// the stub reader (driven by the real vault-fpstub) and the scripted
/// pinentry: vaultd shows “Touch the fingerprint reader” with **Use PIN
/// instead** / **Use BankID or Vipps** while the scan runs, and ends the
/// dialog itself when the scan ends, when the asking app goes away, and when
/// vaultd stops. No pinentry is ever left behind.
final class FingerprintDialogTests: VaultdTestCase {
    var stubPath = ""
    var fake: VaultPrompterTests.Fake!

    /// A vault with a session, a PIN and a fingerprint, locked; dialogs go to the fake pinentry.
    func lockedVault(config extra: String = "") throws -> VaultdProcess {
        let dir = NSTemporaryDirectory() + "fp-dialog-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        fake = VaultPrompterTests.Fake(log: dir + "/log", script: dir + "/script")
        try fake.set([])
        let v = try makeVaultd(env: fake.env)
        stubPath = v.root + "/fpstub.json"
        try (extra + VaultdProcess.fastPINConfig + FingerprintFlowTests.stubReaderConfig(stubPath))
            .write(toFile: v.configPath, atomically: true, encoding: .utf8)
        fpstub("plug")
        fpstub("enroll-finger", "right-index")
        try v.start()
        try importSession(v, account: "kari", accessToken: "AT-fp-dialog", refreshToken: nil)
        enrollPIN(v)
        fpstub("next", "match", "right-index")
        let r = v.vaultctl(["enroll", "fingerprint"])
        XCTAssertEqual(r.exit, 0, r.err)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        return v
    }

    @discardableResult
    func fpstub(_ args: String...) -> ProcessOutcome { fpstub(state: stubPath, args) }

    /// An app that lets vaultd prompt, with its `session` request sent.
    func asking(_ v: VaultdProcess, id: Int64 = 5) throws -> RawClient {
        let c = try v.raw()
        let hello = try c.call("hello", ["version": 1, "client": "aktivitetslogg", "lang": "en", "prompter": "vault"])
        XCTAssertEqual(hello.result?["prompter"], "vault", hello.text)
        XCTAssertTrue(c.send(Request(id: .int(id), op: "session", fields: ["account": "kari"])))
        return c
    }

    func count(_ line: String) -> Int { fake.lines.filter { $0.hasPrefix(line) }.count }

    func waitForDialog(_ n: Int = 1, _ kind: String = "CONFIRM", file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(waitUntil(timeout: 15, interval: 0.02) { count(kind) >= n }, "no \(kind) #\(n): \(fake.lines)", file: file, line: line)
    }

    var pinentryPIDs: [Int32] {
        fake.lines.filter { $0.hasPrefix("START pid=") }.compactMap { l in
            l.dropFirst("START pid=".count).split(separator: " ").first.flatMap { Int32($0) }
        }
    }

    /// Every pinentry vaultd started has gone (ended and reaped).
    func assertNoPinentryLeft(file: StaticString = #filePath, line: UInt = #line) {
        let gone = waitUntil(timeout: 3) { pinentryPIDs.allSatisfy { kill($0, 0) != 0 } }
        XCTAssertTrue(gone, "a pinentry is still running: \(pinentryPIDs)", file: file, line: line)
    }

    func testTheDialogNamesTheWaysInAndClosesOnAMatch() throws {
        let v = try lockedVault()
        try fake.set(["wait"])
        let app = try asking(v)
        waitForDialog()
        let lines = fake.lines
        XCTAssertTrue(lines.contains { $0.hasPrefix("SETDESC ‘") && $0.hasSuffix("’ wants to use your login.%0A%0ATouch the fingerprint reader to unlock.") }, "\(lines)")
        XCTAssertTrue(lines.contains("SETOK Use PIN instead"), "\(lines)")
        XCTAssertTrue(lines.contains("SETNOTOK Use BankID or Vipps") || !lines.contains { $0.hasPrefix("SETNOTOK") },
                      "a login button only with a provider: \(lines)")
        fpstub("next", "match", "right-index")
        let r = try app.readJSON(timeout: 15)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(r.result?["access_token"], "AT-fp-dialog")
        XCTAssertTrue(fake.lines.contains { $0.hasPrefix("KILLED") }, "vaultd ended the dialog itself: \(fake.lines)")
        assertNoPinentryLeft()
    }

    func testThreeFailedScansCloseTheirDialogsThenThePINWhichTheAppNeverSees() throws {
        let v = try lockedVault()
        try fake.set(["wait", "wait", "wait", "pin \(Self.pin)"])
        let app = try asking(v)
        for n in 1...3 {
            waitForDialog(n)
            fpstub("next", "no-match")
        }
        let r = try app.readJSON(timeout: 20)
        XCTAssertTrue(r.isOK, r.text)
        let lines = fake.lines
        XCTAssertEqual(lines.filter { $0.hasPrefix("KILLED") }.count, 3, "each scan's dialog closed with its scan: \(lines)")
        XCTAssertTrue(lines.contains { $0.hasSuffix("Not recognised — try again (2 tries left).") }, "\(lines)")
        XCTAssertEqual(count("GETPIN"), 1, "then the PIN: \(lines)")
        XCTAssertFalse(String(decoding: app.received, as: UTF8.self).contains(Self.pin), "the PIN never reaches the app")
        XCTAssertFalse(String(decoding: app.received, as: UTF8.self).contains("\"prompt\""))
        assertNoPinentryLeft()
    }

    func testAHardwareErrorGoesToThePINWithinASecond() throws {
        let v = try lockedVault()
        try fake.set(["wait", "pin \(Self.pin)"])
        let app = try asking(v)
        waitForDialog()
        fpstub("next", "error")
        let began = monotonicNow()
        XCTAssertTrue(waitUntil(timeout: 10, interval: 0.01) { count("GETPIN") >= 1 }, "\(fake.lines)")
        let took = monotonicNow() - began
        XCTAssertLessThan(took, 1.0, "from the hardware error to the PIN dialog")
        XCTAssertTrue(fake.lines.contains { $0.hasPrefix("KILLED") }, "\(fake.lines)")
        let r = try app.readJSON(timeout: 15)
        XCTAssertTrue(r.isOK, r.text)
        assertNoPinentryLeft()
    }

    func testUsePINInsteadCancelsTheScan() throws {
        let v = try lockedVault()
        try fake.set(["ok", "pin \(Self.pin)"])
        let app = try asking(v)
        let r = try app.readJSON(timeout: 20)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(count("GETPIN"), 1, "\(fake.lines)")
        // The next unlock shows the fingerprint dialog again, and a match opens it.
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        try fake.set(["wait"])
        let again = try asking(v, id: 6)
        waitForDialog(2)
        fpstub("next", "match", "right-index")
        XCTAssertTrue(try again.readJSON(timeout: 15).isOK)
        assertNoPinentryLeft()
    }

    /// Seed 001: Cancel on the fingerprint dialog offers the PIN; with no login configured, Cancel there ends the request.
    func testCancelOnTheFingerprintDialogOffersThePIN() throws {
        let v = try lockedVault()
        try fake.set(["cancel", "pin \(Self.pin)"])
        let app = try asking(v)
        let r = try app.readJSON(timeout: 20)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(count("GETPIN"), 1, "\(fake.lines)")

        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        try fake.set(["cancel", "cancel"])
        let again = try asking(v, id: 6)
        let cancelled = try again.readJSON(timeout: 20)
        XCTAssertEqual(cancelled.errorCode, "cancelled", cancelled.text)
        XCTAssertEqual(count("GETPIN"), 2, "the PIN was offered, once: \(fake.lines)")
        XCTAssertEqual(try status(v)["locked"], true)
        assertNoPinentryLeft()
    }

    func testTheDialogClosesWhenTheAppGoesAway() throws {
        let v = try lockedVault()
        try fake.set(["wait"])
        let app = try asking(v)
        waitForDialog()
        app.close()
        XCTAssertTrue(waitUntil(timeout: 3, interval: 0.02) { fake.lines.contains { $0.hasPrefix("KILLED") } }, "\(fake.lines)")
        assertNoPinentryLeft()
        XCTAssertEqual(count("GETPIN"), 0, "no PIN dialog for an app that has gone: \(fake.lines)")
        XCTAssertEqual(try status(v)["locked"], true)
        // The line is free: the next app's dialog shows and unlocks.
        try fake.set(["ok", "pin \(Self.pin)"])
        let next = try asking(v, id: 7)
        XCTAssertTrue(try next.readJSON(timeout: 20).isOK)
    }

    func testVaultdStopsPromptlyWithADialogOpenAndLeavesNoPinentry() throws {
        let v = try lockedVault()
        try fake.set(["wait"])
        let app = try asking(v)
        waitForDialog()
        let began = monotonicNow()
        let outcome = v.stop(timeout: 10)
        let took = monotonicNow() - began
        XCTAssertLessThan(took, 3, "vaultd took \(took) s to stop with a dialog open")
        XCTAssertEqual(outcome?.exit, 0, "\(String(describing: outcome))")
        XCTAssertTrue(fake.lines.contains { $0.hasPrefix("KILLED") }, "\(fake.lines)")
        assertNoPinentryLeft()
        // The app's request was answered (cancelled) or its connection closed; it was not left hanging.
        var extra: [[UInt8]] = []
        XCTAssertTrue(app.waitForClose(timeout: 3, extra: &extra))
    }
}

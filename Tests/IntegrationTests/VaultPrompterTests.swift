import Foundation
import VaultProtocol
import VaultWire
import XCTest

/// `"prompter": "vault"` end to end with a real vaultd and the scripted
/// pinentry (Tests/pinentry/fake-pinentry): vaultd asks the person itself,
/// the app only waits, and nothing typed ever passes the app's socket.
final class VaultPrompterTests: VaultdTestCase {
    static let fake = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("pinentry/fake-pinentry").path

    struct Fake {
        let log: String
        let script: String
        var env: [String: String] { ["SESSIONVAULT_PINENTRY": VaultPrompterTests.fake, "FAKE_PINENTRY_LOG": log, "FAKE_PINENTRY_SCRIPT": script] }
        var lines: [String] { ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init) }
        func set(_ actions: [String]) throws {
            try actions.map { $0 + "\n" }.joined().write(toFile: script, atomically: true, encoding: .utf8)
        }
    }

    /// A vault with a PIN and a session, locked; dialogs go to the fake pinentry.
    func lockedVault(config: String = VaultdProcess.fastPINConfig, token: String = "at-prompter") throws -> (VaultdProcess, Fake) {
        let dir = NSTemporaryDirectory() + "fake-pinentry-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        let fake = Fake(log: dir + "/log", script: dir + "/script")
        try fake.set([])
        let v = try startVaultd(config: config, env: fake.env)
        enrollPIN(v)
        try importSession(v, account: "kari", accessToken: token, refreshToken: nil)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        return (v, fake)
    }

    /// Hello as an app that lets vaultd prompt.
    func app(_ v: VaultdProcess, lang: String = "en") throws -> RawClient {
        let c = try v.raw()
        let hello = try c.call("hello", ["version": 1, "client": "aktivitetslogg", "lang": .string(lang), "prompter": "vault",
                                         "display": ":42"])
        XCTAssertEqual(hello.result?["prompter"], "vault", hello.text)
        return c
    }

    func testAppGetsItsSessionAfterAWrongAndARightPINAndNeverSeesEither() throws {
        let (v, fake) = try lockedVault()
        try fake.set(["pin 000000", "pin \(Self.pin)"])
        let c = try app(v)
        var prompted = false
        let r = try c.call("session", ["account": "kari"], timeout: 60, onPrompt: { _ in prompted = true; return .cancel })
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(r.result?["access_token"], "at-prompter")
        XCTAssertFalse(prompted, "a prompter-vault client never gets a prompt event")
        XCTAssertTrue(c.sideFrames.isEmpty, "\(c.sideFrames)")
        // The bytes the app received: neither PIN, no prompt.
        let received = String(decoding: c.received, as: UTF8.self)
        XCTAssertFalse(received.contains(Self.pin), received)
        XCTAssertFalse(received.contains("000000"), received)
        XCTAssertFalse(received.contains("\"prompt\""), received)

        let log = fake.lines
        XCTAssertEqual(log.filter { $0 == "GETPIN" }.count, 2, "\(log)")
        let errors = log.filter { $0.hasPrefix("SETERROR") }
        XCTAssertEqual(errors.count, 1, "\(log)")
        XCTAssertTrue(errors.first?.hasPrefix("SETERROR That did not match.") == true, "the wrong PIN is said in the next dialog: \(log)")
        XCTAssertTrue(log.contains { $0.hasPrefix("SETDESC ‘") && $0.contains("’ wants to use your login.%0A%0AEnter your PIN:") }, "\(log)")
        XCTAssertTrue(log.contains { $0.hasPrefix("START") && $0.contains("DISPLAY=:42 ") }, "the dialog goes to the app's display: \(log)")
    }

    func testCancelTimeoutCrashAndMissingPinentryGiveTheirCodes() throws {
        let (v, fake) = try lockedVault(config: "prompt_timeout = 2\n" + VaultdProcess.fastPINConfig)
        let cases: [(String, String, String?)] = [
            ("cancel", "cancelled", nil), ("hang", "timeout", nil),
            ("crash", "factor_unavailable", Messages.pinentryFailed.en),
            ("garbage", "factor_unavailable", Messages.pinentryFailed.en),
        ]
        for (action, code, sentence) in cases {
            try fake.set([action])
            let began = Date()
            let r = try app(v).call("session", ["account": "kari"], timeout: 30)
            XCTAssertEqual(r.errorCode, code, "\(action): \(r.text)")
            if let sentence { XCTAssertEqual(r.errorMessage, sentence, "\(action)") }
            XCTAssertLessThan(Date().timeIntervalSince(began), 10, "\(action): never a hung request")
        }
        XCTAssertEqual(try status(v)["locked"], true)

        // No pinentry at all: a sentence saying how to get one.
        let (missing, _) = try lockedVault(config: "pinentry = \"/nonexistent/pinentry\"\n" + VaultdProcess.fastPINConfig)
        let r = try app(missing).call("session", ["account": "kari"], timeout: 30)
        XCTAssertEqual(r.errorCode, "factor_unavailable", r.text)
        XCTAssertEqual(r.errorMessage, Messages.pinentryMissing.en)
    }

    func testBokmalDialogAndAPlainClientStillGetsLocked() throws {
        let (v, fake) = try lockedVault()
        let plain = try v.raw()
        try plain.hello()
        XCTAssertEqual(try plain.call("session", ["account": "kari"]).errorCode, "locked", "a client that said neither gets locked as before")
        XCTAssertTrue(fake.lines.isEmpty, "no dialog for a client that did not ask for one")

        try fake.set(["pin \(Self.pin)"])
        let r = try app(v, lang: "nb").call("session", ["account": "kari"], timeout: 60)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertTrue(fake.lines.contains { $0.hasSuffix("vil bruke innloggingen din.%0A%0ASkriv inn PIN-koden:") }, "\(fake.lines)")
        XCTAssertTrue(fake.lines.contains("SETCANCEL Avbryt"), "\(fake.lines)")
    }

    func testEnrollmentTypesThePINTwiceInOneDialog() throws {
        let (v, fake) = try lockedVault()
        try fake.set(["pin \(Self.pin)", "pin 730641"])
        let c = try app(v)
        let r = try c.call("reenroll", ["factor": "pin"], timeout: 60)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertTrue(fake.lines.contains("SETREPEAT Type the same PIN again:"), "\(fake.lines)")
        XCTAssertFalse(String(decoding: c.received, as: UTF8.self).contains("730641"))
        // The new PIN is the one that opens the vault now.
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let (u, _) = try unlock(v, pins: ["730641"])
        XCTAssertTrue(u.isOK, u.text)
    }

    func testAReleaseBesideAnOpenDialogIsNotHeldUp() throws {
        let (v, fake) = try lockedVault(config: "prompt_timeout = 4\n" + VaultdProcess.fastPINConfig)
        let (u, _) = try unlock(v, pins: [Self.pin])
        XCTAssertTrue(u.isOK, u.text)
        // A dialog on screen that nobody answers (a re-enrollment).
        try fake.set(["hang"])
        let waiting = try app(v)
        XCTAssertTrue(waiting.send(Request(id: 99, op: "reenroll", fields: ["factor": "pin"])))
        XCTAssertTrue(waitUntil(timeout: 10) { fake.lines.contains("GETPIN") }, "\(fake.lines)")
        // Releases on other connections, plain and prompter-vault, answer at once.
        let plain = try v.raw()
        try plain.hello()
        for client in [plain, try app(v)] {
            let began = Date()
            let r = try client.call("session", ["account": "kari"], timeout: 5)
            XCTAssertTrue(r.isOK, r.text)
            XCTAssertLessThan(Date().timeIntervalSince(began), 1, "a release waited for a dialog")
        }
        // The unanswered dialog is closed at prompt_timeout and its request fails with `timeout`.
        let closed = try waiting.readJSON(timeout: 15)
        XCTAssertEqual(closed.errorCode, "timeout", closed.text)
    }
}

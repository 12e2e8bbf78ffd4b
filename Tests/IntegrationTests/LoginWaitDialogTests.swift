import Foundation
import VaultProtocol
import VaultTestSupport
import XCTest

/// The wait for a login in the browser, as a person at vaultd's own dialog
/// has it (issue 22): the dialog says what is going on and has Cancel, so a
/// person who closed the browser tab is not left with a silent five-minute
/// wait; when the browser comes back the dialog closes by itself. A real
/// vaultd, the strict test provider, the scripted pinentry and an `xdg-open`
/// on vaultd's PATH that is the test browser (or does nothing: the closed tab).
final class LoginWaitDialogTests: OIDCTestCase {
    /// vaultd with BankID, dialogs to the scripted pinentry, and `xdg-open`
    /// doing `browser` (a program path, or nil: open nothing).
    func vaultd(browser: String?) throws -> (TestProvider, VaultdProcess, VaultPrompterTests.Fake) {
        let bankid = try startProvider("bankid")
        let dir = try makeTemporaryDirectory("login-wait")
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        let fake = VaultPrompterTests.Fake(log: dir + "/log", script: dir + "/script")
        try fake.set([])
        let opener = dir + "/bin/xdg-open"
        try FileManager.default.createDirectory(atPath: dir + "/bin", withIntermediateDirectories: true)
        // The browser is left until vaultd's wait is on screen, as a person sees
        // the dialog before finishing in the browser: a browser done first would
        // leave no wait to show (under load, the race the test lost once in CI).
        let body = browser.map {
            "i=0; while [ $i -lt 200 ] && ! grep -q CONFIRM \(fake.log) 2>/dev/null; do sleep 0.1; i=$((i+1)); done\nexec \($0) \"$1\"\n"
        } ?? "exit 0\n"
        try ("#!/bin/sh\n" + body).write(toFile: opener, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: opener)
        let path = dir + "/bin:" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        var env = fake.env
        env["PATH"] = path
        env["TEST_USER"] = "kari"
        let v = try startVaultd(config: config([bankid.configTable()]), env: env)
        return (bankid, v, fake)
    }

    /// `login` from an app that lets vaultd ask.
    func login(_ v: VaultdProcess, timeout: Double = 60) throws -> JSON {
        let c = try v.raw()
        defer { c.close() }
        let hello = try c.call("hello", ["version": 1, "client": "aktivitetslogg", "lang": "en", "prompter": "vault",
                                         "display": ":42"])
        XCTAssertEqual(hello.result?["prompter"], "vault", hello.text)
        return try c.call("login", ["provider": "bankid"], timeout: timeout)
    }

    func testCancelWhileTheBrowserIsAwayEndsTheLoginAtOnce() throws {
        let (_, v, fake) = try vaultd(browser: nil)
        try fake.set(["cancel"])
        let began = Date()
        let r = try login(v)
        XCTAssertEqual(r.errorCode, "cancelled", r.text)
        XCTAssertEqual(r.errorMessage, Messages.loginCancelled(provider: "BankID").en, r.text)
        XCTAssertLessThan(Date().timeIntervalSince(began), 20, "ended by Cancel, not by the redirect's minutes")
        let lines = fake.lines
        let shown = Messages.waitingForBrowserLogin(provider: "BankID").en.replacingOccurrences(of: "\n", with: "%0A")
        XCTAssertTrue(lines.contains { $0.hasPrefix("SETDESC ‘") && $0.hasSuffix("’ wants to use your login.%0A%0A" + shown) },
                      "the wait is shown and names the app: \(lines)")
        XCTAssertTrue(lines.contains("CONFIRM --one-button"), "Cancel is its one button: \(lines)")
        XCTAssertEqual(try sessions(v).count, 0, "nothing stored")
        // The way back at once: the next login is not held up by the first.
        try fake.set(["cancel"])
        XCTAssertEqual(try login(v).errorCode, "cancelled")
    }

    func testTheWaitClosesByItselfWhenTheBrowserComesBack() throws {
        let (_, v, fake) = try vaultd(browser: TestProvider.browser)
        try fake.set(["wait"])
        let r = try login(v)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertNotNil(r.result?["access_token"]?.stringValue, r.text)
        let lines = fake.lines
        XCTAssertTrue(lines.contains("CONFIRM --one-button"), "the wait was shown: \(lines)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("KILLED") && $0.hasSuffix("SIGTERM") },
                      "vaultd closed the waiting dialog itself when the browser came back: \(lines)")
        XCTAssertEqual(try sessions(v).count, 1)
    }
}

import Foundation
import VaultClient
import VaultProtocol
import VaultTestSupport
import XCTest

/// Fingerprint enrollment after a first login, unlock, fallback when it fails,
/// and its settings, through a real vaultd with the stub fingerprint reader, driven by the
/// real vault-fpstub tool, as a person and their computer would.
final class FingerprintFlowTests: VaultdTestCase {
    var stubPath = ""

    func startWithReader(fingers: [String] = ["right-index"], plugged: Bool = true) throws -> VaultdProcess {
        let v = try makeVaultd()
        stubPath = v.root + "/fpstub.json"
        try (VaultdProcess.fastPINConfig + Self.stubReaderConfig(stubPath)).write(toFile: v.configPath, atomically: true, encoding: .utf8)
        if plugged { fpstub("plug") }
        for f in fingers { fpstub("enroll-finger", f) }
        try v.start()
        return v
    }

    /// The stub reader, with the opt-in vaultd needs outside --demo.
    static func stubReaderConfig(_ path: String) -> String {
        "[fingerprint]\nreader = \"stub\"\nallow_stub_reader = true\nstub_state = \"\(path)\"\nscan_timeout = 5\n"
    }

    @discardableResult
    func fpstub(_ args: String...) -> ProcessOutcome { fpstub(state: stubPath, args) }

    /// Imports a session, enrolls the PIN, enrolls the fingerprint (one matching scan), locks.
    func setUpEnrolled(_ v: VaultdProcess) throws {
        try importSession(v, account: "kari", accessToken: "AT-fp-1", refreshToken: "RT-fp-1")
        enrollPIN(v)
        fpstub("next", "match", "right-index")
        let r = v.vaultctl(["enroll", "fingerprint"])
        XCTAssertEqual(r.exit, 0, r.err)
        XCTAssertTrue(r.out.contains("Fingerprint enabled"), r.out)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
    }

    /// An interactive `session` request answered by `script`.
    func session(_ v: VaultdProcess, _ script: PromptScript) throws -> JSON {
        let c = try v.raw()
        defer { c.close() }
        try c.hello(interactive: true)
        return try c.call("session", ["account": "kari"], timeout: 60, onPrompt: script.handler)
    }

    func factorState(_ v: VaultdProcess, _ name: String) throws -> JSON? {
        let c = try v.raw()
        defer { c.close() }
        return try c.call("factors").result?["factors"]?.arrayValue?.first { $0["factor"]?.stringValue == name }
    }

    func slotIDs(_ v: VaultdProcess) throws -> [String] {
        let out = try sqlite3(v.storePath, "SELECT id FROM keyslot ORDER BY id;")
        XCTAssertEqual(out.exit, 0, out.err)
        return out.out.split(separator: "\n").map(String.init)
    }

    func testFingerprintComesFirstAndReleasesTheSession() throws {
        let v = try startWithReader()
        try setUpEnrolled(v)
        XCTAssertEqual(try factorState(v, "fingerprint")?["label"], "Fingerprint enabled")
        fpstub("next", "match", "right-index")
        let script = PromptScript()
        let r = try session(v, script)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(r.result?["access_token"], "AT-fp-1")
        XCTAssertEqual(script.secretPrompts, 0, "no PIN, no login screen: the fingerprint came first")
        XCTAssertTrue(script.messages.contains { $0.contains("fingerprint") }, "\(script.messages)")
    }

    func testEnrollmentChangesAreDetectedAndTheStaleSlotCleared() throws {
        let changes: [(String, [String])] = [
            ("a finger added", ["enroll-finger", "left-index"]),
            ("a finger removed", ["remove-finger", "left-thumb"]),
            ("the same finger re-enrolled", ["enroll-finger", "right-index"]),
        ]
        for (what, change) in changes {
            let v = try startWithReader(fingers: ["right-index", "left-thumb"])
            try setUpEnrolled(v)
            XCTAssertTrue(try slotIDs(v).contains("fingerprint"))
            _ = fpstub(change[0], change[1])
            fpstub("next", "match", "right-index")
            let script = PromptScript(secrets: [Self.pin])
            let r = try session(v, script)
            XCTAssertTrue(r.isOK, "\(what): \(r.text)")
            XCTAssertTrue(script.messages.contains { $0.contains("Your fingerprints on this computer have changed") }, "\(what): \(script.messages)")
            XCTAssertEqual(script.secretPrompts, 1, "\(what): the PIN came next")
            XCTAssertFalse(try slotIDs(v).contains("fingerprint"), "\(what): the stale slot is gone from the store")
            XCTAssertEqual(try factorState(v, "fingerprint")?["label"], "Fingerprint must be set up again (fingerprints changed)", what)
            XCTAssertTrue(try auditEntries(v).contains { $0["event"] == "enrollment_changed" }, what)
            v.stop()
        }
    }

    func testAllFingersRemovedIsAChangeToo() throws {
        let v = try startWithReader()
        try setUpEnrolled(v)
        fpstub("remove-finger", "right-index")
        let script = PromptScript(secrets: [Self.pin])
        let r = try session(v, script)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertFalse(try slotIDs(v).contains("fingerprint"))
    }

    func testThreeFailedScansThenPIN() throws {
        let v = try startWithReader()
        try setUpEnrolled(v)
        for _ in 0..<3 { fpstub("next", "no-match") }
        let script = PromptScript(secrets: [Self.pin])
        let r = try session(v, script)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(script.secretPrompts, 1)
        XCTAssertTrue(try slotIDs(v).contains("fingerprint"), "failed scans are not an enrollment change")
    }

    /// Issue 21: failed scans count across requests. Three misses, one per
    /// `session` request (each ended by Cancel at the reader and at the PIN),
    /// end the fingerprint: the fourth request asks for the PIN, not a finger.
    func testMissesSpreadOverRequestsEndTheFingerprintUntilThePIN() throws {
        let v = try startWithReader()
        try setUpEnrolled(v)
        for (request, left) in ["2 tries left", "1 try left", "that was the last try"].enumerated() {
            fpstub("next", "no-match")
            fpstub("next", "cancel")
            let script = PromptScript()   // no PIN: its question is cancelled
            let r = try session(v, script)
            XCTAssertFalse(r.isOK, "request \(request + 1): \(r.text)")
            XCTAssertTrue(script.messages.contains { $0.contains(left) }, "request \(request + 1): \(script.messages)")
        }
        fpstub("next", "match", "right-index")
        let script = PromptScript(secrets: [Self.pin])
        let r = try session(v, script)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(r.result?["access_token"], "AT-fp-1")
        XCTAssertEqual(script.secretPrompts, 1, "the PIN opened it")
        XCTAssertFalse(script.messages.contains { $0.contains("Touch the fingerprint reader") }, "no scan after the third miss: \(script.messages)")
        XCTAssertTrue(try slotIDs(v).contains("fingerprint"), "failed scans are not an enrollment change")
    }

    func testCancelThenPIN() throws {
        let v = try startWithReader()
        try setUpEnrolled(v)
        fpstub("next", "cancel")
        let script = PromptScript(secrets: [Self.pin])
        let r = try session(v, script)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(script.secretPrompts, 1, "cancel at the fingerprint → the PIN is offered")
    }

    func testHardwareErrorAndUnplugMidScanFallBackWithoutCrashing() throws {
        let v = try startWithReader()
        try setUpEnrolled(v)
        fpstub("next", "error")
        let first = PromptScript(secrets: [Self.pin])
        XCTAssertTrue(try session(v, first).isOK)
        XCTAssertTrue(first.messages.contains { $0.contains("not working") || $0.contains("fungerer") || $0.contains("reader") }, "\(first.messages)")
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)

        // Nothing queued: the scan waits for a finger; the reader is pulled out meanwhile.
        let path = stubPath
        let second = PromptScript(secrets: [Self.pin]) { prompt in
            if prompt.kind == .message, prompt.text.lowercased().contains("touch") {
                let exe = Binaries.fpstub
                _ = try? runProcess(exe, ["--state", path, "unplug"], env: childEnvironment([:]), timeout: 20)
            }
        }
        let r = try session(v, second)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(second.secretPrompts, 1)
        XCTAssertTrue(v.isRunning)
        XCTAssertEqual(try factorState(v, "fingerprint")?["label"], "Fingerprint reader not found")
    }

    func testNoReaderMeansNoFingerprintPromptAtAll() throws {
        let v = try startWithReader(fingers: [], plugged: false)
        try importSession(v, account: "kari", accessToken: "AT-fp-1", refreshToken: "RT-fp-1")
        enrollPIN(v)
        XCTAssertEqual(try factorState(v, "fingerprint")?["state"], "unavailable")
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let script = PromptScript(secrets: [Self.pin])
        XCTAssertTrue(try session(v, script).isOK)
        XCTAssertFalse(script.messages.contains { $0.lowercased().contains("fingerprint") }, "\(script.messages)")
        let enroll = v.vaultctl(["enroll", "fingerprint"])
        XCTAssertEqual(enroll.exit, 4)
        XCTAssertTrue(enroll.err.contains("Fingerprint reader not found"), enroll.err)
    }

    func testDisableFingerprintSendsTheNextUnlockElsewhere() throws {
        let v = try startWithReader()
        try setUpEnrolled(v)
        let unlock = v.vaultctl(["unlock", "pin"], stdin: "\(Self.pin)\n")
        XCTAssertEqual(unlock.exit, 0, unlock.err)
        // A client that cannot be asked is told how to confirm: in the settings app, or --yes.
        let unasked = v.vaultctl(["disable", "fingerprint", "--non-interactive"])
        XCTAssertEqual(unasked.exit, 1, unasked.err)
        XCTAssertTrue(unasked.err.contains("Turn it off in SessionVault's settings, which asks you first (vaultctl: --yes;"), unasked.err)
        // vaultd asks, by the method's name; No changes nothing and says so.
        let no = v.vaultctl(["disable", "fingerprint"], stdin: "n\n", env: ["LANG": "nb_NO.UTF-8"])
        XCTAssertEqual(no.exit, 6, no.err)
        XCTAssertTrue(no.out.contains("Slå av opplåsing med Fingeravtrykk?") || no.err.contains("Slå av opplåsing med Fingeravtrykk?"),
                      "out: \(no.out)\nerr: \(no.err)")
        XCTAssertTrue(no.err.contains("Ingenting ble endret. Du kan prøve igjen når du vil."), no.err)
        XCTAssertTrue(try slotIDs(v).contains("fingerprint"))
        let r = v.vaultctl(["disable", "fingerprint"], stdin: "y\n")
        XCTAssertEqual(r.exit, 0, r.err)
        XCTAssertTrue(r.out.contains("Fingerprint not set up"), r.out)
        XCTAssertFalse(try slotIDs(v).contains("fingerprint"))
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        fpstub("next", "match", "right-index")
        let script = PromptScript(secrets: [Self.pin])
        XCTAssertTrue(try session(v, script).isOK)
        XCTAssertEqual(script.secretPrompts, 1, "no fingerprint prompt after disable")
        XCTAssertEqual(v.vaultctl(["status"], env: ["LANG": "nb_NO.UTF-8"]).out.contains("Fingeravtrykk er ikke satt opp"), true)
        // Turning off what is not set up asks nothing: it says so.
        let again = v.vaultctl(["disable", "fingerprint"], stdin: "y\n")
        XCTAssertEqual(again.exit, 4, again.err)
        XCTAssertTrue(again.err.contains("That unlock method is not set up."), again.err)
        XCTAssertFalse(again.out.contains("Turn off") || again.err.contains("Turn off"), again.out + again.err)
    }
}

/// The fallback chain to the end, against vaultd's local demo providers:
/// fingerprint fails, PIN is locked out, Demo BankID lets the person in. With a
/// PIN enrolled the login proves who the person is, not a secret
/// (docs/key-hierarchy.md): it gives a working BankID session at once, and the
/// sessions saved before wait for the PIN, as the answer says.
final class FallbackToLoginTests: VaultdTestCase {
    var stub = ""

    /// vaultd with its demo providers and the stub reader; a first login with
    /// Demo Vipps whose fingerprint offer is accepted, then a PIN; locked.
    func demoVaultWithFingerprint(pin: String = "[pin]\nargon_memory_mib = 64\nfree_attempts = 1\nfirst_delay = 600\n") throws -> VaultdProcess {
        let v = try makeVaultd(config: pin, extraArgs: ["--demo"])
        stub = v.root + "/fpstub.json"
        try (v.configLines() + "[fingerprint]\nreader = \"stub\"\nstub_state = \"\(stub)\"\nscan_timeout = 5\n")
            .write(toFile: v.configPath, atomically: true, encoding: .utf8)
        fpstub("plug")
        fpstub("enroll-finger", "right-index")
        try v.start()

        // First login with Demo Vipps; accept the fingerprint offer (one matching touch).
        fpstub("next", "match", "right-index")
        let login = v.vaultctl(["login", "vipps", "--browser", TestProvider.browser], stdin: "y\n", env: ["TEST_USER": "kari"])
        XCTAssertEqual(login.exit, 0, login.err)
        XCTAssertTrue(login.err.contains("Turn on fingerprint login?"), login.err)
        enrollPIN(v)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        return v
    }

    func fpstub(_ args: String...) {
        let out = try? runProcess(Binaries.fpstub, ["--state", stub] + args, env: childEnvironment([:]), timeout: 20)
        XCTAssertEqual(out?.exit, 0, "vault-fpstub \(args)")
    }

    /// A prompt script that logs in as Kari in the demo provider's page when vaultd opens it.
    func loginScript(secrets: [String] = [], choices: [String]) -> PromptScript {
        PromptScript(secrets: secrets, confirm: true, choices: choices) { prompt in
            if prompt.kind == .openURL, let url = prompt.extra["url"]?.stringValue {
                _ = try? runProcess(TestProvider.browser, [url], env: childEnvironment(["TEST_USER": "kari"]), timeout: 30)
            }
        }
    }

    func testFingerprintFailsPINLockedOutThenBankIDAndReenrollment() throws {
        let v = try demoVaultWithFingerprint()

        // Three failed scans → the login choice, the PIN beside it → PIN (wrong: locked out at once) → the login choice → Demo BankID.
        for _ in 0..<3 { fpstub("next", "no-match") }
        let script = loginScript(secrets: ["000001"], choices: ["pin", "bankid"])
        let c = try v.raw()
        defer { c.close() }
        try c.hello(interactive: true)
        let r = try c.call("session", ["account": "vipps"], timeout: 60, onPrompt: script.handler)
        XCTAssertEqual(r.errorCode, "locked", r.text)
        XCTAssertTrue(r.text.contains("wait for your PIN"), r.text)
        let choices = script.prompts.filter { $0.kind == .choice }.map(\.text)
        XCTAssertEqual(choices.count, 2, "\(choices)")
        XCTAssertTrue(choices.first?.contains("That did not match several times") == true,
                      "the failed fingerprint leads to the BankID/Vipps choice, saying why; the PIN beside it: \(choices)")
        XCTAssertTrue(script.messages.contains { $0.contains("Too many wrong attempts") }, "\(script.messages)")
        XCTAssertTrue(choices.last?.contains("Demo BankID") == true, "then the login, the last way in: \(choices)")
        let bankid = try c.call("session", ["account": "bankid"], timeout: 10)
        XCTAssertTrue(bankid.isOK, "the login's own session works at once: \(bankid.text)")
        let status = v.vaultctl(["sessions"])
        XCTAssertTrue(status.out.contains("Waits for your PIN"), status.out)
        XCTAssertTrue(script.confirmPrompts.isEmpty, "no offer without the vault key: \(script.confirmPrompts)")
        let audit = try auditEntries(v)
        XCTAssertTrue(audit.contains { $0["event"] == "login" && $0["factor"] == "bankid" && $0["outcome"] == "ok" })
        XCTAssertEqual(audit.filter { $0["event"] == "enroll" && $0["factor"] == "fingerprint" }.count, 1)
    }

    /// Seed 003: after an enrollment change the next dialog is the BankID/Vipps
    /// choice, saying what happened, with the PIN beside it; the login gives
    /// the app its session at once.
    func testAnEnrollmentChangeGoesStraightToTheLoginChoice() throws {
        let v = try demoVaultWithFingerprint(pin: VaultdProcess.fastPINConfig)
        fpstub("enroll-finger", "left-index")   // someone added a finger
        fpstub("next", "match", "right-index")
        let script = loginScript(choices: ["vipps"])
        let c = try v.raw()
        defer { c.close() }
        try c.hello(interactive: true)
        let r = try c.call("session", ["account": "vipps"], timeout: 60, onPrompt: script.handler)
        XCTAssertTrue(r.isOK, "the login's fresh session, at once: \(r.text)")
        let choices = script.prompts.filter { $0.kind == .choice }
        XCTAssertEqual(choices.count, 1, "\(script.prompts.map(\.text))")
        XCTAssertTrue(choices.first?.text.contains("Your fingerprints on this computer have changed") == true,
                      "the choice says what happened: \(choices.map(\.text))")
        let offered = choices.map { JSON.object($0.extra).text }
        XCTAssertTrue(offered.first?.contains("\"pin\"") == true, "the PIN beside the providers: \(offered)")
        XCTAssertEqual(script.secretPrompts, 0, "the PIN was not asked first")
        XCTAssertFalse(script.messages.contains { $0.contains("have changed") }, "said once, in the choice: \(script.messages)")
        XCTAssertTrue(script.messages.contains { $0.contains("you will be asked to set up Fingerprint again") },
                      "the vault stays locked for the PIN, and the login says the offer comes after it: \(script.messages)")
        XCTAssertTrue(script.confirmPrompts.isEmpty, "no offer yet: \(script.confirmPrompts)")

        // The PIN beside the providers opens the vault too; then the offer comes, and a touch sets the fingerprint up again.
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        fpstub("next", "match", "right-index")
        let pin = loginScript(secrets: [Self.pin], choices: ["pin"])
        let again = try c.call("session", ["account": "vipps"], timeout: 60, onPrompt: pin.handler)
        XCTAssertTrue(again.isOK, again.text)
        XCTAssertEqual(pin.secretPrompts, 1)
        XCTAssertTrue(pin.confirmPrompts.contains { $0.contains("Turn on fingerprint login?") }, "\(pin.confirmPrompts)")
        XCTAssertTrue(v.vaultctl(["status"]).out.contains("Fingerprint enabled"), "set up again")
    }
}

extension VaultdTestCase {
    /// Runs the real vault-fpstub on the stub reader whose state is at `state`.
    @discardableResult
    func fpstub(state: String, _ args: [String], file: StaticString = #filePath, line: UInt = #line) -> ProcessOutcome {
        let exe = Binaries.fpstub
        let out = (try? runProcess(exe, ["--state", state] + args, env: childEnvironment([:]), timeout: 20))
            ?? ProcessOutcome(exit: -1, signaled: false, out: "", err: "did not run", timedOut: false)
        XCTAssertEqual(out.exit, 0, "vault-fpstub \(args): \(out.err)", file: file, line: line)
        return out
    }
}

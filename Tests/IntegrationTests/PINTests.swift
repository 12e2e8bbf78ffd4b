import Foundation
import VaultProtocol
import XCTest

/// The PIN factor end to end: enrollment through vaultctl, the locked state,
/// wrong PINs counted and throttled (durably), escalation, and reset.
final class PINTests: VaultdTestCase {
    static let throttledConfig = "[pin]\nargon_memory_mib = 64\nfree_attempts = 2\nfirst_delay = 2\nmax_delay = 8\n"
    static let lockedSentence = "The vault is locked. Unlock it with your fingerprint or PIN, or log in with BankID or Vipps."

    func testEnrollRefusesWeakPINsWithTheirSentences() throws {
        let v = try startVaultd()
        enrollPIN(v)
        // Changing the PIN asks for the current one first; then three weak PINs
        // in a row: each refused with its sentence, then the enrollment ends.
        let weak = v.vaultctl(["reenroll", "pin"], stdin: "\(Self.pin)\n123456\n111111\n4829\n")
        XCTAssertTrue(weak.err.contains("To change or turn off your PIN, first enter the PIN you use now."), weak.err)
        XCTAssertEqual(weak.exit, 1, "out: \(weak.out) err: \(weak.err)")
        XCTAssertTrue(weak.err.contains("That PIN is a run of digits (like 123456) and is easy to guess. Please choose another."), weak.err)
        XCTAssertTrue(weak.err.contains("That PIN repeats one digit and is easy to guess. Please choose another."), weak.err)
        XCTAssertTrue(weak.err.contains("A PIN must have 6 to 64 digits. Please choose another."), weak.err)
        XCTAssertTrue(weak.err.contains("The PIN was not set up. Please try again."), weak.err)
        // Letters, and two PINs that differ.
        let letters = v.vaultctl(["reenroll", "pin"], stdin: "\(Self.pin)\n48a915\n")
        XCTAssertTrue(letters.err.contains("A PIN may contain digits only. Please choose another."), letters.err)
        XCTAssertEqual(letters.exit, 6, "input ended: cancelled. \(letters.err)")
        let mismatch = v.vaultctl(["reenroll", "pin"], stdin: "\(Self.pin)\n730641\n730642\n")
        XCTAssertTrue(mismatch.err.contains("The two PINs were not the same. Let's start again."), mismatch.err)

        // The old PIN is still the one that works.
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let (r, _) = try unlock(v, pins: [Self.pin])
        XCTAssertTrue(r.isOK, "the original PIN stopped working after refused re-enrollments: \(r.text)")
        // The PIN does not appear in anything vaultctl printed.
        for out in [weak.out, weak.err, letters.out, letters.err, mismatch.out, mismatch.err] {
            XCTAssertFalse(out.contains(Self.pin))
        }
    }

    func testLockedTokenExitsFourWithTheSentence() throws {
        let v = try startVaultd()
        enrollPIN(v)
        try importSession(v, account: "alice", accessToken: "at-locked-test", refreshToken: "rt-locked-test")
        let unlocked = v.vaultctl(["token", "--non-interactive"])
        XCTAssertEqual(unlocked.exit, 0, unlocked.err)
        XCTAssertEqual(unlocked.out.trimmingCharacters(in: .whitespacesAndNewlines), "at-locked-test")

        let lock = v.vaultctl(["lock"])
        XCTAssertEqual(lock.exit, 0, lock.err)
        XCTAssertTrue(lock.out.contains("The vault is locked."), lock.out)
        let status = v.vaultctl(["status"])
        XCTAssertTrue(status.out.contains("Vault: locked"), status.out)
        XCTAssertTrue(status.out.contains("PIN enabled"), status.out)

        let r = v.vaultctl(["token", "--non-interactive"])
        XCTAssertEqual(r.exit, 4, "out: \(r.out) err: \(r.err)")
        XCTAssertTrue(r.err.contains(Self.lockedSentence), r.err)
        XCTAssertFalse(r.out.contains("at-locked-test"))
        let json = v.vaultctl(["token", "--non-interactive", "--json"])
        XCTAssertEqual(json.exit, 4)
        let err = try JSON.parse(json.out.trimmingCharacters(in: .whitespacesAndNewlines))
        XCTAssertEqual(err["error"]?["code"], "locked", json.out)
        XCTAssertEqual(err["error"]?["factors"], .array(["pin"]), json.out)

        // Interactive token with the PIN on stdin unlocks and prints the token.
        let t = v.vaultctl(["token"], stdin: "\(Self.pin)\n")
        XCTAssertEqual(t.exit, 0, t.err)
        XCTAssertEqual(t.out.trimmingCharacters(in: .whitespacesAndNewlines), "at-locked-test")
    }

    func testWrongPINsLockOutEscalateSurviveRestartAndResetOnSuccess() throws {
        let v = try startVaultd(config: Self.throttledConfig)
        enrollPIN(v)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)

        // First wrong PIN is free: the server says how many tries are left and asks again.
        var (r, script) = try unlock(v, pins: ["000000"])
        XCTAssertEqual(r.errorCode, "cancelled", "input ran out after one free wrong try: \(r.text)")
        XCTAssertEqual(script.secretPrompts, 2, "a free wrong try should be asked again")
        XCTAssertTrue(script.messages.contains("That did not match. 1 try left before a pause. Please try again."), "\(script.messages)")
        XCTAssertEqual(try pinFactor(v)["state"], "enabled")

        // The second wrong PIN starts a lockout of first_delay (2 s).
        (r, script) = try unlock(v, pins: ["000001"])
        XCTAssertEqual(r.errorCode, "locked_out", r.text)
        XCTAssertEqual(r["error"]?["retry_after"], .int(2), r.text)
        XCTAssertTrue(r.errorMessage?.contains("Too many wrong attempts. Try again in 2 s") == true, r.text)
        XCTAssertFalse(r.text.contains("000001"))
        var pin = try pinFactor(v)
        XCTAssertEqual(pin["state"], "locked_out", pin.text)
        let retry = try XCTUnwrap(pin["retry_after"]?.intValue, pin.text)
        XCTAssertTrue((1...2).contains(retry), pin.text)
        let st = try status(v)
        let statusPin = st["factors"]?.arrayValue?.first { $0["factor"] == "pin" }
        XCTAssertEqual(statusPin?["state"], "locked_out", st.text)
        XCTAssertNotNil(statusPin?["retry_after"]?.intValue, st.text)
        XCTAssertTrue(statusPin?["label"]?.stringValue?.hasPrefix("PIN locked — try again in") == true, st.text)

        // After the lockout, one more wrong PIN doubles the wait (4 s).
        try waitForLockoutToEnd(v)
        (r, script) = try unlock(v, pins: ["000002"])
        XCTAssertEqual(r.errorCode, "locked_out", r.text)
        XCTAssertEqual(r["error"]?["retry_after"], .int(4), "escalation: 2 s, then 4 s: \(r.text)")
        XCTAssertEqual(script.secretPrompts, 1, "no free tries are left once the counter is past them")
        let lockedAt = monotonicNow()

        // While locked out, even the right PIN is not asked for.
        if monotonicNow() - lockedAt < 2.5 {
            (r, script) = try unlock(v, pins: [Self.pin])
            XCTAssertEqual(r.errorCode, "locked_out", r.text)
            XCTAssertEqual(script.secretPrompts, 0, "a locked-out PIN must not be asked for")
        }

        // The lockout survives a restart of vaultd.
        try v.restart()
        XCTAssertEqual(v.lastExit?.exit, 0, "vaultd did not exit 0 on SIGTERM")
        pin = try pinFactor(v)
        if monotonicNow() - lockedAt < 3.0 {
            XCTAssertEqual(pin["state"], "locked_out", "the lockout was lost in the restart: \(pin.text)")
            XCTAssertTrue((1...4).contains(pin["retry_after"]?.intValue ?? 0), pin.text)
        }

        // The counter survived too: the next wrong PIN doubles again (8 s = max_delay).
        try waitForLockoutToEnd(v)
        (r, _) = try unlock(v, pins: ["000003"])
        XCTAssertEqual(r.errorCode, "locked_out", r.text)
        XCTAssertEqual(r["error"]?["retry_after"], .int(8), "the failure count was lost in the restart: \(r.text)")

        // The right PIN after the lockout works and resets the counter.
        try waitForLockoutToEnd(v)
        (r, _) = try unlock(v, pins: [Self.pin])
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(try status(v)["locked"], .bool(false))
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        // A fresh counter: the first wrong try is free again, the second waits first_delay.
        (r, script) = try unlock(v, pins: ["000004"])
        XCTAssertEqual(r.errorCode, "cancelled", r.text)
        XCTAssertEqual(script.secretPrompts, 2)
        XCTAssertEqual(try pinFactor(v)["state"], "enabled")
        (r, _) = try unlock(v, pins: ["000005"])
        XCTAssertEqual(r["error"]?["retry_after"], .int(2), "the counter was not reset by the right PIN: \(r.text)")

        // The audit log tells the story, without PINs.
        let entries = try auditEntries(v)
        let failures = entries.filter { $0["event"] == "unlock" && $0["outcome"] == "failed" }
        XCTAssertEqual(failures.compactMap { $0["detail"]?["failures"]?.intValue }, [1, 2, 3, 4, 1, 2], "\(failures.map(\.text))")
        let lockouts = entries.filter { $0["event"] == "lockout" }.compactMap { $0["detail"]?["seconds"]?.intValue }
        XCTAssertEqual(lockouts, [2, 4, 8, 2])
        let text = JSON.array(entries).text
        for secret in [Self.pin, "000000", "000001", "000002", "000003", "000004", "000005"] {
            XCTAssertFalse(text.contains(secret), "the audit log holds a PIN")
        }
    }

    func testWrongPINThroughVaultctlExitsFour() throws {
        let v = try startVaultd(config: Self.throttledConfig)
        enrollPIN(v)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let r = v.vaultctl(["unlock", "pin"], stdin: "000000\n000001\n")
        XCTAssertEqual(r.exit, 4, r.err)
        XCTAssertTrue(r.err.contains("That did not match. 1 try left before a pause. Please try again."), r.err)
        XCTAssertTrue(r.err.contains("Too many wrong attempts. Try again in 2 s, or log in with BankID or Vipps."), r.err)
        let factors = v.vaultctl(["factors"])
        XCTAssertTrue(factors.out.contains("locked_out"), factors.out)
    }

    func testUnansweredPINPromptTimesOutWithoutCountingAnAttempt() throws {
        let v = try startVaultd(config: "prompt_timeout = 1\n" + Self.throttledConfig)
        enrollPIN(v)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let c = try v.raw()
        try c.hello(interactive: true)
        // Leave the secret prompt unanswered.
        var asked = 0
        let r = try c.call("unlock", ["factor": "pin"], timeout: 15) { p in
            if p.kind == .secret { asked += 1 }
            return .none
        }
        XCTAssertEqual(asked, 1)
        XCTAssertEqual(r.errorCode, "timeout", r.text)
        XCTAssertTrue(try c.call("status").isOK, "the connection is still usable after a prompt timed out")
        // Nothing was counted: two wrong tries are still needed for a lockout.
        var (u, script) = try unlock(v, pins: ["000000"])
        XCTAssertEqual(u.errorCode, "cancelled", u.text)
        XCTAssertEqual(script.secretPrompts, 2, "an unanswered prompt was counted as a wrong PIN")
        (u, _) = try unlock(v, pins: [Self.pin])
        XCTAssertTrue(u.isOK, u.text)
    }
}

import Foundation
import VaultProtocol
import VaultWire
import XCTest

/// The PIN failure counter is written durably *before* the PIN is checked, so
/// killing vaultd in between never gives a free guess. Uses the debug-build
/// hook `SESSIONVAULT_TEST_PAUSE_AFTER_COUNTER`.
final class CrashSafetyTests: VaultdTestCase {
    static let config = "[pin]\nargon_memory_mib = 64\nfree_attempts = 2\nfirst_delay = 2\nmax_delay = 8\n"

    /// Starts an unlock with `pin`, waits for vaultd to pause right after the
    /// counter write, kills it with SIGKILL and restarts it without the hook.
    func crashMidAttempt(_ v: VaultdProcess, pin: String) throws {
        let marker = v.root + "/paused.marker"
        v.stop()
        try v.start(env: ["SESSIONVAULT_TEST_PAUSE_AFTER_COUNTER": marker])
        let c = try v.raw()
        try c.hello(interactive: true)
        c.send(Request(id: "doomed", op: "unlock", fields: ["factor": "pin"]))
        let prompt = try c.readJSON(timeout: 10)
        XCTAssertEqual(prompt["event"], "prompt", prompt.text)
        let pid = try XCTUnwrap(prompt["prompt"]?["pid"]?.stringValue, prompt.text)
        c.send(Request(id: "a", op: "answer", fields: ["pid": .string(pid), "value": .string(pin)]))
        let paused = waitUntil(timeout: 10) { FileManager.default.fileExists(atPath: marker) }
        // Without the pause the kill lands anywhere, and the test would prove nothing: fail, never skip.
        guard paused else {
            throw IntegrationError("""
                vaultd did not pause after the PIN counter write within 10 s: the crash could not be placed. \
                The hook exists only in debug builds (VAULTD_BIN must be one); otherwise it was never reached.
                """)
        }
        v.kill9()
        XCTAssertEqual(v.lastExit?.signaled, true)
        c.close()
        try FileManager.default.removeItem(atPath: marker)
        try v.start(env: [:])
    }

    func testKilledWrongPINAttemptStillCounts() throws {
        let v = try startVaultd(config: Self.config)
        enrollPIN(v)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)

        try crashMidAttempt(v, pin: "000000")
        XCTAssertTrue(try status(v)["locked"] == .bool(true))
        XCTAssertEqual(try pinFactor(v)["state"], "enabled", "one counted failure is still under free_attempts")

        // free_attempts - 1 = 1 more wrong PIN: without the counted attempt this
        // would be a free try (asked again); with it, the lockout starts now.
        let (r, script) = try unlock(v, pins: ["000001"])
        XCTAssertEqual(r.errorCode, "locked_out", "the killed attempt was not counted: \(r.text)")
        XCTAssertEqual(r["error"]?["retry_after"], .int(2), r.text)
        XCTAssertEqual(script.secretPrompts, 1)
        let failed = try auditEntries(v).filter { $0["event"] == "unlock" && $0["outcome"] == "failed" }
        XCTAssertEqual(failed.last?["detail"]?["failures"], .int(2), "\(failed.map(\.text))")
    }

    func testKilledRightPINAttemptCountsUntilASuccessfulCheck() throws {
        let v = try startVaultd(config: Self.config)
        enrollPIN(v)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)

        try crashMidAttempt(v, pin: Self.pin)
        XCTAssertEqual(try status(v)["locked"], .bool(true), "the killed attempt must not have unlocked anything")

        // The attempt counted: one wrong PIN now locks out.
        var (r, script) = try unlock(v, pins: ["000001"])
        XCTAssertEqual(r.errorCode, "locked_out", "the killed right-PIN attempt was not counted: \(r.text)")
        XCTAssertEqual(script.secretPrompts, 1)

        // A successful check resets it.
        try waitForLockoutToEnd(v)
        (r, _) = try unlock(v, pins: [Self.pin])
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        (r, script) = try unlock(v, pins: ["000002"])
        XCTAssertEqual(r.errorCode, "cancelled", "after a success the first wrong try is free again: \(r.text)")
        XCTAssertEqual(script.secretPrompts, 2)
        XCTAssertEqual(try pinFactor(v)["state"], "enabled")
    }

    /// The lockout a failure brings is written with the count, before the
    /// check: an attempt killed during the check that reaches the limit leaves
    /// vaultd locked out after the restart, not one guess short of it.
    func testKilledAttemptThatReachesTheLimitLeavesTheLockout() throws {
        let v = try startVaultd(config: "[pin]\nargon_memory_mib = 64\nfree_attempts = 2\nfirst_delay = 600\nmax_delay = 600\n")
        enrollPIN(v)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let (first, _) = try unlock(v, pins: ["000001"])
        XCTAssertEqual(first.errorCode, "cancelled", "the first wrong PIN is free: \(first.text)")

        try crashMidAttempt(v, pin: "000002")
        XCTAssertEqual(try pinFactor(v)["state"], "locked_out", "the killed attempt's lockout was written before the check")
        let (r, script) = try unlock(v, pins: [Self.pin])
        XCTAssertEqual(r.errorCode, "locked_out", r.text)
        XCTAssertEqual(script.secretPrompts, 0, "no guess is taken while locked out")
    }
}

import Foundation
import VaultProtocol
import VaultWire
import XCTest

/// Idle locking and a clean shutdown.
final class LockTests: VaultdTestCase {
    func testIdleTimeoutLocksTheVault() throws {
        let v = try startVaultd(config: "idle_timeout = 2\n[pin]\nargon_memory_mib = 64\n")
        enrollPIN(v)
        try importSession(v, account: "idle", accessToken: "at-idle", refreshToken: nil)
        XCTAssertEqual(try status(v)["locked"], .bool(false))
        // No requests that count as activity; `status` polls only look.
        let locked = try waitUntil(timeout: 10, interval: 0.5) { try status(v)["locked"] == .bool(true) }
        XCTAssertTrue(locked, "the vault was still unlocked 10 s into a 2 s idle timeout")
        let r = v.vaultctl(["token", "--non-interactive"])
        XCTAssertEqual(r.exit, 4, r.err)
        let audit = try auditEntries(v)
        XCTAssertTrue(audit.contains { $0["event"] == "lock" && $0["detail"]?["reason"] == "idle" }, "\(audit.map(\.text))")
    }

    func testIdleTimeoutDoesNotLockAVaultWithoutFactors() throws {
        // With no factor, locking would only hide the sessions: the device key reopens it.
        let v = try startVaultd(config: "idle_timeout = 1\n[pin]\nargon_memory_mib = 64\n")
        try importSession(v, account: "nofactor", accessToken: "at-nofactor", refreshToken: nil)
        Thread.sleep(forTimeInterval: 2.5)
        XCTAssertEqual(try status(v)["locked"], .bool(false))
    }

    func testSIGTERMExitsZeroAndRemovesTheSocket() throws {
        let v = try startVaultd()
        enrollPIN(v)
        XCTAssertTrue(FileManager.default.fileExists(atPath: v.socketPath))
        let outcome = try XCTUnwrap(v.stop())
        XCTAssertFalse(outcome.timedOut, "vaultd did not stop within 10 s of SIGTERM")
        XCTAssertFalse(outcome.signaled, "vaultd died of the signal instead of shutting down")
        XCTAssertEqual(outcome.exit, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: v.socketPath), "the socket file is left behind")
        XCTAssertTrue(v.log.contains("vaultd stopped"), v.log)
        assertNoCrashOutput(v.log)
        // And it comes back with the PIN enrolled and the vault locked.
        try v.start()
        let st = try status(v)
        XCTAssertEqual(st["locked"], .bool(true), st.text)
    }

    func testSIGTERMWithClientsConnectedStillExits() throws {
        let v = try startVaultd()
        enrollPIN(v)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        // The shutdown races with the requests it interrupts: try a few times.
        for round in 1...8 {
            // One idle client, one half-line client, one waiting at a PIN prompt.
            let idle = try v.raw()
            try idle.hello()
            let half = try v.raw()
            half.send("{\"id\":1,\"op\":\"sta")
            let prompting = try v.raw()
            try prompting.hello(interactive: true)
            prompting.send(Request(id: 1, op: "unlock", fields: ["factor": "pin"]))
            XCTAssertEqual(try prompting.readJSON()["event"], "prompt")
            let outcome = try XCTUnwrap(v.stop())
            // Give a crash on a background thread time to reach the log.
            usleep(300_000)
            let log = v.log
            var ok = true
            if outcome.timedOut { ok = false; XCTFail("round \(round): vaultd hung on SIGTERM with clients connected") }
            if outcome.signaled {
                ok = false
                XCTFail("round \(round): vaultd died of signal \(outcome.exit) on SIGTERM with a client at a PIN prompt")
            } else if outcome.exit != 0 {
                ok = false
                XCTFail("round \(round): vaultd exited \(outcome.exit) on SIGTERM")
            }
            if FileManager.default.fileExists(atPath: v.socketPath) { ok = false; XCTFail("round \(round): socket left behind") }
            if log.contains("Cannot schedule tasks on an EventLoop that has already shut down") {
                ok = false
                XCTFail("round \(round): vaultd used its event loop after shutting it down (a pending PIN prompt's timer)")
            }
            assertNoCrashOutput(log)
            if !ok || log.contains("Fatal error") { break }
            idle.close(); half.close(); prompting.close()
            try v.start()
        }
    }

    func testSIGTERMRightAfterTheSocketAcceptsExitsCleanly() throws {
        // A service manager may stop vaultd the moment it is up: from the first
        // accepted connection on, SIGTERM must mean a clean shutdown.
        let v = try makeVaultd()
        for round in 1...10 {
            try v.start(waitForReady: false)
            let outcome = try XCTUnwrap(v.stop())
            XCTAssertFalse(outcome.timedOut, "round \(round)")
            XCTAssertFalse(outcome.signaled, "round \(round): vaultd was killed by signal \(outcome.exit) instead of shutting down")
            XCTAssertEqual(outcome.exit, 0, "round \(round)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: v.socketPath), "round \(round): stale socket left behind")
            if outcome.signaled || outcome.exit != 0 { break }
        }
    }
}

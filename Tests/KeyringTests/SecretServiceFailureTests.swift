import Foundation
import Keyring
import VaultTestSupport
import XCTest

/// How SecretServiceKeyring reports a locked keyring, a bus without a Secret Service, and
/// no bus at all. libsecret connects to the session bus once per process, so each case runs
/// this test binary again as a child, in the environment under test.
final class SecretServiceFailureTests: XCTestCase {
    func testLockedKeyringReportsLocked() throws {
        try requireKeyringTools()
        try runChild(expecting: "locked", wrapper: [repositoryRoot + "/scripts/with-keyring", "--locked"])
    }

    func testBusWithoutSecretServiceReportsUnavailable() throws {
        try requireKeyringTools()
        try runChild(expecting: "unavailable",
                     wrapper: [repositoryRoot + "/scripts/with-keyring", "--no-secret-service"])
    }

    func testNoBusReportsUnavailable() throws {
        let runtime = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        // GDBus falls back to $XDG_RUNTIME_DIR/bus, so point that at an empty dir too.
        try runChild(expecting: "unavailable", wrapper: [],
                     environment: ["XDG_RUNTIME_DIR": runtime], removing: ["DBUS_SESSION_BUS_ADDRESS"])
    }

    func testDeadBusSocketReportsUnavailable() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try runChild(expecting: "unavailable", wrapper: [],
                     environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=\(dir)/no-such-bus", "XDG_RUNTIME_DIR": dir])
    }

    private func runChild(expecting expectation: String, wrapper: [String],
                          environment extra: [String: String] = [:], removing: [String] = []) throws {
        var env = ProcessInfo.processInfo.environment
        // DISPLAY would let GDBus autolaunch a bus; the markers belong to the outer keyring.
        for name in ["DISPLAY", "WAYLAND_DISPLAY", "SESSIONVAULT_TEST_KEYRING", "SESSIONVAULT_TEST_KEYRING_MODE"] + removing {
            env.removeValue(forKey: name)
        }
        env.merge(extra) { _, new in new }
        env["SESSIONVAULT_KEYRING_CHILD_EXPECT"] = expectation
        // Under scripts/sanitize the child is a second ASan test runner: what LSan
        // finds at its exit is XCTest's own run objects, and its exit status must
        // stay the test's verdict. (Its ASan checks stay on.)
        if let asan = env["ASAN_OPTIONS"] { env["ASAN_OPTIONS"] = asan + ":detect_leaks=0" }

        let testBinary = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let filter = "KeyringTests.SecretServiceFailureChild/testChildExpectation"
        let result = try runCommand(wrapper + [testBinary, filter], environment: env, timeout: 60)
        XCTAssertFalse(result.timedOut, "the child hung")
        XCTAssertEqual(result.status, 0, "child expecting \(expectation) failed:\n\(result.stdout)\n\(result.stderr)")
        // Guard against a filter that silently matched nothing.
        XCTAssertTrue(result.stdout.contains("Executed 1 test"), "child ran no test:\n\(result.stdout)")
    }
}

/// The child side of SecretServiceFailureTests; skipped when run directly.
final class SecretServiceFailureChild: XCTestCase {
    func testChildExpectation() throws {
        guard let expectation = ProcessInfo.processInfo.environment["SESSIONVAULT_KEYRING_CHILD_EXPECT"] else {
            throw XCTSkip("runs only as a child of SecretServiceFailureTests")
        }
        switch expectation {
        case "locked":
            // An existing key behind the lock (seeded by with-keyring --locked) and a
            // missing one must both say "locked": never "no key", which would make
            // loadOrCreate replace a key it cannot see.
            for vault in ["locked-seed", "absent"] {
                let keyring = SecretServiceKeyring(vault: vault)
                XCTAssertThrowsError(try keyring.load()) { error in
                    XCTAssertEqual(error as? KeyringError, .locked, "load(\(vault))")
                }
                XCTAssertThrowsError(try keyring.loadOrCreate()) { error in
                    XCTAssertEqual(error as? KeyringError, .locked, "loadOrCreate(\(vault))")
                }
                // libsecret's clear skips locked items and reports success; `vaultctl wipe`
                // must not claim to have removed a key that is still there.
                XCTAssertThrowsError(try keyring.delete()) { error in
                    XCTAssertEqual(error as? KeyringError, .locked, "delete(\(vault))")
                }
            }
        case "unavailable":
            let keyring = SecretServiceKeyring()
            let start = Date()
            for (name, call) in [("load", { _ = try keyring.load() }),
                                 ("loadOrCreate", { _ = try keyring.loadOrCreate() }),
                                 ("delete", { try keyring.delete() })] as [(String, () throws -> Void)] {
                XCTAssertThrowsError(try call()) { error in
                    guard case KeyringError.unavailable(let detail)? = error as? KeyringError else {
                        return XCTFail("\(name): expected .unavailable, got \(error)")
                    }
                    print("\(name): \(detail)")
                }
            }
            XCTAssertLessThan(Date().timeIntervalSince(start), 2, "a missing Secret Service must fail fast")
        default:
            XCTFail("unknown expectation \(expectation)")
        }
    }
}

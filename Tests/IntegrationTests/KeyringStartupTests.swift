import Foundation
import VaultProtocol
import VaultTestSupport
import XCTest

/// vaultd with its device key in a real Secret Service (gnome-keyring on a
/// private D-Bus session), and what it says when the keyring is locked,
/// missing, or has lost the key.
final class KeyringStartupTests: VaultdTestCase {
    func testDeviceKeyLivesInTheSecretServiceAndSurvivesRestarts() throws {
        let keyring = try PrivateKeyring(.unlocked)
        defer { keyring.stop() }
        let v = try makeVaultd(keyring: "secret-service", env: keyring.environment)
        try v.start()
        try importSession(v, account: "kari", accessToken: "AT-keyring-1", refreshToken: "RT-keyring-1")
        enrollPIN(v)
        XCTAssertTrue(v.log.contains("created a new device key"))

        // The key is an item of our schema in the keyring, not a file.
        let lookup = try runCommand(["secret-tool", "lookup", "vault", "default"],
                                            environment: keyring.childEnvironment())
        XCTAssertEqual(lookup.status, 0, lookup.stderr)
        XCTAssertFalse(lookup.stdout.isEmpty)
        XCTAssertFalse(FileManager.default.fileExists(atPath: v.dataDir + "/device.key"))

        try v.restart()
        XCTAssertFalse(v.log.components(separatedBy: "created a new device key").count > 2, "the key is reused")
        XCTAssertEqual(try status(v)["locked"], true, "a PIN is enrolled: locked after restart")
        let r = v.vaultctl(["token", "kari"], stdin: "\(Self.pin)\n")
        XCTAssertEqual(r.exit, 0, r.err)
        XCTAssertEqual(r.out.trimmingCharacters(in: .whitespacesAndNewlines), "AT-keyring-1")
    }

    func testLockedKeyringStopsVaultdWithASentence() throws {
        let keyring = try PrivateKeyring(.locked)
        defer { keyring.stop() }
        let v = try makeVaultd(keyring: "secret-service", env: keyring.environment)
        let out = try v.runToExit()
        XCTAssertFalse(out.timedOut)
        XCTAssertEqual(out.exit, 3)
        XCTAssertTrue(out.err.contains("Your desktop keyring is locked — unlock it and start vaultd again."), out.err)
        assertNoCrashOutput(out.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: v.storePath), "nothing is created without a device key")

        let nb = try v.runToExit(env: ["LANG": "nb_NO.UTF-8"])
        XCTAssertTrue(nb.err.contains("Nøkkelringen på skrivebordet er låst"), nb.err)
    }

    func testMissingSecretServiceOrBusStopsVaultdAndNamesTheFileFallback() throws {
        for mode in [PrivateKeyring.Mode.noSecretService, .noBus] {
            let keyring = try PrivateKeyring(mode)
            defer { keyring.stop() }
            let v = try makeVaultd(keyring: "secret-service", env: keyring.environment)
            let started = monotonicNow()
            let out = try v.runToExit()
            XCTAssertEqual(out.exit, 3, "\(mode): \(out.err)")
            XCTAssertTrue(out.err.contains("--keyring=file"), "\(mode): the sentence names the way out: \(out.err)")
            XCTAssertLessThan(monotonicNow() - started, 15, "\(mode): fails fast, never hangs")
            assertNoCrashOutput(out.err)
        }
    }

    /// A wiped keyring (new login keyring, the old device key gone): the old
    /// vault can never open again. vaultd keeps the old file aside, starts a
    /// fresh vault, and the person goes straight to login: no PIN or
    /// fingerprint prompt for a vault that cannot open.
    func testWipedKeyringStartsFreshAndKeepsTheOldFileAside() throws {
        let first = try PrivateKeyring(.unlocked)
        let v = try makeVaultd(keyring: "secret-service", env: first.environment)
        try v.start()
        try importSession(v, account: "kari", accessToken: "AT-wiped-1", refreshToken: "RT-wiped-1")
        enrollPIN(v)
        v.stop()
        first.stop()

        let wiped = try PrivateKeyring(.unlocked)
        defer { wiped.stop() }
        try v.start(env: wiped.environment)
        let s = try status(v)
        XCTAssertEqual(s["locked"], false)
        XCTAssertEqual(s["accounts"]?.arrayValue?.count, 0)
        XCTAssertEqual(s["factors"]?.arrayValue?.first { $0["factor"] == "pin" }?["state"], "not_enrolled",
                       "no prompt for a slot that cannot open")
        let aside = try FileManager.default.contentsOfDirectory(atPath: v.dataDir).filter { $0.hasPrefix("vault.sqlite.orphaned-") }
        XCTAssertFalse(aside.isEmpty, "the old store is kept, not deleted")
        XCTAssertTrue(v.log.contains("moved aside"))
    }
}

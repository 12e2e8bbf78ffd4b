import Foundation
import VaultTestSupport
import XCTest

/// Proves each PrivateKeyring mode is what other integration tests rely on it to be,
/// using `secret-tool` (libsecret-tools) as an independent Secret Service client.
final class PrivateKeyringTests: XCTestCase {
    private func secretTool(_ keyring: PrivateKeyring, _ arguments: [String], input: String? = nil)
        throws -> CommandResult {
        try runCommand(["secret-tool"] + arguments, environment: keyring.childEnvironment(),
                               input: input, timeout: 10)
    }

    func testUnlockedStoresAndLooksUp() throws {
        let keyring = try PrivateKeyring(.unlocked)
        defer { keyring.stop() }
        XCTAssertTrue(try keyring.nameHasOwner("org.freedesktop.secrets"))

        let store = try secretTool(keyring, ["store", "--label=probe", "sessionvault-test", "unlocked"], input: "s3cret")
        XCTAssertEqual(store.status, 0, "store failed: \(store.stderr)")
        let lookup = try secretTool(keyring, ["lookup", "sessionvault-test", "unlocked"])
        XCTAssertEqual(lookup.status, 0, "lookup failed: \(lookup.stderr)")
        XCTAssertEqual(lookup.stdout, "s3cret")
    }

    func testLockedRefusesStoreAndHidesItems() throws {
        let keyring = try PrivateKeyring(.locked)
        defer { keyring.stop() }
        XCTAssertTrue(try keyring.nameHasOwner("org.freedesktop.secrets"))

        let store = try secretTool(keyring, ["store", "--label=probe", "sessionvault-test", "locked"], input: "s3cret")
        XCTAssertNotEqual(store.status, 0, "store into a locked collection succeeded")
        // libsecret's text for SECRET_ERROR_IS_LOCKED.
        XCTAssertTrue(store.stderr.contains("locked collection"), "unexpected stderr: \(store.stderr)")
        XCTAssertFalse(store.timedOut)

        let lookup = try secretTool(keyring, ["lookup", "sessionvault-test", "locked"])
        XCTAssertNotEqual(lookup.status, 0)
        XCTAssertEqual(lookup.stdout, "")
    }

    func testLockedKeepsSeededItemsButWillNotReveal() throws {
        let keyring = try PrivateKeyring(.locked, seed: [.deviceKey(vault: "seeded", base64: "c2VlZA==")])
        defer { keyring.stop() }

        let search = try secretTool(keyring, ["search", "--all", "vault", "seeded"])
        XCTAssertEqual(search.status, 0, "stderr: \(search.stderr)")
        // A locked item still shows up (its attributes are kept hashed), so the seed exists.
        XCTAssertTrue(search.stdout.contains("[/"), "no item found: \(search.stdout)")
        XCTAssertTrue(search.stderr.contains("locked object"), "unexpected stderr: \(search.stderr)")
        // lookup says nothing at all: no secret, no error, exactly as for a missing item.
        let lookup = try secretTool(keyring, ["lookup", "vault", "seeded"])
        XCTAssertNotEqual(lookup.status, 0)
        XCTAssertEqual(lookup.stdout, "")
        XCTAssertEqual(lookup.stderr, "")
    }

    func testUnlockedSeedIsReadable() throws {
        let keyring = try PrivateKeyring(.unlocked, seed: [.deviceKey(vault: "seeded", base64: "c2VlZA==")])
        defer { keyring.stop() }
        let lookup = try secretTool(keyring, ["lookup", "xdg:schema", "org.sessionvault.DeviceKey", "vault", "seeded"])
        XCTAssertEqual(lookup.stdout, "c2VlZA==", "stderr: \(lookup.stderr)")
    }

    func testNoSecretServiceFailsFast() throws {
        let keyring = try PrivateKeyring(.noSecretService)
        defer { keyring.stop() }
        XCTAssertNotNil(keyring.busAddress)
        XCTAssertFalse(try keyring.nameHasOwner("org.freedesktop.secrets"))

        let store = try secretTool(keyring, ["store", "--label=probe", "sessionvault-test", "none"], input: "s3cret")
        XCTAssertNotEqual(store.status, 0)
        XCTAssertFalse(store.timedOut)
        XCTAssertLessThan(store.elapsed, 2, "a missing Secret Service must fail fast, not wait for activation")
        // Nothing may have been auto-activated behind our back.
        XCTAssertFalse(try keyring.nameHasOwner("org.freedesktop.secrets"))
    }

    func testNoBusFailsFast() throws {
        let keyring = try PrivateKeyring(.noBus)
        defer { keyring.stop() }
        XCTAssertNil(keyring.busAddress)
        XCTAssertNil(keyring.childEnvironment()["DBUS_SESSION_BUS_ADDRESS"])

        let lookup = try secretTool(keyring, ["lookup", "sessionvault-test", "none"])
        XCTAssertNotEqual(lookup.status, 0)
        XCTAssertFalse(lookup.timedOut)
        XCTAssertLessThan(lookup.elapsed, 2)
    }

    func testGivenDataHomeAndPasswordReopenTheSameKeyring() throws {
        let dataHome = FileManager.default.temporaryDirectory
            .appendingPathComponent("sessionvault-datahome-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dataHome) }

        let first = try PrivateKeyring(.unlocked, dataHome: dataHome, password: "pw-1")
        let store = try secretTool(first, ["store", "--label=probe", "sessionvault-test", "persist"], input: "kept")
        XCTAssertEqual(store.status, 0, "store failed: \(store.stderr)")
        first.stop()

        let second = try PrivateKeyring(.unlocked, dataHome: dataHome, password: "pw-1")
        defer { second.stop() }
        let lookup = try secretTool(second, ["lookup", "sessionvault-test", "persist"])
        XCTAssertEqual(lookup.stdout, "kept", "stderr: \(lookup.stderr)")
    }

    func testStopEndsTheBusAndRemovesTheTempDir() throws {
        let keyring = try PrivateKeyring(.unlocked)
        let environment = keyring.childEnvironment()
        keyring.stop()
        keyring.stop()  // idempotent

        XCTAssertFalse(FileManager.default.fileExists(atPath: keyring.directory))
        let call = try runCommand(
            ["gdbus", "call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
             "--method", "org.freedesktop.DBus.GetId"],
            environment: environment, timeout: 5)
        XCTAssertNotEqual(call.status, 0, "the bus still answers after stop()")
    }
}

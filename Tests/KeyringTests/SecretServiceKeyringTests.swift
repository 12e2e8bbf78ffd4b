import Foundation
import Keyring
import SodiumKit
import VaultTestSupport
import XCTest

/// Against a real gnome-keyring through libsecret, in this process
/// (run through `scripts/with-keyring`).
final class SecretServiceKeyringTests: XCTestCase {
    private var vaultsToDelete: [String] = []

    override func tearDown() {
        for vault in vaultsToDelete {
            try? SecretServiceKeyring(vault: vault).delete()
        }
        vaultsToDelete = []
        super.tearDown()
    }

    private func makeKeyring(_ prefix: String = "test") -> SecretServiceKeyring {
        let vault = uniqueVaultName(prefix)
        vaultsToDelete.append(vault)
        return SecretServiceKeyring(vault: vault)
    }

    func testKind() {
        XCTAssertEqual(SecretServiceKeyring().kind, "secret-service")
    }

    func testCreateThenLoadReturnsTheSameBytes() throws {
        guard try requireTestKeyring() else { return }
        let keyring = makeKeyring()
        XCTAssertNil(try keyring.load())

        let (key, created) = try keyring.loadOrCreate()
        XCTAssertTrue(created)
        XCTAssertEqual(key.count, 32)
        let loaded = try XCTUnwrap(try keyring.load())
        XCTAssertTrue(loaded.constantTimeEquals(key))
    }

    func testSecondLoadOrCreateReturnsTheExistingKey() throws {
        guard try requireTestKeyring() else { return }
        let keyring = makeKeyring()
        let first = try keyring.loadOrCreate()
        let second = try keyring.loadOrCreate()
        XCTAssertTrue(first.created)
        XCTAssertFalse(second.created)
        XCTAssertTrue(second.key.constantTimeEquals(first.key))
    }

    /// The audit chain head is a second item of its own schema: it round-trips
    /// and neither hides nor replaces the device key.
    func testAuditHeadIsItsOwnItem() throws {
        guard try requireTestKeyring() else { return }
        let keyring = makeKeyring("audit")
        XCTAssertNil(try keyring.loadAuditHead())
        let (key, _) = try keyring.loadOrCreate()
        try keyring.saveAuditHead("7 00ff")
        try keyring.saveAuditHead("8 ab01")
        XCTAssertEqual(try keyring.loadAuditHead(), "8 ab01")
        let loaded = try XCTUnwrap(try keyring.load())
        XCTAssertTrue(loaded.constantTimeEquals(key), "the device key lookup found the audit head")
        XCTAssertNil(try makeKeyring("other").loadAuditHead(), "another vault sees this vault's head")
    }

    func testSeparateVaultsAreIndependent() throws {
        guard try requireTestKeyring() else { return }
        let a = makeKeyring("a"), b = makeKeyring("b")
        let keyA = try a.loadOrCreate()
        let keyB = try b.loadOrCreate()
        XCTAssertTrue(keyA.created)
        XCTAssertTrue(keyB.created, "vault b must not see vault a's key")
        XCTAssertFalse(keyA.key.constantTimeEquals(keyB.key))

        try a.delete()
        XCTAssertNil(try a.load())
        let stillB = try XCTUnwrap(try b.load())
        XCTAssertTrue(stillB.constantTimeEquals(keyB.key))
    }

    func testDeleteThenLoadIsNil() throws {
        guard try requireTestKeyring() else { return }
        let keyring = makeKeyring()
        _ = try keyring.loadOrCreate()
        try keyring.delete()
        XCTAssertNil(try keyring.load())
        // Deleting what is not there is not an error (`vaultctl wipe` twice).
        try keyring.delete()
        // And a new key can be created afterwards.
        XCTAssertTrue(try keyring.loadOrCreate().created)
    }

    /// The key really lives in the Secret Service, under our schema, where the desktop's
    /// own tools (seahorse, secret-tool) can see it.
    func testStoredSecretIsVisibleToSecretTool() throws {
        guard try requireTestKeyring() else { return }
        let vault = uniqueVaultName()
        vaultsToDelete.append(vault)
        let (key, _) = try SecretServiceKeyring(vault: vault).loadOrCreate()

        let lookup = try runCommand(["secret-tool", "lookup", "vault", vault])
        XCTAssertEqual(lookup.status, 0, "secret-tool lookup failed: \(lookup.stderr)")
        let bytes = try XCTUnwrap(Data(base64Encoded: lookup.stdout), "not base64: \(lookup.stdout)")
        XCTAssertEqual(Array(bytes), key.unsafeCopyToArray())

        let bySchema = try runCommand(["secret-tool", "lookup", "xdg:schema", "org.sessionvault.DeviceKey", "vault", vault])
        XCTAssertEqual(bySchema.stdout, lookup.stdout)

        let search = try runCommand(["secret-tool", "search", "--all", "vault", vault])
        XCTAssertTrue(search.stdout.contains("label = SessionVault device key"), search.stdout)
        XCTAssertTrue(search.stdout.contains("schema = org.sessionvault.DeviceKey"), search.stdout)
    }

    func testItemsOfOtherSchemasAreIgnored() throws {
        guard try requireTestKeyring() else { return }
        let vault = uniqueVaultName()
        let stored = try runCommand(["secret-tool", "store", "--label=not ours", "vault", vault],
                                    input: Data(repeating: 7, count: 32).base64EncodedString())
        XCTAssertEqual(stored.status, 0, stored.stderr)
        defer { _ = try? runCommand(["secret-tool", "clear", "vault", vault]) }

        XCTAssertNil(try SecretServiceKeyring(vault: vault).load())
    }

    func testStoredKeyOfWrongLengthFails() throws {
        guard try requireTestKeyring() else { return }
        let vault = uniqueVaultName()
        vaultsToDelete.append(vault)
        try storeRaw(Data(repeating: 1, count: 16).base64EncodedString(), vault: vault)

        XCTAssertThrowsError(try SecretServiceKeyring(vault: vault).load()) { error in
            guard case KeyringError.failed(let detail)? = error as? KeyringError else {
                return XCTFail("expected .failed, got \(error)")
            }
            XCTAssertTrue(detail.contains("16 bytes"), detail)
        }
        // loadOrCreate must not paper over it with a new key: sealed data would be lost.
        XCTAssertThrowsError(try SecretServiceKeyring(vault: vault).loadOrCreate())
    }

    func testStoredKeyThatIsNotBase64Fails() throws {
        guard try requireTestKeyring() else { return }
        let vault = uniqueVaultName()
        vaultsToDelete.append(vault)
        try storeRaw("definitely not base64!", vault: vault)

        XCTAssertThrowsError(try SecretServiceKeyring(vault: vault).load()) { error in
            guard case KeyringError.failed? = error as? KeyringError else {
                return XCTFail("expected .failed, got \(error)")
            }
        }
    }

    func testConcurrentUseFromManyTasks() async throws {
        guard try requireTestKeyring() else { return }
        let keyring = makeKeyring()
        let (key, _) = try keyring.loadOrCreate()
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<16 {
                group.addTask {
                    guard let loaded = try keyring.load() else { return false }
                    return loaded.constantTimeEquals(key)
                }
            }
            for try await same in group { XCTAssertTrue(same) }
        }
    }

    private func storeRaw(_ secret: String, vault: String) throws {
        let result = try runCommand(["secret-tool", "store", "--label=SessionVault device key",
                                     "xdg:schema", "org.sessionvault.DeviceKey", "vault", vault], input: secret)
        XCTAssertEqual(result.status, 0, result.stderr)
    }
}

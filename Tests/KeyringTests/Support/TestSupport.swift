import Foundation
import VaultTestSupport
import XCTest

/// Secret Service tests run against the private keyring `scripts/with-keyring` provides,
/// never the developer's own. Without it they fail loudly (a silent skip would let CI go
/// green without ever testing the keyring) unless skipping was asked for.
func requireTestKeyring(file: StaticString = #filePath, line: UInt = #line) throws -> Bool {
    let env = ProcessInfo.processInfo.environment
    if env["SESSIONVAULT_TEST_KEYRING"] == "1" { return true }
    if env["SESSIONVAULT_SKIP_KEYRING_TESTS"] == "1" {
        throw cannotRunHere("SESSIONVAULT_SKIP_KEYRING_TESTS=1")
    }
    XCTFail("""
        This Secret Service test needs a private keyring. Run it through scripts/with-keyring, \
        e.g. `scripts/with-keyring swift test --filter KeyringTests`, or set \
        SESSIONVAULT_SKIP_KEYRING_TESTS=1 to skip it.
        """, file: file, line: line)
    return false
}

/// Tests that start their own bus and keyring need the tools, not an outer keyring.
func requireKeyringTools() throws {
    if ProcessInfo.processInfo.environment["SESSIONVAULT_SKIP_KEYRING_TESTS"] == "1" {
        throw cannotRunHere("SESSIONVAULT_SKIP_KEYRING_TESTS=1")
    }
}

/// A vault name no other test (or earlier run) uses.
func uniqueVaultName(_ prefix: String = "test") -> String {
    "\(prefix)-\(UUID().uuidString)"
}

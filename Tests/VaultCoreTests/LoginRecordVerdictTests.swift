import XCTest
@testable import VaultCore

/// What a login's identity record says about the login, on its own: no store, no keys.
final class LoginRecordVerdictTests: XCTestCase {
    let me = ["issuer": "https://idp.example", "subject": "me"]
    let someoneElse = ["issuer": "https://idp.example", "subject": "someone else"]

    func verdict(_ check: Keyslot.RecordCheck?, pin: Bool = false) -> LoginRecordVerdict {
        LoginRecordVerdict(check: check, binding: me, hasSecretFactor: pin)
    }

    func testTheRecordDecidesWhoTheLoginIs() {
        XCTAssertEqual(verdict(nil), .firstSeen)
        XCTAssertEqual(verdict(.intact(me)), .owner)
        XCTAssertEqual(verdict(.intact(someoneElse)), .otherIdentity)
        XCTAssertEqual(verdict(.newerVersion), .newer)
        XCTAssertEqual(verdict(.damaged), .damaged(refused: true), "without a PIN a damaged record is what reopens the vault")
        XCTAssertEqual(verdict(.damaged, pin: true), .damaged(refused: false), "with a PIN it opens nothing")
    }

    func testOnlyTheOwnerReopensALockedVaultAndOnlyWithoutAPIN() {
        XCTAssertTrue(LoginRecordVerdict.owner.reopensVault(vaultOpen: false, hasSecretFactor: false, hasOwner: true))
        XCTAssertFalse(LoginRecordVerdict.owner.reopensVault(vaultOpen: false, hasSecretFactor: true, hasOwner: true))
        XCTAssertFalse(LoginRecordVerdict.owner.reopensVault(vaultOpen: true, hasSecretFactor: false, hasOwner: true))
        for stranger in [LoginRecordVerdict.firstSeen, .damaged(refused: false), .newer] {
            XCTAssertFalse(stranger.reopensVault(vaultOpen: false, hasSecretFactor: false, hasOwner: true), "\(stranger)")
        }
    }

    /// A vault without an owner and without a PIN (only the device key guards it)
    /// is reopened by its first login, which becomes its owner; with a PIN it is not.
    func testTheFirstLoginOfAVaultWithoutAnOwnerOrAPINReopensIt() {
        XCTAssertTrue(LoginRecordVerdict.firstSeen.reopensVault(vaultOpen: false, hasSecretFactor: false, hasOwner: false))
        XCTAssertFalse(LoginRecordVerdict.firstSeen.reopensVault(vaultOpen: false, hasSecretFactor: true, hasOwner: false))
        XCTAssertFalse(LoginRecordVerdict.firstSeen.reopensVault(vaultOpen: true, hasSecretFactor: false, hasOwner: false))
        for other in [LoginRecordVerdict.damaged(refused: false), .newer] {
            XCTAssertFalse(other.reopensVault(vaultOpen: false, hasSecretFactor: false, hasOwner: false), "\(other)")
        }
    }

    /// A stranger's login at a locked vault never becomes its owner's; a newer record is never overwritten.
    func testAnIdentityIsRecordedOnlyAtAnOpenVault() {
        XCTAssertTrue(LoginRecordVerdict.firstSeen.recordsIdentity(vaultOpen: true))
        XCTAssertFalse(LoginRecordVerdict.firstSeen.recordsIdentity(vaultOpen: false))
        XCTAssertTrue(LoginRecordVerdict.damaged(refused: false).recordsIdentity(vaultOpen: true), "written again")
        XCTAssertFalse(LoginRecordVerdict.owner.recordsIdentity(vaultOpen: true), "already recorded")
        XCTAssertFalse(LoginRecordVerdict.newer.recordsIdentity(vaultOpen: true))
        XCTAssertTrue(LoginRecordVerdict.owner.renewsSoftUnlocks(vaultOpen: true))
        XCTAssertTrue(LoginRecordVerdict.firstSeen.renewsSoftUnlocks(vaultOpen: true))
        XCTAssertFalse(LoginRecordVerdict.damaged(refused: false).renewsSoftUnlocks(vaultOpen: true))
        XCTAssertFalse(LoginRecordVerdict.owner.renewsSoftUnlocks(vaultOpen: false))
    }
}

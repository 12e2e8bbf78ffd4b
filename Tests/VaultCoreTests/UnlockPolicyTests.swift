import XCTest
@testable import VaultCore
import VaultFactor
import VaultProtocol
import VaultStore

/// The unlock policy's rules on their own: no store, no keyring, no clock.
final class UnlockPolicyTests: XCTestCase {
    let fingerprint = FactorDescriptor(id: .fingerprint, displayName: LocalizedText(en: "Fingerprint", nb: "Fingeravtrykk"),
                                       rank: 10, contribution: .presenceOnly)
    let pin = FactorDescriptor(id: .pin, displayName: LocalizedText(en: "PIN", nb: "PIN-kode"), rank: 20,
                               contribution: .lowEntropySecret)

    func row(_ id: String, factor: String? = nil, version: Int = 2) -> KeyslotRow {
        KeyslotRow(id: id, factor: factor ?? id, version: version, salt: [], kdf: "{}", binding: "{}", sealedKey: [], createdAt: 0)
    }

    func policy(_ slots: [KeyslotRow], live: Set<FactorID> = [], logins: [String] = ["bankid", "vipps"]) -> UnlockPolicy {
        UnlockPolicy(factors: [fingerprint, pin], slots: Dictionary(uniqueKeysWithValues: slots.map { ($0.id, $0) }),
                     secretFactors: ["pin"], liveSoftUnlocks: live, loginProviders: logins)
    }

    func testAFingerprintCountsOnlyWhileItsSoftUnlockLives() {
        let slots = [row("pin"), row("fingerprint")]
        XCTAssertEqual(policy(slots).usableFactors, [.pin])
        XCTAssertEqual(policy(slots, live: [.fingerprint]).usableFactors, [.fingerprint, .pin], "rank order")
        // A v1 fingerprint slot still wraps the vault key until its next match migrates it.
        XCTAssertEqual(policy([row("fingerprint", version: Keyslot.legacyVersion), row("pin")]).usableFactors, [.fingerprint, .pin])
    }

    func testALockedClientIsToldTheUsableFactorsThenTheLogins() {
        let p = policy([row("pin"), row("fingerprint")])
        XCTAssertEqual(p.lockedFactorList, ["pin", "bankid", "vipps"])
        let f = p.lockedFailure()
        XCTAssertEqual(f.code, .locked)
        XCTAssertEqual(f.extra["factors"], ["pin", "bankid", "vipps"])
        XCTAssertEqual(p.candidates(preferred: nil), [.pin])
        XCTAssertEqual(p.candidates(preferred: .fingerprint), [.fingerprint], "asked for by name")
    }

    /// When no slot can open the vault key, the answer never names a way that cannot work.
    func testAVaultNoSlotCanOpenOffersTheLoginAndReset() {
        let p = policy([row("fingerprint")], live: [.fingerprint])
        XCTAssertFalse(p.canOpenVaultKey)
        let f = p.lockedFailure()
        XCTAssertEqual(f.message, Messages.vaultUnopenable)
        XCTAssertEqual(f.extra["factors"], ["bankid", "vipps"])
        XCTAssertTrue(policy([row(Keyslot.deviceSlotID)]).canOpenVaultKey)
        XCTAssertTrue(policy([row("pin")]).canOpenVaultKey)
    }

    func testTheAtRestWarningIsGivenOnlyWithoutAPINAndWithAFactorSetUp() {
        XCTAssertNil(policy([row(Keyslot.deviceSlotID)]).atRestWarning, "nothing set up: nothing to warn about")
        XCTAssertEqual(policy([row(Keyslot.deviceSlotID), row("fingerprint")]).atRestWarning, Messages.fingerprintWithoutPIN)
        XCTAssertNil(policy([row("pin"), row("fingerprint")]).atRestWarning)
    }

    func testWhatAWaitingSessionAndAGoneSoftUnlockAskFor() {
        let withPIN = policy([row("pin"), row("fingerprint")])
        let withoutPIN = policy([row(Keyslot.deviceSlotID), row("fingerprint")])
        XCTAssertEqual(withPIN.sessionWaits, Messages.sessionWaitsForPIN)
        XCTAssertEqual(withoutPIN.sessionWaits, Messages.sessionWaitsForUnlock)
        XCTAssertEqual(withPIN.softUnlockNeedsPIN(fingerprint.displayName).message,
                       Messages.softUnlockGone(fingerprint.displayName, hasPIN: true))
        XCTAssertEqual(withoutPIN.softUnlockNeedsPIN(fingerprint.displayName).message,
                       Messages.softUnlockGone(fingerprint.displayName, hasPIN: false))
        XCTAssertEqual(withPIN.loggedInButLocked().message, Messages.loggedInOthersWaitForPIN)
    }
}

import VaultTestSupport
import XCTest
import FingerprintFactor
@testable import VaultCore
import VaultFactor
import VaultProtocol

/// Failed scans count across unlocks (issue 21): two misses, then Cancel or a
/// timeout, and the next miss is the third, not the first. After the third the
/// soft unlock is gone and the PIN (or BankID/Vipps) is needed. Through a real
/// Vault with the real fingerprint and PIN factors; the reader is in memory.
final class FingerprintAcrossUnlocksTests: XCTestCase {
    var rig: CountRig!
    override func setUpWithError() throws { rig = try CountRig() }
    override func tearDown() { rig.cleanup() }

    /// One unlock request by a person who cancels every question after the scans.
    func unlockGivingUp(_ vault: Vault) async -> VaultFailure? {
        await failure { try await vault.unlock(factor: nil, conversation: self.rig.person()) }
    }

    func assertFallenBack(_ vault: Vault, file: StaticString = #filePath, line: UInt = #line) async throws {
        let soft = await vault.fingerprintSoftUnlock
        XCTAssertFalse(soft, "the soft unlock is gone after the third miss", file: file, line: line)
        // Asked for by name: `locked`, saying the PIN is needed.
        let named = await failure { try await vault.unlock(factor: .fingerprint, conversation: self.rig.person()) }
        XCTAssertEqual(named?.code, .locked, file: file, line: line)
        XCTAssertEqual(named?.extra["factors"], .array([.string("pin"), .string("bankid")]), file: file, line: line)
        // A plain unlock no longer scans: the PIN comes first, and it opens.
        rig.log.clear()
        rig.reader.queue(.match(finger: "right-index"))
        try await vault.unlock(factor: nil, conversation: rig.person(CountTest.pin))
        XCTAssertEqual(rig.log.events, ["pin"], "no scan before the PIN", file: file, line: line)
        let locked = vault.isLocked
        XCTAssertFalse(locked, file: file, line: line)
    }

    func testMissMissCancelThenOneMissFallsBack() async throws {
        let vault = try await rig.enrolledVault()
        try await vault.unlock(factor: .pin, conversation: rig.person(CountTest.pin))   // fills the soft box
        await vault.lock(reason: "test")
        rig.log.clear()
        rig.reader.queue(.noMatch, .noMatch, .cancelled)
        let first = await unlockGivingUp(vault)
        XCTAssertEqual(first?.code, .cancelled)
        XCTAssertEqual(rig.log.events, ["scan", "scan", "scan", "login"], "a failed fingerprint leads to BankID/Vipps, the PIN beside it")
        let softAfterCancel = await vault.fingerprintSoftUnlock
        XCTAssertTrue(softAfterCancel, "two misses: one try is left")

        rig.log.clear()
        rig.reader.queue(.noMatch)
        _ = await unlockGivingUp(vault)
        XCTAssertEqual(rig.log.events, ["scan", "login"], "the third miss, counted across the Cancel, ends the fingerprint")
        XCTAssertTrue(rig.log.shown.contains { $0.contains("1 try left") }, "the first prompt counts the earlier misses: \(rig.log.shown)")
        XCTAssertTrue(rig.log.shown.contains { $0.contains("that was the last try") }, "\(rig.log.shown)")
        try await assertFallenBack(vault)
    }

    func testMissMissTimeoutThenOneMissFallsBack() async throws {
        let vault = try await rig.enrolledVault()
        try await vault.unlock(factor: .pin, conversation: rig.person(CountTest.pin))
        await vault.lock(reason: "test")
        rig.reader.queue(.noMatch, .noMatch, .timeout)
        let first = await unlockGivingUp(vault)
        XCTAssertEqual(first?.code, .cancelled)
        rig.log.clear()
        rig.reader.queue(.noMatch)
        _ = await unlockGivingUp(vault)
        XCTAssertEqual(rig.log.events, ["scan", "login"], "a timeout does not give fresh tries either")
        try await assertFallenBack(vault)
    }

    func testThreeMissesInThreeRequestsFallBack() async throws {
        let vault = try await rig.enrolledVault()
        try await vault.unlock(factor: .pin, conversation: rig.person(CountTest.pin))
        await vault.lock(reason: "test")
        for left in ["2 tries left", "1 try left"] {
            rig.log.clear()
            rig.reader.queue(.noMatch)   // then the person walks away (Cancel at the reader)
            _ = await unlockGivingUp(vault)
            XCTAssertTrue(rig.log.shown.contains { $0.contains(left) }, "\(left): \(rig.log.shown)")
            let soft = await vault.fingerprintSoftUnlock
            XCTAssertTrue(soft)
        }
        rig.reader.queue(.noMatch)
        _ = await unlockGivingUp(vault)
        try await assertFallenBack(vault)
    }

    /// What resets the count (model/unlock.pml: a new soft box, or a match): the PIN, and a match.
    func testThePINAndAMatchResetTheCount() async throws {
        let vault = try await rig.enrolledVault()
        try await vault.unlock(factor: .pin, conversation: rig.person(CountTest.pin))
        await vault.lock(reason: "test")
        rig.reader.queue(.noMatch, .noMatch, .cancelled)
        _ = await unlockGivingUp(vault)
        try await vault.unlock(factor: .pin, conversation: rig.person(CountTest.pin))   // the PIN: a new box, no misses
        await vault.lock(reason: "test")
        rig.reader.queue(.noMatch, .noMatch, .match(finger: "right-index"))
        try await vault.unlock(factor: nil, conversation: rig.person())               // the match forgives them
        await vault.lock(reason: "test")
        rig.reader.queue(.noMatch, .noMatch, .cancelled)
        _ = await unlockGivingUp(vault)
        let soft = await vault.fingerprintSoftUnlock
        XCTAssertTrue(soft, "two misses since the match: one try left")
        rig.log.clear()
        rig.reader.queue(.match(finger: "right-index"))
        try await vault.unlock(factor: nil, conversation: rig.person())
        XCTAssertEqual(rig.log.events, ["scan"])
    }

    /// A login at a locked vault with a PIN reaches no vault key and makes no
    /// soft box: it resets nothing (a stranger's own BankID must buy no tries).
    func testALoginThatLeavesTheVaultLockedResetsNothing() async throws {
        let vault = try await rig.enrolledVault()
        try await vault.unlock(factor: .pin, conversation: rig.person(CountTest.pin))
        await vault.lock(reason: "test")
        rig.reader.queue(.noMatch, .noMatch, .cancelled)
        _ = await unlockGivingUp(vault)
        _ = try await vault.login(provider: "bankid", conversation: rig.person())
        let locked = vault.isLocked
        XCTAssertTrue(locked)
        rig.reader.queue(.noMatch)
        _ = await unlockGivingUp(vault)
        try await assertFallenBack(vault)
    }
}

import Foundation
import Locking
import PINFactor
import SecurityChip
import VaultFactor
import VaultProtocol
import VaultStore
import XCTest
@testable import VaultCore
import VaultTestSupport

/// The vault bound to this computer's security chip (docs/key-hierarchy.md,
/// "Bound to this computer"), against a real TPM 2.0 simulator (swtpm): the
/// disk and the device key carried to another chip, PIN guesses at the chip's
/// pace, the chip wiped, and the layer turned on and off.
final class ChipBoundVaultTests: XCTestCase {
    var fx: VaultFixture!
    let thePIN = "482915"
    /// vaultd's own lockout set out of the way, so the chip's is the one met.
    let pin = PINFactor(throttle: ThrottlePolicy(freeAttempts: 50, firstDelay: 1, maxDelay: 1))

    override func setUpWithError() throws {
        setenv("TSS2_LOG", "all+NONE", 1)
        fx = try VaultFixture()
    }
    override func tearDown() { fx.cleanup() }

    func vault(_ tpm: SoftwareTPM?, binds: Bool = true, store: VaultStore? = nil, providers: any IdentityProviderDirectory = NoIdentityProviders()) throws -> Vault {
        let chip = ChipBinding(chip: tpm.map { TPMChip(location: $0.tcti) }, bindsNewWraps: binds)
        return try Vault(store: store ?? VaultStore(path: fx.dir + "/vault.sqlite"), deviceKey: fx.deviceKey, factors: [pin],
                         config: VaultConfig(idleTimeout: 0), logger: VaultFixture.logger, providers: providers, chip: chip)
    }

    func wrap(_ id: String) throws -> KeyslotRow? { try fx.store.keyslots().first { $0.id == id } }

    /// Copies the store's files as a backup would.
    func copiedStore() throws -> VaultStore {
        let copy = fx.dir + "-copy"
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: copy) }
        for name in try FileManager.default.contentsOfDirectory(atPath: fx.dir) where name.hasPrefix("vault.sqlite") {
            try FileManager.default.copyItem(atPath: fx.dir + "/" + name, toPath: copy + "/" + name)
        }
        return try VaultStore(path: copy + "/vault.sqlite")
    }

    func testWithoutAPINTheCopiedDiskAndDeviceKeyOpenNothingOnAnotherChip() async throws {
        let here = try SoftwareTPM(tries: 5, interval: 10)
        let v = try vault(here)
        _ = try await v.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        let device = try XCTUnwrap(try wrap(Keyslot.deviceSlotID))
        XCTAssertTrue(Keyslot.isBoundToChip(device), "a new vault is bound to the chip that answers")
        let said = await v.chipProtection()
        XCTAssertEqual(said, Messages.chipInUse(withPIN: false))

        // The attacker has the files and the device key, on another computer.
        let elsewhere = try SoftwareTPM(tries: 5, interval: 10)
        XCTAssertThrowsError(try Keyslot.openWrap(device, deviceKey: fx.deviceKey, secret: nil, chip: nil))
        XCTAssertThrowsError(try Keyslot.openWrap(device, deviceKey: fx.deviceKey, secret: nil, chip: TPMChip(location: elsewhere.tcti))) {
            XCTAssertEqual($0 as? WrapError, .chip(.notThisChip))
        }
        let stolen = try vault(elsewhere, store: try copiedStore())
        XCTAssertTrue(stolen.isLocked)
        let refused = await failure { _ = try await stolen.release(account: "a", conversation: SilentConversation()) }
        XCTAssertNotNil(refused, "no session on another chip")

        // This computer, after a restart: opens as before.
        let again = try vault(here)
        let a = try await again.release(account: "a", conversation: SilentConversation())
        XCTAssertEqual(a.accessToken, "at-T1")
    }

    func testPINGuessesAreCountedByTheChipWhoseLockoutHasItsOwnSentence() async throws {
        let tpm = try SoftwareTPM(tries: 3, interval: 10)
        let v = try vault(tpm)
        _ = try await v.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await v.enroll(.pin, conversation: ScriptedClient(secrets: [thePIN, thePIN]))
        XCTAssertTrue(Keyslot.isBoundToChip(try XCTUnwrap(try wrap("pin"))), "the PIN's wrap is bound")
        XCTAssertNil(try wrap(Keyslot.deviceSlotID))
        await v.lock(reason: "test")

        let guesses = ScriptedClient(secrets: ["000001", "000002", "000003", "000004", thePIN])
        let answer = await failure { try await v.unlock(factor: .pin, conversation: guesses) }
        XCTAssertEqual(guesses.asked, 3, "the chip locks after its 3 tries and no 4th PIN is asked for")
        XCTAssertEqual(answer?.code, .lockedOut)
        XCTAssertTrue(answer?.message.en.hasPrefix("Too many wrong PINs — this computer's security chip is waiting; try again in") ?? false,
                      "\(String(describing: answer))")
        XCTAssertTrue(answer?.message.en.hasSuffix("or log in with BankID or Vipps.") ?? false)
        XCTAssertEqual(try TPMChip(location: tpm.tcti).status().failures, 3, "each wrong PIN counted in the chip")
        XCTAssertEqual(try fx.store.failureCounter(factor: "pin").failures, 3, "and in vaultd's own count")

        // The right PIN now: the chip still waits, so it is not even asked.
        let right = ScriptedClient(secrets: [thePIN])
        let again = await failure { try await v.unlock(factor: .pin, conversation: right) }
        XCTAssertEqual(again?.code, .lockedOut)
        XCTAssertEqual(right.asked, 0)
        let locked = v.isLocked
        XCTAssertTrue(locked)
        XCTAssertTrue(try v.audit.entries().contains { $0.event == "unlock" && $0.outcome == "chip_locked_out" })
    }

    /// swtpm's chip, with its `status` calls counted.
    final class CountedChip: SecretChip, @unchecked Sendable {
        let base: TPMChip
        let statusCalls = Locked(0)
        init(_ base: TPMChip) { self.base = base }
        var location: String { base.location }
        func seal(_ secret: SecureBytes, auth: SecureBytes, guessProtected: Bool) throws(ChipError) -> [UInt8] {
            try base.seal(secret, auth: auth, guessProtected: guessProtected)
        }
        func unseal(_ blob: [UInt8], auth: SecureBytes) throws(ChipError) -> SecureBytes { try base.unseal(blob, auth: auth) }
        func check(_ blob: [UInt8]) throws(ChipError) { try base.check(blob) }
        func status() throws(ChipError) -> ChipStatus {
            statusCalls.withLock { $0 += 1 }
            return try base.status()
        }
    }

    /// `status` says whether the chip's lockout binds anyone, which only the
    /// chip knows: a round trip to the TPM (which the whole system shares) on
    /// the actor. An app polling `status`, or asking in a loop, made one per
    /// request; now the chip is asked once a minute.
    func testStatusInALoopAsksTheChipOnceAMinute() async throws {
        let tpm = try SoftwareTPM(tries: 5, interval: 10)
        let chip = CountedChip(TPMChip(location: tpm.tcti))
        let clock = TestClock()
        let v = try Vault(store: fx.store, deviceKey: fx.deviceKey, factors: [pin], config: VaultConfig(idleTimeout: 0),
                          logger: VaultFixture.logger, chip: ChipBinding(chip: chip, bindsNewWraps: true), clock: clock.reading)
        _ = try await v.enroll(.pin, conversation: ScriptedClient(secrets: [thePIN, thePIN]))
        let before = chip.statusCalls.withLock { $0 }
        for _ in 0..<100 {
            let said = await v.chipProtection()
            XCTAssertTrue(said?.en.contains("not locked by the computer's owner") ?? false)
        }
        XCTAssertEqual(chip.statusCalls.withLock { $0 } - before, 1, "the chip asked once for 100 looks")
        clock.advance(ChipLockoutWatch.askedEvery)
        _ = await v.chipProtection()
        XCTAssertEqual(chip.statusCalls.withLock { $0 } - before, 2, "and again a minute on")
    }

    func testTheRightPINOpensAndTheChipLayerTurnsOnAndOffAtTheNextPIN() async throws {
        let tpm = try SoftwareTPM(tries: 5, interval: 10)
        // A vault from before the TPM layer.
        let old = try vault(nil)
        _ = try await old.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await old.enroll(.pin, conversation: ScriptedClient(secrets: [thePIN, thePIN]))
        XCTAssertFalse(Keyslot.isBoundToChip(try XCTUnwrap(try wrap("pin"))))

        let on = try vault(tpm)
        let waiting = await on.chipProtection()
        XCTAssertEqual(waiting, Messages.chipFromNextPIN, "says the chip comes in with the next PIN")
        try await on.unlock(factor: .pin, conversation: ScriptedClient(secrets: [thePIN]))
        XCTAssertTrue(Keyslot.isBoundToChip(try XCTUnwrap(try wrap("pin"))), "bound at the PIN, in place")
        let said = await on.chipProtection()
        XCTAssertTrue(said?.en.hasPrefix(Messages.chipInUse(withPIN: true).en) ?? false)
        XCTAssertTrue(said?.en.contains("not locked by the computer's owner") ?? false, "swtpm has no lockout password: said")

        let boundAgain = try vault(tpm)
        try await boundAgain.unlock(factor: .pin, conversation: ScriptedClient(secrets: [thePIN]))
        let a = try await boundAgain.release(account: "a", conversation: SilentConversation())
        XCTAssertEqual(a.accessToken, "at-T1")

        // tpm = "off" with the chip still there: unbound at the next PIN.
        let off = try vault(tpm, binds: false)
        try await off.unlock(factor: .pin, conversation: ScriptedClient(secrets: [thePIN]))
        XCTAssertFalse(Keyslot.isBoundToChip(try XCTUnwrap(try wrap("pin"))))
        let noChip = try vault(nil)
        try await noChip.unlock(factor: .pin, conversation: ScriptedClient(secrets: [thePIN]))
        let b = try await noChip.release(account: "a", conversation: SilentConversation())
        XCTAssertEqual(b.accessToken, "at-T1")
    }

    func testTheDeviceWrapIsBoundAtStartAndUnboundWhenTurnedOff() async throws {
        let tpm = try SoftwareTPM()
        let old = try vault(nil)
        _ = try await old.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        XCTAssertFalse(Keyslot.isBoundToChip(try XCTUnwrap(try wrap(Keyslot.deviceSlotID))))
        _ = try vault(tpm)
        XCTAssertTrue(Keyslot.isBoundToChip(try XCTUnwrap(try wrap(Keyslot.deviceSlotID))), "bound at start, one transaction")
        let off = try vault(tpm, binds: false)
        XCTAssertFalse(Keyslot.isBoundToChip(try XCTUnwrap(try wrap(Keyslot.deviceSlotID))))
        let a = try await off.release(account: "a", conversation: SilentConversation())
        XCTAssertEqual(a.accessToken, "at-T1")
    }

    /// A cleared or replaced chip: a sentence, a working session from a login,
    /// and the offer to start over, said before anything is lost.
    func testAWipedChipIsNoDeadEndWithoutAPIN() async throws {
        let tpm = try SoftwareTPM()
        let bankid = FakeIdentityProvider()
        let dir = FakeDirectory(providers: [bankid])
        let v = try vault(tpm, providers: dir)
        _ = try await v.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        try tpm.wipe()

        let after = try vault(tpm, providers: dir)
        let said = await after.chipProtection()
        XCTAssertEqual(said, Messages.chipReplaced)
        XCTAssertTrue(after.isLocked)

        // Declined: the login still gives its session, the old one is kept as it is.
        let declining = ScriptedClient(confirms: [false])
        let first = try await after.login(provider: "bankid", conversation: declining)
        XCTAssertEqual(first.accessToken, "AT-bankid-1")
        XCTAssertTrue(declining.confirmQuestions.first?.contains("sealed for this computer's old security chip") ?? false,
                      "\(declining.confirmQuestions)")
        XCTAssertEqual(Set(try fx.store.sessions().count == 2 ? ["both"] : []), ["both"], "nothing deleted on a No")

        // Yes: a new vault on the new chip, this login its first session.
        let agreeing = ScriptedClient(confirms: [true])
        let second = try await after.login(provider: "bankid", conversation: agreeing)
        XCTAssertEqual(second.accessToken, "AT-bankid-2")
        XCTAssertEqual(try fx.store.sessions().count, 1, "the old chip's session is gone, the new login kept")
        XCTAssertTrue(Keyslot.isBoundToChip(try XCTUnwrap(try wrap(Keyslot.deviceSlotID))), "bound to the new chip")
        let now = await after.chipProtection()
        XCTAssertEqual(now, Messages.chipInUse(withPIN: false))
        let restarted = try vault(tpm, providers: dir)
        let kept = try await restarted.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(kept.accessToken, "AT-bankid-2")
    }

    func testAWipedChipWithAPINIsToldAtStartWithoutAGuess() async throws {
        let tpm = try SoftwareTPM(tries: 3, interval: 10)
        let bankid = FakeIdentityProvider()
        let v = try vault(tpm, providers: FakeDirectory(providers: [bankid]))
        _ = try await v.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await v.enroll(.pin, conversation: ScriptedClient(secrets: [thePIN, thePIN]))
        try tpm.wipe()
        let after = try vault(tpm, providers: FakeDirectory(providers: [bankid]))
        let said = await after.chipProtection()
        XCTAssertEqual(said, Messages.chipReplaced)
        let answer = await failure { try await after.unlock(factor: .pin, conversation: ScriptedClient(secrets: [thePIN])) }
        XCTAssertEqual(answer?.message, Messages.chipReplaced, "the PIN cannot work: said in one sentence")
        XCTAssertEqual(try TPMChip(location: tpm.tcti).status().failures, 0, "no guess was counted in the new chip")
        let agreeing = ScriptedClient(confirms: [true])
        let session = try await after.login(provider: "bankid", conversation: agreeing)
        XCTAssertEqual(session.accessToken, "AT-bankid-1")
        XCTAssertEqual(try fx.store.keyslots().map(\.id).filter { $0 != "login:bankid" }, [Keyslot.deviceSlotID], "started over: no PIN")
    }
}

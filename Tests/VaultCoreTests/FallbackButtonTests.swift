import XCTest
@testable import VaultCore
import PINFactor
import VaultFactor
import VaultProtocol
import VaultStore
import VaultTestSupport

/// The buttons of a presence factor's dialog (the fingerprint's “Use PIN
/// instead” / “Use BankID or Vipps” / Cancel) and where each leads, and what
/// a failed provider choice says.
final class FallbackButtonTests: XCTestCase {
    var fx: VaultFixture!
    override func setUpWithError() throws { fx = try VaultFixture() }
    override func tearDown() { fx.cleanup() }

    let pin = PINFactor(throttle: ThrottlePolicy(freeAttempts: 5, firstDelay: 30, maxDelay: 120))

    /// A vault with the waiting fake presence factor first, then the PIN, then a BankID login; locked.
    func lockedVault() async throws -> (Vault, FakePresenceFactor) {
        let fake = FakePresenceFactor(waits: true)
        let vault = try fx.vault([fake, pin], providers: FakeDirectory(providers: [FakeIdentityProvider()]))
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient(confirms: [false]))
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        await vault.lock(reason: "test")
        return (vault, fake)
    }

    func testTheWaitEndsByItselfAndOpensTheVault() async throws {
        let (vault, fake) = try await lockedVault()
        let c = ScriptedClient()
        try await vault.unlock(factor: nil, conversation: c)
        XCTAssertEqual(fake.verifies, 1)
        XCTAssertEqual(c.offeredButtons, [["pin", UnlockAttempt.loginChoice]], "the next factor and the login")
        XCTAssertEqual(c.asked, 0)
    }

    func testUsePINInsteadGoesStraightToThePIN() async throws {
        let (vault, _) = try await lockedVault()
        let c = ScriptedClient(secrets: ["482915"], presses: ["pin"])
        try await vault.unlock(factor: nil, conversation: c)
        let locked = vault.isLocked
        XCTAssertFalse(locked)
        XCTAssertEqual(c.asked, 1)
        XCTAssertTrue(c.offeredChoices.isEmpty, "no login choice")
        XCTAssertFalse(c.shown.contains { $0.contains("cancel") || $0.contains("Cancel") }, "no failure said: the person chose \(c.shown)")
    }

    func testUseBankIDOrVippsSkipsThePIN() async throws {
        let (vault, _) = try await lockedVault()
        let c = ScriptedClient(secrets: ["482915"], choices: ["bankid"], presses: [UnlockAttempt.loginChoice])
        // With a PIN set, the login gives the app its own fresh session (the vault stays locked for the PIN).
        let s = try await vault.release(account: "bankid", conversation: c)
        XCTAssertEqual(s.accessToken, "AT-bankid-2")
        XCTAssertEqual(c.asked, 0, "the PIN was not asked")
        XCTAssertEqual(c.offeredChoices, [["bankid", "cancel"]])
    }

    /// Seed 001: Cancel on the fingerprint offers the PIN instead.
    func testCancelOnTheFingerprintOffersThePIN() async throws {
        let (vault, _) = try await lockedVault()
        let c = ScriptedClient(secrets: ["482915"], choices: ["bankid"], presses: ["cancel"])
        try await vault.unlock(factor: nil, conversation: c)
        let locked = vault.isLocked
        XCTAssertFalse(locked, "the PIN opened it")
        XCTAssertEqual(c.asked, 1)
        XCTAssertTrue(c.offeredChoices.isEmpty, "no login choice")
    }

    func testCancelOnTheFingerprintThePINAndTheLoginStopsTheUnlock() async throws {
        let (vault, _) = try await lockedVault()
        let c = ScriptedClient(presses: ["cancel"])
        var failure: VaultFailure?
        do { try await vault.unlock(factor: nil, conversation: c) } catch { failure = error }
        XCTAssertEqual(failure?.code, .cancelled)
        XCTAssertEqual(c.asked, 1, "the PIN was offered once")
        XCTAssertEqual(c.offeredChoices, [["bankid", "cancel"]], "then, as after any PIN dialog closed, the login; Cancel there ends it")
        let locked = vault.isLocked
        XCTAssertTrue(locked)
    }

    func testWithoutAPINCancelOnTheFingerprintStopsTheUnlock() async throws {
        let fake = FakePresenceFactor(waits: true)
        let vault = try fx.vault([fake, pin], providers: FakeDirectory(providers: [FakeIdentityProvider()]))
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient(confirms: [false]))
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        await vault.lock(reason: "test")
        let c = ScriptedClient(choices: ["bankid"], presses: ["cancel"])
        var failure: VaultFailure?
        do { try await vault.unlock(factor: nil, conversation: c) } catch { failure = error }
        XCTAssertEqual(failure?.code, .cancelled)
        XCTAssertEqual(c.offeredButtons, [[UnlockAttempt.loginChoice]], "the login was its own button")
        XCTAssertTrue(c.offeredChoices.isEmpty)
        XCTAssertEqual(c.asked, 0)
    }

    /// Seed 003: after an enrollment change the next dialog is the BankID/Vipps
    /// choice, saying what happened, with the PIN beside the providers.
    func testAnEnrollmentChangeGoesStraightToTheLoginChoiceWithThePINBesideIt() async throws {
        let changed = VaultFailure.enrollmentChanged(FakePresenceFactor().descriptor).message.en
        do {
            let (vault, fake) = try await lockedVault()
            fake.enrollment = [9, 9]
            let c = ScriptedClient(secrets: ["482915"], choices: ["pin"])
            try await vault.unlock(factor: nil, conversation: c)
            let locked = vault.isLocked
            XCTAssertFalse(locked, "the PIN beside the providers opened it")
            XCTAssertEqual(c.offeredChoices, [["bankid", "pin", "cancel"]])
            XCTAssertEqual(c.choicePrompts.first, changed, "the choice says what happened: \(c.choicePrompts)")
            XCTAssertFalse(c.shown.contains(changed), "and no dialog before it says it again: \(c.shown)")
            XCTAssertEqual(c.asked, 1)
            XCTAssertFalse(try fx.store.keyslots().contains { $0.id == "fake" }, "the stale record is gone")
        }
    }

    func testAFailedFingerprintGoesStraightToTheLoginWhichGivesTheSessionAtOnce() async throws {
        let (vault, fake) = try await lockedVault()
        fake.outcome = .fail(.tooManyAttempts)
        let c = ScriptedClient(secrets: ["482915"], choices: ["bankid"])
        let s = try await vault.release(account: "bankid", conversation: c)
        XCTAssertEqual(s.accessToken, "AT-bankid-2", "the login's own session, at once")
        XCTAssertEqual(c.asked, 0, "the PIN was not asked first")
        XCTAssertEqual(c.offeredChoices, [["bankid", "pin", "cancel"]])
        XCTAssertEqual(c.choicePrompts, [Messages.tooManyMisses.en], "the choice says what happened")
    }

    func testAnEnrollmentChangeWithoutALoginProviderGoesToThePIN() async throws {
        let fake = FakePresenceFactor(waits: true)
        let vault = try fx.vault([fake, pin])
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        await vault.lock(reason: "test")
        fake.enrollment = [9, 9]
        let c = ScriptedClient(secrets: ["482915"])
        try await vault.unlock(factor: nil, conversation: c)
        XCTAssertEqual(c.asked, 1)
        XCTAssertTrue(c.offeredChoices.isEmpty)
        let changed = VaultFailure.enrollmentChanged(fake.descriptor).message.en
        XCTAssertTrue(c.shown.contains(changed), "said before the PIN: \(c.shown)")
    }

    func testATimedOutProviderChoiceIsATimeoutNotACancel() async throws {
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [FakeIdentityProvider()]))
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        await vault.lock(reason: "test")
        for (error, code) in [(FactorError.timeout, ErrorCode.timeout), (.cancelled, .cancelled),
                              (.unavailable(Messages.pinentryFailed), .factorUnavailable)] {
            var failure: VaultFailure?
            do {
                _ = try await vault.release(account: "bankid", conversation: ScriptedClient(secrets: [nil], chooseError: error))
            } catch { failure = error }
            XCTAssertEqual(failure?.code, code, "\(error)")
        }
    }

    func testButtonLabels() {
        XCTAssertEqual(Messages.dialogUseLogin(["BankID", "Vipps"]), LocalizedText(en: "Use BankID or Vipps", nb: "Bruk BankID eller Vipps"))
        XCTAssertEqual(Messages.dialogUseLogin(["BankID", "Vipps", "ID-porten"]).nb, "Bruk BankID, Vipps eller ID-porten")
        XCTAssertEqual(Messages.dialogUseInstead(pin.descriptor.displayName), LocalizedText(en: "Use PIN instead", nb: "Bruk PIN-kode i stedet"))
    }
}

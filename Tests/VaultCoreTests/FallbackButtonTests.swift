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
        XCTAssertEqual(c.offeredButtons, [["pin", Vault.loginChoice]], "the next factor and the login")
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
        let c = ScriptedClient(secrets: ["482915"], choices: ["bankid"], presses: [Vault.loginChoice])
        // With a PIN set, the login gives the app its own fresh session (the vault stays locked for the PIN).
        let s = try await vault.release(account: "bankid", conversation: c)
        XCTAssertEqual(s.accessToken, "AT-bankid-2")
        XCTAssertEqual(c.asked, 0, "the PIN was not asked")
        XCTAssertEqual(c.offeredChoices, [["bankid", "cancel"]])
    }

    func testCancelStopsTheUnlock() async throws {
        let (vault, _) = try await lockedVault()
        let c = ScriptedClient(secrets: ["482915"], choices: ["bankid"], presses: ["cancel"])
        var failure: VaultFailure?
        do { try await vault.unlock(factor: nil, conversation: c) } catch { failure = error }
        XCTAssertEqual(failure?.code, .cancelled)
        XCTAssertEqual(c.asked, 0)
        XCTAssertTrue(c.offeredChoices.isEmpty)
        let locked = vault.isLocked
        XCTAssertTrue(locked)
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

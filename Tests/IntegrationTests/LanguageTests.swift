import Foundation
import VaultProtocol
import XCTest

/// vaultctl speaks the person's language (bokmål for nb/no/nn locales).
final class LanguageTests: VaultdTestCase {
    static let lockedNB = "Hvelvet er låst. Lås det opp med fingeravtrykk eller PIN-kode, eller logg inn med BankID eller Vipps."
    static let lockedEN = "The vault is locked. Unlock it with your fingerprint or PIN, or log in with BankID or Vipps."

    func testNorwegianLockedSentence() throws {
        let v = try startVaultd()
        enrollPIN(v)
        try importSession(v, account: "kari", accessToken: "at-kari", refreshToken: nil)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)

        let nb = v.vaultctl(["token", "--non-interactive"], env: ["LANG": "nb_NO.UTF-8"])
        XCTAssertEqual(nb.exit, 4, nb.err)
        XCTAssertTrue(nb.err.contains(Self.lockedNB), nb.err)
        XCTAssertFalse(nb.err.contains(Self.lockedEN), nb.err)

        // LC_ALL wins over LANG; LC_MESSAGES too.
        let lcAll = v.vaultctl(["token", "--non-interactive"], env: ["LANG": "en_US.UTF-8", "LC_ALL": "nb_NO.UTF-8"])
        XCTAssertTrue(lcAll.err.contains(Self.lockedNB), lcAll.err)
        let lcMessages = v.vaultctl(["token", "--non-interactive"], env: ["LANG": "en_US.UTF-8", "LC_MESSAGES": "no_NO.UTF-8"])
        XCTAssertTrue(lcMessages.err.contains(Self.lockedNB), lcMessages.err)

        let en = v.vaultctl(["token", "--non-interactive"], env: ["LANG": "en_GB.UTF-8"])
        XCTAssertEqual(en.exit, 4)
        XCTAssertTrue(en.err.contains(Self.lockedEN), en.err)

        // vaultctl's own words follow the locale too.
        let status = v.vaultctl(["status"], env: ["LANG": "nb_NO.UTF-8"])
        XCTAssertTrue(status.out.contains("Hvelv: låst"), status.out)
        XCTAssertTrue(status.out.contains("PIN-kode er slått på"), status.out)

        // The socket's messages follow hello's lang.
        let c = try v.raw()
        try c.hello(lang: "nb")
        let r = try c.call("session")
        XCTAssertEqual(r.errorCode, "locked")
        XCTAssertEqual(r.errorMessage, Self.lockedNB)
    }

    func testNorwegianDaemonNotRunningSentence() throws {
        let v = try makeVaultd()
        let r = v.vaultctl(["status"], env: ["LANG": "nb_NO.UTF-8"])
        XCTAssertEqual(r.exit, 3, r.err)
        XCTAssertTrue(r.err.contains("SessionVault kjører ikke."), r.err)
        let en = v.vaultctl(["status"])
        XCTAssertEqual(en.exit, 3)
        XCTAssertTrue(en.err.contains("SessionVault is not running."), en.err)
    }
}

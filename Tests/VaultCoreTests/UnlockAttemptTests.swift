import VaultFactor
import VaultProtocol
import XCTest
@testable import VaultCore

/// What a factor's refusal means for the unlock it was asked in, on its own:
/// no factor, no dialog (FallbackButtonTests shows the same through a vault).
final class UnlockAttemptTests: XCTestCase {
    let pinButton = ChoiceOption(value: "pin", label: LocalizedText(en: "Use PIN instead", nb: "Bruk PIN-kode i stedet"))
    let loginButton = ChoiceOption(value: UnlockAttempt.loginChoice, label: LocalizedText(en: "Use BankID", nb: "Bruk BankID"))
    let locked = VaultFailure(.locked)

    func said(_ error: FactorError, _ options: [ChoiceOption]) -> String {
        switch UnlockAttempt(refused: error, offering: options, locked: locked) {
        case .opened: "opened"
        case .next(let f): "next \(f.code.rawValue)"
        case .stop(let f): "stop \(f.code.rawValue)"
        case .chose(let choice): "chose \(choice)"
        }
    }

    func testCancelOffersTheNextFactorAndOtherwiseEndsTheUnlock() {
        XCTAssertEqual(said(.pressed(.cancel), [pinButton, loginButton]), "chose pin", "seed 001: Cancel on the fingerprint offers the PIN")
        XCTAssertEqual(said(.pressed(.cancel), [loginButton]), "stop cancelled", "not the login: the person does not want in now")
        XCTAssertEqual(said(.pressed(.cancel), []), "stop cancelled")
        XCTAssertEqual(said(.pressed(.wayIn(UnlockAttempt.loginChoice)), [pinButton, loginButton]), "chose :login")
        XCTAssertEqual(said(.pressed(.wayIn("pin")), [pinButton]), "chose pin")
    }

    func testAClientThatCannotAnswerStopsTheUnlockUnaudited() {
        XCTAssertEqual(said(.notInteractive, [pinButton]), "stop locked")
        XCTAssertFalse(UnlockAttempt.audits(.notInteractive))
        for error in [FactorError.cancelled, .noMatch, .tooManyAttempts, .timeout, .pressed(.cancel)] {
            XCTAssertTrue(UnlockAttempt.audits(error), "\(error)")
        }
    }

    func testOtherRefusalsHandOverToTheNextWayIn() {
        XCTAssertEqual(said(.tooManyAttempts, [pinButton]), "next no_match")
        XCTAssertEqual(said(.timeout, []), "next timeout")
        XCTAssertEqual(said(.unavailable(LocalizedText(en: "No reader.", nb: "Ingen leser.")), []), "next factor_unavailable")
        XCTAssertEqual(said(.cancelled, [pinButton]), "next cancelled", "a PIN dialog's Cancel is not the fingerprint's button")
        XCTAssertTrue(UnlockAttempt.dropsSoftBox(after: .tooManyAttempts, presence: true))
        XCTAssertFalse(UnlockAttempt.dropsSoftBox(after: .tooManyAttempts, presence: false))
        XCTAssertFalse(UnlockAttempt.dropsSoftBox(after: .timeout, presence: true))
    }
}

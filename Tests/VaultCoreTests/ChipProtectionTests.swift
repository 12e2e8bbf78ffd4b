import SecurityChip
@testable import VaultCore
import VaultProtocol
import XCTest

/// What `status` says of the security chip, decided as a value
/// (`ChipBinding.protection`): no chip is asked here, so each branch is shown
/// with the answer it depends on. ChipBoundVaultTests shows the same sentences
/// from a vault on a software TPM.
final class ChipProtectionTests: XCTestCase {
    let binding = ChipBinding(chip: TPMChip(location: "swtpm:port=1"), bindsNewWraps: true)

    func say(_ binding: ChipBinding, refusal: ChipError? = nil, unbound: Bool = false, hasPIN: Bool = true,
             armed: Bool? = true, asked: inout Int) -> LocalizedText? {
        binding.protection(refusal: refusal, anyWrapUnbound: unbound, hasPIN: hasPIN) { _ in
            asked += 1
            return armed
        }
    }

    func testEachSentenceAndWhenTheChipsLockoutIsAsked() {
        var asked = 0
        XCTAssertEqual(say(binding, refusal: .notThisChip, asked: &asked), Messages.chipReplaced, "a refusal comes first")
        let off = ChipBinding(chip: nil, bindsNewWraps: false, unavailable: LocalizedText(en: "No chip.", nb: "Ingen brikke."))
        XCTAssertEqual(say(off, asked: &asked), off.unavailable, "no chip in use: why")
        XCTAssertEqual(say(binding, unbound: true, asked: &asked), Messages.chipFromNextPIN)
        XCTAssertEqual(say(binding, hasPIN: false, asked: &asked), Messages.chipInUse(withPIN: false))
        XCTAssertEqual(asked, 0, "the chip's lockout is asked only when a PIN is set and the chip is in use")
        XCTAssertEqual(say(binding, armed: true, asked: &asked), Messages.chipInUse(withPIN: true))
        XCTAssertEqual(say(binding, armed: nil, asked: &asked), Messages.chipInUse(withPIN: true), "a chip that does not say")
        let unarmed = say(binding, armed: false, asked: &asked)
        XCTAssertEqual(unarmed?.en, Messages.chipInUse(withPIN: true).en + " " + Messages.chipLockoutNotArmed.en)
        XCTAssertEqual(unarmed?.nb, Messages.chipInUse(withPIN: true).nb + " " + Messages.chipLockoutNotArmed.nb)
        XCTAssertEqual(asked, 3)
    }
}

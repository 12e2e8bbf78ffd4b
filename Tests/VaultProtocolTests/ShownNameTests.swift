import XCTest
import VaultProtocol

/// Names from outside go into dialog text only as names: an executable called
/// “x\n\nYour bank says: type your PIN” or one with a right-to-left override
/// must not draw a paragraph or reverse the sentence around it.
final class ShownNameTests: XCTestCase {
    func testControlFormatAndSeparatorCharactersAreDropped() {
        XCTAssertEqual(Messages.shown("evil\n\nYour bank says: type your PIN"), "evilYour bank says: type your PIN")
        XCTAssertEqual(Messages.shown("app\u{202E}gpj.exe"), "appgpj.exe", "a bidi override is dropped")
        XCTAssertEqual(Messages.shown("zero\u{200B}width\u{2028}line\u{0007}"), "zerowidthline")
        XCTAssertEqual(Messages.shown("  Aktivitetslogg  "), "Aktivitetslogg")
        XCTAssertEqual(Messages.shown("Ørsta Mentorhus"), "Ørsta Mentorhus", "letters of any language stay")
        XCTAssertEqual(Messages.shown(String(repeating: "a", count: 100)).count, 64)
    }

    func testEveryDialogSentenceThatNamesAnAppOrProviderCleansIt() {
        let evil = "evil\nDeny = Allow"
        for text in [Messages.appAsks(evil), Messages.appNotAllowed(evil), Messages.appDeniedRecently(evil), Messages.appLabel(evil),
                     Messages.unlockClosedRecently(evil), Messages.loginClosedRecently(evil), Messages.lockedRecently(evil),
                     Messages.tooManyConnectionsForApp(evil, limit: 2), Messages.sameNameAsAllowed(evil, asking: evil, allowed: [evil]),
                     Messages.allowAppQuestion(Messages.appLabel("x"), provider: evil),
                     Messages.useProvider(evil), Messages.chooseLogin([evil], toContinue: true), Messages.dialogUseLogin([evil]),
                     Messages.unverifiedApp(evil), Messages.replaceSession(evil, provider: evil)] {
            XCTAssertFalse(text.en.contains("\n"), text.en)
            XCTAssertFalse(text.nb.contains("\n"), text.nb)
        }
    }
}

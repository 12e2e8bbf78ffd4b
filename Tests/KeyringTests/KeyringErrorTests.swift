import Keyring
import SodiumKit
import VaultProtocol
import XCTest

final class KeyringErrorTests: XCTestCase {
    func testMessagesForPeople() {
        XCTAssertEqual(KeyringError.locked.message, Messages.keyringLocked)
        XCTAssertEqual(KeyringError.unavailable("x").message, Messages.keyringMissing)
        XCTAssertEqual(KeyringError.failed("x").message, Messages.keyringFailed)

        let unsafe = KeyringError.unsafeFile("x").message
        for language in Language.allCases {
            XCTAssertFalse(unsafe.text(language).isEmpty)
            XCTAssertTrue(unsafe.text(language).contains("chmod 600"), "needs a next step")
        }
    }

    func testDescriptionsCarryTheDetail() {
        XCTAssertTrue(KeyringError.unavailable("no bus").description.contains("no bus"))
        XCTAssertTrue(KeyringError.failed("boom").description.contains("boom"))
        XCTAssertTrue(KeyringError.unsafeFile("/k is a symbolic link").description.contains("/k"))
        XCTAssertNotEqual(KeyringError.failed("a"), .failed("b"))
    }
}

/// SodiumKit's base64 helpers, used to keep the key in guarded memory on its way
/// to and from the Secret Service.
final class SecureBytesBase64Tests: XCTestCase {
    func testRoundTripMatchesFoundation() throws {
        for count in [0, 1, 2, 3, 31, 32, 33, 64] {
            let key = try SecureBytes.random(count: count)
            let text = try key.withBase64CString { String(cString: $0) }
            XCTAssertEqual(text, Data(key.unsafeCopyToArray()).base64EncodedString())
            let back = try text.withCString { (c: UnsafePointer<CChar>) throws(SodiumError) -> SecureBytes in
                try SecureBytes.fromBase64(c)
            }
            XCTAssertTrue(back.constantTimeEquals(key), "count \(count)")
        }
    }

    func testIgnoresTrailingNewline() throws {
        let back = try "AAEC\n".withCString { (c: UnsafePointer<CChar>) throws(SodiumError) -> SecureBytes in
            try SecureBytes.fromBase64(c)
        }
        XCTAssertEqual(back.unsafeCopyToArray(), [0, 1, 2])
    }

    func testRejectsGarbage() {
        for bad in ["!!!!", "AAE", "AA=A"] {
            XCTAssertThrowsError(try bad.withCString { (c: UnsafePointer<CChar>) throws(SodiumError) -> SecureBytes in
                try SecureBytes.fromBase64(c)
            }, bad)
        }
    }
}

import SecurityChip
import SodiumKit
import VaultTestSupport
import XCTest

/// The TPM layer against a real TPM 2.0 simulator (swtpm), as an attacker
/// would try it: wrong auth values until the chip locks, a blob carried to
/// another chip, a chip wiped since.
final class TPMChipTests: XCTestCase {
    private func secret() throws -> SecureBytes { try SecureBytes.random(count: 32) }
    private func auth(_ text: String) throws -> SecureBytes { try SecureBytes.utf8(text) }

    func testSealedSecretOpensWithTheRightAuthOnly() throws {
        let tpm = try SoftwareTPM(tries: 5, interval: 10)
        let chip = TPMChip(location: tpm.tcti)
        let s = try secret()
        let blob = try chip.seal(s, auth: try auth("right"), guessProtected: true)
        XCTAssertFalse(blob.isEmpty)
        // The secret is not in the blob in clear.
        XCTAssertNil(blob.firstRange(of: s.unsafeCopyToArray()))
        XCTAssertTrue(try chip.unseal(blob, auth: try auth("right")).constantTimeEquals(s))
        XCTAssertThrowsError(try chip.unseal(blob, auth: try auth("wrong"))) { XCTAssertEqual($0 as? ChipError, .wrongAuth) }
        XCTAssertEqual(try chip.status().failures, 1, "a wrong auth counts in the chip")
    }

    func testWrongAuthsLockTheChipAndTheRightOneWaits() throws {
        let tpm = try SoftwareTPM(tries: 5, interval: 2)
        let chip = TPMChip(location: tpm.tcti)
        let s = try secret()
        let blob = try chip.seal(s, auth: try auth("1234"), guessProtected: true)
        for guess in 0..<5 {
            XCTAssertThrowsError(try chip.unseal(blob, auth: try auth("000\(guess)"))) { XCTAssertEqual($0 as? ChipError, .wrongAuth) }
        }
        XCTAssertThrowsError(try chip.unseal(blob, auth: try auth("1234")), "the right auth is refused during the lockout") {
            guard case .lockedOut(let wait)? = $0 as? ChipError else { return XCTFail("\($0)") }
            XCTAssertGreaterThan(wait, 0)
            XCTAssertLessThanOrEqual(wait, 2)
        }
        let status = try chip.status()
        XCTAssertTrue(status.inLockout)
        XCTAssertEqual(status.maxTries, 5)
        XCTAssertFalse(status.lockoutArmed, "swtpm has no lockout authorization set")
        // One interval forgives one failure: then the right auth opens, and only it.
        Thread.sleep(forTimeInterval: Double(status.retryAfter) + 0.5)
        XCTAssertTrue(try chip.unseal(blob, auth: try auth("1234")).constantTimeEquals(s), "after the recovery interval")
    }

    func testANoDAObjectIsNotCountedAndOpensDuringALockout() throws {
        let tpm = try SoftwareTPM(tries: 2, interval: 1000)
        let chip = TPMChip(location: tpm.tcti)
        let deviceSecret = try secret()
        let device = try chip.seal(deviceSecret, auth: try auth("device auth"), guessProtected: false)
        let pin = try chip.seal(try secret(), auth: try auth("1234"), guessProtected: true)
        XCTAssertThrowsError(try chip.unseal(device, auth: try auth("nope")))
        XCTAssertEqual(try chip.status().failures, 0, "a wrong auth on a noDA object is not a guess the chip counts")
        for _ in 0..<2 { XCTAssertThrowsError(try chip.unseal(pin, auth: try auth("0000"))) }
        XCTAssertTrue(try chip.status().inLockout)
        XCTAssertTrue(try chip.unseal(device, auth: try auth("device auth")).constantTimeEquals(deviceSecret))
    }

    func testABlobCarriedToAnotherChipOpensNothing() throws {
        let here = try SoftwareTPM(tries: 5, interval: 10)
        let elsewhere = try SoftwareTPM(tries: 5, interval: 10)
        let blob = try TPMChip(location: here.tcti).seal(try secret(), auth: try auth("1234"), guessProtected: true)
        XCTAssertThrowsError(try TPMChip(location: elsewhere.tcti).unseal(blob, auth: try auth("1234"))) {
            XCTAssertEqual($0 as? ChipError, .notThisChip)
        }
        // Told without a guess, too: what vaultd asks at start.
        XCTAssertNoThrow(try TPMChip(location: here.tcti).check(blob))
        XCTAssertThrowsError(try TPMChip(location: elsewhere.tcti).check(blob)) { XCTAssertEqual($0 as? ChipError, .notThisChip) }
        XCTAssertEqual(try TPMChip(location: here.tcti).status().failures, 0)
    }

    func testTheSameChipAfterARestartOpensItButNotAfterAWipe() throws {
        let tpm = try SoftwareTPM(tries: 5, interval: 10)
        let chip = TPMChip(location: tpm.tcti)
        let s = try secret()
        let blob = try chip.seal(s, auth: try auth("1234"), guessProtected: true)
        tpm.stop()
        try tpm.start()
        XCTAssertTrue(try chip.unseal(blob, auth: try auth("1234")).constantTimeEquals(s))
        try tpm.wipe()
        XCTAssertThrowsError(try chip.unseal(blob, auth: try auth("1234"))) { XCTAssertEqual($0 as? ChipError, .notThisChip) }
    }

    func testNoChipIsUnreachableNotAFailure() throws {
        let dir = try makeTemporaryDirectory("sessionvault-notpm")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for location in ["swtpm:path=\(dir)/none.sock", "device:\(dir)/tpmrm0"] {
            XCTAssertThrowsError(try TPMChip(location: location).status(), location) {
                guard case .unreachable? = $0 as? ChipError else { return XCTFail("\(location): \($0)") }
            }
        }
    }

    func testABlobThatIsNotOursIsRefusedBeforeTheChip() throws {
        let tpm = try SoftwareTPM()
        let chip = TPMChip(location: tpm.tcti)
        for blob in [[], Array("SVT1".utf8), Array("XXXX".utf8) + [UInt8](repeating: 0, count: 64)] as [[UInt8]] {
            XCTAssertThrowsError(try chip.unseal(blob, auth: try auth("1234"))) {
                guard case .failed? = $0 as? ChipError else { return XCTFail("\($0)") }
            }
        }
        XCTAssertEqual(try chip.status().failures, 0)
    }
}

import Locking
import XCTest
@testable import PINFactor
import VaultFactor
import VaultTestSupport

final class PINFactorTests: XCTestCase {
    let pin = PINFactor()

    func weak(_ s: String) throws -> Bool { pin.weakness(of: try SecureBytes.utf8(s)) != nil }

    func testRejectsShortAndTrivialPINs() throws {
        for bad in ["", "12345", "000000", "999999999", "123456", "234567", "987654", "890123", "210987", "12a456", "１２３４５６"] {
            XCTAssertTrue(try weak(bad), "\(bad) should be refused")
        }
        for good in ["482915", "1357924", "000001", "121212x".replacingOccurrences(of: "x", with: "")] {
            XCTAssertFalse(try weak(good), "\(good) should be accepted")
        }
    }

    func testRejectsOverlongPIN() throws {
        XCTAssertTrue(try weak(String(repeating: "48", count: 40)))
    }

    func testEnrollAsksTwiceAndReturnsThePIN() async throws {
        let c = ScriptedConversation(["482915", "482915"])
        let proof = try await pin.enroll(c)
        XCTAssertEqual(c.asked.count, 2)
        XCTAssertEqual(proof.contribution.map { String(decoding: $0.unsafeCopyToArray(), as: UTF8.self) }, "482915")
        XCTAssertTrue(proof.enrollmentState.isEmpty)
    }

    func testEnrollMismatchStartsAgain() async throws {
        let c = ScriptedConversation(["482915", "482916", "551938", "551938"])
        _ = try await pin.enroll(c)
        XCTAssertEqual(c.asked.count, 4)
        XCTAssertTrue(c.shown.contains { $0.contains("not the same") })
    }

    func testEnrollWeakPINExplainsAndAsksAgain() async throws {
        let c = ScriptedConversation(["123456", "551938", "551938"])
        _ = try await pin.enroll(c)
        XCTAssertTrue(c.shown.first?.contains("run of digits") ?? false)
    }

    func testEnrollGivesUpAfterThreeRounds() async throws {
        let c = ScriptedConversation(["111111", "222222", "333333"])
        do {
            _ = try await pin.enroll(c)
            XCTFail("expected rejection")
        } catch {
            guard case .rejected(let why) = error else { return XCTFail("\(error)") }
            // Said to whoever asked (the settings app or vaultctl): no command in it.
            XCTAssertEqual(why.en, "The PIN was not set up. Please try again.")
            XCTAssertEqual(why.nb, "PIN-koden ble ikke satt opp. Prøv igjen.")
        }
    }

    func testCancelIsCancel() async {
        do {
            _ = try await pin.verify(ScriptedConversation([nil]), slot: EnrolledSlot(factor: .pin, binding: [:]))
            XCTFail("expected cancel")
        } catch {
            XCTAssertEqual(error, .cancelled)
        }
    }

    func testDescriptorAsksForStretchingAndThrottling() {
        XCTAssertEqual(pin.descriptor.contribution, .lowEntropySecret)
        XCTAssertNotNil(pin.descriptor.throttle)
    }
}

final class ThrottlePolicyTests: XCTestCase {
    func testGatekeeperShapedSchedule() {
        let t = ThrottlePolicy()
        XCTAssertEqual((0...4).map { t.delay(afterFailures: $0) }, [0, 0, 0, 0, 0])
        XCTAssertEqual(t.delay(afterFailures: 5), 30)
        XCTAssertEqual(t.delay(afterFailures: 6), 60)
        XCTAssertEqual(t.delay(afterFailures: 7), 120)
        XCTAssertEqual(t.delay(afterFailures: 16), 61_440)
        XCTAssertEqual(t.delay(afterFailures: 17), 86_400, "capped at a day")
        XCTAssertEqual(t.delay(afterFailures: 1_000), 86_400, "no overflow")
        XCTAssertEqual(t.attemptsLeft(afterFailures: 3), 2)
        XCTAssertEqual(t.attemptsLeft(afterFailures: 9), 0)
    }
}

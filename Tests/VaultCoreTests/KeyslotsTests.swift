import XCTest
@testable import VaultCore
import SodiumKit
import VaultFactor
import VaultProtocol
@testable import VaultStore
import VaultTestSupport

/// `Keyslots` on a real SQLite store: each change is one transaction, and the
/// copy in memory is what the store holds, after a success and after a failure.
final class KeyslotsTests: XCTestCase {
    var fx: VaultFixture!

    override func setUpWithError() throws { fx = try VaultFixture() }
    override func tearDown() { fx.cleanup() }

    func keyslots() throws -> Keyslots {
        try Keyslots.load(store: fx.store, deviceKey: fx.deviceKey, chip: .none, secretFactors: ["pin"])
    }

    /// The copy in memory equals a fresh read of the store.
    func assertInStep(_ slots: Keyslots, _ ids: Set<String>, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(Set(slots.rows.keys), ids, "in memory", file: file, line: line)
        XCTAssertEqual(try keyslots().rows, slots.rows, "in the store", file: file, line: line)
    }

    func deviceWrap(_ vk: SecureBytes) throws -> KeyslotRow {
        try Keyslot.makeDeviceWrap(vaultKey: vk, deviceKey: fx.deviceKey, chip: nil, now: 1)
    }

    func pinWrap(_ vk: SecureBytes, pin: String = "4711") throws -> KeyslotRow {
        try Keyslot.makeWrap(id: "pin", factor: "pin", vaultKey: vk, deviceKey: fx.deviceKey,
                             secret: SecureBytes.utf8(pin), cost: .interactive, chip: nil, now: 2)
    }

    func record(_ id: String) throws -> KeyslotRow {
        try Keyslot.makeRecord(id: id, factor: id, binding: ["issuer": "https://idp.example", "subject": "s"],
                               deviceKey: fx.deviceKey, now: 3)
    }

    func testAPINReplacesTheDeviceWrapAndDisablingItPutsItBack() throws {
        let vk = try SecureBytes.random(count: 32)
        var slots = try keyslots()
        try slots.replace(put: [try deviceWrap(vk)], delete: [])
        XCTAssertNotNil(try slots.openDeviceWrap()?.get())
        try fx.store.setMeta(Keyslots.staleKey("pin"), [1])
        _ = try fx.store.recordAttempt(factor: "pin") { _ in 0 }

        try slots.enroll(try pinWrap(vk), replacing: [Keyslot.deviceSlotID])
        try assertInStep(slots, ["pin"])
        XCTAssertNil(slots.openDeviceWrap(), "no slot the device key alone opens")
        XCTAssertFalse(slots.isStale("pin"), "the stale mark is cleared")
        XCTAssertEqual(try fx.store.failureCounter(factor: "pin").failures, 0, "the failure counter is cleared")
        XCTAssertTrue(slots.hasWrap)
        XCTAssertFalse(slots.hasWrap(besides: "pin"), "the PIN is the only wrap")

        try slots.disable("pin", restoring: [try deviceWrap(vk)])
        try assertInStep(slots, [Keyslot.deviceSlotID])
        let reopened = try XCTUnwrap(slots.openDeviceWrap()).get()
        XCTAssertEqual(reopened.unsafeCopyToArray(), vk.unsafeCopyToArray())
    }

    func testAFailedChangeLeavesTheStoreAndTheCopyAsTheyWere() throws {
        let vk = try SecureBytes.random(count: 32)
        var slots = try keyslots()
        try slots.replace(put: [try deviceWrap(vk), try record("login:bankid")], delete: [])
        let before = slots.rows

        try fx.refuseWrites(true)
        XCTAssertThrowsError(try slots.enroll(try pinWrap(vk), replacing: [Keyslot.deviceSlotID]))
        XCTAssertThrowsError(try slots.replace(put: [try record("login:vipps")], delete: ["login:bankid"]))
        XCTAssertThrowsError(try slots.disable("login:bankid", restoring: []))
        try fx.refuseWrites(false)

        XCTAssertEqual(slots.rows, before)
        try assertInStep(slots, [Keyslot.deviceSlotID, "login:bankid"])
    }

    /// A changed enrollment is never trusted again in this run, even when the store cannot drop it.
    func testAChangedEnrollmentIsDroppedFromMemoryEvenWhenTheStoreRefuses() throws {
        var slots = try keyslots()
        try slots.replace(put: [try record("fingerprint"), try record("face")], delete: [])
        try slots.dropChanged("fingerprint")
        try assertInStep(slots, ["face"])
        XCTAssertTrue(slots.isStale("fingerprint"))

        try fx.refuseWrites(true)
        XCTAssertThrowsError(try slots.dropChanged("face"))
        try fx.refuseWrites(false)
        XCTAssertNil(slots["face"], "dropped in memory")
        XCTAssertNotNil(try keyslots()["face"], "the store still has it; the next start reads it again")
    }

    func testRecordChecksAndReset() throws {
        let vk = try SecureBytes.random(count: 32)
        var slots = try keyslots()
        var edited = try record("login:bankid")
        try slots.replace(put: [try record("login:vipps"), try pinWrap(vk)], delete: [])
        edited.binding = #"{"issuer":"https://idp.example","subject":"someone else"}"#
        try slots.replace(put: [edited], delete: [])
        XCTAssertEqual(slots.check("login:vipps"), .intact(["issuer": "https://idp.example", "subject": "s"]))
        XCTAssertEqual(slots.check("login:bankid"), .damaged)
        XCTAssertNil(slots.check("login:idporten"))

        try fx.store.setMeta(Keyslots.staleKey("fingerprint"), [1])
        let (newKey, publicKey, removed) = try slots.startOver(now: 1, logger: VaultFixture.logger)
        XCTAssertEqual(removed, 0)
        try assertInStep(slots, [Keyslot.deviceSlotID])
        // The one slot left is the new vault key's device wrap, and its public key is stored for sealing.
        guard case .success(let opened)? = slots.openDeviceWrap() else { return XCTFail("the device wrap does not open") }
        XCTAssertTrue(opened.constantTimeEquals(newKey))
        XCTAssertFalse(newKey.constantTimeEquals(vk), "a new vault key")
        XCTAssertEqual(try fx.store.meta(SessionSealing.publicKeyMeta), publicKey)
        XCTAssertFalse(slots.isStale("fingerprint"), "reset clears the stale marks")
    }

    /// What a change must contain is decided with the change: a PIN takes the
    /// device wrap's place in the same transaction; a presence factor's
    /// record comes beside the wrap; turning off the only wrap brings the
    /// device wrap back, turning off anything else does not.
    func testSettingUpAPINTakesTheDeviceWrapsPlaceAndTurningItOffBringsItBack() throws {
        let vk = try SecureBytes.random(count: 32)
        let pin = FactorDescriptor(id: .pin, displayName: LocalizedText(en: "PIN", nb: "PIN"), rank: 20, contribution: .lowEntropySecret)
        let finger = FactorDescriptor(id: .fingerprint, displayName: LocalizedText(en: "Fingerprint", nb: "Fingeravtrykk"),
                                      rank: 10, contribution: .presenceOnly)
        var slots = try keyslots()
        try slots.replace(put: [try deviceWrap(vk)], delete: [])

        try slots.setUp(pin, proof: FactorProof(contribution: SecureBytes.utf8("4711")), vaultKey: vk, cost: .interactive,
                        now: 5, logger: VaultFixture.logger)
        try assertInStep(slots, ["pin"])
        let pinRow = try XCTUnwrap(slots["pin"])
        XCTAssertTrue(try slots.openWrap(pinRow, secret: SecureBytes.utf8("4711")).constantTimeEquals(vk))

        try slots.setUp(finger, proof: FactorProof(enrollmentState: [1, 2, 3]), vaultKey: vk, cost: .interactive,
                        now: 6, logger: VaultFixture.logger)
        try assertInStep(slots, ["pin", "fingerprint"])

        try slots.turnOff("fingerprint", vaultKey: vk, now: 7, logger: VaultFixture.logger)
        try assertInStep(slots, ["pin"])
        try slots.turnOff("pin", vaultKey: vk, now: 8, logger: VaultFixture.logger)
        try assertInStep(slots, [Keyslot.deviceSlotID])
        guard case .success(let opened)? = slots.openDeviceWrap() else { return XCTFail("the device wrap does not open") }
        XCTAssertTrue(opened.constantTimeEquals(vk), "the device wrap brought back opens to the same vault key")
    }

    /// A login's identity is recorded as a record this vault's device key
    /// vouches for, in place of a damaged one.
    func testALoginsIdentityIsRecordedInPlaceOfADamagedRecord() throws {
        var slots = try keyslots()
        var edited = try record("login:bankid")
        edited.binding = #"{"issuer":"https://idp.example","subject":"someone else"}"#
        try slots.replace(put: [edited], delete: [])
        XCTAssertEqual(slots.check("login:bankid"), .damaged)
        try slots.recordIdentity("login:bankid", binding: ["issuer": "https://idp.example", "subject": "kari"], now: 9,
                                 logger: VaultFixture.logger)
        try assertInStep(slots, ["login:bankid"])
        XCTAssertEqual(slots.check("login:bankid"), .intact(["issuer": "https://idp.example", "subject": "kari"]))
    }
}

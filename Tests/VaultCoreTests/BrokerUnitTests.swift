import Foundation
import SodiumKit
import VaultFactor
import VaultProtocol
import VaultStore
import XCTest
@testable import VaultCore

/// The broker's plain-value units on their own: no store, no actor, no clock.
/// The `Vault` actor applies what they decide; VaultTests and LoginTests show
/// the same rules through it.
final class BrokerUnitTests: XCTestCase {
    // MARK: PresenceCheck

    let fingerprint: FactorID = "fingerprint"

    struct Enrolled {
        let deviceKey: SecureBytes
        let vaultKey: SecureBytes
        let record: KeyslotRow
        let softBox: SoftUnlock
    }

    func enrolled(state: [UInt8] = [1, 2, 3]) throws -> Enrolled {
        let deviceKey = try SecureBytes.random(count: 32)
        let vaultKey = try SecureBytes.random(count: 32)
        let record = try Keyslot.makePresenceRecord(id: "fingerprint", factor: "fingerprint",
                                                    proof: FactorProof(enrollmentState: state), deviceKey: deviceKey, now: 1)
        guard case .intact(let binding) = Keyslot.check(record, deviceKey: deviceKey),
              let digest = Keyslot.digest(in: binding) else { throw SodiumError.malformed("record") }
        return Enrolled(deviceKey: deviceKey, vaultKey: vaultKey, record: record,
                        softBox: try SoftUnlock(vaultKey: vaultKey, factor: fingerprint, digest: digest, since: 0))
    }

    func testTheEnrolledFingerprintOpensTheSoftBox() throws {
        let e = try enrolled()
        let check = PresenceCheck(fingerprint, record: e.record, proof: FactorProof(enrollmentState: [1, 2, 3]),
                                  deviceKey: e.deviceKey, now: 2, softBox: { e.softBox })
        guard case .opened(let vk) = check else { return XCTFail("\(check)") }
        XCTAssertEqual(vk.unsafeCopyToArray(), e.vaultKey.unsafeCopyToArray())
    }

    func testAnotherEnrollmentIsAChangeAndNeverAsksTheSoftBox() throws {
        let e = try enrolled()
        var asked = false
        let check = PresenceCheck(fingerprint, record: e.record, proof: FactorProof(enrollmentState: [9, 9]),
                                  deviceKey: e.deviceKey, now: 2, softBox: { asked = true; return e.softBox })
        guard case .enrollmentChanged = check else { return XCTFail("\(check)") }
        XCTAssertFalse(asked, "a changed enrollment must not expire (and audit) the soft box first")
    }

    func testWithoutASoftBoxThePINOrALoginIsNeededFirst() throws {
        let e = try enrolled()
        let check = PresenceCheck(fingerprint, record: e.record, proof: FactorProof(enrollmentState: [1, 2, 3]),
                                  deviceKey: e.deviceKey, now: 2, softBox: { nil })
        guard case .needsHardUnlock = check else { return XCTFail("\(check)") }
    }

    func testAnEditedOrForeignRecordIsUnusableNotAChange() throws {
        let e = try enrolled()
        var edited = e.record
        edited.binding = edited.binding.replacingOccurrences(of: "}", with: ",\"x\":\"y\"}")
        for (record, key) in [(edited, e.deviceKey), (e.record, try SecureBytes.random(count: 32))] {
            let check = PresenceCheck(fingerprint, record: record, proof: FactorProof(enrollmentState: [1, 2, 3]),
                                      deviceKey: key, now: 2, softBox: { e.softBox })
            guard case .recordUnusable(newer: false) = check else { return XCTFail("\(check)") }
        }
        var newer = e.record
        newer.version = Keyslot.version + 1
        let check = PresenceCheck(fingerprint, record: newer, proof: FactorProof(enrollmentState: [1, 2, 3]),
                                  deviceKey: e.deviceKey, now: 2, softBox: { e.softBox })
        guard case .recordUnusable(newer: true) = check else { return XCTFail("\(check)") }
    }

    // MARK: GrantCheck

    let app = AppIdentity(kind: .flatpak, name: "org.example.Mentor")

    func testGrantsAreCheckedOnlyForPeersWithPerAppOn() {
        let peer = Requester(pid: 7, uid: 1000, app: app)
        XCTAssertEqual(GrantCheck(perApp: false, requester: peer, isGranted: { _ in false }), .unchecked)
        XCTAssertEqual(GrantCheck(perApp: true, requester: .inProcess, isGranted: { _ in false }), .unchecked,
                       "vaultd's own calls have no peer")
        XCTAssertEqual(GrantCheck(perApp: true, requester: peer, isGranted: { $0 == self.app }), .granted(app))
        XCTAssertEqual(GrantCheck(perApp: true, requester: peer, isGranted: { _ in false }), .ask(app))
    }

    func testAPeerWithoutAKnownAppIsRefusedWithoutADialog() {
        let unidentified = Requester(pid: 7, uid: 1000, app: app, unidentified: true)
        XCTAssertEqual(GrantCheck(perApp: true, requester: unidentified, isGranted: { _ in true }),
                       .refused(outcome: "unidentified_app", message: Messages.unidentifiedApp, app: nil),
                       "an unidentified peer could be anyone, even one holding a grant")
        XCTAssertEqual(GrantCheck(perApp: true, requester: Requester(pid: 7, uid: 1000), isGranted: { _ in true }),
                       .refused(outcome: "unknown_app", message: Messages.appNotAllowed(nil), app: nil))
    }

    func testAnAppSaidNoToIsRefusedWithoutADialogForAWhile() {
        let peer = Requester(pid: 7, uid: 1000, app: app)
        let deniedAt: (AppIdentity) -> Double? = { $0 == self.app ? 1_000 : nil }
        let refused = GrantCheck.refused(outcome: "asked_recently", message: Messages.appDeniedRecently(app.shortName), app: app)
        XCTAssertEqual(GrantCheck(perApp: true, requester: peer, isGranted: { _ in false }, deniedAt: deniedAt, now: 1_000), refused)
        XCTAssertEqual(GrantCheck(perApp: true, requester: peer, isGranted: { _ in false }, deniedAt: deniedAt,
                                  now: 1_000 + GrantCheck.askAgainAfter - 1), refused)
        XCTAssertEqual(GrantCheck(perApp: true, requester: peer, isGranted: { _ in false }, deniedAt: deniedAt,
                                  now: 1_000 + GrantCheck.askAgainAfter), .ask(app), "asked again after the pause")
        XCTAssertEqual(GrantCheck(perApp: true, requester: peer, isGranted: { _ in true }, deniedAt: deniedAt, now: 1_000), .granted(app),
                       "a grant made since (vaultctl apps allow) is used")
        let other = Requester(pid: 8, uid: 1000, app: AppIdentity(kind: .flatpak, name: "org.example.Other"))
        guard case .ask = GrantCheck(perApp: true, requester: other, isGranted: { _ in false }, deniedAt: deniedAt, now: 1_000) else {
            return XCTFail("another app is asked")
        }
    }

    func testADenyIsRememberedPerAppAndAccountAndSweptOnceOld() {
        var denials = GrantCheck.Denials()
        let other = AppIdentity(kind: .flatpak, name: "org.example.Other")
        denials.denied(app, account: "bankid", now: 1_000)
        XCTAssertEqual(denials.deniedAt(app, account: "bankid"), 1_000)
        XCTAssertNil(denials.deniedAt(app, account: "vipps"), "another account of the same app")
        XCTAssertNil(denials.deniedAt(other, account: "bankid"), "another app")
        denials.denied(other, account: "bankid", now: 1_000 + GrantCheck.askAgainAfter)
        XCTAssertNil(denials.deniedAt(app, account: "bankid"), "swept at the next Deny once its pause is over")
        XCTAssertEqual(denials.deniedAt(other, account: "bankid"), 1_000 + GrantCheck.askAgainAfter)
    }

    func testAGrantDialogClosedIsADenyAndOneNotShownRefuses() {
        XCTAssertNil(GrantCheck.unanswered(.cancelled, app: app), "closed, or the client went away: a Deny")
        XCTAssertEqual(GrantCheck.unanswered(.timeout, app: app)?.outcome, "timeout")
        XCTAssertEqual(GrantCheck.unanswered(.timeout, app: app)?.failure.code, .timeout)
        for error in [FactorError.notInteractive, .unavailable(LocalizedText(en: "No display.", nb: "Ingen skjerm."))] {
            let said = GrantCheck.unanswered(error, app: app)
            XCTAssertEqual(said?.outcome, "no_dialog", "\(error)")
            XCTAssertEqual(said?.failure.code, .appNotAllowed)
            XCTAssertEqual(said?.failure.message, Messages.appNotAllowed(app.shortName))
        }
    }

    func testASandboxedAppManagesOnlyItsOwnGrants() {
        let mine = AppGrant(app: app, account: "bankid", grantedAt: 1, lastUse: nil)
        let theirs = AppGrant(app: AppIdentity(kind: .flatpak, name: "org.example.Other"), account: "bankid", grantedAt: 1, lastUse: nil)
        let sandboxed = Requester(pid: 7, uid: 1000, app: app)
        XCTAssertTrue(mine.isManageable(by: sandboxed))
        XCTAssertFalse(theirs.isManageable(by: sandboxed))
        XCTAssertTrue(theirs.isManageable(by: Requester(pid: 8, uid: 1000, app: AppIdentity(kind: .executable, name: "/usr/bin/vaultctl"))),
                      "an unsandboxed caller could run vaultctl anyway")
        XCTAssertFalse(mine.isManageable(by: Requester(pid: 7, uid: 1000, app: app, unidentified: true)))
    }

    func testAnImportNeverSilentlyReplacesAnotherAppsSession() {
        let sandboxed = Requester(pid: 7, uid: 1000, app: app)
        let terminal = Requester(pid: 8, uid: 1000, app: AppIdentity(kind: .executable, name: "/usr/bin/vaultctl"))
        func check(_ r: Requester, replacing: Bool = true, perApp: Bool = true, granted: Bool = false) -> ImportCheck {
            ImportCheck(requester: r, replacing: replacing, perApp: perApp, isGranted: { _ in granted })
        }
        XCTAssertEqual(check(Requester(pid: 7, uid: 1000, app: app, unidentified: true), replacing: false),
                       .refused(outcome: "unidentified_app", message: Messages.unidentifiedApp, app: nil),
                       "an unidentified peer imports nothing, not even a new account")
        XCTAssertEqual(check(sandboxed, replacing: false), .allowed, "a new account is anyone's to add")
        XCTAssertEqual(check(sandboxed, granted: true), .allowed, "its own account")
        XCTAssertEqual(check(sandboxed), .refused(outcome: "not_granted", message: Messages.importNotYours, app: app))
        XCTAssertEqual(check(sandboxed, perApp: false), .refused(outcome: "not_granted", message: Messages.importNotYours, app: app),
                       "per_app = false does not let a sandboxed app replace what it cannot show a grant for")
        XCTAssertEqual(check(terminal), .ask, "an unconfined app is asked about another's account")
        XCTAssertEqual(check(terminal, perApp: false), .allowed, "with per_app = false no account is any one app's")
        XCTAssertEqual(check(.inProcess), .allowed)
    }

    // MARK: LoginIdentity

    func login(subject: String, nationalID: String?) throws -> VerifiedLogin {
        VerifiedLogin(provider: "idporten", providerName: "ID-porten", issuer: "https://idp.example", clientID: "c",
                      subject: subject, name: "Kari", claims: [:], nationalID: try nationalID.map { try SecureBytes.utf8($0) },
                      acr: nil, tokens: TokenGrant(accessToken: "at", accessExpiresAt: nil, refreshToken: nil))
    }

    func testANationalIDIsOneRecordPerPersonAndNeverStoredInTheClear() throws {
        let deviceKey = try SecureBytes.random(count: 32)
        let nin = "01017012345"
        let viaIDPorten = try login(subject: nin, nationalID: nin)
        let identity = try LoginIdentity(viaIDPorten, deviceKey: deviceKey)
        XCTAssertEqual(identity.slotID, LoginIdentity.personSlotID)
        XCTAssertFalse(identity.proof.binding.values.contains { $0.contains(nin) })
        let stored = LoginIdentity.storedSubject(of: viaIDPorten, deviceKey: deviceKey)
        XCTAssertFalse(stored.contains(nin), "a subject that is the national ID is kept only as a keyed hash")
        XCTAssertEqual(stored.count, 64)
        let viaBankID = try login(subject: "pairwise-123", nationalID: nin)
        XCTAssertEqual(try LoginIdentity(viaBankID, deviceKey: deviceKey).proof.binding, identity.proof.binding, "the same person, another provider")
        XCTAssertEqual(LoginIdentity.storedSubject(of: viaBankID, deviceKey: deviceKey), "pairwise-123")
        XCTAssertNotEqual(try LoginIdentity(viaIDPorten, deviceKey: try SecureBytes.random(count: 32)).proof.binding, identity.proof.binding,
                          "keyed by this device: a copied record names nobody elsewhere")
    }

    func testWithoutANationalIDTheRecordIsTheProvidersSubject() throws {
        let identity = try LoginIdentity(try login(subject: "sub-1", nationalID: nil), deviceKey: try SecureBytes.random(count: 32))
        XCTAssertEqual(identity.slotID, "login:idporten")
        XCTAssertEqual(identity.proof.binding, ["issuer": "https://idp.example", "subject": "sub-1"])
    }

    // MARK: ImportRequest

    func testAnImportNeedsATokenAnHTTPSIssuerAndAClientID() throws {
        func account(_ issuer: String, clientID: String = "c", rt: String? = "rt", name: String? = nil) throws -> String {
            try ImportRequest(issuer: issuer, clientID: clientID, account: name, refreshToken: rt, accessToken: nil,
                              accessExpiresAt: nil).validatedAccount()
        }
        XCTAssertEqual(try account("https://idp.example/realms/x"), "idp.example")
        XCTAssertEqual(try account("http://127.0.0.1:8080", name: "work"), "work")
        for bad in [{ try account("http://idp.example") }, { try account("https://idp.example", clientID: "") },
                    { try account("https://idp.example", rt: nil) }, { try account("not a url") }] {
            XCTAssertThrowsError(try bad()) { XCTAssertEqual(($0 as? VaultFailure)?.code, .badRequest) }
        }
    }
}

/// The PIN's check against a real store (SQLite): counted before it is
/// checked, locked out after the free tries, reset by the right PIN.
final class SecretCheckTests: XCTestCase {
    func testWrongPINsAreCountedUntilTheLockoutAndTheRightOneResetsTheCount() throws {
        let dir = NSTemporaryDirectory() + "secretcheck-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try VaultStore(path: dir + "/vault.sqlite")
        let deviceKey = try SecureBytes.random(count: 32)
        let vaultKey = try SecureBytes.random(count: 32)
        let slot = try Keyslot.makeWrap(id: "pin", factor: "pin", vaultKey: vaultKey, deviceKey: deviceKey,
                                        secret: try SecureBytes.utf8("482915"), cost: .interactive, chip: nil, now: 0)
        let throttle = ThrottlePolicy(freeAttempts: 2, firstDelay: 30, maxDelay: 600)
        let check = SecretCheck(factor: "pin", throttle: throttle, store: store,
                                keyslots: Keyslots(store: store, deviceKey: deviceKey, chip: .none, secretFactors: ["pin"]))

        guard case .wrong(1, 0, 1) = check.check(try SecureBytes.utf8("000000"), against: slot, now: 100) else {
            return XCTFail("the first wrong PIN leaves one free try")
        }
        XCTAssertEqual(try store.failureCounter(factor: "pin").failures, 1, "counted durably")
        guard case .wrong(2, let lockout, 0) = check.check(try SecureBytes.utf8("111111"), against: slot, now: 101) else {
            return XCTFail("the second wrong PIN locks out")
        }
        XCTAssertEqual(lockout, 30)
        XCTAssertEqual(try store.failureCounter(factor: "pin").lockedUntil, 131, "the lockout is stored with the count")
        guard case .opened(let vk) = check.check(try SecureBytes.utf8("482915"), against: slot, now: 200) else {
            return XCTFail("the right PIN opens the wrap")
        }
        XCTAssertEqual(vk.unsafeCopyToArray(), vaultKey.unsafeCopyToArray())
        XCTAssertEqual(try store.failureCounter(factor: "pin"), FailureCounter(factor: "pin", failures: 0, lockedUntil: 0))
    }
}

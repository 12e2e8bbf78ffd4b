import XCTest
@testable import VaultCore
import PINFactor
import SodiumKit
import VaultFactor
import VaultProtocol
import VaultStore
import VaultTestSupport

/// The broker's side of issue 21's boundaries, each played as an attacker
/// would: a PIN changed by whoever finds the vault open, a public key swapped
/// on disk, a v1 slot that must never be deleted, names that fake dialog text,
/// a refused request that keeps the vault open.
final class HostileNeighbourTests: XCTestCase {
    var fx: VaultFixture!
    let pin = PINFactor(throttle: ThrottlePolicy(freeAttempts: 2, firstDelay: 30, maxDelay: 120))
    let thePIN = "482915"

    override func setUpWithError() throws { fx = try VaultFixture() }
    override func tearDown() { fx.cleanup() }

    /// Someone at an open vault (the owner stepped away) cannot change or
    /// turn off the PIN without knowing it; the owner can.
    func testChangingOrTurningOffThePINAsksForTheCurrentOneFirst() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: [thePIN, thePIN]))
        let open = vault.isLocked
        XCTAssertFalse(open, "the vault is open")

        // A new PIN offered twice, but the current one is not known: refused, and counted.
        let stranger = ScriptedClient(secrets: ["111111", "222222", "333333", "333333"])
        let changed = await failure { _ = try await vault.enroll(.pin, conversation: stranger) }
        XCTAssertEqual(changed?.code, .lockedOut, "\(String(describing: changed))")
        XCTAssertEqual(try fx.store.failureCounter(factor: "pin").failures, 2, "each wrong current PIN counts like an unlock's")
        let off = await failure { _ = try await vault.disable(.pin, confirmed: true, conversation: ScriptedClient(secrets: ["999999"])) }
        XCTAssertEqual(off?.code, .lockedOut)
        XCTAssertEqual(try fx.store.keyslots().map(\.id), ["pin"], "the PIN slot is as it was")

        // The owner, after the lockout: asked the current PIN (in the words for it), then the new one twice.
        try fx.store.resetFailures(factor: "pin")
        let owner = ScriptedClient(secrets: [thePIN, "739184", "739184"])
        let status = try await vault.enroll(.pin, conversation: owner)
        XCTAssertEqual(status.state, .enabled)
        XCTAssertEqual(owner.asked, 3, "the current PIN, then the new one twice")
        await vault.lock(reason: "test")
        try await vault.unlock(factor: .pin, conversation: ScriptedClient(secrets: ["739184"]))
        let after = vault.isLocked
        XCTAssertFalse(after, "the new PIN opens the vault")
    }

    /// A PIN typed to unlock for this very request is not asked twice.
    func testAPINTypedToUnlockForTheChangeIsNotAskedAgain() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: [thePIN, thePIN]))
        await vault.lock(reason: "test")
        let owner = ScriptedClient(secrets: [thePIN, "739184", "739184"])
        _ = try await vault.enroll(.pin, conversation: owner)
        XCTAssertEqual(owner.asked, 3, "unlock PIN, then the new one twice")
    }

    /// Someone who can write the data directory but has no device key swaps
    /// the stored public key for one of their own: logins while locked would
    /// then seal sessions to them. The key carries a device-key MAC; a swapped
    /// one is not used.
    func testASwappedPublicKeyIsNotUsed() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: [thePIN, thePIN]))
        let genuine = try XCTUnwrap(try fx.store.meta(SessionSealing.publicKeyMeta))
        XCTAssertNotNil(try fx.store.meta(SessionSealing.publicKeyMACMeta), "the MAC is written with the key")
        let fresh = try fx.reopened([pin])
        let used = await fresh.sealingPublicKey
        XCTAssertEqual(used, genuine, "the genuine key is used while locked")

        let attackers = try PublicKeyBox.keyPair(seed: try SecureBytes.random(count: 32)).publicKey
        XCTAssertNotEqual(attackers, genuine)
        try fx.store.setMeta(SessionSealing.publicKeyMeta, attackers)
        let reopened = try fx.reopened([pin])
        let swapped = await reopened.sealingPublicKey
        XCTAssertNil(swapped, "a key without a valid MAC is not sealed to")

        // Once the owner unlocks, the right key (from the vault key) is back, with its MAC.
        try await reopened.unlock(factor: .pin, conversation: ScriptedClient(secrets: [thePIN]))
        XCTAssertEqual(try fx.store.meta(SessionSealing.publicKeyMeta), genuine)
        let restored = await (try fx.reopened([pin])).sealingPublicKey
        XCTAssertEqual(restored, genuine)
    }

    /// A v1 fingerprint slot is the only wrap of the vault key: an enrollment
    /// change must not delete it (every session would be lost for good).
    func testAV1PresenceSlotIsNeverDeleted() async throws {
        let fake = FakePresenceFactor()
        let vault = try fx.vault([pin, fake])
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        let open = await vault.vaultKey
        let vk = try XCTUnwrap(open)
        // The old layout: VK under DK + the enrollment digest, the only slot.
        let salt = Random.bytes(Keyslot.saltSize)
        let binding = Keyslot.bindingJSON([:])
        let kek = try Keyslot.kek(deviceKey: fx.deviceKey, id: "fake", factor: "fake", salt: salt, stretched: nil,
                                  enrollmentState: fake.enrollment, binding: binding)
        let sealed = try SecretBox.seal(vk, key: kek, associatedData: Keyslot.associatedData(id: "fake", factor: "fake"))
        try fx.store.updateKeyslots(put: [KeyslotRow(id: "fake", factor: "fake", version: Keyslot.legacyVersion, salt: salt, kdf: "{}",
                                                     binding: binding, sealedKey: sealed.bytes, createdAt: 1)],
                                    delete: [Keyslot.deviceSlotID])
        fake.enrollment = [9, 9, 9]   // a finger added
        let reopened = try fx.reopened([pin, fake])
        let refused = await failure { _ = try await reopened.release(account: "a", conversation: ScriptedClient()) }
        XCTAssertNotNil(refused)
        XCTAssertEqual(try fx.store.keyslots().map(\.id), ["fake"], "the v1 slot is kept")
        // The enrollment back as it was: the slot opens, and migrates.
        fake.enrollment = [1, 2, 3]
        let s = try await reopened.release(account: "a", conversation: ScriptedClient())
        XCTAssertEqual(s.accessToken, "at-T1")
    }

    /// A refused request does not restart the idle timer: an app asking for
    /// what it may not have must not keep the vault open.
    func testOnlyServedRequestsRestartTheIdleTimer() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        let served = vault.table.lastActivity
        try await Task.sleep(for: .milliseconds(20))
        let evil = Requester(pid: 4242, uid: 1, app: AppIdentity(kind: .flatpak, name: "org.example.Evil"))
        let refused = await failure { _ = try await vault.release(account: "a", conversation: SilentConversation(requester: evil)) }
        XCTAssertEqual(refused?.code, .appNotAllowed)
        let bad = await failure { _ = try await vault.importSession(importRequest(account: "a", token: "T2"),
                                                                     conversation: SilentConversation(requester: evil)) }
        XCTAssertEqual(bad?.code, .appNotAllowed)
        XCTAssertEqual(vault.table.lastActivity, served, "refused requests left the idle timer alone")
        _ = try await vault.release(account: "a", conversation: SilentConversation())
        XCTAssertGreaterThan(vault.table.lastActivity, served, "a served one restarts it")
    }

    /// An unidentified peer is granted nothing, not even what it imports.
    func testAnUnidentifiedPeerIsGrantedNothing() async throws {
        let vault = try fx.vault([pin])
        let ghost = SilentConversation(requester: Requester(pid: 4243, uid: 1, unidentified: true))
        let imported = await failure { _ = try await vault.importSession(importRequest(account: "g", token: "T1"), conversation: ghost) }
        XCTAssertEqual(imported?.code, .appNotAllowed)
        XCTAssertEqual(imported?.message, Messages.unidentifiedApp)
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        let visible = await vault.accounts(visibleTo: ghost.requester)
        XCTAssertEqual(visible.count, 0)
        let released = await failure { _ = try await vault.release(account: nil, conversation: ghost) }
        XCTAssertNotNil(released)
        let grants = await vault.appGrants()
        XCTAssertEqual(grants.count, 1, "only the scripted app's own grant")
    }

    /// Prompt fatigue: a sandboxed app that puts the unlock dialog back the
    /// moment the person closes it, until a tired person types the PIN to make
    /// it stop. One close costs nothing (a slip, then the person's own retry);
    /// after two, that app raises no dialog for two minutes and hears
    /// `rate_limited` with the wait. Another app, an unidentified peer in a new
    /// process each time and the person's own unconfined tools are counted
    /// apart or not at all. Without ClosedDialogs: twenty dialogs.
    func testAnAppThatRaisesTheUnlockDialogAgainAndAgainIsHeldBack() async throws {
        let clock = TestClock()
        let vault = try fx.vault([pin], clock: clock)
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: [thePIN, thePIN]))
        _ = try await vault.importSession(importRequest(account: "nabo", token: "T1"), conversation: ScriptedClient())
        await vault.lock(reason: "test")
        let nabo = Requester(pid: 4242, uid: 0, app: AppIdentity(kind: .flatpak, name: "org.example.Nabo"))
        let pushy = ScriptedClient(requester: nabo)   // every PIN question: Cancel
        var codes: [ErrorCode?] = []
        for _ in 0..<20 {
            codes.append(await failure { try await vault.unlock(factor: nil, conversation: pushy) }?.code)
        }
        XCTAssertEqual(pushy.asked, 2, "two dialogs, then none")
        XCTAssertEqual(codes, [.cancelled, .cancelled] + Array(repeating: .rateLimited, count: 18))
        let held = await failure { try await vault.unlock(factor: nil, conversation: pushy) }
        XCTAssertEqual(held?.message, Messages.unlockClosedRecently("org.example.Nabo"))
        XCTAssertEqual(held?.extra["retry_after"], .int(Int64(ClosedDialogs.quiet)))
        // Through a release too (a granted app asking for its session).
        _ = try await vault.allowApp("flatpak:org.example.Nabo", account: "nabo", requester: .inProcess)
        let viaRelease = await failure { _ = try await vault.release(account: "nabo", conversation: pushy) }
        XCTAssertNotEqual(viaRelease?.code, .cancelled, "no third dialog through a release either")
        XCTAssertEqual(pushy.asked, 2)

        // Another sandboxed app is asked as usual; so is the person's own tool, which opens it.
        let other = ScriptedClient(requester: Requester(pid: 4343, uid: 0, app: AppIdentity(kind: .flatpak, name: "org.example.Annen")))
        _ = await failure { try await vault.unlock(factor: nil, conversation: other) }
        XCTAssertEqual(other.asked, 1)
        // Unidentified peers share one count, whatever their pid.
        for pid in Int32(5000)..<5004 {
            let ghost = ScriptedClient(requester: Requester(pid: pid, uid: 0, unidentified: true))
            _ = await failure { try await vault.unlock(factor: nil, conversation: ghost) }
            XCTAssertEqual(ghost.asked, pid < 5002 ? 1 : 0, "unidentified peer \(pid)")
        }
        let closedRecently = try vault.audit.entries().filter { $0.event == "unlock" && $0.outcome == "closed_recently" }
        XCTAssertEqual(closedRecently.filter { $0.pid == 4242 }.count, 1,
                       "an app's 19 refusals in a loop: one written, the rest counted (\(closedRecently.count) in all)")

        // Two minutes after the last close the app may ask again.
        clock.advance(ClosedDialogs.quiet - 1)
        _ = await failure { try await vault.unlock(factor: nil, conversation: pushy) }
        XCTAssertEqual(pushy.asked, 2)
        clock.advance(1)
        _ = await failure { try await vault.unlock(factor: nil, conversation: pushy) }
        XCTAssertEqual(pushy.asked, 3)

        let person = ScriptedClient(secrets: [nil, nil, nil, thePIN])
        for _ in 0..<3 { _ = await failure { try await vault.unlock(factor: nil, conversation: person) } }
        try await vault.unlock(factor: nil, conversation: person)
        XCTAssertEqual(person.asked, 4, "the person's own tool is never held back")
        let open = vault.isLocked
        XCTAssertFalse(open)
    }

    /// A sandboxed app that locks the vault the moment the person opens it would
    /// have them unlock all day (each dialog raised by the apps they use, so
    /// ClosedDialogs never sees it): it locks an open vault once in ten minutes.
    func testAnAppThatLocksTheVaultAgainAndAgainIsHeldBack() async throws {
        let clock = TestClock()
        let vault = try fx.vault([pin], clock: clock)
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: [thePIN, thePIN]))
        let nabo = Requester(pid: 4242, uid: 0, app: AppIdentity(kind: .flatpak, name: "org.example.Nabo"))
        let person = ScriptedClient(secrets: Array(repeating: thePIN, count: 10))

        try await vault.lock(askedBy: nabo)
        var locked = vault.isLocked
        XCTAssertTrue(locked, "one lock is an app's to ask")
        // Locking a locked vault costs the person nothing: not counted.
        try await vault.lock(askedBy: nabo)
        try await vault.unlock(factor: nil, conversation: person)
        var codes: [ErrorCode?] = []
        for _ in 0..<5 {
            codes.append(await failure { try await vault.lock(askedBy: nabo) }?.code)
        }
        XCTAssertEqual(codes, Array(repeating: .rateLimited, count: 5))
        locked = vault.isLocked
        XCTAssertFalse(locked, "the vault stays open for the apps the person is using")
        let held = await failure { try await vault.lock(askedBy: nabo) }
        XCTAssertEqual(held?.message, Messages.lockedRecently("org.example.Nabo"))
        XCTAssertEqual(held?.extra["retry_after"], .int(Int64(ConfinedPace.Kind.lockOpenVault.limit.window)))
        XCTAssertEqual(try vault.audit.entries().filter { $0.event == "lock" && $0.outcome == "rate_limited" && $0.pid == 4242 }.count, 1,
                       "an app's refusals in a loop: one written, the rest counted")

        // Unidentified peers share one count, whatever their pid.
        try await vault.lock(askedBy: Requester(pid: 5000, uid: 0, unidentified: true))
        try await vault.unlock(factor: nil, conversation: person)
        let ghost = await failure { try await vault.lock(askedBy: Requester(pid: 5001, uid: 0, unidentified: true)) }
        XCTAssertEqual(ghost?.code, .rateLimited)
        // The person's own tool always locks.
        for _ in 0..<3 {
            try await vault.lock(askedBy: Requester(pid: 4343, uid: 0, app: AppIdentity(kind: .desktop, name: "io.github.sessionvault.Settings")))
            locked = vault.isLocked
            XCTAssertTrue(locked)
            try await vault.unlock(factor: nil, conversation: person)
        }
        // Ten minutes after its lock the app may lock again.
        clock.advance(ConfinedPace.Kind.lockOpenVault.limit.window - 1)
        _ = await failure { try await vault.lock(askedBy: nabo) }
        locked = vault.isLocked
        XCTAssertFalse(locked)
        clock.advance(1)
        try await vault.lock(askedBy: nabo)
        locked = vault.isLocked
        XCTAssertTrue(locked)
    }

    /// Checking the audit chain walks the whole log: a sandboxed app asking in
    /// a loop (32 connections, 32 asks in flight on each) would keep both cores
    /// walking it. Once a minute for such an app; the person's tools always.
    func testAnAppThatChecksTheAuditLogInALoopIsHeldBack() async throws {
        let clock = TestClock()
        let vault = try fx.vault([pin], clock: clock)
        let nabo = Requester(pid: 4242, uid: 0, app: AppIdentity(kind: .flatpak, name: "org.example.Nabo"))
        XCTAssertTrue(try vault.checkAudit(askedBy: nabo).intact)
        var codes: [ErrorCode?] = []
        for _ in 0..<5 { codes.append(await failure { _ = try vault.checkAudit(askedBy: nabo) }?.code) }
        XCTAssertEqual(codes, Array(repeating: .rateLimited, count: 5))
        let held = await failure { _ = try vault.checkAudit(askedBy: nabo) }
        XCTAssertEqual(held?.extra["retry_after"], .int(60))
        // Unidentified peers share one count; the person's own tool is never held back.
        XCTAssertNoThrow(try vault.checkAudit(askedBy: Requester(pid: 5000, uid: 0, unidentified: true)))
        XCTAssertThrowsError(try vault.checkAudit(askedBy: Requester(pid: 5001, uid: 0, unidentified: true)))
        for _ in 0..<3 { XCTAssertTrue(try vault.checkAudit(askedBy: ScriptedClient.testApp).intact) }
        clock.advance(60)
        XCTAssertNoThrow(try vault.checkAudit(askedBy: nabo))
    }

    /// Each page of the audit log is up to 1,000 rows read under the store's
    /// one lock: a sandboxed app reads 60 pages a minute, an unidentified peer
    /// (which may read no entry) costs no read, the person's tools read freely.
    func testAnAppThatReadsTheAuditLogInALoopIsHeldBack() async throws {
        let clock = TestClock()
        let vault = try fx.vault([pin], clock: clock)
        let nabo = Requester(pid: 4242, uid: 0, app: AppIdentity(kind: .flatpak, name: "org.example.Nabo"))
        for _ in 0..<60 { XCTAssertNoThrow(try vault.auditEntries(.after(0, limit: 1000), askedBy: nabo)) }
        let held = await failure { _ = try vault.auditEntries(.after(0, limit: 1000), askedBy: nabo) }
        XCTAssertEqual(held?.code, .rateLimited)
        XCTAssertNotNil(held?.extra["retry_after"])
        XCTAssertEqual(try vault.auditEntries(.after(0, limit: 1000), askedBy: Requester(pid: 5000, uid: 0, unidentified: true)), [])
        for _ in 0..<100 { XCTAssertNoThrow(try vault.auditEntries(.after(0, limit: 1000), askedBy: ScriptedClient.testApp)) }
        XCTAssertFalse(try vault.auditEntries(.after(0, limit: 1000), askedBy: ScriptedClient.testApp).isEmpty,
                       "the refusal was audited, and the person's tool reads it")
        clock.advance(60)
        XCTAssertNoThrow(try vault.auditEntries(.after(0, limit: 1000), askedBy: nabo))
    }

    /// The counts stay small: an app per key does not grow them past a few hundred.
    func testClosedDialogsForgetsAppsPastTheirQuiet() {
        var closes = ClosedDialogs()
        for i in 0..<1_000 {
            closes.closed("flatpak:app\(i)", now: Double(i) * ClosedDialogs.quiet)
        }
        XCTAssertLessThanOrEqual(closes.keyCount, ClosedDialogs.keysKept + 1)
        closes.closed("flatpak:x", now: 0)
        closes.closed("flatpak:x", now: ClosedDialogs.window + 1)
        XCTAssertNil(closes.wait("flatpak:x", now: ClosedDialogs.window + 2), "two closes a long while apart are two slips")
    }
}

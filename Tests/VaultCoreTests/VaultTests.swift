import XCTest
@testable import VaultCore
import PINFactor
import VaultFactor
import VaultTestSupport
import VaultProtocol
import VaultStore

final class VaultTests: XCTestCase {
    var fx: VaultFixture!
    let pin = PINFactor(throttle: ThrottlePolicy(freeAttempts: 2, firstDelay: 30, maxDelay: 120))

    override func setUpWithError() throws { fx = try VaultFixture() }
    override func tearDown() { fx.cleanup() }

    func code(_ body: () async throws -> Void) async -> ErrorCode? {
        do { try await body(); return nil } catch let f as VaultFailure { return f.code } catch { return .internal }
    }

    func testFreshVaultIsOpenedByTheDeviceKeyAlone() async throws {
        let vault = try fx.vault([pin])
        let locked = vault.isLocked
        XCTAssertFalse(locked)
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        let again = try fx.reopened([pin])
        let lockedAfterRestart = again.isLocked
        XCTAssertFalse(lockedAfterRestart, "no factor enrolled: the device slot opens the vault at start")
        let s = try await again.release(account: nil, conversation: SilentConversation())
        XCTAssertEqual(s.accessToken, "at-T1")
        // Never the refresh token: `ReleasedSession` holds none (the socket's bytes: RequestHandlerTests).
    }

    func testEnrollingPINReplacesTheDeviceSlotAndLocksAfterRestart() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        let status = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        XCTAssertEqual(status.state, .enabled)
        XCTAssertEqual(status.label.en, "PIN enabled")
        XCTAssertEqual(try fx.store.keyslots().map(\.id), ["pin"])

        let restarted = try fx.reopened([pin])
        let locked = restarted.isLocked
        XCTAssertTrue(locked)
        do {
            _ = try await restarted.release(account: nil, conversation: SilentConversation())
            XCTFail("expected locked")
        } catch {
            XCTAssertEqual(error.code, .locked)
            XCTAssertEqual(error.extra["factors"], ["pin"])
        }
        let s = try await restarted.release(account: nil, conversation: ScriptedClient(secrets: ["482915"]))
        XCTAssertEqual(s.accessToken, "at-T1")
    }

    func testWrongPINCountsThenLocksOutAndSurvivesRestart() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        await vault.lock(reason: "test")
        let client = ScriptedClient(secrets: ["000001", "000002"])
        do {
            try await vault.unlock(factor: nil, conversation: client)
            XCTFail("expected lockout")
        } catch {
            XCTAssertEqual(error.code, .lockedOut)
            XCTAssertEqual(error.extra["retry_after"], 30)
        }
        XCTAssertTrue(client.shown.contains { $0.contains("1 try left") }, "\(client.shown)")
        XCTAssertEqual(try fx.store.failureCounter(factor: "pin").failures, 2)

        // The lockout is on disk: a restarted vault refuses even the right PIN without asking.
        let restarted = try fx.reopened([pin])
        let right = ScriptedClient(secrets: ["482915"])
        let c = await code { try await restarted.unlock(factor: nil, conversation: right) }
        XCTAssertEqual(c, .lockedOut)
        XCTAssertEqual(right.asked, 0, "no PIN is asked while locked out")
        let statuses = await restarted.factorStatuses()
        XCTAssertEqual(statuses.first?.state, .lockedOut)
        XCTAssertTrue(statuses.first?.label.en.hasPrefix("PIN locked — try again in") ?? false)

        // After the wait, the right PIN works and resets the counter.
        var counter = try fx.store.failureCounter(factor: "pin")
        counter.lockedUntil = 0
        try fx.store.setFailureCounter(counter)
        try await restarted.unlock(factor: nil, conversation: ScriptedClient(secrets: ["482915"]))
        XCTAssertEqual(try fx.store.failureCounter(factor: "pin").failures, 0)
    }

    /// The fingerprint is a soft unlock (docs/key-hierarchy.md): after a
    /// restart the PIN is needed once, then the presence factor reopens the vault.
    func testAfterARestartThePINIsNeededOnceThenThePresenceFactorReopens() async throws {
        let fake = FakePresenceFactor()
        let vault = try fx.vault([fake, pin])
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        XCTAssertEqual(Set(try fx.store.keyslots().map(\.id)), ["pin", "fake"])

        let restarted = try fx.reopened([fake, pin])
        let before = fake.verifies
        let noPIN = await code { _ = try await restarted.release(account: "a", conversation: ScriptedClient()) }
        XCTAssertNotNil(noPIN, "a presence factor alone opens nothing after a restart")
        XCTAssertEqual(fake.verifies, before, "it is not even asked")
        let v1 = await restarted.factorStatuses().first { $0.factor == "fake" }?.label.en
        XCTAssertEqual(v1, "Fake enabled — enter your PIN once to use it")
        let s1 = try await restarted.release(account: "a", conversation: ScriptedClient(secrets: ["482915"]))
        XCTAssertEqual(s1.accessToken, "at-T1")

        await restarted.lock(reason: "test")
        let s2 = try await restarted.release(account: "a", conversation: ScriptedClient())
        XCTAssertEqual(s2.accessToken, "at-T1", "after the PIN, the presence factor reopens the vault")
        XCTAssertEqual(fake.verifies, before + 1)
    }

    func testTooManyFailedScansNeedThePINOnceAgain() async throws {
        let fake = FakePresenceFactor()
        let vault = try fx.vault([fake, pin])
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        await vault.lock(reason: "test")
        fake.outcome = .fail(.tooManyAttempts)
        try await vault.unlock(factor: nil, conversation: ScriptedClient(secrets: ["482915"]))
        await vault.lock(reason: "test")
        fake.outcome = .present
        // The PIN above rebuilt the soft box: the presence factor works again.
        try await vault.unlock(factor: nil, conversation: ScriptedClient())
        await vault.lock(reason: "test")
        fake.outcome = .fail(.tooManyAttempts)
        let c = await code { try await vault.unlock(factor: nil, conversation: ScriptedClient()) }
        XCTAssertNotNil(c)
        fake.outcome = .present
        let after = await code { try await vault.unlock(factor: nil, conversation: ScriptedClient()) }
        XCTAssertNotNil(after, "after the fallback the presence factor does not open until the PIN is given")
    }

    func testTheSoftUnlockEndsAfterItsTimeLimit() async throws {
        let fake = FakePresenceFactor()
        var config = VaultConfig()
        config.fingerprintMaxAge = 1
        let clock = TestClock()
        let vault = try fx.vault([fake, pin], config: config, clock: clock)
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        await vault.lock(reason: "test")
        clock.advance(1.1)
        let c = await code { try await vault.unlock(factor: nil, conversation: ScriptedClient()) }
        XCTAssertNotNil(c, "past fingerprint_max_hours the PIN is needed")
        try await vault.unlock(factor: nil, conversation: ScriptedClient(secrets: ["482915"]))
    }

    func testMaxUnlockedLocksHoweverBusy() async throws {
        var config = VaultConfig(idleTimeout: 3600)
        config.maxUnlocked = 1
        let clock = TestClock()
        let vault = try fx.vault([pin], config: config, clock: clock)
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        await vault.lockIfIdle()
        let v2 = vault.isLocked
        XCTAssertFalse(v2)
        clock.advance(1.1)
        _ = await vault.accounts()   // busy: a request just now
        await vault.lockIfIdle()
        let v3 = vault.isLocked
        XCTAssertTrue(v3, "max_unlocked counts from the unlock, not from the last request")
    }

    func testPolicyOrderAndFallbackOnFailure() async throws {
        let fake = FakePresenceFactor()
        let vault = try fx.vault([pin, fake])
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        await vault.lock(reason: "test")
        // The presence factor ranks first; when it is cancelled the PIN is asked next.
        fake.outcome = .fail(.cancelled)
        let client = ScriptedClient(secrets: ["482915"])
        try await vault.unlock(factor: nil, conversation: client)
        XCTAssertEqual(fake.verifies, 1)
        XCTAssertEqual(client.asked, 1)
        // Unavailable hardware is skipped without asking it.
        await vault.lock(reason: "test")
        fake.available = false
        try await vault.unlock(factor: nil, conversation: ScriptedClient(secrets: ["482915"]))
        XCTAssertEqual(fake.verifies, 1)
    }

    func testChangedEnrollmentRemovesTheStaleSlotAndMovesOn() async throws {
        let fake = FakePresenceFactor()
        let vault = try fx.vault([fake, pin])
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        await vault.lock(reason: "test")
        fake.enrollment = [1, 2, 3, 4]   // a finger was added
        let client = ScriptedClient(secrets: ["482915"])
        try await vault.unlock(factor: nil, conversation: client)
        XCTAssertTrue(client.shown.contains { $0.contains("Fake on this computer has changed") }, "\(client.shown)")
        XCTAssertEqual(try fx.store.keyslots().map(\.id), ["pin"], "the stale slot is gone from the store")
        let events = try vault.audit.entries().map(\.event)
        XCTAssertTrue(events.contains("enrollment_changed"))
    }

    /// A presence record is facts plus a device-keyed MAC. An edited record is
    /// told apart from an enrollment change: it is kept, not used, and said so,
    /// and setting the factor up again replaces it. The vault key's own slot
    /// (here the device slot) is never touched.
    func testATamperedRecordIsKeptNotUsedAndNotMistakenForAChange() async throws {
        let fake = FakePresenceFactor()
        let vault = try fx.vault([fake])
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        let record = try XCTUnwrap(try fx.store.keyslots().first { $0.id == "fake" })
        var edits: [KeyslotRow] = []
        for position in [0, record.sealedKey.count - 1] {
            var t = record
            t.sealedKey[position] ^= 0x01
            edits.append(t)
        }
        var salt = record
        salt.salt[0] ^= 0x01
        var binding = record
        binding.binding = binding.binding.replacingOccurrences(of: "\"enrollment_digest\":\"", with: "\"enrollment_digest\":\"00")
        edits += [salt, binding]
        for (n, edited) in edits.enumerated() {
            XCTAssertNotEqual(edited, record, "edit \(n) changes the row")
            try fx.store.updateKeyslots(put: [edited], delete: [])
            let reopened = try fx.reopened([fake])
            let status = await reopened.factorStatuses().first { $0.factor == "fake" }
            XCTAssertEqual(status?.state, .unavailable, "edit \(n)")
            XCTAssertTrue(status?.label.en.contains("changed by something other than SessionVault") ?? false, "edit \(n)")
            XCTAssertTrue(try fx.store.keyslots().contains { $0.id == "fake" }, "edit \(n): the record is kept")
            XCTAssertTrue(try fx.store.keyslots().contains { $0.id == "device" }, "edit \(n): the vault key's slot is kept")
            XCTAssertFalse(try reopened.audit.entries().contains { $0.event == "enrollment_changed" }, "edit \(n): not a change")
            try fx.store.updateKeyslots(put: [record], delete: [])
        }
        // A record a newer SessionVault wrote: a version mismatch, not tampering and not a change.
        var newer = record
        newer.version = Keyslot.version + 1
        try fx.store.updateKeyslots(put: [newer], delete: [])
        let underOlder = try fx.reopened([fake])
        let status = await underOlder.factorStatuses().first { $0.factor == "fake" }
        XCTAssertEqual(status?.state, .unavailable)
        XCTAssertEqual(status?.label, Messages.factorRecordNewer(fake.descriptor.displayName))
        XCTAssertEqual(try fx.store.keyslots().first { $0.id == "fake" }?.version, Keyslot.version + 1, "kept as it is")

        try fx.store.updateKeyslots(put: [edits[0]], delete: [])
        let reopened = try fx.reopened([fake])
        _ = try await reopened.enroll("fake", conversation: ScriptedClient())
        await reopened.lock(reason: "test")
        try await reopened.unlock(factor: nil, conversation: ScriptedClient())
    }

    func testDisablingTheLastFactorBringsBackTheDeviceSlot() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        // The current PIN first (changing or removing it asks for it), then the
        // confirmation: declining it changes nothing.
        let declined = await code { _ = try await vault.disable(.pin, confirmed: false,
                                                                conversation: ScriptedClient(secrets: ["482915"], confirms: [false])) }
        XCTAssertEqual(declined, .cancelled)
        XCTAssertEqual(try fx.store.keyslots().map(\.id), ["pin"])
        let status = try await vault.disable(.pin, confirmed: false, conversation: ScriptedClient(secrets: ["482915"], confirms: [true]))
        XCTAssertEqual(status.state, .notEnrolled)
        XCTAssertEqual(try fx.store.keyslots().map(\.id), ["device"])
        let reopened = try fx.reopened([pin])
        let s = try await reopened.release(account: nil, conversation: SilentConversation())
        XCTAssertEqual(s.accessToken, "at-T1", "sessions stay reachable")
    }

    /// A change of unlock methods the person calls off — No at its question, Cancel at the
    /// unlock before it, at the PIN in use or at the new PIN, or a closed dialog — says that
    /// nothing was changed (what the settings app shows), not the unlock's "choose another
    /// way to log in", which stays for an app waiting for its session.
    func testAChangeCalledOffSaysNothingWasChanged() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        let calledOff: [(String, ScriptedClient, (ScriptedClient) async throws -> Void)] = [
            ("No to turning the PIN off", ScriptedClient(secrets: ["482915"], confirms: [false]),
             { _ = try await vault.disable(.pin, confirmed: false, conversation: $0) }),
            ("the question closed", ScriptedClient(secrets: ["482915"], confirms: [nil]),
             { _ = try await vault.disable(.pin, confirmed: false, conversation: $0) }),
            ("Cancel at the PIN in use", ScriptedClient(secrets: [nil]),
             { _ = try await vault.enroll(.pin, conversation: $0) }),
            ("Cancel at the new PIN", ScriptedClient(secrets: ["482915", nil]),
             { _ = try await vault.enroll(.pin, conversation: $0) }),
            ("No to starting over", ScriptedClient(confirms: [false]),
             { _ = try await vault.reset(confirmed: false, conversation: $0) }),
            ("the start-over question closed", ScriptedClient(confirms: [nil]),
             { _ = try await vault.reset(confirmed: false, conversation: $0) }),
        ]
        for (what, client, change) in calledOff {
            let f = await failure { try await change(client) }
            XCTAssertEqual(f?.code, .cancelled, what)
            XCTAssertEqual(f?.message, Messages.nothingChanged, what)
        }
        await vault.lock(reason: "test")
        let atUnlock = await failure { _ = try await vault.disable(.pin, confirmed: true, conversation: ScriptedClient(secrets: [nil])) }
        XCTAssertEqual(atUnlock?.message, Messages.nothingChanged, "Cancel at the unlock before the change")
        let app = await failure { _ = try await vault.release(account: "a", conversation: ScriptedClient(secrets: [nil])) }
        XCTAssertEqual(app?.code, .cancelled)
        XCTAssertNotEqual(app?.message, Messages.nothingChanged, "an app waiting for its session hears the unlock's words")
        XCTAssertEqual(try fx.store.keyslots().map(\.id), ["pin"], "nothing was changed")
        XCTAssertEqual(try fx.store.sessions().count, 1, "nothing was changed")
    }

    func testDisableNeedsConfirmationFromANonInteractiveClient() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        let c = await code { _ = try await vault.disable(.pin, confirmed: false, conversation: ScriptedClient(interactive: false)) }
        XCTAssertEqual(c, .badRequest)
        XCTAssertEqual(try fx.store.keyslots().map(\.id), ["pin"])
    }

    func testWrongDeviceKeyIsRefused() async throws {
        _ = try fx.vault([pin])
        XCTAssertThrowsError(try Vault(store: fx.store, deviceKey: try SecureBytes.random(count: 32), factors: [pin],
                                       config: VaultConfig(), logger: VaultFixture.logger)) {
            guard case .deviceKeyMismatch = $0 as? VaultStartupError else { return XCTFail("\($0)") }
        }
    }

    func testSwappedSessionRecordsDoNotOpen() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.importSession(importRequest(account: "a", token: "AAA"), conversation: ScriptedClient())
        _ = try await vault.importSession(importRequest(account: "b", token: "BBB"), conversation: ScriptedClient())
        var rows = try fx.store.sessions()
        XCTAssertEqual(rows.count, 2)
        let secretA = rows[0].sealedSecret
        rows[0].sealedSecret = rows[1].sealedSecret
        rows[1].sealedSecret = secretA
        for r in rows { try fx.store.putSession(r) }
        let reopened = try fx.reopened([pin])
        for account in ["a", "b"] {
            let c = await code { _ = try await reopened.release(account: account, conversation: SilentConversation()) }
            XCTAssertEqual(c, .internal, "a record moved to another row must not open there")
        }
    }

    func testAccountSelection() async throws {
        let vault = try fx.vault([pin])
        let none = await code { _ = try await vault.release(account: nil, conversation: SilentConversation()) }
        XCTAssertEqual(none, .noSession)
        _ = try await vault.importSession(importRequest(account: "a", token: "A"), conversation: ScriptedClient())
        _ = try await vault.importSession(importRequest(account: "b", token: "B"), conversation: ScriptedClient())
        let ambiguous = await code { _ = try await vault.release(account: nil, conversation: SilentConversation()) }
        XCTAssertEqual(ambiguous, .badRequest)
        let b = try await vault.release(account: "b", conversation: SilentConversation())
        XCTAssertEqual(b.accessToken, "at-B")
        let missing = await code { _ = try await vault.release(account: "zzz", conversation: SilentConversation()) }
        XCTAssertEqual(missing, .noSession)
    }

    func testExpiredAccessTokenWithoutRefreshIsSessionExpired() async throws {
        let vault = try fx.vault([pin])
        var r = importRequest(account: "a", token: "A")
        r.accessExpiresAt = 1_000
        _ = try await vault.importSession(r, conversation: ScriptedClient())
        let c = await code { _ = try await vault.release(account: "a", conversation: SilentConversation()) }
        XCTAssertEqual(c, .sessionExpired)
    }

    func testLogoutWorksWhileLockedAndIsImmediate() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.importSession(importRequest(account: "a", token: "A"), conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        await vault.lock(reason: "test")
        let n = try await vault.logout(account: nil, all: true, requester: .inProcess)
        XCTAssertEqual(n.removed, 1)
        XCTAssertEqual(try fx.store.sessions().count, 0)
        let c = await code { _ = try await vault.release(account: nil, conversation: ScriptedClient(secrets: ["482915"])) }
        XCTAssertEqual(c, .noSession)
    }

    func testConcurrentRequestsShareOneUnlock() async throws {
        let fake = FakePresenceFactor()
        let vault = try fx.vault([fake])
        _ = try await vault.importSession(importRequest(account: "a", token: "A"), conversation: ScriptedClient())
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        await vault.lock(reason: "test")
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<10 {
                group.addTask { try await vault.release(account: nil, conversation: ScriptedClient()).accessToken }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        XCTAssertEqual(tokens, Array(repeating: "at-A", count: 10))
        XCTAssertEqual(fake.verifies, 1, "one prompt, not ten")
    }

    func testIdleLock() async throws {
        let fake = FakePresenceFactor()
        let clock = TestClock()
        let vault = try fx.vault([fake], config: VaultConfig(idleTimeout: 1), clock: clock)
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        await vault.lockIfIdle()
        var locked = vault.isLocked
        XCTAssertFalse(locked, "not idle yet")
        clock.advance(1.1)
        await vault.lockIfIdle()
        locked = vault.isLocked
        XCTAssertTrue(locked)
    }

    func testAuditChainRecordsAndDetectsEdits() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        await vault.lock(reason: "test")
        _ = await code { try await vault.unlock(factor: nil, conversation: ScriptedClient(secrets: ["000001", nil])) }
        try await vault.unlock(factor: nil, conversation: ScriptedClient(secrets: ["482915"]))
        let entries = try vault.audit.entries()
        XCTAssertEqual(entries.map(\.event), ["enroll", "lock", "unlock", "unlock", "unlock"])
        XCTAssertEqual(entries.map(\.outcome), ["ok", "ok", "failed", "cancelled", "ok"])
        XCTAssertNil(try vault.audit.verify())
        for e in entries { XCTAssertFalse(e.detail.contains("482915") || e.detail.contains("000001")) }

        // Behind the vault's back, as someone with the file would: drop the
        // append-only trigger and turn the failed unlock into a success.
        let failed = entries[2]
        let raw = try SQLiteConnection(path: fx.dir + "/vault.sqlite")
        try raw.execute("DROP TRIGGER audit_no_update")
        try raw.run("UPDATE audit SET outcome = 'ok' WHERE seq = ?", [failed.seq])
        let changed = raw.changes
        try raw.close()
        XCTAssertEqual(changed, 1, "the edit must have changed a row")
        let edited = try vault.audit.entries()
        XCTAssertEqual(edited[2].outcome, "ok", "the edit must be visible to the vault")
        XCTAssertNotEqual(edited[2], failed)
        XCTAssertEqual(try vault.audit.verify(), failed.seq, "verify must name the edited entry")
    }
}

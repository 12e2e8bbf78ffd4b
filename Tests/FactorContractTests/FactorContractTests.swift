import Foundation
import PINFactor
import Testing
@testable import VaultCore
import VaultFactor
import VaultTestSupport
import VaultStore

/// The factor contract: the same assertions, through a real `Vault` (real
/// store in a temp dir, random device key), for every harness in
/// `Harnesses.all` — the PIN, a fake presence factor, and the external Python
/// plugin as a secret and as a presence factor.
@Suite("Factor contract")
struct FactorContract {
    /// One harness with a fresh vault around it; the vault holds one imported session.
    struct Setup {
        let fixture: VaultFixture
        let harness: any FactorHarness
        let vault: Vault
        var id: FactorID { harness.factor.descriptor.id }
        var kind: ContributionKind { harness.factor.descriptor.contribution }

        /// `backupPIN`: also register a PIN (for the "skipped by the policy" case).
        init(_ kind: HarnessKind, backupPIN: Bool = false) async throws {
            let fixture = try VaultFixture()
            do {
                harness = try await kind.type.make(in: fixture.dir)
                var factors: [any UnlockFactor] = [harness.factor]
                if backupPIN { factors.append(PINFactor(throttle: contractThrottle)) }
                vault = try fixture.vault(factors)
                _ = try await vault.importSession(importRequest(), conversation: scripted())
            } catch {
                fixture.cleanup()   // the test's `defer` never runs when setting up fails
                throw error
            }
            self.fixture = fixture
        }

        func enroll() async throws {
            let status = try await vault.enroll(id, conversation: harness.enrollInput())
            #expect(status.state == .enabled)
        }

        func slotIDs() throws -> [String] { try fixture.store.keyslots().map(\.id).sorted() }
        /// A secret factor's wrap replaces the device slot; a presence factor adds
        /// a record beside it (docs/key-hierarchy.md).
        var enrolledSlots: [String] { kind == .lowEntropySecret ? [id.rawValue] : ["device", id.rawValue].sorted() }
        func failures() throws -> Int { try fixture.store.failureCounter(factor: id.rawValue).failures }
        func state() async -> FactorStatus.State? { await vault.factorStatuses().first { $0.factor == id }?.state }
        func cleanup() { fixture.cleanup() }
    }

    @Test("enroll writes the slot and the factor is enabled", arguments: Harnesses.all)
    func enrollWritesSlot(_ kind: HarnessKind) async throws {
        let s = try await Setup(kind)
        defer { s.cleanup() }
        #expect(try s.slotIDs() == ["device"], "a fresh vault has only the device slot")
        let status = try await s.vault.enroll(s.id, conversation: s.harness.enrollInput())
        #expect(status.state == .enabled)
        #expect(status.label.en.hasSuffix("enabled"))
        #expect(try s.slotIDs() == s.enrolledSlots, "a PIN's wrap replaces the device slot; a presence record sits beside it")
        #expect(await s.state() == .enabled)
        let events = try s.vault.audit.entries().filter { $0.event == "enroll" }
        #expect(events.last?.outcome == "ok")
    }

    @Test("correct input unlocks and releases the session, also after a restart", arguments: Harnesses.all)
    func correctInputUnlocks(_ kind: HarnessKind) async throws {
        let s = try await Setup(kind)
        defer { s.cleanup() }
        try await s.enroll()
        await s.vault.lock(reason: "test")
        #expect(s.vault.isLocked)

        let client = s.harness.correctInput()
        let session = try await s.vault.release(account: "kari", conversation: client)
        #expect(session.accessToken == "at-T1")
        #expect(!(s.vault.isLocked))
        #expect(client.prompts.count >= 1 || s.kind == .presenceOnly, "a secret factor asks for its secret")

        let restarted = try s.fixture.reopened([s.harness.factor])
        #expect(restarted.isLocked, "with a factor enrolled, a restarted vault starts locked")
        let again = try await restarted.release(account: "kari", conversation: s.harness.correctInput())
        #expect(again.accessToken == "at-T1")
    }

    @Test("wrong input fails, stays locked, and keeps the slot", arguments: Harnesses.all)
    func wrongInputFails(_ kind: HarnessKind) async throws {
        let s = try await Setup(kind)
        defer { s.cleanup() }
        try await s.enroll()
        await s.vault.lock(reason: "test")

        let f = await failure { try await s.vault.unlock(factor: nil, conversation: s.harness.wrongInput()) }
        #expect(s.vault.isLocked)
        #expect(try s.slotIDs() == s.enrolledSlots, "a wrong answer never destroys the slot")
        switch s.kind {
        case .lowEntropySecret:
            // Judged by the vault: every wrong guess is counted before it is checked, then the lockout.
            #expect(f?.code == .lockedOut || f?.code == .noMatch, "got \(String(describing: f))")
            #expect(try s.failures() == contractThrottle.freeAttempts, "each wrong guess is counted")
            #expect(await s.state() == .lockedOut)
            // After the wait, the right secret opens and resets the counter.
            var counter = try s.fixture.store.failureCounter(factor: s.id.rawValue)
            counter.lockedUntil = 0
            try s.fixture.store.setFailureCounter(counter)
            try await s.vault.unlock(factor: nil, conversation: s.harness.correctInput())
            #expect(try s.failures() == 0)
        case .presenceOnly:
            // Judged by the factor: no match (or too many), and the record still
            // works for the right person. Too many failed scans is the fallback:
            // then the factor does not reopen this run until the PIN or a login
            // (here: none, so a restart, whose device slot refills the soft box).
            #expect(f?.code == .noMatch, "got \(String(describing: f))")
            if f?.message.en.contains("several times") != true {
                try await s.vault.unlock(factor: nil, conversation: s.harness.correctInput())
            } else {
                let after = await failure { try await s.vault.unlock(factor: nil, conversation: s.harness.correctInput()) }
                #expect(after?.code == .locked, "after the fallback the soft unlock is gone: \(String(describing: after))")
                let restarted = try s.fixture.reopened([s.harness.factor])
                try await restarted.unlock(factor: nil, conversation: s.harness.correctInput())
                return
            }
        }
        #expect(!(s.vault.isLocked))
    }

    @Test("cancel ends with cancelled, still locked, nothing counted", arguments: Harnesses.all)
    func cancelIsCancelled(_ kind: HarnessKind) async throws {
        let s = try await Setup(kind)
        defer { s.cleanup() }
        try await s.enroll()
        await s.vault.lock(reason: "test")

        let client = s.harness.cancellingInput()
        let f = await failure { try await s.vault.unlock(factor: nil, conversation: client) }
        #expect(f?.code == .cancelled, "got \(String(describing: f))")
        #expect(s.vault.isLocked)
        if kind.type.cancelsThroughConversation { #expect(client.prompts.count == 1, "asked once, then the person cancelled") }
        #expect(try s.slotIDs() == s.enrolledSlots)
        if s.kind == .lowEntropySecret { #expect(try s.failures() == 0, "a cancel is not a guess") }
        // And the factor still works afterwards.
        try await s.vault.unlock(factor: nil, conversation: s.harness.correctInput())
    }

    @Test("a client that can't answer gets locked with the factor listed, and nothing runs", arguments: Harnesses.all)
    func nonInteractiveIsLocked(_ kind: HarnessKind) async throws {
        let s = try await Setup(kind)
        defer { s.cleanup() }
        try await s.enroll()
        await s.vault.lock(reason: "test")
        let f = await failure { _ = try await s.vault.release(account: nil, conversation: SilentConversation()) }
        #expect(f?.code == .locked)
        #expect(f?.extra["factors"] == JSON.array([.string(s.id.rawValue)]))
    }

    @Test("disable destroys the slot and the device slot comes back", arguments: Harnesses.all)
    func disableDestroysSlot(_ kind: HarnessKind) async throws {
        let s = try await Setup(kind)
        defer { s.cleanup() }
        try await s.enroll()
        // A secret factor is asked for its current secret first (issue 21).
        let person = s.kind == .lowEntropySecret ? s.harness.correctInput() : scripted()
        let status = try await s.vault.disable(s.id, confirmed: true, conversation: person)
        #expect(status.state == .notEnrolled)
        #expect(try s.slotIDs() == ["device"])
        let restarted = try s.fixture.reopened([s.harness.factor])
        #expect(!(restarted.isLocked), "the sessions stay reachable through the device slot")
    }

    @Test("unavailable: factor_unavailable without any prompt", arguments: Harnesses.unavailable)
    func unavailableFailsWithoutPrompting(_ kind: HarnessKind) async throws {
        let s = try await Setup(kind)
        defer { s.cleanup() }
        try await s.enroll()
        await s.vault.lock(reason: "test")
        try s.harness.setAvailable(false)

        let client = s.harness.correctInput()
        let f = await failure { try await s.vault.unlock(factor: nil, conversation: client) }
        #expect(f?.code == .factorUnavailable, "got \(String(describing: f))")
        #expect(client.prompts.count == 0, "an unavailable factor never prompts")
        #expect(f.map { !$0.message.en.isEmpty && !$0.message.nb.isEmpty } == true, "a sentence in both languages")
        #expect(await s.state() == .unavailable)
        #expect(try s.slotIDs() == s.enrolledSlots, "unavailable is not a reason to drop the slot")

        let enrolling = s.harness.enrollInput()
        let e = await failure { _ = try await s.vault.enroll(s.id, conversation: enrolling) }
        #expect(e?.code == .factorUnavailable)
        #expect(enrolling.prompts.count == 0)

        try s.harness.setAvailable(true)
        try await s.vault.unlock(factor: nil, conversation: s.harness.correctInput())
    }

    @Test("unavailable: skipped by the policy when another factor is enrolled", arguments: Harnesses.unavailable)
    func unavailableIsSkipped(_ kind: HarnessKind) async throws {
        let s = try await Setup(kind, backupPIN: true)
        defer { s.cleanup() }
        try await s.enroll()
        _ = try await s.vault.enroll(.pin, conversation: scripted([.secret(PINHarness.pin), .secret(PINHarness.pin)]))
        await s.vault.lock(reason: "test")
        try s.harness.setAvailable(false)

        let client = scripted([.secret(PINHarness.pin)])
        try await s.vault.unlock(factor: nil, conversation: client)
        #expect(client.prompts == ["Enter your PIN:"], "only the PIN was asked: \(client.prompts)")
        #expect(!(s.vault.isLocked))
    }

    @Test("enrollment change: enrollment_changed and the slot is gone from the store", arguments: Harnesses.withEnrollmentState)
    func enrollmentChangeRemovesSlot(_ kind: HarnessKind) async throws {
        let s = try await Setup(kind)
        defer { s.cleanup() }
        try await s.enroll()
        await s.vault.lock(reason: "test")
        try s.harness.changeEnrollment()

        let f = await failure { try await s.vault.unlock(factor: nil, conversation: s.harness.correctInput()) }
        #expect(f?.code == .enrollmentChanged, "got \(String(describing: f))")
        #expect(s.vault.isLocked)
        #expect(try s.slotIDs() == ["device"], "the stale record is deleted; the vault key's own slot stays")
        #expect(await s.state() == .notEnrolled)
        #expect(try s.vault.audit.entries().contains { $0.event == "enrollment_changed" && $0.factor == s.id.rawValue })
    }
}

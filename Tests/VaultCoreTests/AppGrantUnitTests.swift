import Foundation
import Locking
import SodiumKit
import VaultFactor
import VaultProtocol
import XCTest
@testable import VaultCore
@testable import VaultStore
import VaultTestSupport

/// The grant rule in the broker, with a conversation that answers the grant
/// question from a script (the real dialog is tested with pinentry in
/// Tests/python/test_app_grants.py).
final class AppGrantUnitTests: XCTestCase {
    /// An app that answers grant questions from `answers` (nil: no dialog available).
    final class App: ClientConversation, Sendable {
        let language: Language = .en
        var isInteractive: Bool { true }
        let requester: Requester
        let answers: Locked<[GrantAnswer?]>
        let asked = Locked<[GrantQuestion]>([])

        init(_ name: String, kind: AppIdentity.Kind = .flatpak, answers: [GrantAnswer?] = [], executable: String? = nil) {
            requester = Requester(pid: 4242, uid: 0, executable: executable, app: AppIdentity(kind: kind, name: name))
            self.answers = Locked(answers)
        }
        func show(_ message: LocalizedText) async {}
        func askSecret(_ prompt: LocalizedText) async throws(FactorError) -> SecureBytes { throw .notInteractive }
        func confirm(_ prompt: LocalizedText) async throws(FactorError) -> Bool { throw .notInteractive }
        func askGrant(_ question: GrantQuestion) async throws(FactorError) -> GrantAnswer {
            asked.withLock { $0.append(question) }
            let next = answers.withLock { $0.isEmpty ? nil : $0.removeFirst() }
            guard let next else { throw .notInteractive }
            return next
        }
    }

    func code(_ body: () async throws -> Void) async -> ErrorCode? {
        do {
            try await body()
            return nil
        } catch {
            return (error as? VaultFailure)?.code
        }
    }

    /// A vault on `clock` where Aktivitetslogg imported `accounts` (tokens T1, T2, …): it is their owner.
    func ownersVault(_ fx: VaultFixture, _ clock: TestClock, accounts: [String]) async throws -> (Vault, App) {
        let vault = try fx.vault([], clock: clock)
        let owner = App("org.example.Aktivitetslogg")
        for (i, account) in accounts.enumerated() {
            _ = try await vault.importSession(importRequest(account: account, token: "T\(i + 1)"), conversation: owner)
        }
        return (vault, owner)
    }

    func testTheImporterIsGrantedOthersAreAskedAndOnlyAllowIsRemembered() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let clock = TestClock()
        let (vault, owner) = try await ownersVault(fx, clock, accounts: ["kari"])
        _ = try await vault.release(account: "kari", conversation: owner)
        XCTAssertTrue(owner.asked.withLock { $0 }.isEmpty)

        let other = App("org.example.Timeliste", answers: [.deny, .once, nil, .allow])
        let deny = await code { _ = try await vault.release(account: "kari", conversation: other) }
        XCTAssertEqual(deny, .appNotAllowed)
        clock.advance(GrantCheck.askAgainAfter)  // asked again only after a while (testAnAppSaidNoToIsNotAskedAgainAtOnce)
        _ = try await vault.release(account: "kari", conversation: other)          // only this time
        let again = await code { _ = try await vault.release(account: "kari", conversation: other) }
        XCTAssertEqual(again, .appNotAllowed, "Only this time is not remembered; no dialog → refused")
        _ = try await vault.release(account: "kari", conversation: other)          // allow
        _ = try await vault.release(account: "kari", conversation: other)          // remembered: not asked
        let questions = other.asked.withLock { $0 }
        XCTAssertEqual(questions.count, 4)
        XCTAssertEqual(questions.first?.allowed.map(\.shortName), ["org.example.Aktivitetslogg"])
        XCTAssertEqual(questions.first?.provider, "generic", "an imported session without a provider id")

        // Sealed in the store: a restart keeps them.
        let reopened = try fx.reopened([])
        let kept = await reopened.appGrants().map { "\($0.app.key) \($0.account)" }
        XCTAssertEqual(kept, ["flatpak:org.example.Aktivitetslogg kari", "flatpak:org.example.Timeliste kari"])
        // Revoked: asked again.
        // Another sandboxed app cannot take it back; vaultctl (unsandboxed) can.
        let notYours = await code { _ = try await reopened.revokeApp("org.example.Timeliste", requester: owner.requester) }
        XCTAssertEqual(notYours, .badRequest)
        let vaultctl = Requester(pid: 7, uid: 0, app: AppIdentity(kind: .executable, name: "/usr/bin/vaultctl"))
        let removed = try await reopened.revokeApp("org.example.Timeliste", requester: vaultctl)
        XCTAssertEqual(removed.map(\.account), ["kari"])
        let asked = App("org.example.Timeliste")
        let refused = await code { _ = try await reopened.release(account: "kari", conversation: asked) }
        XCTAssertEqual(refused, .appNotAllowed)
        XCTAssertEqual(asked.asked.withLock { $0.count }, 1)
        let outcomes = try reopened.audit.entries().filter { $0.event == "grant" }.map(\.outcome)
        XCTAssertEqual(outcomes, ["allow", "deny", "once", "no_dialog", "allow", "revoked", "no_dialog"])
    }

    /// An app that asks in a loop after the person said no is refused without
    /// a dialog until a while has passed: persistence must not wear the person
    /// down into choosing Allow. Only that app, about that account.
    func testAnAppSaidNoToIsNotAskedAgainAtOnce() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let clock = TestClock()
        let (vault, _) = try await ownersVault(fx, clock, accounts: ["kari", "ola"])
        let pushy = App("org.example.Pushy", answers: [.deny, .deny, .allow])
        for _ in 0..<50 {
            let refused = await code { _ = try await vault.release(account: "kari", conversation: pushy) }
            XCTAssertEqual(refused, .appNotAllowed)
        }
        XCTAssertEqual(pushy.asked.withLock { $0.count }, 1, "asked once, then refused without a dialog")
        let outcomes = try vault.audit.entries().filter { $0.event == "grant" }.map(\.outcome)
        XCTAssertEqual(outcomes.filter { $0 == "asked_recently" }.count, 1, "the refusals in a loop are counted, not each written: \(outcomes)")
        do {
            _ = try await vault.release(account: "kari", conversation: pushy)
        } catch {
            XCTAssertEqual(error.message, Messages.appDeniedRecently("org.example.Pushy"))
        }
        // Another account is another question; another app is asked as usual.
        _ = await code { _ = try await vault.release(account: "ola", conversation: pushy) }
        XCTAssertEqual(pushy.asked.withLock { $0.count }, 2)
        let other = App("org.example.Timeliste", answers: [.once])
        _ = try await vault.release(account: "kari", conversation: other)

        clock.advance(GrantCheck.askAgainAfter - 1)
        _ = await code { _ = try await vault.release(account: "kari", conversation: pushy) }
        XCTAssertEqual(pushy.asked.withLock { $0.count }, 2, "not yet")
        clock.advance(1)
        let released = try await vault.release(account: "kari", conversation: pushy)
        XCTAssertEqual(released.accessToken, "at-T1", "asked again, and Allow")
    }

    /// `logout` is open to every app, for what it may see. One that sees
    /// nothing (or a vault with no session) and logs out in a loop wrote an
    /// audit entry each time, a durable write; now it writes nothing.
    func testLoggingOutNothingWritesNothing() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let vault = try fx.vault([])
        let stranger = App("org.example.Stranger")
        for _ in 0..<50 {
            let r = try await vault.logout(account: nil, all: true, requester: stranger.requester)
            XCTAssertEqual(r.removed, 0)
        }
        XCTAssertEqual(try vault.audit.entries().filter { $0.event == "logout" }.count, 0, "an empty vault: nothing to write")
        _ = try await vault.importSession(importRequest(account: "kari", token: "T1"), conversation: App("org.example.Owner"))
        for _ in 0..<50 {
            let r = try await vault.logout(account: nil, all: true, requester: stranger.requester)
            XCTAssertEqual(r.removed, 0)
        }
        XCTAssertEqual(try vault.audit.entries().filter { $0.event == "logout" }.count, 0, "none it may see: nothing to write")
        let left = await vault.accounts().map(\.account)
        XCTAssertEqual(left, ["kari"])
        let owned = try await vault.logout(account: nil, all: true, requester: App("org.example.Owner").requester)
        XCTAssertEqual(owned.removed, 1)
        XCTAssertEqual(try vault.audit.entries().filter { $0.event == "logout" }.count, 1)
    }

    /// An account named that has no session is said so by its name (the person
    /// who typed `vaultctl token vipps2` while logged in with Vipps is not told they
    /// are logged in nowhere) — and in the same words when the session is there but
    /// the sandboxed app asking may not see it, so naming accounts finds none out.
    func testAnAccountNamedWithoutASessionIsSaidSoInTheSameWordsWhetherItIsThereOrHidden() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let clock = TestClock()
        let (vault, owner) = try await ownersVault(fx, clock, accounts: ["kari"])
        let stranger = App("org.example.Stranger")
        let missing = await failure { _ = try await vault.release(account: "vipps2", conversation: owner) }
        XCTAssertEqual(missing?.code, .noSession)
        XCTAssertEqual(missing?.message, Messages.noSessionNamed("vipps2"))
        XCTAssertTrue(missing?.message.en.contains("“vipps2”") ?? false)
        let hidden = await failure { _ = try await vault.logout(account: "kari", all: false, requester: stranger.requester) }
        let absent = await failure { _ = try await vault.logout(account: "nobody", all: false, requester: stranger.requester) }
        XCTAssertEqual(hidden?.code, .noSession)
        XCTAssertEqual(hidden?.message, Messages.noSessionNamed("kari"))
        XCTAssertEqual(absent?.message, Messages.noSessionNamed("nobody"))
        let context = await failure { _ = try await vault.setActiveOrganization("oslo", account: "kari", requester: stranger.requester) }
        XCTAssertEqual(context?.message, Messages.noSessionNamed("kari"))
        let unnamed = await failure { _ = try await vault.release(account: nil, conversation: stranger) }
        XCTAssertEqual(unnamed?.message, Messages.standard(.noSession), "none named: not logged in, as before")
        let left = await vault.accounts().map(\.account)
        XCTAssertEqual(left, ["kari"])
    }

    /// Login starts are limited per app as grants name it, not per executable:
    /// two Flatpak apps on one runtime run the same /usr/bin/python3, and one
    /// starting logins in a loop must not keep the other from logging in.
    func testOneAppsLoginLoopDoesNotHoldBackAnotherOnTheSameRuntime() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let bankid = FakeIdentityProvider()
        // Not a Cancel (two of those hold an app back at once: ClosedDialogs): the provider is down.
        bankid.set { $0.loginError = VaultFailure(.providerUnavailable) }
        let vault = try fx.vault([], providers: FakeDirectory(providers: [bankid]))
        let looping = App("org.example.Looping", executable: "/usr/bin/python3")
        let neighbour = App("org.example.Aktivitetslogg", executable: "/usr/bin/python3")
        for _ in 0..<10 {
            let started = await code { _ = try await vault.login(provider: "bankid", conversation: looping) }
            XCTAssertEqual(started, .providerUnavailable, "the provider's flow ran")
        }
        let eleventh = await code { _ = try await vault.login(provider: "bankid", conversation: looping) }
        XCTAssertEqual(eleventh, .rateLimited)
        let other = await code { _ = try await vault.login(provider: "bankid", conversation: neighbour) }
        XCTAssertEqual(other, .providerUnavailable, "another app on the same executable still logs in")
    }

    /// A process per request is a new key each time: the limiter keeps only
    /// the keys with starts inside its window once it holds a few hundred.
    func testTheLoginLimiterForgetsKeysOutsideItsWindow() {
        var limiter = LoginRateLimiter(limit: 10, window: 60)
        for i in 0..<10_000 {
            XCTAssertNil(limiter.admit("pid:\(i)", now: Double(i)))
        }
        XCTAssertLessThanOrEqual(limiter.keyCount, LoginRateLimiter.keysKept + 1)
        XCTAssertNil(limiter.admit("pid:9999", now: 10_000), "a second start of a kept key is counted, not refused")
    }

    /// A sandboxed app cannot grow the person's store (and audit log) without
    /// end through vaultd: at most 20 accounts, at most 10 imports a minute.
    /// Replacing its own account stays possible; an unsandboxed one is not limited.
    func testASandboxedAppImportsAtMostTwentyAccountsTenAMinute() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let clock = TestClock()
        let vault = try fx.vault([], clock: clock)
        let hoarder = App("org.example.Hoarder")
        func importing(_ account: String) async -> ErrorCode? {
            await code { _ = try await vault.importSession(importRequest(account: account, token: account), conversation: hoarder) }
        }
        for i in 0..<ImportCheck.confinedWritesPerMinute {
            let refused = await importing("acct-\(i)")
            XCTAssertNil(refused)
        }
        let eleventh = await importing("acct-10")
        XCTAssertEqual(eleventh, .rateLimited, "ten imports a minute")
        do {
            _ = try await vault.importSession(importRequest(account: "acct-10", token: "x"), conversation: hoarder)
        } catch {
            XCTAssertNotNil(error.extra["retry_after"]?.intValue)
        }
        for i in 10..<ImportCheck.maxAccountsPerSandboxedApp {
            if i % ImportCheck.confinedWritesPerMinute == 0 { clock.advance(60) }
            let refused = await importing("acct-\(i)")
            XCTAssertNil(refused)
        }
        clock.advance(60)
        let tooMany = await importing("one-more")
        XCTAssertEqual(tooMany, .appNotAllowed, "twenty accounts at most")
        do {
            _ = try await vault.importSession(importRequest(account: "one-more", token: "x"), conversation: hoarder)
        } catch {
            XCTAssertEqual(error.message, Messages.tooManyAccounts("org.example.Hoarder", limit: ImportCheck.maxAccountsPerSandboxedApp))
        }
        let stored = await vault.accounts().map(\.account)
        XCTAssertFalse(stored.contains("one-more"))
        let own = await importing("acct-0")
        XCTAssertNil(own, "its own account can be replaced")
        _ = try await vault.logout(account: "acct-1", all: false, requester: hoarder.requester)
        let afterLogout = await importing("one-more")
        XCTAssertNil(afterLogout, "room again after a logout")

        // vaultctl, outside any sandbox, is not limited.
        let vaultctl = App("/usr/bin/vaultctl", kind: .executable)
        for i in 0..<(ImportCheck.confinedWritesPerMinute + 5) {
            _ = try await vault.importSession(importRequest(account: "mine-\(i)", token: "\(i)"), conversation: vaultctl)
        }
        let count = await vault.accounts().count
        XCTAssertEqual(count, ImportCheck.maxAccountsPerSandboxedApp + ImportCheck.confinedWritesPerMinute + 5)
        // Each refusal audited once; the second of each (the same again at once) counted with it.
        let imports = try vault.audit.entries().filter { $0.event == "import" }
        for outcome in ["rate_limited", "too_many_accounts"] {
            XCTAssertEqual(imports.filter { $0.outcome == outcome && !$0.detail.contains("repeated") }.count, 1, outcome)
        }
    }

    func testAGrantRowCopiedToAnotherIdOrEditedGrantsNothing() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let vault = try fx.vault([])
        _ = try await vault.importSession(importRequest(account: "kari", token: "T1"), conversation: App("org.example.A"))
        _ = try await vault.importSession(importRequest(account: "ola", token: "T2"), conversation: App("org.example.B"))
        let rows = try fx.store.grants()
        XCTAssertEqual(rows.count, 2)
        // B's row put under A's id, and A's row with one byte flipped: neither opens.
        var flipped = rows[0]
        flipped.sealed[flipped.sealed.count - 1] ^= 1
        try fx.store.updateGrants(put: [GrantRow(id: rows[0].id, sealed: rows[1].sealed, updatedAt: 0),
                                        GrantRow(id: rows[1].id, sealed: flipped.sealed, updatedAt: 0)], delete: [])
        let left = await (try fx.reopened([])).appGrants()
        XCTAssertTrue(left.isEmpty, "\(left)")
        // And the names are not in the file in the clear.
        let file = try Data(contentsOf: URL(fileURLWithPath: fx.dir + "/vault.sqlite"))
        XCTAssertNil(file.range(of: Data("org.example.A".utf8)))
    }

    func testPerAppOffAndVaultdsOwnCallsAreNotChecked() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let vault = try fx.vault([], config: VaultConfig(idleTimeout: 0, perApp: false))
        _ = try await vault.importSession(importRequest(account: "kari", token: "T1"), conversation: App("org.example.A"))
        _ = try await vault.release(account: "kari", conversation: App("org.example.B"))
        let inProcess = try fx.vault([])
        _ = try await inProcess.release(account: "kari", conversation: SilentConversation())
        let grants = await vault.appGrants()
        XCTAssertTrue(grants.isEmpty, "per_app = false writes no grants")
    }

    /// With `per_app = false` no session is one app's: an unconfined app
    /// imports over an account another app imported, with no one to ask
    /// (vault-bench's refresh stampede did this and was refused). A sandboxed
    /// app still may not: it has no grant to show.
    func testPerAppOffLetsAnUnconfinedAppImportOverButNotASandboxedOne() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let vault = try fx.vault([], config: VaultConfig(idleTimeout: 0, perApp: false))
        _ = try await vault.importSession(importRequest(account: "kari", token: "T1"), conversation: App("/usr/bin/a", kind: .executable))
        // `App` answers no confirmation (not interactive for questions): nobody is asked.
        _ = try await vault.importSession(importRequest(account: "kari", token: "T2"), conversation: App("/usr/bin/b", kind: .executable))
        let released = try await vault.release(account: "kari", conversation: App("/usr/bin/c", kind: .executable))
        XCTAssertEqual(released.accessToken, "at-T2")
        let sandboxed = await code {
            _ = try await vault.importSession(importRequest(account: "kari", token: "T3"), conversation: App("org.example.A"))
        }
        XCTAssertEqual(sandboxed, .appNotAllowed)
        let after = try await vault.release(account: "kari", conversation: App("/usr/bin/c", kind: .executable))
        XCTAssertEqual(after.accessToken, "at-T2", "the refused import changed nothing")
        // With per_app on, the same unconfined import over is refused without a dialog.
        let strict = try fx.reopened([])
        let refused = await code {
            _ = try await strict.importSession(importRequest(account: "kari", token: "T4"), conversation: App("/usr/bin/b", kind: .executable))
        }
        XCTAssertEqual(refused, .appNotAllowed)
    }
}

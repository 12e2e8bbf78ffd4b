import XCTest
@testable import VaultCore
import Locking
import PINFactor
import VaultFactor
import VaultProtocol
import VaultStore
import VaultTestSupport

final class LoginTests: XCTestCase {
    var fx: VaultFixture!
    let pin = PINFactor(throttle: ThrottlePolicy(freeAttempts: 1, firstDelay: 30, maxDelay: 120))

    override func setUpWithError() throws { fx = try VaultFixture() }
    override func tearDown() { fx.cleanup() }

    func testFirstLoginStoresTheSessionAndCreatesALoginSlot() async throws {
        let bankid = FakeIdentityProvider()
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid]))
        let s = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        XCTAssertEqual(s.accessToken, "AT-bankid-1")
        XCTAssertEqual(s.meta.claims["org"], "Mentorhuset")
        XCTAssertEqual(s.meta.claims["roles"], ["peer_mentor"])
        // A released session has no refresh token to give (the type holds none);
        // what reaches the socket is checked in RequestHandlerTests.
        XCTAssertEqual(Set(try fx.store.keyslots().map(\.id)), ["device", "login:bankid"],
                       "no local factor yet: the device slot stays, so the app resumes with no prompt")
        let again = try await vault.release(account: nil, conversation: SilentConversation())
        XCTAssertEqual(again.accessToken, "AT-bankid-1")
    }

    /// `login` with no provider named: vaultd asks which (one option each and
    /// Cancel) and logs in with the one chosen; Cancel is `cancelled`, and a
    /// client that cannot be asked is told to name one.
    func testALoginWithNoProviderNamedAsksWhichOne() async throws {
        let vipps = FakeIdentityProvider(id: "vipps", name: "Vipps")
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [FakeIdentityProvider(), vipps]))
        let client = ScriptedClient(choices: ["vipps"])
        let s = try await vault.login(provider: nil, conversation: client)
        XCTAssertEqual(s.meta.provider, "vipps")
        XCTAssertEqual(client.offeredChoices, [["bankid", "vipps", "cancel"]])
        let cancelled = await failure { _ = try await vault.login(provider: nil, conversation: ScriptedClient(choices: ["cancel"])) }
        XCTAssertEqual(cancelled?.code, .cancelled)
        let silent = await failure { _ = try await vault.login(provider: nil, conversation: ScriptedClient(interactive: false)) }
        XCTAssertEqual(silent?.code, .badRequest)
        XCTAssertTrue(silent?.message.en.contains("Say which provider") == true, "\(String(describing: silent))")
        // Nothing to choose from: said, with whom to ask, in both languages; nobody is asked.
        let none = try fx.vault([pin])
        let asked = ScriptedClient(choices: ["bankid"])
        let empty = await failure { _ = try await none.login(provider: nil, conversation: asked) }
        XCTAssertEqual(empty?.code, .badRequest)
        XCTAssertEqual(empty?.message, Messages.noLoginProvider)
        XCTAssertTrue(empty?.message.en.contains("Ask whoever set up this computer") == true, "\(String(describing: empty))")
        XCTAssertTrue(empty?.message.nb.contains("Be den som satte opp maskinen") == true, "\(String(describing: empty))")
        XCTAssertEqual(asked.offeredChoices, [])
    }

    /// A member of several organizations with none chosen is asked which, once,
    /// after the login: the app's session carries the one chosen, and the next
    /// login asks nothing. Cancel leaves none active (the session still comes,
    /// with `orgs`).
    func testAMemberOfSeveralOrganizationsIsAskedOnceWhichOne() async throws {
        let members = TwoOrganizations()
        let bankid = FakeIdentityProvider()
        let vault = try Vault(store: fx.store, deviceKey: fx.deviceKey, factors: [pin], config: VaultConfig(idleTimeout: 0),
                              logger: VaultFixture.logger, providers: FakeDirectory(providers: [bankid]), members: members)
        let cancelling = ScriptedClient(choices: ["cancel"])
        let none = try await vault.login(provider: "bankid", conversation: cancelling)
        XCTAssertEqual(cancelling.offeredChoices, [["oslo", "tromso", "cancel"]])
        XCTAssertNil(none.meta.claims["org_name"], "\(none.meta.claims)")
        XCTAssertEqual(none.meta.claims["roles"], [], "no organization active, so no roles")
        XCTAssertEqual(none.meta.claims["orgs"]?.arrayValue?.count, 2)
        XCTAssertNil(members.active.withLock { $0 }, "Cancel is no organization: the registry is told nothing")

        let choosing = ScriptedClient(choices: ["tromso"])
        let chosen = try await vault.login(provider: "bankid", conversation: choosing)
        XCTAssertEqual(choosing.choicePrompts, [Messages.chooseOrganization.en])
        XCTAssertEqual(chosen.meta.claims["org"], "tromso")
        XCTAssertEqual(chosen.meta.claims["roles"], ["coordinator"])
        let released = try await vault.release(account: nil, conversation: SilentConversation())
        XCTAssertEqual(released.meta.claims["org"], "tromso", "the stored session carries it")

        let again = ScriptedClient(choices: ["oslo"])
        let next = try await vault.login(provider: "bankid", conversation: again)
        XCTAssertEqual(again.offeredChoices, [], "asked once: the choice is remembered")
        XCTAssertEqual(next.meta.claims["org"], "tromso")
    }

    /// Choosing the organization already in use writes nothing, and a
    /// sandboxed app switching back and forth is slowed down: each switch is
    /// a commit of the session and an audit entry.
    func testTheOrganizationInUseWritesNothingAndASandboxedAppIsSlowedDown() async throws {
        let members = TwoOrganizations()
        let clock = TestClock()
        let vault = try Vault(store: fx.store, deviceKey: fx.deviceKey, factors: [pin], config: VaultConfig(idleTimeout: 0),
                              logger: VaultFixture.logger, providers: FakeDirectory(providers: [FakeIdentityProvider()]),
                              members: members, clock: clock.reading)
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient(choices: ["tromso"]))
        let app = Requester(pid: 77, uid: 0, app: AppIdentity(kind: .flatpak, name: "org.example.Switcher"))
        _ = try await vault.allowApp("flatpak:org.example.Switcher", account: "bankid", requester: .inProcess)
        func contexts() throws -> Int { try vault.audit.entries().filter { $0.event == "context" && $0.outcome == "ok" }.count }
        let before = try contexts()
        for _ in 0..<20 { _ = try await vault.setActiveOrganization("tromso", account: "bankid", requester: app) }
        XCTAssertEqual(try contexts(), before, "the one in use: nothing written")

        var refused: VaultFailure?
        for i in 0..<(ImportCheck.confinedWritesPerMinute + 1) {
            do {
                _ = try await vault.setActiveOrganization(i % 2 == 0 ? "oslo" : "tromso", account: "bankid", requester: app)
            } catch {
                refused = error
            }
        }
        XCTAssertEqual(refused?.code, .rateLimited)
        XCTAssertEqual(try contexts(), before + ImportCheck.confinedWritesPerMinute)
        clock.advance(60)
        _ = try await vault.setActiveOrganization("oslo", account: "bankid", requester: app)
        // vaultctl (unsandboxed) is not slowed down.
        let vaultctl = Requester(pid: 78, uid: 0, app: AppIdentity(kind: .executable, name: "/usr/bin/vaultctl"))
        for i in 0..<(ImportCheck.confinedWritesPerMinute + 2) {
            _ = try await vault.setActiveOrganization(i % 2 == 0 ? "tromso" : "oslo", account: "bankid", requester: vaultctl)
        }
    }

    /// A login cancelled on the way (the browser's wait, or in the browser)
    /// says so in the seeds' words and offers the choice again (seed 003);
    /// the next choice logs in, and Cancel there ends it as `cancelled`.
    func testACancelledLoginSaysSoAndOffersTheChoiceAgain() async throws {
        let bankid = FakeIdentityProvider()
        let vipps = FakeIdentityProvider(id: "vipps", name: "Vipps")
        bankid.set { $0.loginError = VaultFailure(.cancelled, message: Messages.loginCancelled(provider: "BankID")) }
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid, vipps]))
        let client = ScriptedClient(choices: ["bankid", "vipps"])
        let s = try await vault.login(provider: nil, conversation: client)
        XCTAssertEqual(s.meta.provider, "vipps")
        XCTAssertEqual(client.offeredChoices, [["bankid", "vipps", "cancel"], ["bankid", "vipps", "cancel"]])
        XCTAssertEqual(client.choicePrompts.last, "BankID login was cancelled", "\(client.choicePrompts)")
        let gaveUp = ScriptedClient(choices: ["bankid", "cancel"])
        let cancelled = await failure { _ = try await vault.login(provider: nil, conversation: gaveUp) }
        XCTAssertEqual(cancelled?.code, .cancelled)
        XCTAssertEqual(gaveUp.offeredChoices.count, 2)
        // Another failure is not a cancel: it ends the login as it was.
        bankid.set { $0.loginError = VaultFailure(.providerUnavailable) }
        let unavailable = ScriptedClient(choices: ["bankid", "vipps"])
        let down = await failure { _ = try await vault.login(provider: nil, conversation: unavailable) }
        XCTAssertEqual(down?.code, .providerUnavailable)
        XCTAssertEqual(unavailable.offeredChoices.count, 1)
    }

    /// Prompt fatigue through the login: a sandboxed app that asks for a login
    /// again the moment the person closes the choice (until a tired person
    /// logs in with BankID to make it stop, giving the app a session) opens no
    /// third login for two minutes; its unlock and `unlock bankid` are held
    /// back with it (one count: switching gains it nothing); the person's own
    /// tool is asked as always. Without ClosedDialogs: ten choices.
    func testAnAppThatAsksForALoginAgainAndAgainIsHeldBack() async throws {
        let clock = TestClock()
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [FakeIdentityProvider()]), clock: clock)
        let nabo = Requester(pid: 4242, uid: 0, app: AppIdentity(kind: .flatpak, name: "org.example.Nabo"))
        let pushy = ScriptedClient(requester: nabo)   // no choice scripted: Cancel
        var codes: [ErrorCode?] = []
        for _ in 0..<10 {
            codes.append(await failure { _ = try await vault.login(provider: nil, conversation: pushy) }?.code)
        }
        XCTAssertEqual(pushy.offeredChoices.count, 2, "two choices, then none")
        XCTAssertEqual(codes, [.cancelled, .cancelled] + Array(repeating: .rateLimited, count: 8))
        let held = await failure { _ = try await vault.login(provider: "bankid", conversation: pushy) }
        XCTAssertEqual(held?.code, .rateLimited)
        XCTAssertEqual(held?.message, Messages.loginClosedRecently("org.example.Nabo"))
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        await vault.lock(reason: "test")
        let viaUnlock = await failure { try await vault.unlock(factor: FactorID(rawValue: "bankid"), conversation: pushy) }
        XCTAssertEqual(viaUnlock?.code, .rateLimited, "unlock bankid is a login too")
        let unlock = await failure { try await vault.unlock(factor: nil, conversation: pushy) }
        XCTAssertEqual(unlock?.code, .rateLimited, "and the unlock dialog shares the count")
        XCTAssertEqual(pushy.asked, 0)
        XCTAssertEqual(pushy.offeredChoices.count, 2)
        let logins = try vault.audit.entries().filter { $0.event == "login" && $0.outcome == "closed_recently" }
        XCTAssertEqual(logins.count, 1, "refusals in a loop: one written, the rest counted")

        let person = ScriptedClient(choices: ["bankid"])
        _ = try await vault.login(provider: nil, conversation: person)
        XCTAssertEqual(person.offeredChoices.count, 1, "the person's own tool is asked as always")
        await vault.lock(reason: "test")
        clock.advance(ClosedDialogs.quiet)
        let later = ScriptedClient(choices: ["cancel"], requester: nabo)
        _ = await failure { _ = try await vault.login(provider: nil, conversation: later) }
        XCTAssertEqual(later.offeredChoices.count, 1, "asked again two minutes after the last close")
    }

    /// With a PIN enrolled a login proves who the person is, not a secret: it
    /// gives a working session at once but never the vault key (docs/key-hierarchy.md).
    func testSameIdentityGetsAFreshSessionButNotTheVaultKeyAnotherIsRefused() async throws {
        let bankid = FakeIdentityProvider()
        let dir = FakeDirectory(providers: [bankid])
        let vault = try fx.vault([pin], providers: dir)
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))

        let restarted = try fx.reopened([pin], providers: dir)
        bankid.set { $0.subject = "someone-else" }
        let refused = await failure { _ = try await restarted.login(provider: "bankid", conversation: ScriptedClient()) }
        XCTAssertEqual(refused?.code, .loginFailed)
        XCTAssertTrue(refused?.message.en.contains("someone other than") ?? false)
        let stillLocked = restarted.isLocked
        XCTAssertTrue(stillLocked)

        bankid.set { $0.subject = "subject-kari" }
        let s = try await restarted.login(provider: "bankid", conversation: ScriptedClient())
        let locked = restarted.isLocked
        XCTAssertTrue(locked, "with a PIN, a login never opens the vault key")
        XCTAssertEqual(s.accessToken, "AT-bankid-3", "the fresh login's tokens replace the old ones")
        let again = try await restarted.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(again.accessToken, "AT-bankid-3", "the new session works while the vault stays locked")

        // After a restart the new session waits for the PIN like every other.
        let later = try fx.reopened([pin], providers: dir)
        let waits = await failure { _ = try await later.release(account: "bankid", conversation: SilentConversation()) }
        XCTAssertEqual(waits?.code, .locked)
        let v1 = await later.accounts().first?.waiting
        XCTAssertNotNil(v1, "status says it waits for the PIN")
        try await later.unlock(factor: .pin, conversation: ScriptedClient(secrets: ["482915"]))
        let opened = try await later.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(opened.accessToken, "AT-bankid-3", "the PIN opens the session stored while locked")
        let v2 = await later.accounts().first?.waiting
        XCTAssertNil(v2)
    }

    /// A vault without an owner and without a PIN — its sessions imported, or locked
    /// before any login — is reopened by its first login, which becomes its owner (it
    /// stayed locked until a restart, saying the sessions waited for a PIN there was
    /// none of). Then another identity at the locked vault opens nothing, and is told
    /// that the older sessions wait for an unlock (not for a PIN).
    func testTheFirstLoginReopensAVaultWithoutAnOwnerOrAPIN() async throws {
        let bankid = FakeIdentityProvider(), other = FakeIdentityProvider(id: "idp", name: "Other ID")
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid, other]))
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        await vault.lock(reason: "test")
        try await vault.unlock(factor: "bankid", conversation: ScriptedClient())
        let opened = !vault.isLocked
        XCTAssertTrue(opened, "the first login opened it")
        XCTAssertEqual(Set(try fx.store.keyslots().map(\.id)), ["device", "login:bankid"], "and is its owner now")
        let old = try await vault.release(account: "a", conversation: SilentConversation())
        XCTAssertEqual(old.accessToken, "at-T1")

        await vault.lock(reason: "test")
        bankid.set { $0.subject = "someone-else" }
        let refused = await failure { try await vault.unlock(factor: "bankid", conversation: ScriptedClient()) }
        XCTAssertEqual(refused?.code, .loginFailed)
        let stranger = await failure { try await vault.unlock(factor: "idp", conversation: ScriptedClient()) }
        XCTAssertEqual(stranger?.code, .locked, "a first login of another provider, now that there is an owner, opens nothing")
        XCTAssertEqual(stranger?.message, Messages.loggedInOthersWaitForUnlock, "no PIN is set: not “wait for your PIN”")
        let stillLocked = vault.isLocked
        XCTAssertTrue(stillLocked)
        XCTAssertEqual(Set(try fx.store.keyslots().map(\.id)), ["device", "login:bankid"], "the stranger is not recorded")
    }

    /// `unlock NAME` takes a factor or a login provider (`unlock bankid`): a name that is
    /// neither is told both kinds, and `enroll` only the factors.
    func testAnUnknownWayInNamesTheFactorsAndTheLogins() async throws {
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [FakeIdentityProvider()]))
        let unlock = await failure { try await vault.unlock(factor: "nonsense", conversation: ScriptedClient()) }
        XCTAssertEqual(unlock?.code, .badRequest)
        XCTAssertEqual(unlock?.message.en, "There is no unlock method called “nonsense”. Choose one of: pin, bankid.")
        let enroll = await failure { _ = try await vault.enroll("nonsense", conversation: ScriptedClient()) }
        XCTAssertEqual(enroll?.message.en, "There is no unlock method called “nonsense”. Choose one of: pin.")
    }

    func testLoginWhileLockedGivesANewSessionAndTheOldOnesWaitForThePIN() async throws {
        let bankid = FakeIdentityProvider(), vipps = FakeIdentityProvider(id: "vipps", name: "Vipps", refreshTokens: false)
        let dir = FakeDirectory(providers: [bankid, vipps])
        let vault = try fx.vault([pin], providers: dir)
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        await vault.lock(reason: "test")
        let client = ScriptedClient()
        let s = try await vault.login(provider: "vipps", conversation: client)
        XCTAssertEqual(s.accessToken, "AT-vipps-1", "a working session at once")
        let stillLocked = vault.isLocked
        XCTAssertTrue(stillLocked)
        XCTAssertTrue(client.shown.contains(Messages.loggedInOthersWaitForPIN.en), "the person is told: \(client.shown)")
        XCTAssertFalse(try fx.store.keyslots().contains { $0.id == "login:vipps" },
                       "an identity first seen at a locked vault is not recorded as its owner")
        let accounts = await vault.accounts()
        XCTAssertEqual(accounts.first { $0.account == "bankid" }?.waiting, Messages.sessionWaitsForPIN)
        XCTAssertNil(accounts.first { $0.account == "vipps" }?.waiting)
        let old = await failure { _ = try await vault.release(account: "bankid", conversation: SilentConversation()) }
        XCTAssertEqual(old?.code, .locked, "sessions sealed earlier stay sealed until the PIN")

        try await vault.unlock(factor: .pin, conversation: ScriptedClient(secrets: ["482915"]))
        let both = try await [vault.release(account: "bankid", conversation: SilentConversation()).accessToken,
                              vault.release(account: "vipps", conversation: SilentConversation()).accessToken]
        XCTAssertEqual(both, ["AT-bankid-1", "AT-vipps-1"])
        let v3 = await vault.accounts().allSatisfy { $0.waiting == nil }
        XCTAssertTrue(v3)
    }

    /// The same person through another provider: logins that prove a national
    /// ID share one person slot, so a first login with Vipps lets BankID unlock later.
    func testThePersonNotTheProviderOpensThePersonSlot() async throws {
        let vipps = FakeIdentityProvider(id: "vipps", name: "Vipps", refreshTokens: false, provesNationalID: true)
        let bankid = FakeIdentityProvider(provesNationalID: true)
        vipps.set { $0.nationalID = "15838512329"; $0.subject = "vipps-sub" }
        bankid.set { $0.nationalID = "15838512329"; $0.subject = "bankid-altsub" }
        let dir = FakeDirectory(providers: [bankid, vipps])
        let vault = try fx.vault([pin], providers: dir)
        _ = try await vault.login(provider: "vipps", conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        XCTAssertEqual(Set(try fx.store.keyslots().map(\.id)), ["pin", "login:person"])
        XCTAssertFalse(try fx.store.keyslots().contains { $0.binding.contains("15838512329") }, "never the number in clear")

        await vault.lock(reason: "test")
        let s = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        XCTAssertEqual(s.accessToken, "AT-bankid-1", "BankID proves the same person: a session at once")
        let locked = vault.isLocked
        XCTAssertTrue(locked, "but with a PIN enrolled a login never opens the vault key")

        await vault.lock(reason: "test")
        bankid.set { $0.nationalID = "01929023583" }
        let f = await failure { _ = try await vault.login(provider: "bankid", conversation: ScriptedClient()) }
        XCTAssertEqual(f?.code, .loginFailed, "another person is refused")
        let stillLocked = vault.isLocked
        XCTAssertTrue(stillLocked)
    }

    func testFailedLoginLeavesNothingBehind() async throws {
        let bankid = FakeIdentityProvider()
        bankid.set { $0.loginError = VaultFailure(.tokenInvalid) }
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid]))
        let f = await failure { _ = try await vault.login(provider: "bankid", conversation: ScriptedClient()) }
        XCTAssertEqual(f?.code, .tokenInvalid)
        XCTAssertEqual(try fx.store.sessions().count, 0)
        XCTAssertEqual(try fx.store.keyslots().map(\.id), ["device"])
    }

    func testLoginStartsAreRateLimited() async throws {
        let bankid = FakeIdentityProvider()
        bankid.set { $0.loginError = VaultFailure(.cancelled) }
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid]))
        for _ in 0..<10 {
            let f = await failure { _ = try await vault.login(provider: "bankid", conversation: ScriptedClient()) }
            XCTAssertEqual(f?.code, .cancelled)
        }
        let f = await failure { _ = try await vault.login(provider: "bankid", conversation: ScriptedClient()) }
        XCTAssertEqual(f?.code, .rateLimited)
        XCTAssertGreaterThan(f?.extra["retry_after"]?.intValue ?? 0, 0)
    }

    func testConcurrentReleasesOfAnExpiredTokenRefreshOnce() async throws {
        let bankid = FakeIdentityProvider()
        bankid.set { $0.accessTTL = 30 }  // every token lands inside the refresh window: refresh on next use
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<20 { group.addTask { try await vault.release(account: "bankid", conversation: SilentConversation()).accessToken } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        XCTAssertEqual(bankid.snapshot.refreshCalls, 1, "single flight")
        XCTAssertEqual(tokens, ["AT-bankid-2"])
        XCTAssertEqual(bankid.snapshot.refreshTokensSeen, ["RT-bankid-1"])

        // The rotated refresh token was stored: after a restart the next refresh uses it.
        let restarted = try fx.reopened([pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await restarted.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(bankid.snapshot.refreshTokensSeen, ["RT-bankid-1", "RT-bankid-2"])
    }

    /// Releases as the server does for a client that cannot answer prompts.
    private static func release(_ vault: Vault, _ account: String, minValid: Int64 = 0) async -> Result<ReleasedSession, VaultFailure> {
        do throws(VaultFailure) {
            return .success(try await vault.release(account: account, minValid: minValid, conversation: SilentConversation()))
        } catch {
            return .failure(error)
        }
    }

    /// A session stored by a login while locked (a PIN enrolled) refreshes on
    /// release with its record key: the vault key is not needed.
    func testASessionStoredWhileLockedRefreshesWithItsRecordKey() async throws {
        let bankid = FakeIdentityProvider()
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        await vault.lock(reason: "test")
        bankid.set { $0.accessTTL = 30 }  // inside the refresh window: due on next use
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        let locked = vault.isLocked
        XCTAssertTrue(locked)
        let r = await Self.release(vault, "bankid")
        XCTAssertEqual(try r.get().accessToken, "AT-bankid-2", "refreshed with the record key")
        XCTAssertEqual(bankid.snapshot.refreshTokensSeen, ["RT-bankid-1"])
    }

    func testConcurrentReleasesJoinOneRefresh() async throws {
        let bankid = FakeIdentityProvider()
        bankid.set { $0.accessTTL = 30 }  // inside the refresh window: due on next use
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        // 50 at once: one token call.
        let tokens = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<50 {
                group.addTask { try await Self.release(vault, "bankid").get().accessToken }
            }
            return try await group.reduce(into: [String?]()) { $0.append($1) }
        }
        XCTAssertEqual(bankid.snapshot.refreshCalls, 1, "single flight")
        XCTAssertEqual(Set(tokens), ["AT-bankid-2"], "every request answered with the refreshed token")
        XCTAssertEqual(tokens.count, 50)
        // The rotated token is durable before anyone saw the new access token.
        let restarted = try fx.reopened([pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await restarted.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(bankid.snapshot.refreshTokensSeen, ["RT-bankid-1", "RT-bankid-2"])
        XCTAssertEqual(try fx.store.auditRows().filter { $0.event == "refresh" }.count, 2, "each refresh audited with its write")
    }

    func testJoinersAllHearARejectedRefresh() async throws {
        let bankid = FakeIdentityProvider()
        bankid.set { $0.accessTTL = 0 }
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        bankid.set { $0.refreshError = VaultFailure(.sessionExpired) }
        let outcomes = await withTaskGroup(of: Result<ReleasedSession, VaultFailure>.self) { group in
            for _ in 0..<20 { group.addTask { await Self.release(vault, "bankid") } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        XCTAssertEqual(outcomes.count, 20)
        for outcome in outcomes {
            guard case .failure(let f) = outcome else { return XCTFail("expected session_expired, got \(String(describing: outcome))") }
            XCTAssertEqual(f.code, .sessionExpired)
        }
        XCTAssertEqual(bankid.snapshot.refreshCalls, 1)
        XCTAssertEqual(try fx.store.sessions().count, 0, "the sealed record is removed")
        // Gone now: the next request is told there is no session.
        guard case .failure(let gone) = await Self.release(vault, "bankid") else { return XCTFail("released a removed session") }
        XCTAssertEqual(gone.code, .noSession)
    }

    func testAStillValidTokenIsReleasedWhenTheProviderIsDown() async throws {
        let bankid = FakeIdentityProvider()
        bankid.set { $0.accessTTL = 40 }
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        bankid.set { $0.refreshError = VaultFailure(.providerUnavailable) }
        let got = try await Self.release(vault, "bankid").get()
        XCTAssertEqual(got.accessToken, "AT-bankid-1")
        // A fresh token is released at once; a locked vault says it is locked.
        bankid.set { $0.refreshError = nil; $0.accessTTL = 3600 }
        let refreshed = try await Self.release(vault, "bankid", minValid: 3000).get()
        XCTAssertEqual(refreshed.accessToken, "AT-bankid-3", "min_valid beyond the token's life refreshes it")
        let fresh = try await Self.release(vault, "bankid").get()
        XCTAssertEqual(fresh.accessToken, "AT-bankid-3")
        await vault.lock(reason: "test")
        guard case .failure(let locked) = await Self.release(vault, "bankid") else { return XCTFail("released from a locked vault") }
        XCTAssertEqual(locked.code, .locked)
    }

    func testRejectedRefreshEndsTheSession() async throws {
        let bankid = FakeIdentityProvider()
        bankid.set { $0.accessTTL = 0 }
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        bankid.set { $0.refreshError = VaultFailure(.sessionExpired) }
        let f = await failure { _ = try await vault.release(account: "bankid", conversation: SilentConversation()) }
        XCTAssertEqual(f?.code, .sessionExpired)
        XCTAssertEqual(f?.message.en, "Your session has expired — please log in again")
        XCTAssertEqual(try fx.store.sessions().count, 0, "the sealed record is removed")
    }

    func testProviderDownServesAStillValidToken() async throws {
        let bankid = FakeIdentityProvider()
        bankid.set { $0.accessTTL = 40 }  // valid, but inside the refresh window
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        bankid.set { $0.refreshError = VaultFailure(.providerUnavailable) }
        let s = try await vault.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(s.accessToken, "AT-bankid-1")
    }

    /// A refresh token that ends before its access token: the session lasts
    /// until the access token ends, the end is announced then and not before,
    /// and the spent refresh token is never sent to the provider.
    func testARefreshTokenEndingFirstLeavesTheAccessTokenItsLife() async throws {
        let bankid = FakeIdentityProvider()
        bankid.set { $0.accessTTL = 40; $0.refreshTTL = 0 }   // inside the refresh window, refresh token spent
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        let meta = try XCTUnwrap(vault.table.allEntries().values.first?.meta)
        XCTAssertEqual(SessionEnds.end(of: meta), meta.accessExpiresAt, "the end is the access token's, not the spent refresh token's")
        let got = try await vault.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(got.accessToken, "AT-bankid-1")
        XCTAssertEqual(bankid.snapshot.refreshCalls, 0, "a refresh token past its stated end is not tried")

        // Once the access token has run out too, the session has ended, still without a call.
        bankid.set { $0.accessTTL = 0 }
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        let f = await failure { _ = try await vault.release(account: "bankid", conversation: SilentConversation()) }
        XCTAssertEqual(f?.code, .sessionExpired)
        XCTAssertEqual(bankid.snapshot.refreshCalls, 0)
        XCTAssertEqual(try fx.store.sessions().count, 0)
    }

    func testSessionEndsIsTheLaterExpiryOnceTheRefreshTokensEndIsKnown() {
        func meta(access: Int64?, refresh: Int64?, hasRefresh: Bool) -> SessionMeta {
            SessionMeta(account: "a", provider: "p", issuer: "https://idp.example", clientID: "c", subject: "s", name: "A",
                        claims: [:], accessExpiresAt: access, refreshExpiresAt: refresh, hasRefreshToken: hasRefresh, createdAt: 0)
        }
        XCTAssertEqual(SessionEnds.end(of: meta(access: 1000, refresh: 500, hasRefresh: true)), 1000)
        XCTAssertEqual(SessionEnds.end(of: meta(access: 500, refresh: 1000, hasRefresh: true)), 1000)
        XCTAssertEqual(SessionEnds.end(of: meta(access: nil, refresh: 700, hasRefresh: true)), 700)
        XCTAssertNil(SessionEnds.end(of: meta(access: 500, refresh: nil, hasRefresh: true)), "a refresh token with no stated end")
        XCTAssertEqual(SessionEnds.end(of: meta(access: 500, refresh: 1000, hasRefresh: false)), 500)
    }

    func testVippsSessionEndsWithItsAccessToken() async throws {
        let vipps = FakeIdentityProvider(id: "vipps", name: "Vipps", refreshTokens: false)
        vipps.set { $0.accessTTL = 0 }
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [vipps]))
        _ = try await vault.login(provider: "vipps", conversation: ScriptedClient())
        let f = await failure { _ = try await vault.release(account: "vipps", conversation: SilentConversation()) }
        XCTAssertEqual(f?.code, .sessionExpired)
        XCTAssertEqual(vipps.snapshot.refreshCalls, 0, "no refresh token, no refresh call")
        XCTAssertEqual(try fx.store.sessions().count, 0)
    }

    func testLockedOutPINFallsBackToLoginAndOffersEnrollment() async throws {
        let bankid = FakeIdentityProvider()
        let dir = FakeDirectory(providers: [bankid])
        let vault = try fx.vault([pin], providers: dir)
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        await vault.lock(reason: "test")
        // One wrong PIN locks the PIN out (free attempts = 1); the policy moves on to the login choice.
        let client = ScriptedClient(secrets: ["000001"], choices: ["bankid"])
        let s = try await vault.release(account: "bankid", conversation: client)
        XCTAssertEqual(s.accessToken, "AT-bankid-2")
        XCTAssertEqual(client.offeredChoices, [["bankid", "cancel"]])
        XCTAssertTrue(client.shown.contains { $0.contains("Too many wrong attempts") })
    }

    func testCancelledChoiceStaysLocked() async throws {
        let bankid = FakeIdentityProvider()
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        await vault.lock(reason: "test")
        let f = await failure { _ = try await vault.release(account: "bankid", conversation: ScriptedClient(secrets: [nil], choices: ["cancel"])) }
        XCTAssertEqual(f?.code, .cancelled)
        let locked = vault.isLocked
        XCTAssertTrue(locked)
    }

    func testLogoutRevokesAtTheProviderAndDeletesFirst() async throws {
        let bankid = FakeIdentityProvider()
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        let r = try await vault.logout(account: "bankid", all: false, requester: .inProcess)
        XCTAssertEqual(r.removed, 1)
        XCTAssertEqual(r.revokedAtProvider, 1)
        XCTAssertEqual(bankid.snapshot.revoked, ["RT-bankid-1"])
        let f = await failure { _ = try await vault.release(account: "bankid", conversation: SilentConversation()) }
        XCTAssertEqual(f?.code, .noSession)
    }
}

/// A presence factor that wants to be offered after a login, like the fingerprint.
final class OfferedFactor: UnlockFactor, Sendable {
    let descriptor = FactorDescriptor(id: "offered", displayName: LocalizedText(en: "Touch", nb: "Berøring"), rank: 10,
                                      contribution: .presenceOnly, offerAfterLogin: true,
                                      offerText: LocalizedText(en: "Turn on touch login?", nb: "Slå på berøring?"))
    func probe() async -> FactorPresence { .available }
    func enroll(_ conversation: any FactorConversation) async throws(FactorError) -> FactorProof { FactorProof(enrollmentState: [1]) }
    func verify(_ conversation: any FactorConversation, slot: EnrolledSlot) async throws(FactorError) -> FactorProof {
        FactorProof(enrollmentState: [1])
    }
}

final class EnrollmentOfferTests: XCTestCase {
    func testOfferedAfterFirstLoginAndNotAgainOnceDeclined() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let bankid = FakeIdentityProvider()
        let vault = try fx.vault([OfferedFactor()], providers: FakeDirectory(providers: [bankid]))
        let first = ScriptedClient(confirms: [false])
        _ = try await vault.login(provider: "bankid", conversation: first)
        XCTAssertEqual(first.confirmQuestions, ["Turn on touch login?"], "offered right after the first login")
        let second = ScriptedClient(confirms: [true])
        _ = try await vault.login(provider: "bankid", conversation: second)
        XCTAssertEqual(second.confirmQuestions, [], "declined: no second offer while this vaultd runs")
        XCTAssertFalse(try fx.store.keyslots().contains { $0.id == "offered" })

        // A new vaultd (a restart) remembers the "Not now".
        let restarted = try fx.reopened([OfferedFactor()], providers: FakeDirectory(providers: [bankid]))
        let third = ScriptedClient(confirms: [true])
        _ = try await restarted.login(provider: "bankid", conversation: third)
        XCTAssertEqual(third.confirmQuestions, [], "a \"Not now\" is not forgotten at a restart")

        // Set up on purpose (the settings, `vaultctl enroll`): then turned off
        // on purpose, which is a "no" to the offer as well.
        _ = try await restarted.enroll("offered", conversation: ScriptedClient())
        XCTAssertTrue(try fx.store.keyslots().contains { $0.id == "offered" })
        _ = try await restarted.disable("offered", confirmed: true, conversation: ScriptedClient())
        let fourth = ScriptedClient(confirms: [true])
        _ = try await restarted.login(provider: "bankid", conversation: fourth)
        XCTAssertEqual(fourth.confirmQuestions, [], "turned off on purpose: not offered again")

        // Starting over is a new vault: the offer comes again.
        _ = try await restarted.reset(confirmed: true, conversation: ScriptedClient())
        let fifth = ScriptedClient(confirms: [false])
        _ = try await restarted.login(provider: "bankid", conversation: fifth)
        XCTAssertEqual(fifth.confirmQuestions, ["Turn on touch login?"], "offered again after starting over")
    }

    /// Only the person's "Not now" is remembered: an offer closed, left to
    /// time out or whose app went away is asked again after the next login.
    func testAnOfferNotAnsweredIsAskedAgain() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let bankid = FakeIdentityProvider()
        let vault = try fx.vault([OfferedFactor()], providers: FakeDirectory(providers: [bankid]))
        let closed = ScriptedClient(confirms: [nil])
        _ = try await vault.login(provider: "bankid", conversation: closed)
        XCTAssertEqual(closed.confirmQuestions, ["Turn on touch login?"])
        let declined = await vault.offers.declined
        XCTAssertTrue(declined.isEmpty, "no answer is not a Not now")
        let restarted = try fx.reopened([OfferedFactor()], providers: FakeDirectory(providers: [bankid]))
        let next = ScriptedClient(confirms: [false])
        _ = try await restarted.login(provider: "bankid", conversation: next)
        XCTAssertEqual(next.confirmQuestions, ["Turn on touch login?"], "asked again after the next login")
    }

    /// Setting a factor up clears its "Not now": after an enrollment change
    /// made its slot stale, the offer comes again after the fallback login.
    func testSettingUpClearsTheNotNow() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let bankid = FakeIdentityProvider()
        let vault = try fx.vault([OfferedFactor()], providers: FakeDirectory(providers: [bankid]))
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient(confirms: [false]))
        _ = try await vault.enroll("offered", conversation: ScriptedClient())
        XCTAssertNil(try fx.store.meta(EnrollmentOffers.storeKey).flatMap { $0.isEmpty ? nil : $0 }, "the decline is gone from the store")
        let restarted = try fx.reopened([OfferedFactor()], providers: FakeDirectory(providers: [bankid]))
        _ = try await restarted.disable("offered", confirmed: true, conversation: ScriptedClient())
        _ = try await restarted.enroll("offered", conversation: ScriptedClient())
        let again = try fx.reopened([OfferedFactor()], providers: FakeDirectory(providers: [bankid]))
        let declined = await again.offers.declined
        XCTAssertFalse(declined.contains("offered"), "set up again: welcome to be offered")
    }
}

/// After an enrollment change the way back is BankID/Vipps, asked for with
/// `prompt=login` and the provider's re-enrollment level; a weaker login gives
/// the session but not the fingerprint back (docs/key-hierarchy.md).
final class ReenrollmentTests: XCTestCase {
    var fx: VaultFixture!
    override func setUpWithError() throws { fx = try VaultFixture() }
    override func tearDown() { fx.cleanup() }

    func testReenrollingAfterAChangeNeedsAStrongFreshLogin() async throws {
        let fake = FakePresenceFactor(offerAfterLogin: true)
        let bankid = FakeIdentityProvider()
        let dir = FakeDirectory(providers: [bankid])
        let vault = try fx.vault([fake], providers: dir)
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient(confirms: [true]))
        XCTAssertEqual(bankid.snapshot.optionsSeen.last, LoginOptions(), "a first login is asked for as usual")
        await vault.lock(reason: "test")
        fake.enrollment = [9, 9]   // a finger was added
        let c = ScriptedClient(confirms: [true], choices: ["bankid"])
        bankid.set { $0.acr = "urn:bankid:bid;LOA=3" }
        _ = try await vault.release(account: "bankid", conversation: c)
        XCTAssertEqual(bankid.snapshot.optionsSeen.last, LoginOptions(reauthenticate: true, acr: "urn:bankid:bid;LOA=4"),
                       "the fallback login after a change is sent with prompt=login and the re-enrollment level")
        XCTAssertTrue(c.shown.contains(Messages.reenrollNeedsStrongLogin.en), "a weaker login says why: \(c.shown)")
        XCTAssertTrue(c.confirmQuestions.isEmpty, "and does not offer the fingerprint")
        let weak = try? await vault.enroll("fake", conversation: ScriptedClient())
        XCTAssertNil(weak, "enrolling directly is refused too")

        bankid.set { $0.acr = "urn:bankid:bid;LOA=4" }
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient(confirms: [true]))
        XCTAssertTrue(try fx.store.keyslots().contains { $0.id == "fake" }, "a strong fresh login turns it back on")
    }
}

extension ReenrollmentTests {
    /// Issue 22: with a PIN, the login after an enrollment change leaves the
    /// vault locked, says the offer comes after the next PIN, and it does.
    func testWithAPINTheOfferComesAfterTheNextPINAndTheLoginSaysSo() async throws {
        let fake = FakePresenceFactor(offerAfterLogin: true)
        let pin = PINFactor(throttle: ThrottlePolicy(freeAttempts: 5, firstDelay: 30, maxDelay: 120))
        let bankid = FakeIdentityProvider()
        bankid.set { $0.acr = "urn:bankid:bid;LOA=4" }
        let vault = try fx.vault([fake, pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient(confirms: [false]))
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        await vault.lock(reason: "test")
        fake.enrollment = [9, 9]   // a finger was added

        let c = ScriptedClient(choices: ["bankid"])
        let s = try await vault.release(account: "bankid", conversation: c)
        XCTAssertEqual(s.accessToken, "AT-bankid-2", "the login's session at once")
        let said = Messages.loggedInWaitingForPIN(sessionsWaiting: true, thenSetUp: fake.descriptor.displayName).en
        XCTAssertTrue(c.shown.contains(said), "the login says what waits for the PIN: \(c.shown)")
        XCTAssertTrue(c.confirmQuestions.isEmpty, "no offer while the vault is locked")

        try await vault.unlock(factor: .pin, conversation: ScriptedClient(secrets: ["482915"]))
        let after = ScriptedClient(confirms: [true])
        _ = try await vault.release(account: "a", conversation: after)
        XCTAssertEqual(after.confirmQuestions.count, 1, "offered after the PIN: \(after.confirmQuestions)")
        XCTAssertTrue(try fx.store.keyslots().contains { $0.id == "fake" }, "and set up again")
    }

    func testTheSentenceSaysWhatWaitsForThePIN() {
        let name = LocalizedText(en: "Fingerprint", nb: "Fingeravtrykk")
        XCTAssertEqual(Messages.loggedInWaitingForPIN(sessionsWaiting: true, thenSetUp: nil), Messages.loggedInOthersWaitForPIN)
        XCTAssertTrue(Messages.loggedInWaitingForPIN(sessionsWaiting: true, thenSetUp: name).nb.hasSuffix("sette opp Fingeravtrykk igjen."))
        XCTAssertFalse(Messages.loggedInWaitingForPIN(sessionsWaiting: false, thenSetUp: name).en.contains("Sessions saved before"))
    }

    /// A session stored by a login while locked waits for the vault key once its
    /// record key is wiped by a lock; whatever opens the vault key next (here the
    /// fingerprint's soft unlock) opens it too, and `unlock bankid` says the
    /// vault stayed locked.
    func testASessionStoredWhileLockedOpensWithTheVaultKeyAfterALock() async throws {
        let fake = FakePresenceFactor()
        let pin = PINFactor(throttle: ThrottlePolicy(freeAttempts: 5, firstDelay: 30, maxDelay: 120))
        let bankid = FakeIdentityProvider()
        let vault = try fx.vault([fake, pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        await vault.lock(reason: "test")
        var answer: VaultFailure?
        do { try await vault.unlock(factor: "bankid", conversation: ScriptedClient()) } catch { answer = error }
        XCTAssertEqual(answer?.code, .locked)
        XCTAssertEqual(answer?.message, Messages.loggedInOthersWaitForPIN)
        let fresh = try await vault.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(fresh.accessToken, "AT-bankid-1")

        await vault.lock(reason: "test")
        let waiting = await vault.accounts().first { $0.account == "bankid" }?.waiting
        XCTAssertEqual(waiting, Messages.sessionWaitsForPIN, "a lock wipes the record key")
        try await vault.unlock(factor: nil, conversation: ScriptedClient())   // the soft unlock
        let again = try await vault.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(again.accessToken, "AT-bankid-1")
    }
}

/// A member registry where the login's person is in two organizations and the
/// active one is remembered, as MemberSync does.
final class TwoOrganizations: MemberDirectory {
    let active = Locked<String?>(nil)

    func claims() -> [String: JSON] {
        let orgs: [(id: String, name: String, roles: [String])] = [("oslo", "Mentorhuset Oslo", ["peer_mentor"]),
                                                                     ("tromso", "Mentorhuset Tromsø", ["coordinator"])]
        var claims: [String: JSON] = ["orgs": .array(orgs.map { ["id": .string($0.id), "name": .string($0.name),
                                                                 "roles": .array($0.roles.map { .string($0) })] })]
        let chosen = active.withLock { $0 }.flatMap { id in orgs.first { $0.id == id } }
        claims["roles"] = .array((chosen?.roles ?? []).map { .string($0) })
        if let chosen {
            claims["org"] = .string(chosen.id)
            claims["org_name"] = .string(chosen.name)
        }
        return claims
    }

    func review(_ login: VerifiedLogin) async throws(VaultFailure) -> [String: JSON] { claims() }
    func setActiveOrganization(_ org: String, provider: String, subject: String) async throws(VaultFailure) -> [String: JSON] {
        active.withLock { $0 = org }
        return claims()
    }
    func conflicts() async -> [JSON] { [] }
}

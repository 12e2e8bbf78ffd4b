import XCTest
@testable import VaultCore
import PINFactor
import SodiumKit
import VaultFactor
import VaultProtocol
@testable import VaultStore
import VaultTestSupport

/// What ends a session, and a rotated refresh token that the store refused.
final class RefreshTests: XCTestCase {
    var fx: VaultFixture!
    let pin = PINFactor(throttle: ThrottlePolicy(freeAttempts: 1, firstDelay: 30, maxDelay: 120))

    override func setUpWithError() throws { fx = try VaultFixture() }
    override func tearDown() { fx.cleanup() }

    /// A session whose access token is due at once, from a fake BankID.
    func loggedIn(accessTTL: Int64 = 0) async throws -> (FakeIdentityProvider, Vault) {
        let bankid = FakeIdentityProvider()
        bankid.set { $0.accessTTL = accessTTL }
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        return (bankid, vault)
    }

    func refuseWrites(_ on: Bool) throws { try fx.refuseWrites(on) }

    func storedTokenHash() throws -> String? { try fx.store.sessions().first?.tokenHash }

    static func hash(_ token: String) -> String { Digest.hex(Digest.sha256(Array(token.utf8))) }

    func testOnlySessionExpiredEndsTheSession() async throws {
        let (bankid, vault) = try await loggedIn()
        let keeping: [VaultFailure] = [
            VaultFailure(.loginFailed, message: Messages.refreshClientRefused(provider: "BankID", error: "invalid_client")),
            VaultFailure(.providerUnavailable, message: Messages.refreshUnavailable(provider: "BankID")),
            VaultFailure(.timeout, message: Messages.refreshTimedOut(provider: "BankID")),
            VaultFailure(.cancelled, message: Messages.refreshInterrupted(provider: "BankID")),
        ]
        for error in keeping {
            bankid.set { $0.refreshError = error }
            let f = await failure { _ = try await vault.release(account: "bankid", conversation: SilentConversation()) }
            XCTAssertEqual(f, error, "the provider's sentence reaches the app")
            XCTAssertEqual(try fx.store.sessions().count, 1, "\(error.code) keeps the session")
            let accounts = await vault.accounts().map(\.account)
            XCTAssertEqual(accounts, ["bankid"])
        }
        bankid.set { $0.refreshError = nil }
        let s = try await vault.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(s.accessToken, "AT-bankid-6", "the kept session refreshes once the provider answers")
        XCTAssertEqual(bankid.snapshot.refreshTokensSeen, Array(repeating: "RT-bankid-1", count: 5))

        bankid.set { $0.refreshError = VaultFailure(.sessionExpired) }
        let f = await failure { _ = try await vault.release(account: "bankid", conversation: SilentConversation()) }
        XCTAssertEqual(f?.code, .sessionExpired)
        XCTAssertEqual(try fx.store.sessions().count, 0)
    }

    /// A request decides off the actor, then joins or starts the refresh. One
    /// that decided before another's refresh ended finds the record changed
    /// and decides again: the rotated-away refresh token is never sent.
    func testARequestDecidedBeforeARefreshEndedDoesNotSendTheOldTokenAgain() async throws {
        let (bankid, vault) = try await loggedIn(accessTTL: 30)   // inside the refresh window
        let requester = Requester(pid: 0, uid: 0)
        guard case .refresh(let early) = try vault.decideRelease(account: "bankid", minValid: 0, requester: requester,
                                                                   grantSettled: false) else {
            return XCTFail("the session should be due for a refresh")
        }
        let first = try await vault.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(first.accessToken, "AT-bankid-2")
        let late = try await vault.refresh(early)
        XCTAssertNil(late, "decided from the record before the refresh: decide again")
        XCTAssertEqual(bankid.snapshot.refreshTokensSeen, ["RT-bankid-1"], "RT-bankid-1 sent once")
        let again = try await vault.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(again.accessToken, "AT-bankid-3")
        XCTAssertEqual(bankid.snapshot.refreshTokensSeen, ["RT-bankid-1", "RT-bankid-2"])
    }

    func testARotationTheStoreRefusesIsServedUsedAndSavedWhenItCan() async throws {
        let (bankid, vault) = try await loggedIn(accessTTL: 30)   // inside the refresh window: every release refreshes
        XCTAssertEqual(try storedTokenHash(), Self.hash("RT-bankid-1"))

        try refuseWrites(true)
        let first = try await vault.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(first.accessToken, "AT-bankid-2", "the new access token is served although the store refused it")
        XCTAssertEqual(try storedTokenHash(), Self.hash("RT-bankid-1"), "the store still has the old row")
        let second = try await vault.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(second.accessToken, "AT-bankid-3")
        XCTAssertEqual(bankid.snapshot.refreshTokensSeen, ["RT-bankid-1", "RT-bankid-2"],
                       "the next refresh sends the rotated token the store refused, not the stored one")
        XCTAssertEqual(try storedTokenHash(), Self.hash("RT-bankid-1"))

        // The disk takes writes again: the retry saves the latest rotation by itself.
        try refuseWrites(false)
        let saved = try await waitUntil(seconds: 5) { try self.storedTokenHash() == Self.hash("RT-bankid-3") }
        XCTAssertTrue(saved, "the held rotation was not saved once the store took writes")
        XCTAssertEqual(try fx.store.auditRows().filter { $0.event == "refresh" }.count, 1,
                       "the saved refresh is audited in its commit")

        // After a restart the next refresh uses what was saved.
        let restarted = try fx.reopened([pin], providers: FakeDirectory(providers: [bankid]))
        _ = try await restarted.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(bankid.snapshot.refreshTokensSeen.last, "RT-bankid-3")
    }

    /// A sandboxed app granted a session asks in a loop for more than the
    /// provider gives (`min_valid` past the token's life): without a pace,
    /// vaultd calls the provider in a loop, and a provider that throttles the
    /// organization's client throttles every member. One refresh a minute per
    /// session; the person's own tools keep oidc-agent's rule, and a token
    /// really due is refreshed for anyone.
    func testASandboxedAppForcesAtMostOneRefreshAMinute() async throws {
        let clock = TestClock()
        let bankid = FakeIdentityProvider()
        bankid.set { $0.accessTTL = 600 }
        let vault = try fx.vault([pin], providers: FakeDirectory(providers: [bankid]), clock: clock)
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        _ = try await vault.allowApp("flatpak:org.example.Nabo", account: "bankid", requester: .inProcess)
        let nabo = SilentConversation(requester: Requester(pid: 4242, uid: 0, app: AppIdentity(kind: .flatpak, name: "org.example.Nabo")))
        var tokens: Set<String> = []
        for _ in 0..<10 {
            tokens.insert(try await vault.release(account: "bankid", minValid: 3_000, conversation: nabo).accessToken)
        }
        XCTAssertEqual(bankid.snapshot.refreshTokensSeen.count, 1, "one token call for ten asks")
        XCTAssertEqual(tokens, ["AT-bankid-2"])
        clock.advance(Vault.confinedForcedRefreshEvery - 1)
        _ = try await vault.release(account: "bankid", minValid: 3_000, conversation: nabo)
        XCTAssertEqual(bankid.snapshot.refreshTokensSeen.count, 1)
        clock.advance(1)
        let later = try await vault.release(account: "bankid", minValid: 3_000, conversation: nabo)
        XCTAssertEqual(later.accessToken, "AT-bankid-3", "a minute on, the app may force one again")

        // The person's own tool: every ask past the token's life refreshes, as oidc-agent does.
        for _ in 0..<3 { _ = try await vault.release(account: "bankid", minValid: 3_000, conversation: SilentConversation()) }
        XCTAssertEqual(bankid.snapshot.refreshTokensSeen.count, 5)
        // A token that is really due is refreshed for the app, however soon after the last.
        bankid.set { $0.accessTTL = 30 }
        _ = try await vault.release(account: "bankid", minValid: 3_000, conversation: SilentConversation())
        let due = try await vault.release(account: "bankid", conversation: nabo)
        XCTAssertEqual(due.accessToken, "AT-bankid-8")
        XCTAssertEqual(bankid.snapshot.refreshTokensSeen.count, 7)
    }

    func testAHeldRotationIsServedAndSavedAtShutdown() async throws {
        let (bankid, vault) = try await loggedIn(accessTTL: 600)
        // Refresh now (min_valid beyond the token's life) with the store refusing.
        try refuseWrites(true)
        let refreshed = try await vault.release(account: "bankid", minValid: 3000, conversation: SilentConversation())
        XCTAssertEqual(refreshed.accessToken, "AT-bankid-2")
        let again = try await vault.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual(again.accessToken, "AT-bankid-2", "the held rotation's access token is served")
        try refuseWrites(false)
        // Shutdown saves it at once, without waiting for the retry task.
        let settled = await vault.settleRefreshes(within: .seconds(2))
        XCTAssertTrue(settled)
        XCTAssertEqual(try storedTokenHash(), Self.hash("RT-bankid-2"))
        _ = bankid
    }

    func testAHeldRotationDoesNotBringBackALoggedOutSession() async throws {
        let (_, vault) = try await loggedIn(accessTTL: 30)
        try refuseWrites(true)
        _ = try await vault.release(account: "bankid", conversation: SilentConversation())
        try refuseWrites(false)
        _ = try await vault.logout(account: "bankid", all: false, requester: Requester(pid: 1, uid: 0, executable: "/usr/bin/test-app"))
        let settled = await vault.settleRefreshes(within: .seconds(1))
        XCTAssertTrue(settled)
        XCTAssertEqual(try fx.store.sessions().count, 0, "the held row was dropped, not saved over the logout")
    }

    func testShutdownWaitsForARefreshInFlightWithinItsBound() async throws {
        let (bankid, vault) = try await loggedIn(accessTTL: 30)
        // The fake token endpoint takes 100 ms: shutdown starts in the middle of it.
        let release = Task { try await vault.release(account: "bankid", conversation: SilentConversation()) }
        try await Task.sleep(for: .milliseconds(30))
        let start = ContinuousClock.now
        let settled = await vault.settleRefreshes(within: .seconds(5))
        XCTAssertTrue(settled)
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(2))
        XCTAssertEqual(try storedTokenHash(), Self.hash("RT-bankid-2"), "the rotated token was committed before shutdown went on")
        _ = try await release.value
        _ = bankid

        // A refresh that hangs is given up at the bound.
        let slow = FakeIdentityProvider()
        slow.set { $0.accessTTL = 30 }
        slow.set { $0.refreshDelay = .seconds(5) }
        let fx2 = try VaultFixture()
        defer { fx2.cleanup() }
        let vault2 = try fx2.vault([pin], providers: FakeDirectory(providers: [slow]))
        _ = try await vault2.login(provider: "bankid", conversation: ScriptedClient())
        let hung = Task { try? await vault2.release(account: "bankid", conversation: SilentConversation()) }
        try await Task.sleep(for: .milliseconds(30))
        let start2 = ContinuousClock.now
        let settled2 = await vault2.settleRefreshes(within: .milliseconds(500))
        XCTAssertFalse(settled2)
        XCTAssertLessThan(ContinuousClock.now - start2, .seconds(2))
        hung.cancel()
    }

    func waitUntil(seconds: Double, _ condition: () throws -> Bool) async throws -> Bool {
        let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < end {
            if try condition() { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return try condition()
    }
}

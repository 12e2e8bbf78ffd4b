import Foundation
import PINFactor
import VaultFactor
import VaultTestSupport
import VaultProtocol
import XCTest
@testable import VaultCore

/// The one release decision, as the server asks it on the thread that read a
/// request (`releaseIfReady`): it hands over only what needs nothing from the
/// broker, and everything else goes the actor's way.
final class ReleaseDecisionTests: XCTestCase {
    let app = Requester(pid: 4242, uid: 0, app: AppIdentity(kind: .flatpak, name: "org.example.Mentor"))

    func testOnlyAFreshGrantedSessionInMemoryIsReleasedWithoutTheActor() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let (vault, clock, _) = try await importedByTheApp(fx)

        // Granted at the import, its use noted then: released at once, audited, idle timer restarted.
        let before = vault.table.lastActivity
        clock.advance(5)
        XCTAssertEqual(vault.releaseIfReady(account: "kari", minValid: 0, requester: app, interactive: false)?.accessToken, "at-T1")
        XCTAssertEqual(vault.table.lastActivity, before + 5, "a release restarts the idle timer")
        try await waitForAudit(vault, event: "release", count: 1)
        // The only account it may see, when none is named.
        XCTAssertEqual(vault.releaseIfReady(account: nil, minValid: 0, requester: app, interactive: false)?.accessToken, "at-T1")

        // Another app, an unidentified peer, an unknown account: the broker's to answer.
        let other = Requester(pid: 4243, uid: 0, app: AppIdentity(kind: .flatpak, name: "org.example.Other"))
        XCTAssertNil(vault.releaseIfReady(account: "kari", minValid: 0, requester: other, interactive: false))
        XCTAssertNil(vault.releaseIfReady(account: "kari", minValid: 0, requester: Requester(pid: 1, uid: 0, unidentified: true),
                                          interactive: false))
        XCTAssertNil(vault.releaseIfReady(account: "nobody", minValid: 0, requester: app, interactive: false))

        // The grant's last use is a minute old: the broker notes it (written
        // back), after which the fast way serves again.
        clock.advance(Double(AppGrants.lastUseResolution))
        XCTAssertNil(vault.releaseIfReady(account: "kari", minValid: 0, requester: app, interactive: false))
        _ = try await vault.release(account: "kari", conversation: AppGrantUnitTests.App("org.example.Mentor"))
        XCTAssertNotNil(vault.releaseIfReady(account: "kari", minValid: 0, requester: app, interactive: false))

        // Revoked: at once, nothing more is handed over without the broker.
        _ = try await vault.revokeApp("org.example.Mentor", requester: .inProcess)
        XCTAssertNil(vault.releaseIfReady(account: "kari", minValid: 0, requester: app, interactive: false))

        // Locked: nothing, for anyone.
        _ = try await vault.allowApp("flatpak:org.example.Mentor", account: "kari", requester: .inProcess)
        XCTAssertNotNil(vault.releaseIfReady(account: "kari", minValid: 0, requester: app, interactive: false))
        await vault.lock(reason: "test")
        XCTAssertNil(vault.releaseIfReady(account: "kari", minValid: 0, requester: app, interactive: false))
    }

    /// An access token past its end, with no provider to refresh it: the
    /// session has ended, which only the broker may record.
    func testAnExpiredSessionIsTheBrokersToEnd() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let (vault, clock, owner) = try await importedByTheApp(fx)
        clock.advance(4_102_444_800 - clock.reading())
        XCTAssertNil(vault.releaseIfReady(account: "kari", minValid: 0, requester: app, interactive: false))
        XCTAssertEqual(vault.table.count, 1, "the fast way changed nothing")
        do {
            _ = try await vault.release(account: "kari", conversation: owner)
            XCTFail("an expired session was released")
        } catch {
            XCTAssertEqual(error.code, .sessionExpired)
        }
        XCTAssertEqual(vault.table.count, 0)
    }

    /// A session whose end has come is ended while the vault is locked, before
    /// any dialog: nobody gives a PIN or a finger only to hear that it is over.
    func testAnEndedSessionIsEndedWithoutAnUnlock() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let clock = TestClock()
        let vault = try fx.vault([PINFactor(throttle: ThrottlePolicy())], config: VaultConfig(idleTimeout: 0, perApp: false), clock: clock)
        let owner = ScriptedClient()
        // An access token alone (as a Vipps login leaves): its expiry is the session's end.
        let accessOnly = ImportRequest(issuer: "https://login.example.org", clientID: "app", account: "kari", name: "Kari Nordmann",
                                       refreshToken: nil, accessToken: "at-T1", accessExpiresAt: 4_102_444_800)
        _ = try await vault.importSession(accessOnly, conversation: owner)
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        await vault.lock(reason: "test")
        clock.advance(4_102_444_800 - clock.reading())
        let person = ScriptedClient(secrets: ["482915"])
        do {
            _ = try await vault.release(account: "kari", conversation: person)
            XCTFail("an ended session was released")
        } catch {
            XCTAssertEqual(error.code, .sessionExpired)
        }
        XCTAssertEqual(person.asked, 0, "no PIN asked for a session that has ended")
        XCTAssertEqual(vault.table.count, 0)
    }

    /// After a login the broker offers to set a factor up at the next
    /// interactive hand-over: that request must reach it.
    func testAPendingOfferSendsAnInteractiveRequestToTheBroker() async throws {
        let fx = try VaultFixture()
        defer { fx.cleanup() }
        let vault = try fx.vault([], config: VaultConfig(idleTimeout: 0, perApp: false))
        _ = try await vault.importSession(importRequest(account: "kari", token: "T1"), conversation: SilentConversation())
        await vault.setOfferPendingForTest(true)
        XCTAssertNil(vault.releaseIfReady(account: "kari", minValid: 0, requester: app, interactive: true))
        XCTAssertNotNil(vault.releaseIfReady(account: "kari", minValid: 0, requester: app, interactive: false))
    }

    /// A vault on `fx` with one session, "kari", imported by the app `app` names (and so granted to it).
    func importedByTheApp(_ fx: VaultFixture) async throws -> (Vault, TestClock, AppGrantUnitTests.App) {
        let clock = TestClock()
        let vault = try fx.vault([], clock: clock)
        let owner = AppGrantUnitTests.App("org.example.Mentor")
        _ = try await vault.importSession(importRequest(account: "kari", token: "T1"), conversation: owner)
        return (vault, clock, owner)
    }

    func waitForAudit(_ vault: Vault, event: String, count: Int) async throws {
        for _ in 0..<100 {
            if try vault.audit.entries(after: 0, limit: 1000).filter({ $0.event == event }).count >= count { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTFail("no \(event) audit entry")
    }
}

extension Vault {
    func setOfferPendingForTest(_ on: Bool) { enrollmentOfferPending = on }
}

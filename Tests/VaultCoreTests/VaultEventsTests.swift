import Foundation
import XCTest
@testable import VaultCore
import PINFactor
import VaultFactor
import VaultProtocol
import VaultTestSupport

/// What the vault publishes for `watch`: each state change once, in order, to
/// every listener; nothing for a change that changed nothing.
final class VaultEventsTests: XCTestCase {
    var fx: VaultFixture!
    let pin = PINFactor(throttle: ThrottlePolicy(freeAttempts: 2, firstDelay: 30, maxDelay: 120))

    override func setUpWithError() throws { fx = try VaultFixture() }
    override func tearDown() { fx.cleanup() }

    func testLockUnlockLogoutAndAnEndedSessionAreEachPublishedOnce() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        _ = try await vault.importSession(importRequest(account: "a", token: "A"), conversation: ScriptedClient())
        var one = vault.events.stream().makeAsyncIterator()
        var two = vault.events.stream().makeAsyncIterator()
        // Its access token has run out and it has no refresh token: its end is
        // announced as it is stored, and releasing it later says nothing more.
        _ = try await vault.importSession(ImportRequest(issuer: "https://login.example.org", clientID: "app", account: "gone",
                                                        refreshToken: nil, accessToken: "at-gone", accessExpiresAt: 1),
                                          conversation: ScriptedClient())

        await vault.lock(reason: "request")
        await vault.lock(reason: "request")   // already locked: nothing to say
        try await vault.unlock(factor: .pin, conversation: ScriptedClient(secrets: ["482915"]))
        _ = try? await vault.release(account: "gone", conversation: SilentConversation())
        _ = try await vault.logout(account: "a", all: false, requester: .inProcess)

        let expected: [VaultEvent] = [.sessionExpired(account: "gone"), .locked(reason: "request"), .unlocked, .loggedOut(account: "a")]
        for e in expected {
            let got1 = await one.next()
            let got2 = await two.next()
            XCTAssertEqual(got1?.event, e)
            XCTAssertEqual(got2?.event, e)
        }
    }

    /// A session's end is announced when the clock reaches it, with no request.
    func testASessionsEndIsAnnouncedWhenItComes() async throws {
        let vault = try fx.vault([pin])
        var events = vault.events.stream().makeAsyncIterator()
        let end = Date().timeIntervalSince1970.rounded(.down) + 2
        _ = try await vault.importSession(ImportRequest(issuer: "https://login.example.org", clientID: "app", account: "soon",
                                                        refreshToken: nil, accessToken: "at-soon", accessExpiresAt: Int64(end)),
                                          conversation: ScriptedClient())
        let heard = await events.next()
        XCTAssertEqual(heard?.event, .sessionExpired(account: "soon"))
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince1970, end, "announced before its end")
        XCTAssertLessThan(Date().timeIntervalSince1970, end + 0.5, "announced late")
    }

    func testAListenerThatNeverReadsKeepsOnlyTheNewest() async throws {
        let events = VaultEvents()
        var stalled = events.stream().makeAsyncIterator()
        for i in 0..<(VaultEvents.listenerBuffer + 10) { events.emit(.loggedOut(account: "a\(i)")) }
        let first = await stalled.next()
        XCTAssertEqual(first?.event, .loggedOut(account: "a10"), "the oldest were not the ones dropped")
    }
}

import XCTest
@testable import VaultCore
import PINFactor
import VaultFactor
import VaultProtocol

/// What the vault publishes for `watch`: each state change once, in order, to
/// every listener; nothing for a change that changed nothing.
final class VaultEventsTests: XCTestCase {
    var fx: Fixture!
    let pin = PINFactor(throttle: ThrottlePolicy(freeAttempts: 2, firstDelay: 30, maxDelay: 120))

    override func setUpWithError() throws { fx = try Fixture() }
    override func tearDown() { fx.cleanup() }

    func testLockUnlockLogoutAndAnEndedSessionAreEachPublishedOnce() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        _ = try await vault.importSession(importRequest(account: "a", token: "A"), conversation: ScriptedClient())
        // Its access token has run out and it has no refresh token: releasing it ends it.
        _ = try await vault.importSession(ImportRequest(issuer: "https://login.example.org", clientID: "app", account: "gone",
                                                        refreshToken: nil, accessToken: "at-gone", accessExpiresAt: 1),
                                          conversation: ScriptedClient())
        var one = vault.events.stream().makeAsyncIterator()
        var two = vault.events.stream().makeAsyncIterator()

        await vault.lock(reason: "request")
        await vault.lock(reason: "request")   // already locked: nothing to say
        try await vault.unlock(factor: .pin, conversation: ScriptedClient(secrets: ["482915"]))
        _ = try? await vault.release(account: "gone", conversation: SilentConversation())
        _ = try await vault.logout(account: "a", all: false, requester: .inProcess)

        let expected: [VaultEvent] = [.locked(reason: "request"), .unlocked, .sessionExpired(account: "gone"), .loggedOut(account: "a")]
        for e in expected {
            let got1 = await one.next()
            let got2 = await two.next()
            XCTAssertEqual(got1?.event, e)
            XCTAssertEqual(got2?.event, e)
        }
    }

    func testAListenerThatNeverReadsKeepsOnlyTheNewest() async throws {
        let events = VaultEvents()
        var stalled = events.stream().makeAsyncIterator()
        for i in 0..<(VaultEvents.listenerBuffer + 10) { events.emit(.loggedOut(account: "a\(i)")) }
        let first = await stalled.next()
        XCTAssertEqual(first?.event, .loggedOut(account: "a10"), "the oldest were not the ones dropped")
    }
}

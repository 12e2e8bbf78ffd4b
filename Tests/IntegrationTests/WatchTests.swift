import Foundation
import VaultClient
import VaultProtocol
import VaultTestSupport
import XCTest

/// The `watch` op against a real vaultd: each change is pushed to every
/// watcher without its asking, and nothing reaches a connection that did not
/// watch. How fast it arrives is vault-bench's to measure ("lock → all 1,000
/// watchers told"), not this test's: under the sanitizers on a busy machine
/// one hop between threads took 58–61 ms (CI, session 16). The desktop's part (logind, the
/// ScreenSaver) is in DesktopLockTests.
final class WatchTests: VaultdTestCase {
    /// How soon after the action's answer its event must have arrived: long
    /// enough for any loaded machine, far shorter than anything that waits
    /// for a request or a poll would take.
    static let bound = 1.0

    func testLockUnlockLogoutAndExpiryReachWatchersAtOnceAndNobodyElse() throws {
        let v = try startVaultd()
        enrollPIN(v)
        try importSession(v, account: "kari", accessToken: "at-kari", refreshToken: nil)

        let watcher = try v.raw()
        try watcher.hello()
        let answer = try watcher.call("watch")
        XCTAssertEqual(answer["result"]?["watching"], .bool(true), answer.text)
        XCTAssertEqual(answer["result"]?["locked"], .bool(false), answer.text)
        let second = try v.raw()
        try second.hello()
        XCTAssertTrue(try second.call("watch").isOK)
        let bystander = try v.raw()
        try bystander.hello()
        let actor = try v.raw()
        try actor.hello()

        // Each action, then: the event on both watchers, within the bound of its answer.
        func expect(_ kind: String, account: String? = nil, reason: String? = nil, after action: () throws -> Void) throws {
            try action()
            let returned = monotonicNow()
            for w in [watcher, second] {
                let event = try w.readJSON(timeout: 5)
                let late = monotonicNow() - returned
                XCTAssertEqual(event["event"], "vault", event.text)
                XCTAssertEqual(event["kind"]?.stringValue, kind, event.text)
                XCTAssertNil(event["id"], "an event answers no request: \(event.text)")
                if let account { XCTAssertEqual(event["account"]?.stringValue, account, event.text) }
                if let reason { XCTAssertEqual(event["reason"]?.stringValue, reason, event.text) }
                XCTAssertLessThan(late, Self.bound, "\(kind) reached a watcher \(Int(late * 1000)) ms after the request returned")
            }
        }

        // A session with no refresh token ends with its access token: the
        // watchers hear it when that moment comes, with no request.
        let end = Date().timeIntervalSince1970.rounded(.down) + 2
        try importSession(v, account: "ola", accessToken: "at-ola", refreshToken: nil, expiresAt: Int64(end))
        try expect("session_expired", account: "ola") {
            while Date().timeIntervalSince1970 < end { usleep(1000) }
        }
        // The app that asks next is told so; the watchers hear nothing more.
        let r = try actor.call("session", ["account": "ola"])
        XCTAssertEqual(r["error"]?["code"], "session_expired", r.text)
        XCTAssertEqual(watcher.readLine(timeout: 0.2), .timeout, "a session's end was announced twice")
        try expect("locked", reason: "request") { XCTAssertTrue(try actor.call("lock").isOK) }
        try expect("unlocked") {
            let (r, _) = try unlock(v, pins: [VaultdTestCase.pin])
            XCTAssertTrue(r.isOK, r.text)
        }
        try expect("logged_out", account: "kari") { XCTAssertTrue(try actor.call("logout", ["account": "kari"]).isOK) }

        // Nothing for the connections that did not ask, and nothing more for the watchers.
        for c in [bystander, actor] {
            XCTAssertEqual(c.readLine(timeout: 0.3), .timeout, "a connection that did not watch got a line")
            XCTAssertFalse(c.sideFrames.contains { $0["event"] == "vault" }, "\(c.sideFrames.map(\.text))")
        }
        XCTAssertEqual(watcher.readLine(timeout: 0.2), .timeout)
        // A watcher still answers requests; its answers come between events.
        XCTAssertEqual(try watcher.call("status")["result"]?["locked"], .bool(false))
    }

    func testAWatcherIsNotClosedForBeingIdle() throws {
        let v = try startVaultd(config: "connection_idle_timeout = 1\n" + VaultdProcess.fastPINConfig)
        enrollPIN(v)
        let watcher = try v.raw()
        try watcher.hello()
        XCTAssertTrue(try watcher.call("watch").isOK)
        let idle = try v.raw()
        try idle.hello()
        var extra: [[UInt8]] = []
        XCTAssertTrue(idle.waitForClose(timeout: 5, extra: &extra), "an idle connection that did not watch stayed open")
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let event = try watcher.readJSON(timeout: 5)
        XCTAssertEqual(event["kind"], "locked", event.text)
    }

    func testTheSwiftClientHasThemAsAnAsyncSequence() async throws {
        let v = try startVaultd()
        enrollPIN(v)
        let events = VaultConnection.events(socketPath: v.socketPath, client: "swift-watch-test")
        var iterator = events.makeAsyncIterator()
        // `events` returns once its connection's `watch` is answered: nothing after this is missed.
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let first = try await iterator.next()
        XCTAssertEqual(first?.kind, "locked")
        XCTAssertEqual(first?.reason, "request")
        let (r, _) = try unlock(v, pins: [VaultdTestCase.pin])
        XCTAssertTrue(r.isOK, r.text)
        let second = try await iterator.next()
        XCTAssertEqual(second?.kind, "unlocked")
    }
}

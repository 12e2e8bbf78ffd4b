import Foundation
import VaultProtocol
import XCTest

/// The organization's own session (docs/backend.md): vaultd, the reference
/// backend (examples/backend) and a strict Vipps-like provider, all real
/// processes on 127.0.0.1. Vipps issues no refresh tokens; through the backend
/// the session lasts as long as the backend says.
final class BackendSessionTests: OIDCTestCase {
    static let secret = "backend-test-client-secret"
    static let expired = "Your session has expired — please log in again"

    /// A Vipps provider that only the backend can use (it holds the secret),
    /// the backend in front of it, and vaultd set up as an organization does it:
    /// the provider and its backend in the system-wide file
    /// (/etc/sessionvault/config.toml's stand-in), and the person's own file
    /// trying to send the login elsewhere, which must not count.
    func setUpBackend(accessTTL: Int = 30, rotationGrace: Int = 0,
                      fingerprint: Bool = false) throws -> (TestProvider, TestBackend, VaultdProcess) {
        let vipps = try startProvider("vipps", arguments: ["--client-secret", Self.secret])
        let backend = try TestBackend(upstream: vipps, secret: Self.secret, accessTTL: accessTTL, rotationGrace: rotationGrace)
        backends.append(backend)
        let decoy = "[providers.vipps]\nprofile = \"vipps\"\nissuer = \"http://127.0.0.1:9/\"\nclient_id = \"decoy\"\n"
        let v: VaultdProcess
        if fingerprint {
            // The stub reader with one finger, and vaultd's clock under the test's control (DaemonClock).
            v = try makeVaultd(config: nil)
            let reader = Self.reader(v)
            try ("per_app = false\n" + VaultdProcess.fastPINConfig + FingerprintFlowTests.stubReaderConfig(reader) + "\n" + decoy)
                .write(toFile: v.configPath, atomically: true, encoding: .utf8)
            fpstub(state: reader, ["plug"])
            fpstub(state: reader, ["enroll-finger", "right-index"])
            v.env.merge(v.movableClock) { $1 }
        } else {
            v = try makeVaultd(config: config([decoy]))
        }
        try backend.configTable().write(toFile: v.systemConfigPath, atomically: true, encoding: .utf8)
        try v.start()
        return (vipps, backend, v)
    }

    /// The stub reader's state file of a fixture made with `fingerprint`.
    static func reader(_ v: VaultdProcess) -> String { v.root + "/fpstub.json" }

    private var backends: [TestBackend] = []

    override func tearDown() {
        for b in backends { b.stop() }
        backends = []
        super.tearDown()
    }

    func loggedInThroughBackend(accessTTL: Int = 30, rotationGrace: Int = 0) throws -> (TestProvider, TestBackend, VaultdProcess, String) {
        let (vipps, backend, v) = try setUpBackend(accessTTL: accessTTL, rotationGrace: rotationGrace)
        let r = login(v, "vipps")
        XCTAssertEqual(r.exit, 0, "a Vipps login through the backend: \(r)")
        let token = try XCTUnwrap(r.json?["access_token"]?.stringValue, "\(r)")
        return (vipps, backend, v, token)
    }

    /// Seven days of a Vipps user's life: logged in once, the app reopened with
    /// the fingerprint each day, refreshed at the backend (never at Vipps), a
    /// crash in between. Both clocks move a day and an hour at a time: the
    /// backend's (its admin clock) and vaultd's (DaemonClock), so vaultd's own
    /// rules run by the days too: the PIN is asked again once the fingerprint's
    /// 48 hours are up, and on the eighth day vaultd itself knows the backend's
    /// session is over and says so, without asking the backend.
    func testVippsSessionThroughTheBackendLastsAsLongAsTheBackendSays() throws {
        let (vipps, backend, v) = try setUpBackend(fingerprint: true)
        let reader = Self.reader(v)
        let r = login(v, "vipps")
        XCTAssertEqual(r.exit, 0, "a Vipps login through the backend: \(r)")
        let first = try XCTUnwrap(r.json?["access_token"]?.stringValue, "\(r)")
        // The app gets the backend's token (its /me answers), not Vipps'.
        XCTAssertEqual(try backend.me(first).status, 200, "the released token is the backend's")
        XCTAssertEqual(try vipps.userinfo(accessToken: first).status, 401, "the released token is not Vipps' own")
        XCTAssertTrue(v.log.contains("the organization's settings are used instead of yours for: [providers]"),
                      "the person's own provider table was set aside, and the log says so: \(v.log)")

        // status names who keeps the session.
        let providers = try status(v)["providers"]?.arrayValue ?? []
        let vippsStatus = try XCTUnwrap(providers.first { $0["provider"]?.stringValue == "vipps" }, "\(providers)")
        XCTAssertEqual(vippsStatus["backend"]?.stringValue, origin(of: backend.url), "\(vippsStatus)")
        XCTAssertEqual(vippsStatus["session"]?.stringValue,
                       Messages.sessionKeptByBackend(origin: origin(of: backend.url)).en)

        // The seeds' setup after the first login: a PIN, then the fingerprint.
        enrollPIN(v)
        fpstub(state: reader, ["next", "match", "right-index"])
        XCTAssertEqual(ctl(v, ["enroll", "fingerprint"]).exit, 0)
        XCTAssertEqual(ctl(v, ["lock"]).exit, 0)

        let day: Int64 = 86_400 + 3_600
        var seen: Set<String> = [first]
        var pinDays: [Int] = []
        for n in 1...6 {
            try backend.advance(seconds: day)
            try v.advanceClock(seconds: day)
            if n == 3 {
                // A crash the day before: the rotated refresh token was stored before it was used.
                v.kill9()
                try v.start()
            }
            // The app reopens: a finger on the reader, and the PIN if vaultd asks for it.
            fpstub(state: reader, ["next", "match", "right-index"])
            let script = PromptScript(secrets: [VaultdTestCase.pin])
            let c = try v.raw()
            defer { c.close() }
            try c.hello(interactive: true)
            let answer = try c.call("session", [:], timeout: 60, onPrompt: script.handler)
            let token = try XCTUnwrap(answer.result?["access_token"]?.stringValue, "day \(n): \(answer.text)")
            if script.secretPrompts > 0 { pinDays.append(n) }
            XCTAssertFalse(seen.contains(token), "day \(n): a new access token from the backend")
            seen.insert(token)
            XCTAssertEqual(try backend.me(token).status, 200, "day \(n): the backend accepts the new token")
            XCTAssertEqual(ctl(v, ["lock"]).exit, 0)
        }
        // Day 2 is 50 hours after the login, past the fingerprint's 48. Day 3
        // follows the crash: as a phone after a restart, the PIN first. Day 5
        // is 50 hours after day 3's PIN.
        XCTAssertEqual(pinDays, [2, 3, 5], "the PIN is asked when the fingerprint's 48 hours are up, by vaultd's clock")
        let stats = try backend.stats()
        XCTAssertEqual(int(stats["reuse_detected"]), 0, "a rotated refresh token was used twice: \(stats.text)")
        XCTAssertGreaterThanOrEqual(int(stats["refreshes"]), 6, stats.text)
        XCTAssertEqual(int(try vipps.stats()["token_grants"]?["refresh_token"]), 0, "Vipps was never asked to refresh")

        // Day 8: past the backend's 7 days, by both clocks. vaultd knows from
        // the backend's `refresh_expires_in`: it asks neither the backend nor
        // for a finger (the vault is locked), and says the session has ended.
        try backend.advance(seconds: day)
        try v.advanceClock(seconds: day)
        let refreshes = int(try backend.stats()["refreshes"])
        let late = ctl(v, ["token", "--json"])
        XCTAssertEqual(late.errorCode, "session_expired", "\(late)")
        XCTAssertEqual(late.errorMessage, Self.expired, "\(late)")
        XCTAssertEqual(int(try backend.stats()["refreshes"]), refreshes, "vaultd knew the session had ended")
        XCTAssertEqual(try sessions(v).count, 0, "the ended session is gone")
    }

    /// The same Vipps without a backend: the session cannot outlive Vipps'
    /// access token, and status says so in one sentence.
    func testWithoutABackendStatusSaysAVippsSessionEndsWithItsAccessToken() throws {
        let vipps = try startProvider("vipps")
        let v = try startVaultd(providers: [vipps])
        let providers = try status(v)["providers"]?.arrayValue ?? []
        let entry = try XCTUnwrap(providers.first { $0["provider"]?.stringValue == "vipps" }, "\(providers)")
        XCTAssertNil(entry["backend"], "\(entry)")
        XCTAssertEqual(entry["session"]?.stringValue, Messages.sessionLastsOnlyAccessToken(provider: "Vipps").en)
        let shown = ctl(v, ["status"])
        XCTAssertTrue(shown.out.contains(Messages.sessionLastsOnlyAccessToken(provider: "Vipps").en), "\(shown)")
    }

    /// A thief with a copy of the refresh token uses it first; the backend's
    /// reuse detection ends the family at vaultd's next refresh, and vaultd
    /// says why in its own sentence.
    func testAStolenRefreshTokenUsedFirstEndsTheSessionAndVaultdSaysSo() throws {
        let (_, backend, v, _) = try loggedInThroughBackend()
        // The refresh token the backend handed out at the login: its issued log
        // (for the secrets scan) has each grant's access token, then its refresh token.
        let issued = try XCTUnwrap(backend.issuedLog, "needs SESSIONVAULT_TEST_ARCHIVE (the test command sets it)")
        let text = try String(contentsOfFile: issued, encoding: .utf8)
        let tokens = text.split(separator: "\n").filter { $0.hasPrefix("token\t") }.map { String($0.dropFirst("token\t".count)) }
        XCTAssertEqual(tokens.count, 2, "the login's grant only")
        let stolen = try XCTUnwrap(tokens.last, "the backend's issued log has no refresh token")
        let (status, answer) = try loopbackHTTP(backend.tokenURL, form: [
            ("grant_type", "refresh_token"), ("refresh_token", stolen), ("client_id", backend.upstream.clientID),
        ])
        XCTAssertEqual(status, 200, "the thief's refresh works once: \(answer?.text ?? "")")

        let r = ctl(v, ["token", "--json"])
        XCTAssertEqual(r.errorCode, "session_expired", "\(r)")
        XCTAssertEqual(r.errorMessage, Messages.sessionEndedReused.en, "\(r)")
        XCTAssertEqual(try sessions(v).count, 0)
        XCTAssertEqual(int(try backend.stats()["reuse_detected"]), 1)
        // The thief's new token died with the family.
        let thiefAccess = try XCTUnwrap(answer?["access_token"]?.stringValue)
        XCTAssertEqual(try backend.me(thiefAccess).status, 401, "the whole family ended")
    }

    /// `kill -9` of vaultd at each step of a refresh at the backend: while the
    /// backend holds the request, after it rotated but before its answer
    /// arrived (the new refresh token existed only in the killed process), and
    /// after vaultd stored it. With the backend's rotation overlap
    /// (docs/backend.md, section 2) no session is lost and the backend never
    /// sees a reused token.
    func testKill9AtEachStepOfARefreshLosesNoSession() throws {
        let (_, backend, v, _) = try loggedInThroughBackend(accessTTL: 2, rotationGrace: 30)
        for step in ["before", "after"] {
            try backend.admin("behavior", ["slow_refresh": [step: 3]])
            let app = ctl(v, ["token"], timeout: 1)   // the app gives up; vaultd still waits for the backend
            XCTAssertNotEqual(app.exit, 0, "\(step): the refresh was held: \(app)")
            v.kill9()
            try backend.admin("behavior", ["slow_refresh": .object([:])])
            Thread.sleep(forTimeInterval: 3)   // the held request ends at the backend (it rotates there)
            try v.start()
            let r = ctl(v, ["token"])
            XCTAssertEqual(r.exit, 0, "\(step): the session survived the kill: \(r)")
            XCTAssertEqual(try backend.me(r.out.trimmingCharacters(in: .whitespacesAndNewlines)).status, 200, step)
        }
        // After vaultd stored the rotated token and answered.
        XCTAssertEqual(ctl(v, ["token"]).exit, 0)
        v.kill9()
        try v.start()
        let last = ctl(v, ["token"])
        XCTAssertEqual(last.exit, 0, "after a stored rotation: \(last)")
        XCTAssertEqual(try sessions(v).count, 1)
        let stats = try backend.stats()
        XCTAssertEqual(int(stats["reuse_detected"]), 0, "a refresh token was used after its successor: \(stats.text)")
        XCTAssertEqual(try backend.sessions().first?["revoked_at"], JSON.null, "the backend's session is alive")
    }

    /// Backend down: the session is kept, with the sentence that says so; back up: it works.
    func testBackendDownKeepsTheSession() throws {
        // 2 s: the token is already too close to its end to be served while the backend is down.
        let (_, backend, v, _) = try loggedInThroughBackend(accessTTL: 2)
        try backend.admin("behavior", ["down": true])
        let r = ctl(v, ["token", "--json"])
        XCTAssertEqual(r.errorCode, "provider_unavailable", "\(r)")
        XCTAssertEqual(r.errorMessage, Messages.refreshUnavailable(provider: "127.0.0.1").en,
                       "the organization's service is down, not Vipps: \(r)")
        XCTAssertEqual(try sessions(v).count, 1, "the session is kept while the backend is down")
        try backend.admin("behavior", ["down": false])
        let back = ctl(v, ["token"])
        XCTAssertEqual(back.exit, 0, "\(back)")
    }

    /// Logout revokes at the backend: its sessions table shows it, the token stops working.
    func testLogoutRevokesAtTheBackend() throws {
        let (_, backend, v, token) = try loggedInThroughBackend(accessTTL: 900)
        let c = try v.raw()
        defer { c.close() }
        let r = try c.call("logout", ["account": "vipps"])
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(int(r.result?["revoked_at_provider"]), 1, "the backend confirmed the revocation: \(r.text)")
        let rows = try backend.sessions()
        XCTAssertEqual(rows.count, 1, "\(rows)")
        XCTAssertNotNil(rows.first?["revoked_at"]?.intValue, "the backend's row is revoked: \(rows)")
        XCTAssertEqual(try backend.me(token).status, 401, "a revoked session stops working at once")
        XCTAssertEqual(try sessions(v).count, 0)
    }

    /// The backend's own rule (age ≥ 18) refuses a minor with its own sentence; nothing is stored.
    func testTheBackendsAgeRuleRefusesAMinorWithItsSentence() throws {
        let (_, backend, v) = try setUpBackend()
        let r = login(v, "vipps", user: "ung")
        assertLoginFails(r, code: "login_failed", message: Messages.backendRefusedAge.en)
        try assertNothingStored(v)
        XCTAssertEqual(try backend.sessions().count, 0, "the backend made no session for a minor")
    }

    /// The provider's ID token passed through by the backend is still checked
    /// here: one made for another login (another nonce) is refused.
    func testAnIDTokenForAnotherLoginIsRefused() throws {
        let (vipps, _, v) = try setUpBackend()
        try vipps.behave(["nonce_mismatch": true])
        let r = login(v, "vipps")
        XCTAssertEqual(r.errorCode, "token_invalid", "\(r)")
        try assertNothingStored(v)
    }
}

/// scheme://host:port of a loopback URL (what vaultd reports as the backend).
private func origin(of url: String) -> String { WebOrigin.of(url) ?? url }

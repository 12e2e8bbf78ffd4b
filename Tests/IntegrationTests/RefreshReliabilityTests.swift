import Foundation
import VaultProtocol
import VaultTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A refresh through a real vaultd against the strict BankID provider, which
/// rotates refresh tokens and (with `rotation_grace` off, its default)
/// revokes the whole family when a rotated one is used again: what ends a
/// session, and SIGTERM while a refresh is in flight.
final class RefreshReliabilityTests: OIDCTestCase {
    /// Logged in as Kari; every access token lives `accessTTL` s.
    func loggedIn(accessTTL: Int) throws -> (TestProvider, VaultdProcess) {
        let bankid = try startProvider("bankid")
        try bankid.admin("config", ["access_ttl": .int(Int64(accessTTL))])
        let v = try startVaultd(providers: [bankid])
        let r = login(v, "bankid")
        XCTAssertEqual(r.exit, 0, "\(r)")
        return (bankid, v)
    }

    /// One `session` request on its own connection, in `lang`.
    func session(_ v: VaultdProcess, lang: String = "en", timeout: Double = 30) throws -> JSON {
        try Self.session(socket: v.socketPath, lang: lang, timeout: timeout)
    }

    static func session(socket: String, lang: String = "en", timeout: Double = 30) throws -> JSON {
        let c = try RawClient(path: socket)
        defer { c.close() }
        try c.hello(lang: lang)
        return try c.call("session", ["account": "bankid"], timeout: timeout)
    }

    func refreshOnce(_ value: JSON) -> JSON { ["value": value, "times": 1, "grant": "refresh_token"] }

    func testRefreshErrorsOtherThanInvalidGrantKeepTheSessionAndSayWhy() throws {
        // 2 s: the token is already too close to its end to be served while the provider fails.
        let (bankid, v) = try loggedIn(accessTTL: 2)
        let cases: [(JSON, String, String, String)] = [
            ("invalid_client", "en", "login_failed",
             "The app's registration at BankID was refused (invalid_client). Your session is kept; contact your organization's support."),
            ("invalid_client", "nb", "login_failed",
             "Appens registrering hos BankID ble avvist (invalid_client). Økten din er beholdt; kontakt brukerstøtten i organisasjonen din."),
            ("unauthorized_client", "en", "login_failed",
             "The app's registration at BankID was refused (unauthorized_client). Your session is kept; contact your organization's support."),
            ("invalid_scope", "en", "login_failed",
             "BankID refused to renew your session (invalid_scope). Your session is kept; contact your organization's support."),
            (503, "en", "provider_unavailable",
             "BankID is temporarily unavailable, so your session could not be renewed. Your session is kept; try again in a few minutes."),
        ]
        for (error, lang, code, message) in cases {
            try bankid.behave(["token_error": refreshOnce(error)])
            let r = try session(v, lang: lang)
            XCTAssertEqual(r.errorCode, code, "\(error.text): \(r.text)")
            XCTAssertEqual(r["error"]?["message"]?.stringValue, message, "\(error.text): \(r.text)")
            XCTAssertEqual(try sessions(v).count, 1, "\(error.text) ended the session")
            XCTAssertEqual(try storedSessionRows(v), 1, "\(error.text) removed the stored session")
        }
        try bankid.behave(["malformed_token_response": refreshOnce(true)])
        XCTAssertEqual(try session(v).errorCode, "provider_unavailable")

        // The provider answers again: the kept session refreshes with its refresh token.
        let ok = try session(v)
        XCTAssertTrue(ok.isOK, ok.text)
        let stats = try bankid.stats()
        XCTAssertEqual(int(stats["refresh_reuse_detected"]), 0, stats.text)
        XCTAssertEqual(int(stats["families_revoked"]), 0, stats.text)

        // invalid_grant ends it.
        try bankid.behave(["token_error": refreshOnce("invalid_grant")])
        XCTAssertEqual(try session(v).errorCode, "session_expired")
        XCTAssertEqual(try storedSessionRows(v), 0)
    }

    /// A sandboxed app the person allowed the session asks, request after
    /// request, for a token that outlives what BankID gives (`min_valid` past
    /// its life): vaultd called BankID once per request, which a provider that
    /// throttles the organization's client would hold against every member.
    /// Now once a minute per session for such an app (Vault.decideRelease).
    func testASandboxedAppAskingForMoreThanTheProviderGivesRefreshesOnceAMinute() throws {
        let (bankid, v) = try loggedIn(accessTTL: 600)
        let allowed = ctl(v, ["apps", "allow", "flatpak:org.example.Nabo", "bankid"])
        XCTAssertEqual(allowed.exit, 0, "\(allowed)")
        // On one connection: the token as it is (min_valid 0), then ten asks for more than
        // BankID gives; each answer as a short hash of its token (no token in a test's
        // output) or its error code.
        let asks = """
            import hashlib, json, socket, sys
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(30)
            s.connect(sys.argv[1])
            answers = s.makefile("rb")
            said = []
            for i in range(12):
                ask = {"id": i, "op": "session", "account": "bankid", "min_valid": 3000 if i > 1 else 0} if i else {"id": 0, "op": "hello", "version": 1}
                s.sendall(json.dumps(ask).encode() + b"\\n")
                r = json.loads(answers.readline())
                token = (r.get("result") or {}).get("access_token")
                if i:
                    said.append(hashlib.sha256(token.encode()).hexdigest()[:12] if token else (r.get("error") or {}).get("code"))
            print(json.dumps(said))
            """
        let before = int(try bankid.stats()["token_grants"]?["refresh_token"])
        let r = try runSandboxed(appID: "org.example.Nabo", script: asks, socketPath: v.socketPath, scratch: v.root)
        XCTAssertEqual(r.exit, 0, r.err)
        let said = try JSON.parse(r.out.trimmingCharacters(in: .whitespacesAndNewlines)).arrayValue ?? []
        XCTAssertEqual(said.count, 11, r.out)
        let (asItWas, forced) = (said.first?.stringValue, said.dropFirst().compactMap(\.stringValue))
        XCTAssertEqual(forced.count, 10, "a token, not a refusal: \(r.out)")
        XCTAssertEqual(Set(forced).count, 1, "one token for all ten: \(r.out)")
        XCTAssertNotEqual(forced.first, asItWas, "the first ask was refreshed: \(r.out)")
        let after = int(try bankid.stats()["token_grants"]?["refresh_token"])
        XCTAssertEqual(after - before, 1, "BankID's token endpoint called for ten asks")
    }

    /// SIGTERM while the token endpoint takes 2 s to answer a refresh:
    /// vaultd waits for it, commits the rotated refresh token, and exits 0.
    /// Without the wait the HTTP client is shut down under the refresh, the
    /// provider rotates anyway, and the store keeps the old token, which the
    /// provider then treats as reuse.
    func testSIGTERMWaitsForARefreshInFlightAndCommitsTheRotation() throws {
        let (bankid, v) = try loggedIn(accessTTL: 30)   // inside the 60 s refresh window: the next release refreshes
        try bankid.behave(["slow_token": refreshOnce(2)])
        let socket = v.socketPath
        Thread { _ = try? Self.session(socket: socket) }.start()
        let reached = try waitUntil(timeout: 10, interval: 0.02) {
            self.int(try bankid.stats()["token_grants"]?["refresh_token"]) == 1
        }
        XCTAssertTrue(reached, "the refresh never reached the provider")

        let start = monotonicNow()
        let exit = v.stop(timeout: 15)
        let took = monotonicNow() - start
        XCTAssertEqual(exit?.signaled, false, "vaultd did not exit by itself")
        XCTAssertEqual(exit?.exit, 0)
        XCTAssertGreaterThan(took, 1, "vaultd did not wait for the refresh in flight")
        XCTAssertLessThan(took, 6, "the wait is bounded by 5 s")
        XCTAssertFalse(v.log.contains("stopped without waiting longer"), v.log)

        // The store holds the rotated token: after a restart it refreshes
        // without reuse. (Once the provider has answered the first refresh:
        // a restart inside its 2 s would race it.)
        let answered = try waitUntil(timeout: 10, interval: 0.05) {
            (try bankid.stats()["token_calls"]?.arrayValue ?? []).contains { $0["grant"]?.stringValue == "refresh_token" }
        }
        XCTAssertTrue(answered, "the provider never finished the first refresh")
        try v.start()
        let r = try session(v)
        XCTAssertTrue(r.isOK, r.text)
        let stats = try bankid.stats()
        XCTAssertEqual(int(stats["token_grants"]?["refresh_token"]), 2, stats.text)
        XCTAssertEqual(int(stats["refresh_reuse_detected"]), 0, "the stored refresh token was the old one: \(stats.text)")
        XCTAssertEqual(int(stats["families_revoked"]), 0, stats.text)
    }

    /// A token endpoint that never answers does not hold vaultd past the bound.
    func testSIGTERMWithAHungTokenEndpointStillStopsWithinTheBound() throws {
        let (bankid, v) = try loggedIn(accessTTL: 30)
        try bankid.behave(["slow_token": refreshOnce(60)])
        let socket = v.socketPath
        Thread { _ = try? Self.session(socket: socket, timeout: 70) }.start()
        let reached = try waitUntil(timeout: 10, interval: 0.02) {
            self.int(try bankid.stats()["token_grants"]?["refresh_token"]) == 1
        }
        XCTAssertTrue(reached, "the refresh never reached the provider")

        let start = monotonicNow()
        let exit = v.stop(timeout: 20)
        let took = monotonicNow() - start
        XCTAssertEqual(exit?.signaled, false, "vaultd did not exit by itself")
        XCTAssertEqual(exit?.exit, 0)
        XCTAssertGreaterThan(took, 4.5, "vaultd gave up before the bound")
        XCTAssertLessThan(took, 7, "vaultd waited past the 5 s bound")
        XCTAssertTrue(v.log.contains("stopped without waiting longer"), v.log)
    }
}

import Foundation
import VaultProtocol
import VaultWire
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Staying logged in ( restarts, silent refresh, single-flight refresh, rotated
/// refresh tokens, rejected refresh) and logout, through a real vaultd and
/// vaultctl against the strict BankID test provider.
final class OIDCSessionTests: OIDCTestCase {
    static let expiredMessage = "Your session has expired — please log in again"

    /// A BankID provider, a vaultd using it, and one login by Kari; returns the login's access token.
    func loggedIn(accessTTL: Int? = nil, file: StaticString = #filePath,
                  line: UInt = #line) throws -> (TestProvider, VaultdProcess, String) {
        let bankid = try startProvider("bankid")
        if let accessTTL { try bankid.admin("config", ["access_ttl": .int(Int64(accessTTL))]) }
        let v = try startVaultd(providers: [bankid], extraArgs: ["--log-level", "trace"])
        let r = login(v, "bankid")
        XCTAssertEqual(r.exit, 0, "\(r)", file: file, line: line)
        let token = try XCTUnwrap(r.json?["access_token"]?.stringValue, "\(r)", file: file, line: line)
        return (bankid, v, token)
    }

    func refreshGrants(_ p: TestProvider) throws -> Int64 { int(try p.stats()["token_grants"]?["refresh_token"]) }

    // MARK: Restarts

    func testSessionSurvivesRestartWithPINEnrolled() throws {
        let (bankid, v, token) = try loggedIn()
        enrollPIN(v)
        try v.restart()
        XCTAssertEqual(try status(v)["locked"], true, "after a restart the vault is locked")

        let r = ctl(v, ["token"], stdin: "\(VaultdTestCase.pin)\n")
        XCTAssertEqual(r.exit, 0, "\(r)")
        XCTAssertEqual(r.out.trimmingCharacters(in: .whitespacesAndNewlines), token, "the same session, released after the PIN")
        XCTAssertTrue(r.err.contains("PIN"), "the PIN was asked for: \(r)")
        XCTAssertEqual(try refreshGrants(bankid), 0, "a valid access token needs no refresh")
        XCTAssertEqual(int(try bankid.stats()["token_grants"]?["authorization_code"]), 1, "no new login")
    }

    func testSessionSurvivesRestartWithoutLocalFactorAndNoPrompt() throws {
        let (bankid, v, token) = try loggedIn()
        try v.restart()
        // stdin is /dev/null: any prompt would be answered with "cancel" and fail.
        let r = ctl(v, ["token"], stdin: nil)
        XCTAssertEqual(r.exit, 0, "\(r)")
        XCTAssertEqual(r.out.trimmingCharacters(in: .whitespacesAndNewlines), token)
        XCTAssertEqual(r.err, "", "no prompt at all: \(r)")
        XCTAssertEqual(int(try bankid.stats()["token_grants"]?["authorization_code"]), 1, "no new login")

        // The socket API an app uses, non-interactive: released as well.
        let c = try v.raw()
        defer { c.close() }
        try c.hello(interactive: false)
        let s = try c.call("session")
        XCTAssertTrue(s.isOK, s.text)
        XCTAssertEqual(s.result?["access_token"]?.stringValue, token)
    }

    // MARK: Refresh

    /// Access token near its end (30 s left, inside vaultd's 60 s refresh
    /// window) and already dead at the provider: the next `token` refreshes
    /// silently; the rotated refresh token is stored, so after a restart the
    /// next refresh works too (the strict provider would revoke the whole
    /// family if the old one were reused).
    func testExpiredAccessTokenIsRefreshedSilentlyAndRotationSurvivesRestart() throws {
        let (bankid, v, token0) = try loggedIn(accessTTL: 30)
        try bankid.admin("expire-tokens", ["access": true, "refresh": false])
        XCTAssertEqual(try bankid.admin("introspect", ["token": .string(token0)])["active"], false)
        let hash0 = try XCTUnwrap(try sessions(v).first?["token_hash"]?.stringValue)

        let r1 = ctl(v, ["token"], stdin: nil)
        XCTAssertEqual(r1.exit, 0, "\(r1)")
        XCTAssertEqual(r1.err, "", "the app sees nothing but its token: \(r1)")
        let token1 = r1.out.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertNotEqual(token1, token0, "a new access token")
        XCTAssertEqual(try bankid.admin("introspect", ["token": .string(token1)])["active"], true)
        XCTAssertEqual(try refreshGrants(bankid), 1)
        let hash1 = try XCTUnwrap(try sessions(v).first?["token_hash"]?.stringValue)
        XCTAssertNotEqual(hash1, hash0, "the rotated refresh token replaced the old one")

        // After a crash (no graceful shutdown), vaultd must use the rotated refresh token.
        v.kill9()
        try v.start()
        let r2 = ctl(v, ["token"], stdin: nil)
        XCTAssertEqual(r2.exit, 0, "\(r2)")
        let token2 = r2.out.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertNotEqual(token2, token1)
        let stats = try bankid.stats()
        XCTAssertEqual(int(stats["token_grants"]?["refresh_token"]), 2)
        XCTAssertEqual(int(stats["refresh_reuse_detected"]), 0, "an old refresh token was replayed: \(stats.text)")
        XCTAssertEqual(int(stats["families_revoked"]), 0, stats.text)
        XCTAssertEqual(try bankid.admin("introspect", ["token": .string(token2)])["active"], true)
        XCTAssertEqual(try sessions(v).count, 1)

        // The refresh token used last (the rotated one) is in no log and no file in clear.
        let used = try XCTUnwrap(stats["last_token_request"]?["refresh_token"]?.stringValue, stats.text)
        XCTAssertFalse(v.log.contains(used), "vaultd's log holds a refresh token")
        XCTAssertEqual(filesContaining(used, under: v.dataDir), [], "a refresh token is stored in clear")
        XCTAssertFalse(ctlOutput.contains(used), "vaultctl printed a refresh token")
    }

    /// 30 apps ask at once for a session whose access token is due: exactly one
    /// refresh at the provider, and all get the same new token.
    func testConcurrentRequestsShareOneRefresh() throws {
        let (bankid, v, token0) = try loggedIn(accessTTL: 30)
        // The refreshed token lives long (no second refresh), and the refresh is slow
        // enough that all requests arrive while it runs.
        try bankid.admin("config", ["access_ttl": 3600])
        try bankid.behave(["slow_token": ["value": 1, "grant": "refresh_token", "times": 1]])
        let before = try refreshGrants(bankid)
        XCTAssertEqual(before, 0)

        var clients: [RawClient] = []
        defer { for c in clients { c.close() } }
        for _ in 0..<30 {
            let c = try v.raw()
            try c.hello(interactive: false)
            clients.append(c)
        }
        for (n, c) in clients.enumerated() {
            XCTAssertTrue(c.send(Request(id: .int(Int64(1000 + n)), op: "session")))
        }
        var tokens: [String] = []
        for (n, c) in clients.enumerated() {
            let a = try c.answer(to: .int(Int64(1000 + n)))
            XCTAssertTrue(a.isOK, "request \(n): \(a.text)")
            tokens.append(a.result?["access_token"]?.stringValue ?? "")
        }
        XCTAssertEqual(tokens.count, 30)
        XCTAssertEqual(Set(tokens).count, 1, "everyone gets the same new token: \(Set(tokens))")
        XCTAssertNotEqual(tokens.first, token0, "the token was refreshed")
        let stats = try bankid.stats()
        XCTAssertEqual(int(stats["token_grants"]?["refresh_token"]), 1, "exactly one refresh grant: \(stats.text)")
        XCTAssertEqual(int(stats["refresh_reuse_detected"]), 0)
        XCTAssertEqual(try bankid.admin("introspect", ["token": .string(tokens[0])])["active"], true)
    }

    /// `min_valid` (seconds) on `session`, and `vaultctl token --min-valid`: a
    /// token that lives long enough is released as it is (by the event-loop fast
    /// path too); one that expires sooner is refreshed first, and the new token
    /// is released even when the provider's lifetime is shorter than asked
    /// (as oidc-agent's min_valid_period). A malformed value is refused.
    func testMinValidForcesARefreshWhenTheTokenExpiresTooSoon() throws {
        let generic = try startProvider("generic")  // access tokens live 300 s
        let v = try startVaultd(providers: [generic])
        let r = login(v, "generic")
        XCTAssertEqual(r.exit, 0, "\(r)")
        let token0 = try XCTUnwrap(r.json?["access_token"]?.stringValue)

        let enough = ctl(v, ["token", "--min-valid", "120"], stdin: nil)
        XCTAssertEqual(enough.exit, 0, "\(enough)")
        XCTAssertEqual(enough.out.trimmingCharacters(in: .whitespacesAndNewlines), token0, "300 s left is more than 120 s")
        XCTAssertEqual(try refreshGrants(generic), 0)

        let tooShort = ctl(v, ["token", "--min-valid", "600", "--json"], stdin: nil)
        XCTAssertEqual(tooShort.exit, 0, "\(tooShort)")
        let token1 = try XCTUnwrap(tooShort.json?["access_token"]?.stringValue, "\(tooShort)")
        XCTAssertNotEqual(token1, token0, "300 s left is less than 600 s: refreshed")
        XCTAssertEqual(try refreshGrants(generic), 1)
        XCTAssertEqual(try generic.admin("introspect", ["token": .string(token1)])["active"], true)

        // The socket API: each request that the token cannot meet refreshes; one
        // without min_valid (or with 0) takes the fresh token as it is.
        let c = try v.raw()
        defer { c.close() }
        try c.hello(interactive: false)
        let forced = try c.call("session", ["min_valid": 600])
        XCTAssertTrue(forced.isOK, forced.text)
        let token2 = try XCTUnwrap(forced.result?["access_token"]?.stringValue)
        XCTAssertNotEqual(token2, token1)
        XCTAssertEqual(try refreshGrants(generic), 2)
        for fields: [String: JSON] in [[:], ["min_valid": 0], ["min_valid": 60]] {
            let plain = try c.call("session", fields)
            XCTAssertEqual(plain.result?["access_token"]?.stringValue, token2, "\(fields): \(plain.text)")
        }
        XCTAssertEqual(try refreshGrants(generic), 2, "no refresh for a token that lives long enough")

        for bad: JSON in [-1, "600", .double(1.5), true] {
            let refused = try c.call("session", ["min_valid": bad])
            XCTAssertEqual(refused.errorCode, "bad_request", "min_valid \(bad.text): \(refused.text)")
            XCTAssertTrue(refused.errorMessage?.contains("min_valid") == true, refused.text)
        }
        XCTAssertEqual(try refreshGrants(generic), 2)
        XCTAssertNotEqual(ctl(v, ["token", "--min-valid", "-5"], stdin: nil).exit, 0, "a negative --min-valid is refused")
    }

    /// Refresh token expired at the provider: `session_expired` with its
    /// sentence, and the session is gone.
    func testRejectedRefreshEndsTheSession() throws {
        let (bankid, v, _) = try loggedIn(accessTTL: 30)
        try bankid.admin("expire-tokens", ["access": true, "refresh": true])

        let r = ctl(v, ["token", "--json"], stdin: nil)
        XCTAssertEqual(r.exit, 5, "\(r)")
        XCTAssertEqual(r.errorCode, "session_expired", "\(r)")
        XCTAssertEqual(r.errorMessage, Self.expiredMessage, "\(r)")
        XCTAssertTrue(r.err.contains("vaultctl: \(Self.expiredMessage)"), "\(r)")
        XCTAssertEqual(try refreshGrants(bankid), 1)
        XCTAssertGreaterThanOrEqual(int(try bankid.stats()["token_errors"]?["invalid_grant"]), 1)
        XCTAssertEqual(try sessions(v).count, 0, "the session is gone")
        XCTAssertEqual(try storedSessionRows(v), 0, "and not in the store either")

        // Asking again: no session (no second refresh attempt).
        let again = ctl(v, ["token", "--json"], stdin: nil)
        XCTAssertEqual(again.exit, 5, "\(again)")
        XCTAssertEqual(again.errorCode, "no_session", "\(again)")
        XCTAssertEqual(try refreshGrants(bankid), 1)

        // Logging in again works.
        let fresh = login(v, "bankid")
        XCTAssertEqual(fresh.exit, 0, "\(fresh)")
        XCTAssertEqual(try sessions(v).count, 1)
    }

    /// The generic test provider does not rotate: the refresh response has no
    /// refresh token, and the old one must be kept (RFC 6749 §6).
    func testNonRotatingProviderKeepsItsRefreshToken() throws {
        let generic = try startProvider("generic")
        try generic.admin("config", ["access_ttl": 30])
        let v = try startVaultd(providers: [generic])
        let r = login(v, "generic")
        XCTAssertEqual(r.exit, 0, "\(r)")
        let token0 = try XCTUnwrap(r.json?["access_token"]?.stringValue)
        let hash0 = try XCTUnwrap(try sessions(v).first?["token_hash"]?.stringValue)
        var last = token0
        for n in 1...2 {
            let t = ctl(v, ["token"], stdin: nil)
            XCTAssertEqual(t.exit, 0, "refresh \(n): \(t)")
            let token = t.out.trimmingCharacters(in: .whitespacesAndNewlines)
            XCTAssertNotEqual(token, last, "refresh \(n) gave a new access token")
            last = token
            XCTAssertEqual(try refreshGrants(generic), Int64(n))
            XCTAssertEqual(try sessions(v).first?["token_hash"]?.stringValue, hash0, "the same refresh token is kept")
        }
        XCTAssertNil(try generic.stats()["token_errors"]?["invalid_grant"], "no refresh was refused")
    }

    /// BankID and Vipps both prove the same national ID: a Vipps login opens
    /// the vault that a BankID login set up (one person slot), each with its own session.
    func testVippsLoginOpensTheVaultOfTheSamePersonAfterBankID() throws {
        let bankid = try startProvider("bankid")
        let vipps = try startProvider("vipps")
        let v = try startVaultd(providers: [bankid, vipps])
        XCTAssertEqual(login(v, "bankid").exit, 0)
        let slots = try loginSlots(v)
        XCTAssertEqual(slots.count, 1, "\(slots)")
        XCTAssertTrue(slots.first?.hasPrefix("login:person|") == true, "\(slots)")
        XCTAssertEqual(ctl(v, ["lock"]).exit, 0)
        let w = login(v, "vipps")
        XCTAssertEqual(w.exit, 0, "\(w)")
        XCTAssertEqual(try loginSlots(v), slots, "the same person slot opened the vault")
        let accounts = Set(try sessions(v).compactMap { $0["account"]?.stringValue })
        XCTAssertEqual(accounts, ["bankid", "vipps"])

        // Another person's Vipps login cannot open Kari's vault.
        XCTAssertEqual(ctl(v, ["lock"]).exit, 0)
        let ola = login(v, "vipps", user: "ola")
        XCTAssertEqual(ola.exit, 1, "\(ola)")
        XCTAssertEqual(ola.errorCode, "login_failed", "\(ola)")
        XCTAssertEqual(try loginSlots(v), slots)
        XCTAssertEqual(Set(try sessions(v).compactMap { $0["account"]?.stringValue }), ["bankid", "vipps"])
    }

    /// 30 apps ask at once while the provider rejects the refresh: one
    /// refresh grant, nobody gets a token, the session is gone.
    func testConcurrentRequestsOnARejectedRefresh() throws {
        let (bankid, v, _) = try loggedIn(accessTTL: 30)
        try bankid.admin("expire-tokens", ["access": true, "refresh": true])
        try bankid.behave(["slow_token": ["value": 1, "grant": "refresh_token", "times": 1]])
        var clients: [RawClient] = []
        defer { for c in clients { c.close() } }
        for _ in 0..<30 {
            let c = try v.raw()
            try c.hello(interactive: false)
            clients.append(c)
        }
        for (n, c) in clients.enumerated() { XCTAssertTrue(c.send(Request(id: .int(Int64(2000 + n)), op: "session"))) }
        var codes: [String] = []
        for (n, c) in clients.enumerated() {
            let a = try c.answer(to: .int(Int64(2000 + n)))
            XCTAssertFalse(a.isOK, "request \(n) got a token from a rejected session: \(a.text)")
            codes.append(a.errorCode ?? "?")
            if a.errorCode == "session_expired" { XCTAssertEqual(a.errorMessage, Self.expiredMessage) }
        }
        XCTAssertEqual(codes.first, "session_expired", "\(codes)")
        XCTAssertTrue(Set(codes).isSubset(of: ["session_expired", "no_session"]), "\(codes)")
        XCTAssertEqual(try refreshGrants(bankid), 1, "exactly one refresh grant")
        XCTAssertEqual(try sessions(v).count, 0)
    }

    // MARK: Logout

    func testLogoutRevokesAtTheProviderAndIsImmediate() throws {
        let (bankid, v, token) = try loggedIn()
        XCTAssertEqual(try bankid.admin("introspect", ["token": .string(token)])["active"], true)

        let r = ctl(v, ["logout", "bankid"])
        XCTAssertEqual(r.exit, 0, "\(r)")
        XCTAssertTrue(r.out.contains("Logged out (1 session removed)."), "\(r)")
        let stats = try bankid.stats()
        XCTAssertEqual(int(stats["revocations"]?["refresh_token"]), 1, "RFC 7009 revocation: \(stats.text)")
        XCTAssertEqual(try bankid.admin("introspect", ["token": .string(token)])["active"], false,
                       "revoking the refresh token revokes its access tokens")

        let after = ctl(v, ["token", "--json"], stdin: nil)
        XCTAssertEqual(after.exit, 5, "\(after)")
        XCTAssertEqual(after.errorCode, "no_session", "\(after)")
        XCTAssertEqual(try sessions(v).count, 0)
        XCTAssertEqual(try storedSessionRows(v), 0)
        XCTAssertEqual(try refreshGrants(bankid), 0)
    }
}

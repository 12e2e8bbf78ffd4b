import Foundation
import VaultProtocol
import XCTest

/// BankID and Vipps logins and the demo: whole logins through a real vaultd and vaultctl, with
/// scripts/demo-browser playing the person at the provider.
final class OIDCLoginTests: OIDCTestCase {

    // MARK: BankID

    func testBankIDLoginReleasesVerifiedSessionWithoutRefreshToken() throws {
        let bankid = try startProvider("bankid")
        let nin = try nationalID(of: "kari", at: bankid)
        let v = try startVaultd(providers: [bankid], extraArgs: ["--log-level", "trace"])

        let first = login(v, "bankid", json: false)
        XCTAssertEqual(first.exit, 0, "\(first)")
        XCTAssertTrue(first.out.contains("Logged in as Kari Nordmann (bankid)."), "\(first)")

        // The authorization request: PKCE S256, fresh state and nonce.
        let stats1 = try bankid.stats()
        let auth1 = try XCTUnwrap(stats1["last_authorize"]?.objectValue, stats1.text)
        XCTAssertEqual(auth1["code_challenge_method"], "S256")
        XCTAssertEqual(auth1["code_challenge"]?.stringValue?.count, 43, "a base64url SHA-256 challenge")
        XCTAssertEqual(auth1["response_type"], "code")
        let state1 = try XCTUnwrap(auth1["state"]?.stringValue)
        let nonce1 = try XCTUnwrap(auth1["nonce"]?.stringValue)
        XCTAssertGreaterThanOrEqual(state1.count, 43, "state carries 32 random bytes")
        XCTAssertGreaterThanOrEqual(nonce1.count, 43, "nonce carries 32 random bytes")
        XCTAssertNotEqual(state1, nonce1)
        XCTAssertTrue((auth1["scope"]?.stringValue ?? "").split(separator: " ").contains("openid"))
        XCTAssertEqual(int(stats1["token_grants"]?["authorization_code"]), 1)
        XCTAssertEqual(stats1["last_token_request"]?["code_verifier"]?.stringValue?.isEmpty, false, "PKCE verifier sent")

        // `vaultctl token` prints the access token; --json is the released session.
        let plain = ctl(v, ["token"])
        XCTAssertEqual(plain.exit, 0, "\(plain)")
        let token1 = plain.out.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertFalse(token1.isEmpty)
        XCTAssertFalse(token1.contains(" "), "only the token on stdout: \(plain.out)")
        let released = try releasedSession(v)
        XCTAssertEqual(released["access_token"]?.stringValue, token1)
        XCTAssertEqual(released["token_type"], "Bearer")
        XCTAssertEqual(released["account"], "bankid")
        XCTAssertEqual(released["provider"], "bankid")
        XCTAssertNil(released["refresh_token"], "a refresh token never leaves the vault: \(released.text)")
        XCTAssertFalse(released.text.contains("refresh"), released.text)
        let claims = try XCTUnwrap(released["claims"], released.text)
        XCTAssertEqual(claims["name"], "Kari Nordmann")
        XCTAssertEqual(claims["org"], "mentor-oslo")
        XCTAssertEqual(claims["roles"], ["mentor"])
        XCTAssertNil(claims["nnin_altsub"], "the national ID is never released")
        XCTAssertEqual(try bankid.admin("introspect", ["token": .string(token1)])["active"], true)

        let sessions1 = try sessions(v)
        XCTAssertEqual(sessions1.count, 1, "\(sessions1)")
        XCTAssertEqual(sessions1.first?["account"], "bankid")
        XCTAssertEqual(sessions1.first?["refreshable"], true, "BankID's refresh token is kept (inside the vault)")
        let slots1 = try loginSlots(v)
        XCTAssertEqual(slots1.count, 1, "\(slots1)")
        let who1 = try XCTUnwrap(bankid.userinfo(accessToken: token1).body, "userinfo for the first token")

        // A second login: BankID gives a new `sub`, the person is the same.
        let second = login(v, "bankid", json: false)
        XCTAssertEqual(second.exit, 0, "\(second)")
        XCTAssertTrue(second.out.contains("Logged in as Kari Nordmann (bankid)."), "\(second)")
        let auth2 = try XCTUnwrap(try bankid.stats()["last_authorize"]?.objectValue)
        XCTAssertNotEqual(auth2["state"], auth1["state"], "state is fresh per login")
        XCTAssertNotEqual(auth2["nonce"], auth1["nonce"], "nonce is fresh per login")
        XCTAssertNotEqual(auth2["code_challenge"], auth1["code_challenge"], "PKCE verifier is fresh per login")
        let token2 = try XCTUnwrap(try releasedSession(v)["access_token"]?.stringValue)
        XCTAssertNotEqual(token2, token1)
        let who2 = try XCTUnwrap(bankid.userinfo(accessToken: token2).body, "userinfo for the second token")
        XCTAssertNotNil(who1["sub"]?.stringValue)
        XCTAssertNotEqual(who1["sub"], who2["sub"], "the test BankID changes sub on every login")
        XCTAssertEqual(who1["bankid_altsub"], who2["bankid_altsub"], "bankid_altsub is stable")

        let sessions2 = try sessions(v)
        XCTAssertEqual(sessions2.count, 1, "the same account, not a second session: \(sessions2)")
        XCTAssertEqual(sessions2.first?["account"], "bankid")
        XCTAssertEqual(try loginSlots(v), slots1, "the same login slot, untouched")

        // Nothing secret in vaultd's (trace-level) log or in clear in its files.
        let tokenRequest = try XCTUnwrap(stats1["last_token_request"]?.objectValue)
        let secrets: [(String, String?)] = [
            ("access token", token1), ("second access token", token2), ("code", tokenRequest["code"]?.stringValue),
            ("code_verifier", tokenRequest["code_verifier"]?.stringValue), ("state", state1), ("nonce", nonce1),
        ]
        for (what, value) in secrets {
            guard let value, !value.isEmpty else { XCTFail("no \(what) to look for"); continue }
            XCTAssertFalse(v.log.contains(value), "vaultd's log holds the \(what)")
            XCTAssertEqual(filesContaining(value, under: v.dataDir), [], "the \(what) is stored in clear")
        }

        // The national ID number: nowhere in clear.
        XCTAssertFalse(v.log.contains(nin), "vaultd's log holds the national ID number")
        XCTAssertEqual(filesContaining(nin, under: v.dataDir), [], "a data file holds the national ID number")
        XCTAssertFalse(ctlOutput.contains(nin), "vaultctl printed the national ID number")
    }

    /// Without a national ID in the login the slot is bound to (issuer, stable
    /// subject): for BankID that must be `bankid_altsub`, not the changing `sub`.
    func testBankIDLoginSlotIsBoundToAltsubNotSub() throws {
        let bankid = try startProvider("bankid")
        try bankid.admin("users/per", ["given_name": "Per", "family_name": "Hansen", "name": "Per Hansen",
                                       "birthdate": "1970-02-01", "org": "mentor-oslo", "roles": ["mentor"]])
        let v = try startVaultd(providers: [bankid])

        let first = login(v, "bankid", user: "per")
        XCTAssertEqual(first.exit, 0, "\(first)")
        let token1 = try XCTUnwrap(first.json?["access_token"]?.stringValue, "\(first)")
        let who1 = try XCTUnwrap(bankid.userinfo(accessToken: token1).body)
        let altsub = try XCTUnwrap(who1["bankid_altsub"]?.stringValue)
        let sub1 = try XCTUnwrap(who1["sub"]?.stringValue)
        let slots = try loginSlots(v)
        XCTAssertEqual(slots.count, 1, "\(slots)")
        XCTAssertTrue(slots.first?.hasPrefix("login:bankid|") == true, "\(slots)")
        XCTAssertTrue(slots.first?.contains(altsub) == true, "bound to bankid_altsub: \(slots)")
        XCTAssertFalse(slots.first?.contains(sub1) == true, "not bound to sub: \(slots)")

        // Locked, the second login (new sub) must still open the same slot.
        XCTAssertEqual(ctl(v, ["lock"]).exit, 0)
        let second = login(v, "bankid", user: "per")
        XCTAssertEqual(second.exit, 0, "a new sub is the same person: \(second)")
        let token2 = try XCTUnwrap(second.json?["access_token"]?.stringValue, "\(second)")
        let who2 = try XCTUnwrap(bankid.userinfo(accessToken: token2).body)
        XCTAssertNotEqual(who2["sub"]?.stringValue, sub1)
        XCTAssertEqual(try loginSlots(v), slots)
        let list = try sessions(v)
        XCTAssertEqual(list.map { $0["account"] }, ["bankid"], "\(list)")
        XCTAssertEqual(try releasedSession(v)["access_token"]?.stringValue, token2)
    }

    // MARK: Vipps

    func testVippsLoginTakesClaimsFromUserinfoAndKeepsNoRefreshToken() throws {
        let vipps = try startProvider("vipps")
        let nin = try nationalID(of: "kari", at: vipps)
        let v = try startVaultd(providers: [vipps], extraArgs: ["--log-level", "trace"])

        let r = login(v, "vipps")
        XCTAssertEqual(r.exit, 0, "\(r)")
        XCTAssertLessThan(r.seconds, 5, "a session within 5 s against a local provider: \(r)")
        let stats = try vipps.stats()
        let scope = (stats["last_authorize"]?["scope"]?.stringValue ?? "").split(separator: " ").map(String.init)
        for s in ["openid", "name", "phoneNumber", "nin"] { XCTAssertTrue(scope.contains(s), "scope \(scope) lacks \(s)") }
        XCTAssertEqual(stats["last_authorize"]?["code_challenge_method"], "S256")
        XCTAssertGreaterThanOrEqual(int(stats["requests"]?["userinfo"]), 1, "Vipps' claims come from userinfo")

        // The ID token carries only sub: name and phone can only have come from userinfo.
        let released = try releasedSession(v)
        XCTAssertEqual(released["provider"], "vipps")
        XCTAssertNil(released["refresh_token"])
        let claims = try XCTUnwrap(released["claims"], released.text)
        XCTAssertEqual(claims["name"], "Kari Nordmann")
        XCTAssertEqual(claims["phone_number"], "4791234567")
        XCTAssertEqual(claims["org"], "mentor-oslo")
        XCTAssertNil(claims["nin"], "the national ID is never released")

        let list = try sessions(v)
        XCTAssertEqual(list.count, 1, "\(list)")
        XCTAssertEqual(list.first?["refreshable"], false, "Vipps issues no refresh tokens: \(list)")
        XCTAssertEqual(int(try vipps.stats()["token_grants"]?["refresh_token"]), 0)

        // More output to scan: status, audit, the plain listing.
        _ = ctl(v, ["status", "--json"])
        _ = ctl(v, ["status"])
        _ = ctl(v, ["audit", "--json"])
        _ = ctl(v, ["sessions"])
        _ = ctl(v, ["token"])
        XCTAssertFalse(v.log.contains(nin), "vaultd's log holds the national ID number")
        XCTAssertEqual(filesContaining(nin, under: v.dataDir), [], "a data file holds the national ID number")
        XCTAssertEqual(filesContaining(nin, under: v.root).filter { !$0.hasPrefix(v.root + "/home") }, [],
                       "a file in vaultd's dirs holds the national ID number")
        XCTAssertFalse(ctlOutput.contains(nin), "vaultctl printed the national ID number: \(ctlOutput)")
    }

    // MARK: Interop

    /// A vaultd with oidc-provider-mock (started with `mockArguments`) as the
    /// provider "mock", a confidential client, and the person logged in there
    /// (the scripted browser POSTs `sub`); the login's run, checked to have ended well.
    func loggedInAtMock(_ mockArguments: [String], file: StaticString = #filePath, line: UInt = #line) throws -> (VaultdProcess, CtlRun) {
        let mock = try startMockProvider(arguments: mockArguments)
        let table = """
            [providers.mock]
            profile = "generic"
            issuer = "\(mock.issuer)"
            client_id = "sessionvault-interop"
            client_secret = "interop-secret"
            """
        let v = try startVaultd(config: config([table]))
        let r = login(v, "mock", env: ["TEST_BROWSER_MODE": "post"])
        XCTAssertEqual(r.exit, 0, "\(r)", file: file, line: line)
        return (v, r)
    }

    /// oidc-provider-mock (Authlib): a confidential client with Basic auth, no
    /// kid in the ID token header, aud as a list, no azp; the person logs in by
    /// POSTing `sub`.
    func testFullLoginAgainstOIDCProviderMock() throws {
        let (v, r) = try loggedInAtMock(["--user-claims", #"{"sub": "kari", "name": "Kari Nordmann", "email": "kari.nordmann@example.test"}"#])
        let token = try XCTUnwrap(r.json?["access_token"]?.stringValue, "\(r)")
        XCTAssertEqual(r.json?["claims"]?["name"], "Kari Nordmann")

        let plain = ctl(v, ["token"])
        XCTAssertEqual(plain.exit, 0, "\(plain)")
        XCTAssertEqual(plain.out.trimmingCharacters(in: .whitespacesAndNewlines), token)
        let list = try sessions(v)
        XCTAssertEqual(list.map { $0["provider"] }, ["mock"], "\(list)")
        XCTAssertEqual(list.first?["refreshable"], true, "the mock issues a refresh token: \(list)")
    }

    /// A refresh at oidc-provider-mock: client_secret_basic, no rotation (the old
    /// refresh token is kept).
    func testRefreshAgainstOIDCProviderMock() throws {
        let (v, r) = try loggedInAtMock(["--user-claims", #"{"sub": "kari", "name": "Kari Nordmann"}"#, "-e", "40"])
        let token0 = try XCTUnwrap(r.json?["access_token"]?.stringValue, "\(r)")
        // 40 s left: inside vaultd's refresh window, so the next request refreshes.
        let t = ctl(v, ["token"], stdin: nil)
        XCTAssertEqual(t.exit, 0, "\(t)")
        let token1 = t.out.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertNotEqual(token1, token0, "refreshed at the mock")
        XCTAssertEqual(try sessions(v).count, 1)
    }

    // MARK: Demo mode

    func testDemoModeVippsLoginCarriesMemberContextAndMasksNationalID() throws {
        // Kari's synthetic number in the demo (Sources/DemoProviders/DemoIdentity.swift).
        let demoNIN = "15838512329"
        let v = try startVaultd(config: config([]), extraArgs: ["--demo"])
        let r = login(v, "vipps", json: false)
        XCTAssertEqual(r.exit, 0, "\(r)")
        XCTAssertTrue(r.out.contains("Logged in as Kari Nordmann"), "\(r)")

        let released = try releasedSession(v)
        let claims = try XCTUnwrap(released["claims"], released.text)
        XCTAssertTrue(claims.text.contains("Mentorhuset Oslo"), "the member registry's organization: \(claims.text)")
        XCTAssertEqual(claims["roles"], ["peer_mentor"], claims.text)
        XCTAssertNil(released["refresh_token"])

        let audit = ctl(v, ["audit", "--json"])
        XCTAssertEqual(audit.exit, 0, "\(audit)")
        let entries = try XCTUnwrap(audit.json?["entries"]?.arrayValue, "\(audit)")
        let syncs = entries.filter { $0["event"] == "member_sync" }
        XCTAssertTrue(syncs.contains { $0["outcome"] == "updated" }, "a member_sync updated event: \(entries)")
        for e in syncs {
            if let shown = e["detail"]?["nin"]?.stringValue {
                XCTAssertTrue(shown.hasSuffix("*****") && shown.count == 11 && shown.hasPrefix("158385"),
                              "masked DDMMYY*****: \(e.text)")
            }
        }
        XCTAssertFalse(audit.out.contains(demoNIN), "the audit log shows the national ID in clear")
        XCTAssertFalse(v.log.contains(demoNIN), "vaultd's log holds the national ID number")
        XCTAssertFalse(ctlOutput.contains(demoNIN), "vaultctl printed the national ID number")
        XCTAssertEqual(filesContaining(demoNIN, under: v.dataDir), [],
                       "the number is in no file in clear (the demo registry lives in memory)")
    }
}

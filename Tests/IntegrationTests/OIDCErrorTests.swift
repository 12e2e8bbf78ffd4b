import Foundation
import VaultProtocol
import XCTest

/// Login errors: every provider failure ends in its code and exact sentence, with nothing
/// stored (no session, no login slot) and nothing left pending, through a real
/// vaultd and vaultctl against the strict test providers.
final class OIDCErrorTests: OIDCTestCase {
    static let bankIDCancelled = "BankID login was cancelled"
    static let vippsCancelled = "Vipps login was cancelled"
    static let loginFailed = "Login failed — please try again"
    static let bankIDUnavailable = "BankID is temporarily unavailable. Try Vipps instead or retry later"
    /// With BankID the only configured provider, no other one is named.
    static let bankIDUnavailableAlone = "BankID is temporarily unavailable. Please retry later"
    static let timedOut = "The login timed out — please try again"
    static let stateMismatch = "Something went wrong — please log in again"
    static let tokenInvalid = "Login could not be verified — please try again"
    static let rateLimited = "Too many attempts — wait a moment and try again"

    /// A behaviour used for the next matching request only.
    func once(_ value: JSON = true, grant: String? = nil) -> JSON {
        var o: [String: JSON] = ["value": value, "times": 1]
        if let grant { o["grant"] = .string(grant) }
        return .object(o)
    }

    /// Both providers are offered afterwards (status `providers`).
    func assertBothProvidersOffered(_ v: VaultdProcess, file: StaticString = #filePath, line: UInt = #line) throws {
        let ids = (try status(v)["providers"]?.arrayValue ?? []).compactMap { $0["provider"]?.stringValue }
        XCTAssertEqual(Set(ids), ["bankid", "vipps"], "both providers are offered: \(ids)", file: file, line: line)
    }

    /// A good login after the failures: no stale pending login or half state.
    func assertCleanLogin(_ v: VaultdProcess, _ provider: String = "bankid", file: StaticString = #filePath,
                          line: UInt = #line) throws {
        let ok = login(v, provider)
        XCTAssertEqual(ok.exit, 0, "a login after the failure: \(ok)", file: file, line: line)
        XCTAssertEqual(try sessions(v).count, 1, file: file, line: line)
        XCTAssertEqual(try loginSlots(v).count, 1, file: file, line: line)
    }

    // MARK: Cancellation

    func testCancelAtBankIDAndAtVipps() throws {
        let bankid = try startProvider("bankid")
        let vipps = try startProvider("vipps")
        let v = try startVaultd(providers: [bankid, vipps])

        try bankid.behave(["authorize_error": once("access_denied")])
        let b = login(v, "bankid")
        assertLoginFails(b, code: "cancelled", message: Self.bankIDCancelled, exit: 6)
        try assertNothingStored(v, "(BankID cancel)")

        try vipps.behave(["authorize_error": once("access_denied")])
        let w = login(v, "vipps")
        assertLoginFails(w, code: "cancelled", message: Self.vippsCancelled, exit: 6)
        try assertNothingStored(v, "(Vipps cancel)")
        XCTAssertEqual(int(try vipps.stats()["token_grants"]?["authorization_code"]), 0, "nothing was exchanged")

        let audit = try auditEntries(v)
        XCTAssertTrue(audit.contains { $0["event"] == "login" && $0["outcome"] == "cancelled" && $0["factor"] == "bankid" },
                      "\(audit)")
        try assertBothProvidersOffered(v)
        try assertCleanLogin(v)
    }

    /// S8 in Norwegian: a client with LANG=nb_NO.UTF-8 gets the bokmål sentence.
    func testCancelSentenceInNorwegianBokmal() throws {
        let bankid = try startProvider("bankid")
        let vipps = try startProvider("vipps")
        let v = try startVaultd(providers: [bankid, vipps])
        let nb = ["LANG": "nb_NO.UTF-8"]

        try bankid.behave(["authorize_error": once("access_denied")])
        let b = login(v, "bankid", env: nb)
        assertLoginFails(b, code: "cancelled", message: "BankID-innloggingen ble avbrutt", exit: 6)
        XCTAssertEqual(try bankid.stats()["last_authorize"]?["ui_locales"], "nb", "the provider's page in bokmål too")

        try vipps.behave(["authorize_error": once("access_denied")])
        let w = login(v, "vipps", env: nb)
        assertLoginFails(w, code: "cancelled", message: "Vipps-innloggingen ble avbrutt", exit: 6)

        // And the English client on the same daemon still gets English.
        try bankid.behave(["authorize_error": once("access_denied")])
        assertLoginFails(login(v, "bankid"), code: "cancelled", message: Self.bankIDCancelled, exit: 6)
        try assertNothingStored(v)
    }

    // MARK: Token endpoint

    func testInvalidGrantAtTheTokenEndpointIsLoginFailed() throws {
        let bankid = try startProvider("bankid")
        let vipps = try startProvider("vipps")
        let v = try startVaultd(providers: [bankid, vipps])
        try bankid.behave(["token_error": once("invalid_grant")])
        let r = login(v, "bankid")
        assertLoginFails(r, code: "login_failed", message: Self.loginFailed)
        XCTAssertEqual(int(try bankid.stats()["token_errors"]?["invalid_grant"]), 1)
        try assertNothingStored(v)
        try assertBothProvidersOffered(v)
        try assertCleanLogin(v)
    }

    func testServerErrorAndHTTP500AtTheTokenEndpointOfferVipps() throws {
        let bankid = try startProvider("bankid")
        let vipps = try startProvider("vipps")
        let v = try startVaultd(providers: [bankid, vipps])
        for (label, value) in [("server_error", JSON.string("server_error")), ("HTTP 500", JSON.int(500)),
                               ("temporarily_unavailable", JSON.string("temporarily_unavailable"))] {
            try bankid.behave(["token_error": once(value)])
            let r = login(v, "bankid")
            assertLoginFails(r, code: "provider_unavailable", message: Self.bankIDUnavailable)
            XCTAssertEqual(r.error?["alternatives"], ["vipps"], "\(label): \(r)")
            try assertNothingStored(v, "(\(label))")
        }
        try assertBothProvidersOffered(v)
        try assertCleanLogin(v, "vipps")
    }

    func testSlowTokenEndpointTimesOut() throws {
        let bankid = try startProvider("bankid")
        let vipps = try startProvider("vipps")
        let v = try startVaultd(providers: [bankid, vipps], tableExtra: ["bankid": "request_timeout = 1"])
        try bankid.behave(["slow_token": once(5, grant: "authorization_code")])
        let r = login(v, "bankid")
        assertLoginFails(r, code: "timeout", message: Self.timedOut)
        XCTAssertLessThan(r.seconds, 4.5, "the request was cut at its deadline (1 s), not at the provider's 5 s: \(r)")
        try assertNothingStored(v)
        try assertBothProvidersOffered(v)
        try assertCleanLogin(v)
    }

    func testProviderDownIsUnavailableQuickly() throws {
        let bankid = try startProvider("bankid")
        let vipps = try startProvider("vipps")
        let v = try startVaultd(providers: [bankid, vipps])
        bankid.stop()
        let r = login(v, "bankid")
        assertLoginFails(r, code: "provider_unavailable", message: Self.bankIDUnavailable)
        XCTAssertEqual(r.error?["alternatives"], ["vipps"], "\(r)")
        XCTAssertLessThan(r.seconds, 3, "a refused connection fails at once: \(r)")
        try assertNothingStored(v)
        try assertBothProvidersOffered(v)
        try assertCleanLogin(v, "vipps")
    }

    /// The provider goes down after discovery was cached: the token exchange is refused.
    func testProviderDownDuringTheTokenExchange() throws {
        let bankid = try startProvider("bankid")
        let vipps = try startProvider("vipps")
        let v = try startVaultd(providers: [bankid, vipps])
        try bankid.behave(["drop_connection": once(["token"])])
        let r = login(v, "bankid")
        assertLoginFails(r, code: "provider_unavailable", message: Self.bankIDUnavailable)
        XCTAssertEqual(r.error?["alternatives"], ["vipps"], "\(r)")
        XCTAssertLessThan(r.seconds, 5, "\(r)")
        try assertNothingStored(v)
        try assertCleanLogin(v)
    }

    // MARK: Hostile responses

    func testHostileIDTokensAreRefusedAndNothingIsStored() throws {
        let bankid = try startProvider("bankid")
        let v = try startVaultd(providers: [bankid])
        // Fewer than 10 logins on this vaultd: the rate limit stays out of the way.
        for name in ["wrong_iss", "wrong_aud", "expired_id_token", "nonce_mismatch", "alg_none", "unknown_kid"] {
            try bankid.behave([name: once(grant: "authorization_code")])
            let r = login(v, "bankid")
            assertLoginFails(r, code: "token_invalid", message: Self.tokenInvalid)
            XCTAssertEqual(int(try bankid.stats()["behaviours_applied"]?[name]), 1, "\(name) took effect")
            try assertNothingStored(v, "(\(name))")
            XCTAssertFalse(r.out.contains("access_token"), "\(name): \(r)")
        }
        try assertCleanLogin(v)
    }

    func testHostileRedirectsAndResponsesAreRefusedAndNothingIsStored() throws {
        let bankid = try startProvider("bankid")
        let v = try startVaultd(providers: [bankid])
        let cases: [(String, JSON, String, String)] = [
            ("mixup_iss", true, "state_mismatch", Self.stateMismatch),
            ("error_and_code", true, "login_failed", Self.loginFailed),
            ("huge_token_response", true, "provider_unavailable", Self.bankIDUnavailableAlone),
        ]
        for (name, value, code, message) in cases {
            try bankid.behave([name: once(value)])
            let before = int(try bankid.stats()["token_grants"]?["authorization_code"])
            let r = login(v, "bankid")
            assertLoginFails(r, code: code, message: message)
            XCTAssertEqual(int(try bankid.stats()["behaviours_applied"]?[name]), 1, "\(name) took effect")
            if name != "huge_token_response" {
                XCTAssertEqual(int(try bankid.stats()["token_grants"]?["authorization_code"]), before,
                               "\(name): the code must not be exchanged")
            }
            try assertNothingStored(v, "(\(name))")
        }
        try assertCleanLogin(v)
    }

    /// HS256 keyed with the public key (the classic alg confusion), at a
    /// generic provider whose discovery advertises RS256.
    func testHS256SignedWithThePublicKeyIsRefused() throws {
        let generic = try startProvider("generic")
        let v = try startVaultd(providers: [generic])
        try generic.behave(["hs256_with_public_key": once(grant: "authorization_code")])
        let r = login(v, "generic")
        assertLoginFails(r, code: "token_invalid", message: Self.tokenInvalid)
        XCTAssertEqual(int(try generic.stats()["behaviours_applied"]?["hs256_with_public_key"]), 1)
        try assertNothingStored(v)
        let ok = login(v, "generic")
        XCTAssertEqual(ok.exit, 0, "\(ok)")
        XCTAssertEqual(try sessions(v).count, 1)
    }

    func testVippsUserinfoForAnotherSubjectIsRefused() throws {
        let vipps = try startProvider("vipps")
        let v = try startVaultd(providers: [vipps])
        try vipps.behave(["userinfo_sub_mismatch": once()])
        let r = login(v, "vipps")
        assertLoginFails(r, code: "token_invalid", message: Self.tokenInvalid)
        XCTAssertEqual(int(try vipps.stats()["behaviours_applied"]?["userinfo_sub_mismatch"]), 1)
        try assertNothingStored(v)
        try assertCleanLogin(v, "vipps")
    }

    // MARK: Rate limit

    func testElevenLoginStartsInAMinuteAreRateLimited() throws {
        let bankid = try startProvider("bankid")
        let v = try startVaultd(providers: [bankid])
        try bankid.behave(["authorize_error": "access_denied"])
        for n in 1...10 {
            let r = login(v, "bankid")
            XCTAssertEqual(r.errorCode, "cancelled", "start \(n): \(r)")
        }
        let eleventh = login(v, "bankid")
        assertLoginFails(eleventh, code: "rate_limited", message: Self.rateLimited)
        let retry = int(eleventh.error?["retry_after"])
        XCTAssertGreaterThan(retry, 0, "retry_after: \(eleventh)")
        XCTAssertLessThanOrEqual(retry, 60, "retry_after: \(eleventh)")
        XCTAssertEqual(int(try bankid.stats()["requests"]?["authorize"]), 10, "the 11th never reached the provider")
        try assertNothingStored(v)
        let audit = try auditEntries(v)
        XCTAssertTrue(audit.contains { $0["event"] == "login" && $0["outcome"] == "rate_limited" }, "\(audit)")
    }
}

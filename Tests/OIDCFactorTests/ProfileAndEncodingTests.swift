import XCTest
@testable import OIDCFactor
import VaultFactor

final class ProfileAndEncodingTests: XCTestCase {
    func testBuiltInProfiles() {
        let bankID = ProviderProfile.bankID(.test, clientID: "c")
        XCTAssertEqual(bankID.scopes, ["openid", "profile", "nnin_altsub"])
        XCTAssertEqual(bankID.subjectClaim, "bankid_altsub")
        XCTAssertEqual(bankID.nationalID, .idToken(claim: "nnin_altsub"))
        XCTAssertEqual(bankID.allowedAlgorithms, [.es256])
        XCTAssertTrue(bankID.issuesRefreshTokens)
        XCTAssertEqual(bankID.discoveryURL,
                       "https://auth.current.bankid.no/auth/realms/current/.well-known/openid-configuration")
        XCTAssertEqual(ProviderProfile.bankID(.production, clientID: "c").issuer, "https://auth.bankid.no/auth/realms/prod")

        let vipps = ProviderProfile.vipps(.production, clientID: "c")
        XCTAssertEqual(vipps.scopes, ["openid", "name", "phoneNumber", "nin"])
        XCTAssertEqual(vipps.nationalID, .userinfo(claim: "nin"))
        XCTAssertEqual(vipps.allowedAlgorithms, [.rs256])
        XCTAssertFalse(vipps.issuesRefreshTokens)
        XCTAssertTrue(vipps.fetchUserinfo)
        XCTAssertEqual(vipps.discoveryURL, "https://api.vipps.no/access-management-1.0/access/.well-known/openid-configuration")
        XCTAssertEqual(vipps.alternatives, [ProviderProfile.Alternative(id: "bankid", displayName: "BankID")])

        let idporten = ProviderProfile.idPorten(.test, clientID: "c")
        XCTAssertEqual(idporten.subjectClaim, "pid")
        XCTAssertEqual(idporten.scopes, ["openid", "profile"])
        XCTAssertEqual(idporten.discoveryURL, "https://test.idporten.no/.well-known/openid-configuration")

        let generic = ProviderProfile.generic(id: "corp", displayName: "Corp", issuer: "https://login.corp.example/", clientID: "c")
        XCTAssertNil(generic.allowedAlgorithms, "generic: from discovery")
        XCTAssertEqual(generic.discoveryURL, "https://login.corp.example/.well-known/openid-configuration")

        for p in [bankID, vipps, idporten, generic] { XCTAssertEqual(p.problems(), [], p.id) }
        XCTAssertEqual(ProviderProfile.builtIn("vipps", environment: .test, clientID: "c")?.id, "vipps")
        XCTAssertNil(ProviderProfile.builtIn("nope", environment: .test, clientID: "c"))
    }

    func testSecretsDoNotPrint() {
        let profile = ProviderProfile.bankID(.test, clientID: "c", clientAuthentication: .clientSecretPost("hunter2"))
        XCTAssertFalse(String(describing: profile).contains("hunter2"))
        XCTAssertFalse(String(reflecting: profile).contains("hunter2"))
    }

    func testProfileProblems() {
        var p = ProviderProfile.bankID(.test, clientID: "")
        p.scopes = ["profile"]
        p.redirect = .fixedPort(0, path: "callback")
        p.allowedAlgorithms = []
        p.gatewayURL = "http://gateway.example/token"
        XCTAssertEqual(p.problems().count, 6, p.problems().joined(separator: "\n"))
        var local = ProviderProfile.generic(id: "t", displayName: "T", issuer: "http://127.0.0.1:8080", clientID: "c")
        XCTAssertEqual(local.problems(), [], "plain http is fine on loopback")
        local.gatewayURL = "http://127.0.0.1:9000/exchange"
        XCTAssertEqual(local.problems(), [])
        local.backend = .init(tokenURL: "http://127.0.0.1:9000/vipps/token", revocationURL: "http://127.0.0.1:9000/vipps/revoke")
        XCTAssertEqual(local.problems(), ["t: use either a gateway or a backend, not both"])
        local.gatewayURL = nil
        XCTAssertEqual(local.problems(), [])
        var remote = ProviderProfile.vipps(.production, clientID: "c")
        remote.backend = .init(tokenURL: "http://members.example.org/vipps/token", revocationURL: "http://members.example.org/vipps/revoke")
        XCTAssertEqual(remote.problems().count, 2, "a backend is https: \(remote.problems())")
        XCTAssertFalse(ProviderProfile.vipps(.production, clientID: "c").refreshes, "Vipps alone: no refresh")
        XCTAssertTrue(remote.refreshes, "Vipps with a backend: the backend refreshes")
    }

    func testMessagesAreTheRequiredSentences() {
        XCTAssertEqual(Messages.loginCancelled(provider: "BankID").en, "BankID login was cancelled")
        XCTAssertEqual(Messages.loginCancelled(provider: "Vipps").en, "Vipps login was cancelled")
        XCTAssertEqual(Messages.providerUnavailable(provider: "BankID", alternatives: ["Vipps"]).en,
                       "BankID is temporarily unavailable. Try Vipps instead or retry later")
        XCTAssertEqual(Messages.providerUnavailable(provider: "Vipps", alternatives: ["BankID"]).en,
                       "Vipps is temporarily unavailable. Try BankID instead or retry later")
        for text in [Messages.loginCancelled(provider: "BankID"),
                     Messages.providerUnavailable(provider: "BankID", alternatives: ["Vipps"]),
                     Messages.openBrowserToLogIn(provider: "BankID"), Messages.loginAlreadyWaiting,
                     Messages.loginTooWeak(provider: "BankID"), Messages.loginNeedsBrowser(provider: "Vipps"),
                     Messages.redirectPortHeldByAnotherUser(provider: "BankID"), Messages.loginPageOpenedTwice,
                     Messages.browserGoingToLogin] {
            XCTAssertFalse(text.nb.isEmpty)
            XCTAssertNotEqual(text.nb, text.en)
        }
    }

    func testBase64URL() {
        for n in 0..<40 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
            let text = Base64URL.encode(bytes)
            XCTAssertFalse(text.contains("=") || text.contains("+") || text.contains("/"))
            XCTAssertEqual(Base64URL.decode(text), bytes)
        }
        XCTAssertNil(Base64URL.decode("ab+c"))
        XCTAssertNil(Base64URL.decode("abc="))
        XCTAssertNil(Base64URL.decode("a"))
        XCTAssertNil(Base64URL.decode("AB"), "non-zero trailing bits: not the canonical encoding")
        XCTAssertEqual(Base64URL.decode("AA"), [0])
        XCTAssertEqual(Base64Standard.encode(Array("client-1:s3cr%3Aet".utf8)), "Y2xpZW50LTE6czNjciUzQWV0")
    }

    func testFormEncodingAndQueries() {
        XCTAssertEqual(FormEncoding.escape("a b&c=d/é~"), "a%20b%26c%3Dd%2F%C3%A9~")
        let q = FormEncoding.parseQuery("code=abc%2Fdef&state=x+y&empty=&flag")
        XCTAssertEqual(q?.map(\.0), ["code", "state", "empty", "flag"])
        XCTAssertEqual(q?.map(\.1), ["abc/def", "x y", "", ""])
        XCTAssertNil(FormEncoding.parseQuery("code=%zz"))
        XCTAssertNil(FormEncoding.parseQuery("code=%C3"), "invalid UTF-8")
    }

    func testURLPolicy() {
        let https = TransportPolicy(issuer: "https://id.example")
        XCTAssertTrue(https.allows("https://id.example/token"))
        XCTAssertFalse(https.allows("http://id.example/token"))
        XCTAssertFalse(https.allows("http://127.0.0.1/token"), "no http even on loopback for a real issuer")
        XCTAssertFalse(https.allows("https://user@id.example/token"))
        XCTAssertFalse(https.allows("ftp://id.example"))
        let local = TransportPolicy(issuer: "http://127.0.0.1:5000")
        XCTAssertTrue(local.allows("http://127.0.0.1:5000/token"))
        XCTAssertTrue(local.allows("http://[::1]:5000/token"))
        XCTAssertFalse(local.allows("http://provider.example/token"))
        XCTAssertEqual(URLParts("http://[::1]:8080/a?b")?.host, "::1")
        XCTAssertEqual(URLParts("HTTPS://Example.COM")?.pathAndQuery, "/")
        XCTAssertNil(URLParts("https://example.com:99999/"))
    }

    func testAuthorizationURLKeepsItsOwnParameters() async throws {
        var profile = ProviderProfile.vipps(.test, clientID: "client 1")
        profile.extraAuthorizationParameters = ["code_challenge_method": "plain", "state": "evil", "prompt": "login",
                                                "response_mode": "form_post"]
        let provider = OIDCProvider(profile: profile, http: sharedTestHTTP)
        let metadata = ProviderMetadata(issuer: profile.issuer, authorizationEndpoint: "https://id.example/auth?x=1",
                                        tokenEndpoint: "https://id.example/token", userinfoEndpoint: nil,
                                        jwksURI: "https://id.example/jwks", revocationEndpoint: nil,
                                        signingAlgorithms: ["RS256"], issParameterSupported: false)
        let url = provider.authorizationURL(metadata: metadata, redirectURI: "http://127.0.0.1:1234/callback",
                                            state: "s", nonce: "n", challenge: "c", language: .en)
        XCTAssertTrue(url.hasPrefix("https://id.example/auth?x=1&response_type=code&"))
        let params = AuthRequest(url: url).params
        XCTAssertEqual(params["code_challenge_method"], "S256")
        XCTAssertEqual(params["state"], "s")
        XCTAssertEqual(params["prompt"], "login")
        XCTAssertNil(params["response_mode"])
        XCTAssertEqual(params["client_id"], "client 1")
        XCTAssertEqual(params["scope"], "openid name phoneNumber nin")
        XCTAssertEqual(params["ui_locales"], "en")
    }

    /// After an enrollment change the login is asked for with `prompt=login`
    /// and BankID's re-enrollment level, so a remembered browser session
    /// cannot finish it silently; a weaker `acr` does not meet that level.
    func testAReenrollmentLoginIsAskedForAfreshAndStrong() async throws {
        let profile = ProviderProfile.bankID(.test, clientID: "c")
        XCTAssertEqual(profile.reenrollMinimumACR, "urn:bankid:bid;LOA=4")
        let provider = OIDCProvider(profile: profile, http: sharedTestHTTP)
        let metadata = ProviderMetadata(issuer: profile.issuer, authorizationEndpoint: "https://id.example/auth",
                                        tokenEndpoint: "https://id.example/token", userinfoEndpoint: nil,
                                        jwksURI: "https://id.example/jwks", revocationEndpoint: nil,
                                        signingAlgorithms: ["ES256"], issParameterSupported: false)
        let plain = AuthRequest(url: provider.authorizationURL(metadata: metadata, redirectURI: "http://127.0.0.1:1/cb",
                                                               state: "s", nonce: "n", challenge: "c", language: .nb)).params
        XCTAssertNil(plain["prompt"])
        XCTAssertNil(plain["acr_values"])
        let fresh = AuthRequest(url: provider.authorizationURL(
            metadata: metadata, redirectURI: "http://127.0.0.1:1/cb", state: "s", nonce: "n", challenge: "c", language: .nb,
            options: LoginOptions(reauthenticate: true, acr: profile.reenrollMinimumACR))).params
        XCTAssertEqual(fresh["prompt"], "login")
        XCTAssertEqual(fresh["acr_values"], "urn:bankid:bid;LOA=4")
        func login(_ acr: String?) -> VerifiedLogin {
            VerifiedLogin(provider: "bankid", providerName: "BankID", issuer: profile.issuer, clientID: "c", subject: "s", name: "n",
                          claims: [:], nationalID: nil, acr: acr, tokens: TokenGrant(accessToken: "a", accessExpiresAt: nil, refreshToken: nil))
        }
        XCTAssertTrue(provider.meetsReenrollLevel(login("urn:bankid:bid;LOA=4")))
        XCTAssertFalse(provider.meetsReenrollLevel(login("urn:bankid:bid;LOA=3")))
        XCTAssertFalse(provider.meetsReenrollLevel(login(nil)))
    }
}

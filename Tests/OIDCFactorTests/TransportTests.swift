import Locking
import XCTest
@testable import OIDCFactor
import VaultFactor

/// The provider misbehaving on the wire: refused, slow, 500, huge, redirecting.
final class TransportTests: XCTestCase, @unchecked Sendable {
    var stub: StubOIDC!

    override func setUp() async throws {
        stub = try await StubOIDC.start(signer: try await TestSigner.es256())
        stub.update { $0.idClaims = ["bankid_altsub": "a"] }
    }

    override func tearDown() async throws {
        await stub.stop()
    }

    func provider(_ change: (inout ProviderProfile) -> Void = { _ in }) -> OIDCProvider {
        var p = stub.profile(.bankID(.test, clientID: "x"))
        p.requestTimeout = .seconds(10)
        change(&p)
        return OIDCProvider(profile: p, http: sharedTestHTTP)
    }

    /// Points the token endpoint somewhere else by rewriting discovery.
    func tokenEndpoint(_ url: String) {
        let issuer = stub.issuer
        stub.server.route("GET /.well-known/openid-configuration") { _ in
            .json(200, ["issuer": .string(issuer), "authorization_endpoint": .string(issuer + "/authorize"),
                        "token_endpoint": .string(url), "jwks_uri": .string(issuer + "/jwks"),
                        "id_token_signing_alg_values_supported": ["ES256"]])
        }
    }

    func testRefusedConnectionIsUnavailableAtOnce() async throws {
        let port = try await closedPort()
        // Discovery refused.
        let issuer = "http://127.0.0.1:\(port)"
        var profile = ProviderProfile.bankID(.test, clientID: "c")
        profile.issuer = issuer
        profile.discoveryURL = ProviderProfile.discoveryURL(forIssuer: issuer)
        profile.requestTimeout = .seconds(10)
        let refused = OIDCProvider(profile: profile, http: sharedTestHTTP)
        var started = ContinuousClock.now
        let failure = await assertFailure(.providerUnavailable) { () async throws(VaultFailure) in
            try await refused.login(BrowserConversation(action: loggingIn(self.stub)))
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(1), "well under the 10 s timeout")
        XCTAssertEqual(failure?.message.en, "BankID is temporarily unavailable. Try Vipps instead or retry later")

        // Token endpoint refused during a refresh.
        tokenEndpoint("http://127.0.0.1:\(port)/token")
        started = ContinuousClock.now
        _ = await assertFailure(.providerUnavailable) { () async throws(VaultFailure) in
            try await self.provider().refresh(refreshToken: "rt")
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(1))
    }

    func testSlowTokenEndpointTimesOut() async throws {
        stub.server.route("POST /token") { _ in .delayed(.seconds(4), .json(200, ["access_token": "late"])) }
        let provider = self.provider { $0.requestTimeout = .seconds(1) }
        let browser = BrowserConversation(action: loggingIn(stub))
        let started = ContinuousClock.now
        let failure = await assertFailure(.timeout) { () async throws(VaultFailure) in try await provider.login(browser) }
        let elapsed = ContinuousClock.now - started
        XCTAssertEqual(failure?.message.en, "The login timed out — please try again")
        XCTAssertLessThan(elapsed, .seconds(3))
        let page = await browser.browserResult()
        XCTAssertTrue(page?.body.contains("The login timed out — please try again.") == true)

        // The same for a refresh, and for a body that stalls after the headers.
        _ = await assertFailure(.timeout) { () async throws(VaultFailure) in try await provider.refresh(refreshToken: "rt") }
        stub.server.route("POST /token") { _ in .slowBody(.seconds(4), Array("{\"access_token\":\"x\"}".utf8)) }
        let stalled = ContinuousClock.now
        _ = await assertFailure(.timeout) { () async throws(VaultFailure) in try await provider.refresh(refreshToken: "rt") }
        XCTAssertLessThan(ContinuousClock.now - stalled, .seconds(3))
    }

    func testServerErrorsAreUnavailable() async throws {
        for reply in [StubReply.raw(500, [], Array("oops".utf8)),
                      .json(503, ["error": "temporarily_unavailable"]),
                      .json(400, ["error": "server_error"]),
                      .raw(502, [("content-type", "text/html")], Array("<html>bad gateway</html>".utf8))] {
            stub.server.route("POST /token") { _ in reply }
            _ = await assertFailure(.providerUnavailable) { () async throws(VaultFailure) in
                try await self.provider().login(BrowserConversation(action: loggingIn(self.stub)))
            }
            _ = await assertFailure(.providerUnavailable) { () async throws(VaultFailure) in
                try await self.provider().refresh(refreshToken: "rt")
            }
        }
        stub.server.route("GET /.well-known/openid-configuration") { _ in .raw(500, [], []) }
        _ = await assertFailure(.providerUnavailable) { () async throws(VaultFailure) in
            try await self.provider().login(BrowserConversation(action: loggingIn(self.stub)))
        }
    }

    func testHugeResponsesAreCutOff() async throws {
        for declare in [false, true] {
            stub.server.route("POST /token") { _ in .huge(bytes: 10 * 1024 * 1024, declareLength: declare) }
            let started = ContinuousClock.now
            _ = await assertFailure(.providerUnavailable) { () async throws(VaultFailure) in
                try await self.provider().login(BrowserConversation(action: loggingIn(self.stub)))
            }
            XCTAssertLessThan(ContinuousClock.now - started, .seconds(5))
        }
        stub.server.route("GET /jwks") { _ in .huge(bytes: 10 * 1024 * 1024, declareLength: false) }
        _ = await assertFailure(.providerUnavailable) { () async throws(VaultFailure) in
            try await self.provider().login(BrowserConversation(action: loggingIn(self.stub)))
        }
    }

    func testRedirectsAreNotFollowed() async throws {
        let issuer = stub.issuer
        stub.server.route("POST /token") { _ in .raw(307, [("location", issuer + "/elsewhere")], []) }
        stub.server.route("POST /elsewhere") { _ in .json(200, ["access_token": "stolen"]) }
        _ = await assertFailure(.providerUnavailable) { () async throws(VaultFailure) in
            try await self.provider().refresh(refreshToken: "rt")
        }
        XCTAssertTrue(stub.server.requests("POST /elsewhere").isEmpty)
    }

    func testMalformedTokenResponses() async throws {
        for body in ["not json", "{\"token_type\":\"Bearer\"}", "{\"access_token\":\"a\",\"token_type\":\"mac\"}",
                     "{\"access_token\":\"a\",\"access_token\":\"b\"}"] {
            stub.server.route("POST /token") { _ in .raw(200, [("content-type", "application/json")], Array(body.utf8)) }
            _ = await assertFailure(.loginFailed) { () async throws(VaultFailure) in
                try await self.provider().login(BrowserConversation(action: loggingIn(self.stub)))
            }
        }
        // No id_token at all: nothing can be verified.
        stub.server.route("POST /token") { _ in .json(200, ["access_token": "a", "token_type": "Bearer"]) }
        _ = await assertFailure(.tokenInvalid) { () async throws(VaultFailure) in
            try await self.provider().login(BrowserConversation(action: loggingIn(self.stub)))
        }
    }

    func testPlainHTTPOutsideLoopbackIsNeverUsed() async throws {
        var profile = ProviderProfile.bankID(.test, clientID: "c")
        profile.issuer = "http://provider.example"
        profile.discoveryURL = ProviderProfile.discoveryURL(forIssuer: profile.issuer)
        XCTAssertFalse(profile.problems().isEmpty)
        let provider = OIDCProvider(profile: profile, http: sharedTestHTTP)
        let started = ContinuousClock.now
        _ = await assertFailure(.providerUnavailable) { () async throws(VaultFailure) in
            try await provider.login(BrowserConversation(action: loggingIn(self.stub)))
        }
        XCTAssertLessThan(ContinuousClock.now - started, .milliseconds(500), "refused before any connection")

        // A loopback issuer whose discovery points at a non-loopback http endpoint.
        let issuer = stub.issuer
        stub.server.route("GET /.well-known/openid-configuration") { _ in
            .json(200, ["issuer": .string(issuer), "authorization_endpoint": .string(issuer + "/authorize"),
                        "token_endpoint": "http://provider.example/token", "jwks_uri": .string(issuer + "/jwks")])
        }
        _ = await assertFailure(.providerUnavailable) { () async throws(VaultFailure) in
            try await self.provider().login(BrowserConversation(action: loggingIn(self.stub)))
        }
    }

    func testDiagnosticsNeverCarrySecrets() async throws {
        let lines = Locked<[String]>([])
        var p = stub.profile(.bankID(.test, clientID: "x"))
        p.clientAuthentication = .clientSecretPost("the-client-secret")
        stub.update { $0.mutateIDToken = { _, c in c["nonce"] = "wrong" } }
        let provider = OIDCProvider(profile: p, http: sharedTestHTTP, diagnostics: { l in lines.withLock { $0.append(l) } })
        let browser = BrowserConversation(action: loggingIn(stub))
        _ = await assertFailure(.tokenInvalid) { () async throws(VaultFailure) in try await provider.login(browser) }
        _ = await assertFailure(.sessionExpired) { () async throws(VaultFailure) in
            try await provider.refresh(refreshToken: "rt-secret-value")
        }
        let text = lines.withLock { $0.joined(separator: "\n") }
        XCTAssertFalse(text.isEmpty)
        let tokenRequest = try XCTUnwrap(stub.server.requests("POST /token").first)
        for secret in [tokenRequest.form["code"], tokenRequest.form["code_verifier"], "the-client-secret",
                       "rt-secret-value", browser.lastRequest?.state, browser.lastRequest?.params["nonce"]] {
            let s = try XCTUnwrap(secret)
            XCTAssertFalse(text.contains(s), "diagnostics leak \(s)")
        }
    }

    func testSharedClientShutsDown() async throws {
        let http = OIDCHTTPClient()
        let provider = OIDCProvider(profile: stub.profile(.bankID(.test, clientID: "x")), http: http)
        _ = try await provider.login(BrowserConversation(action: loggingIn(stub)))
        await http.shutdown()
        let revoked = await provider.revoke(token: "t", isRefreshToken: false)
        XCTAssertFalse(revoked, "after shutdown a request fails at once instead of hanging")
    }
}

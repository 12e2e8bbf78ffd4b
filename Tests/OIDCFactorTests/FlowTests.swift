import Foundation
import Locking
import XCTest
@testable import OIDCFactor
import VaultFactor

/// The whole login against an in-process provider on 127.0.0.1, with the test
/// playing the browser.
final class FlowTests: XCTestCase, @unchecked Sendable {
    var stub: StubOIDC!

    override func setUp() async throws {
        stub = try await StubOIDC.start(signer: try await TestSigner.es256())
    }

    override func tearDown() async throws {
        await stub.stop()
    }

    func bankID(_ change: (inout ProviderProfile) -> Void = { _ in }) -> OIDCProvider {
        var p = stub.profile(.bankID(.test, clientID: "x"))
        change(&p)
        return OIDCProvider(profile: p, http: sharedTestHTTP)
    }

    func useVipps() async throws {
        let rsa = try await TestSigner.rs256()
        stub.update {
            $0.signer = rsa
            $0.jwks = [rsa.jwk]
            $0.issueRefreshTokens = false
            $0.subject = "vipps-sub-1"
            $0.userinfoClaims = ["name": "Kari Nordmann", "nin": "15838512345", "phone_number": "4791234567",
                                 "org": "mentor-oslo", "roles": ["mentor"]]
        }
    }

    func vipps(_ change: (inout ProviderProfile) -> Void = { _ in }) -> OIDCProvider {
        var p = stub.profile(.vipps(.test, clientID: "x"))
        change(&p)
        return OIDCProvider(profile: p, http: sharedTestHTTP)
    }

    // MARK: Happy paths

    func testBankIDLogin() async throws {
        stub.update {
            $0.subject = "changing-sub-\(UUID().uuidString)"
            $0.idClaims = ["bankid_altsub": "altsub-kari", "nnin_altsub": "15838512345", "name": "Kari Nordmann",
                           "acr": "urn:bankid:bid;LOA=4", "org": "mentor-oslo", "roles": ["mentor", "coordinator"]]
        }
        let provider = bankID()
        let browser = BrowserConversation(action: loggingIn(stub))
        let started = unixNow()
        let login = try await provider.login(browser)

        XCTAssertEqual(login.provider, "bankid")
        XCTAssertEqual(login.providerName, "BankID")
        XCTAssertEqual(login.issuer, stub.issuer)
        XCTAssertEqual(login.subject, "altsub-kari", "the stable subject is bankid_altsub, not sub")
        XCTAssertEqual(login.name, "Kari Nordmann")
        XCTAssertEqual(login.acr, "urn:bankid:bid;LOA=4")
        XCTAssertEqual(login.claims["org"], "mentor-oslo")
        XCTAssertEqual(login.claims["roles"], ["mentor", "coordinator"])
        XCTAssertNil(login.claims["nnin_altsub"], "the national ID is never a released claim")
        XCTAssertEqual(login.nationalID.map { String(decoding: $0.unsafeCopyToArray(), as: UTF8.self) }, "15838512345")
        XCTAssertNotNil(login.tokens.refreshToken)
        let expiry = try XCTUnwrap(login.tokens.accessExpiresAt)
        XCTAssertTrue((started + 295...unixNow() + 305).contains(expiry), "absolute expiry: now + expires_in")
        XCTAssertNotNil(login.tokens.refreshExpiresAt)

        // The authorization request: PKCE S256, state, nonce, loopback redirect.
        let request = try XCTUnwrap(browser.lastRequest)
        XCTAssertEqual(request.params["code_challenge_method"], "S256")
        XCTAssertEqual(request.params["code_challenge"]?.count, 43)
        XCTAssertEqual(request.params["response_type"], "code")
        XCTAssertEqual(request.params["scope"], "openid profile nnin_altsub")
        XCTAssertGreaterThanOrEqual(request.params["state"]?.count ?? 0, 32)
        XCTAssertGreaterThanOrEqual(request.params["nonce"]?.count ?? 0, 32)
        XCTAssertTrue(request.redirectURI.hasPrefix("http://127.0.0.1:"))
        XCTAssertTrue(request.redirectURI.hasSuffix("/callback"))
        XCTAssertEqual(browser.opened.withLock { $0.first?.text.en }, "Log in with BankID in your browser.")

        // The token request carried the verifier (the stub checked it against the challenge).
        let tokenRequest = try XCTUnwrap(stub.server.requests("POST /token").last)
        XCTAssertEqual(tokenRequest.form["code_verifier"].map { PKCE.challenge(for: $0) }, request.params["code_challenge"])
        XCTAssertEqual(tokenRequest.form["client_id"], stub.clientID)

        // The browser was told, in plain HTML without scripts.
        let page = await browser.browserResult()
        XCTAssertEqual(page?.status, 200)
        XCTAssertTrue(page?.body.contains("You are logged in with BankID") == true, page?.body ?? "")
        XCTAssertFalse(page?.body.lowercased().contains("<script") == true)

        // Two logins: state, nonce and verifier differ each time.
        let second = BrowserConversation(action: loggingIn(stub))
        _ = try await provider.login(second)
        XCTAssertNotEqual(second.lastRequest?.state, request.state)
        XCTAssertNotEqual(second.lastRequest?.params["nonce"], request.params["nonce"])
        XCTAssertNotEqual(second.lastRequest?.params["code_challenge"], request.params["code_challenge"])
    }

    func testVippsLoginTakesProfileAndNationalIDFromUserinfoOnly() async throws {
        try await useVipps()
        let provider = vipps()
        let browser = BrowserConversation(action: loggingIn(stub))
        let started = ContinuousClock.now
        let login = try await provider.login(browser)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5), "S2: a session within 5 s of the redirect")
        XCTAssertEqual(login.subject, "vipps-sub-1")
        XCTAssertEqual(login.name, "Kari Nordmann")
        XCTAssertEqual(login.nationalID.map { String(decoding: $0.unsafeCopyToArray(), as: UTF8.self) }, "15838512345")
        XCTAssertNil(login.claims["nin"])
        XCTAssertEqual(login.claims["phone_number"], "4791234567")
        XCTAssertEqual(login.claims["org"], "mentor-oslo")
        XCTAssertNil(login.tokens.refreshToken, "Vipps issues no refresh tokens")
        XCTAssertEqual(browser.lastRequest?.params["scope"], "openid name phoneNumber nin")
        let userinfo = try XCTUnwrap(stub.server.requests("GET /userinfo").last)
        XCTAssertEqual(userinfo.header("authorization"), "Bearer " + login.tokens.accessToken)
        XCTAssertFalse(provider.issuesRefreshTokens)

        let failure = await assertFailure(.sessionExpired) { () async throws(VaultFailure) in
            try await provider.refresh(refreshToken: "anything")
        }
        XCTAssertEqual(failure?.message.en, "Your session has expired — please log in again")
    }

    func testUserinfoSubjectMustMatchTheIDToken() async throws {
        try await useVipps()
        stub.update { $0.userinfoSub = "someone-else" }
        let failure = await assertFailure(.tokenInvalid) { () async throws(VaultFailure) in
            try await self.vipps().login(BrowserConversation(action: loggingIn(self.stub)))
        }
        XCTAssertEqual(failure?.message.en, "Login could not be verified — please try again")
    }

    func testRefreshRotatesAndInvalidGrantIsSessionExpired() async throws {
        let provider = bankID()
        stub.update { $0.idClaims = ["bankid_altsub": "alt"] }
        let login = try await provider.login(BrowserConversation(action: loggingIn(stub)))
        let first = try XCTUnwrap(login.tokens.refreshToken)
        let grant = try await provider.refresh(refreshToken: first)
        XCTAssertNotEqual(grant.refreshToken, first)
        XCTAssertNotEqual(grant.accessToken, login.tokens.accessToken)
        XCTAssertNotNil(grant.accessExpiresAt)
        XCTAssertEqual(stub.server.requests("POST /token").last?.form["grant_type"], "refresh_token")

        // The old token was consumed by the rotation.
        let failure = await assertFailure(.sessionExpired) { () async throws(VaultFailure) in
            try await provider.refresh(refreshToken: first)
        }
        XCTAssertEqual(failure?.message.en, "Your session has expired — please log in again")
    }

    func testRevokeWhenAdvertisedOnly() async throws {
        let revoked = await bankID().revoke(token: "rt-1", isRefreshToken: true)
        XCTAssertTrue(revoked)
        XCTAssertEqual(stub.server.requests("POST /revoke").last?.form["token_type_hint"], "refresh_token")
        stub.update { $0.revocation = false }
        let notAdvertised = await bankID().revoke(token: "rt-1", isRefreshToken: true)
        XCTAssertFalse(notAdvertised)
    }

    // MARK: The redirect

    /// Any local process can reach the loopback port: a request without this
    /// login's state is answered 400 and ignored; the real redirect still logs in.
    func testStrayRedirectsAreIgnoredAndTheRealOneLogsIn() async throws {
        stub.update {
            $0.idClaims = ["bankid_altsub": "altsub-kari", "name": "Kari Nordmann", "acr": "urn:bankid:bid;LOA=4"]
        }
        let strays = Locked<[(status: Int, body: String)]>([])
        let browser = BrowserConversation { request in
            for query in ["code=stolen&state=forged-state&iss=x", "code=stolen", "state=%zz", ""] {
                if let r = try? await browserGET(request.redirectURI + "?" + query) {
                    strays.withLock { $0.append((r.status, r.body)) }
                }
            }
            return await loggingIn(self.stub)(request)
        }
        let login = try await bankID().login(browser)
        XCTAssertEqual(login.subject, "altsub-kari")
        let seen = strays.withLock { $0 }
        XCTAssertEqual(seen.map(\.status), [400, 400, 400, 400])
        XCTAssertTrue(seen.allSatisfy { $0.body.contains("This is not the login SessionVault is waiting for.") }, "\(seen)")
        let page = await browser.browserResult()
        XCTAssertEqual(page?.status, 200)
        XCTAssertEqual(stub.server.requests("POST /token").count, 1, "only the real code is exchanged")
        XCTAssertFalse(stub.server.requests("POST /token").contains { $0.form["code"] == "stolen" })
    }

    func testOnlyStrayRedirectsTimeOut() async throws {
        let provider = bankID { $0.redirectTimeout = .seconds(2) }
        let browser = BrowserConversation { request in
            let code = self.stub.issueCode(for: request)
            _ = try? await browserGET(request.redirectURI + "?code=\(code)&state=forged-state")
            return [("code", code), ("iss", self.stub.issuer)]  // no state at all
        }
        let failure = await assertFailure(.timeout) { () async throws(VaultFailure) in try await provider.login(browser) }
        XCTAssertEqual(failure?.message.en, "The login timed out — please try again")
        let page = await browser.browserResult()
        XCTAssertEqual(page?.status, 400)
        XCTAssertTrue(stub.server.requests("POST /token").isEmpty, "nothing is exchanged without the state")
    }

    /// Someone who knows the state but sends parameters twice tampered with the
    /// real redirect: that still ends the login as forged.
    func testDuplicatedParametersWithTheStateAreMismatches() async throws {
        let twice = BrowserConversation { request in
            [("code", self.stub.issueCode(for: request)), ("state", request.state), ("code", "other")]
        }
        let failure = await assertFailure(.stateMismatch) { () async throws(VaultFailure) in try await self.bankID().login(twice) }
        XCTAssertEqual(failure?.message.en, "Something went wrong — please log in again")
        let page = await twice.browserResult()
        XCTAssertTrue(page?.body.contains("Something went wrong — please log in again.") == true, page?.body ?? "")
        XCTAssertTrue(page?.body.contains("You can close this window") == true)
        XCTAssertTrue(stub.server.requests("POST /token").isEmpty, "nothing is exchanged after a forged redirect")
    }

    func testErrorTogetherWithCodeIsRejected() async throws {
        let browser = BrowserConversation(action: loggingIn(stub, extra: [("error", "access_denied")]))
        let failure = await assertFailure(.loginFailed) { () async throws(VaultFailure) in
            try await self.bankID().login(browser)
        }
        XCTAssertEqual(failure?.message.en, "Login failed — please try again")
        XCTAssertTrue(stub.server.requests("POST /token").isEmpty)
    }

    func cancelling(_ error: String) -> BrowserConversation.Action {
        { request in [("error", error), ("state", request.state), ("iss", self.stub.issuer)] }
    }

    func testAccessDeniedIsCancelledWithTheProvidersSentence() async throws {
        let failure = await assertFailure(.cancelled) { () async throws(VaultFailure) in
            try await self.bankID().login(BrowserConversation(action: self.cancelling("access_denied")))
        }
        XCTAssertEqual(failure?.message.en, "BankID login was cancelled")
        XCTAssertEqual(failure?.extra["provider"], "bankid")
        XCTAssertEqual(failure?.extra["alternatives"], ["vipps"])

        try await useVipps()
        let norwegian = BrowserConversation(language: .nb, action: cancelling("access_denied"))
        let vippsFailure = await assertFailure(.cancelled) { () async throws(VaultFailure) in
            try await self.vipps().login(norwegian)
        }
        XCTAssertEqual(vippsFailure?.message.en, "Vipps login was cancelled")
        XCTAssertEqual(vippsFailure?.message.nb, "Vipps-innloggingen ble avbrutt")
        let page = await norwegian.browserResult()
        XCTAssertTrue(page?.body.contains("Vipps-innloggingen ble avbrutt. Du kan lukke dette vinduet") == true, page?.body ?? "")
        XCTAssertTrue(page?.body.contains("lang=\"nb\"") == true)
        XCTAssertEqual(norwegian.lastRequest?.params["ui_locales"], "nb")
    }

    func testServerErrorAtTheProviderIsUnavailableWithAlternatives() async throws {
        for error in ["server_error", "temporarily_unavailable"] {
            let failure = await assertFailure(.providerUnavailable) { () async throws(VaultFailure) in
                try await self.bankID().login(BrowserConversation(action: self.cancelling(error)))
            }
            XCTAssertEqual(failure?.message.en, "BankID is temporarily unavailable. Try Vipps instead or retry later")
            XCTAssertEqual(failure?.extra["alternatives"], ["vipps"])
        }
        try await useVipps()
        let failure = await assertFailure(.providerUnavailable) { () async throws(VaultFailure) in
            try await self.vipps().login(BrowserConversation(action: self.cancelling("server_error")))
        }
        XCTAssertEqual(failure?.message.en, "Vipps is temporarily unavailable. Try BankID instead or retry later")
    }

    func testOtherAuthorizationErrorsFailTheLogin() async throws {
        _ = await assertFailure(.loginFailed) { () async throws(VaultFailure) in
            try await self.bankID().login(BrowserConversation(action: self.cancelling("invalid_request")))
        }
    }

    func testRFC9207IssParameter() async throws {
        stub.update { $0.issParameterSupported = true }
        // Advertised but missing: refused (mix-up defence).
        _ = await assertFailure(.stateMismatch) { () async throws(VaultFailure) in
            try await self.bankID().login(BrowserConversation(action: loggingIn(self.stub, iss: false)))
        }
        // Another issuer: refused, whether advertised or not.
        let mixup = BrowserConversation { request in
            [("code", self.stub.issueCode(for: request)), ("state", request.state), ("iss", "https://other.example")]
        }
        _ = await assertFailure(.stateMismatch) { () async throws(VaultFailure) in try await self.bankID().login(mixup) }
        stub.update { $0.issParameterSupported = false; $0.idClaims = ["bankid_altsub": "a"] }
        _ = await assertFailure(.stateMismatch) { () async throws(VaultFailure) in try await self.bankID().login(mixup) }
        // Not advertised and absent: fine.
        _ = try await bankID().login(BrowserConversation(action: loggingIn(stub, iss: false)))
    }

    func testNoRedirectTimesOutAndTheListenerIsClosed() async throws {
        let provider = bankID { $0.redirectTimeout = .seconds(1) }
        let browser = BrowserConversation { _ in nil }
        let started = ContinuousClock.now
        let failure = await assertFailure(.timeout) { () async throws(VaultFailure) in try await provider.login(browser) }
        let elapsed = ContinuousClock.now - started
        XCTAssertEqual(failure?.message.en, "The login timed out — please try again")
        XCTAssertLessThan(elapsed, .seconds(3))
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(900))
        // The pending login is gone: nothing listens on the redirect URI any more.
        let redirectURI = try XCTUnwrap(browser.lastRequest?.redirectURI)
        do {
            _ = try await browserGET(redirectURI + "?code=late&state=\(browser.lastRequest?.state ?? "")",
                                     timeout: .seconds(2))
            XCTFail("the listener should be closed")
        } catch {}
    }

    func testCancellingTheLoginTaskEndsItAndClosesTheListener() async throws {
        let provider = bankID()
        let browser = BrowserConversation { _ in nil }
        let task = Task { () async throws(VaultFailure) -> VerifiedLogin in try await provider.login(browser) }
        while browser.lastRequest == nil { try await Task.sleep(for: .milliseconds(20)) }
        task.cancel()
        let result = await task.result
        guard case .failure(let failure as VaultFailure) = result else { return XCTFail("expected a failure") }
        XCTAssertEqual(failure.code, .cancelled)
        let redirectURI = try XCTUnwrap(browser.lastRequest?.redirectURI)
        do {
            _ = try await browserGET(redirectURI, timeout: .seconds(2))
            XCTFail("the listener should be closed")
        } catch {}
    }

    func testListenerIgnoresOtherPathsAndForeignHosts() async throws {
        let provider = bankID()
        let results = Locked<[Int]>([])
        let browser = BrowserConversation { request in
            // A favicon request and a DNS-rebinding style request first: neither ends the login.
            let base = request.redirectURI.replacingOccurrences(of: "/callback", with: "")
            if let r = try? await browserGET(base + "/favicon.ico") { results.withLock { $0.append(r.status) } }
            var foreign = HTTPClientRequestBuilder.request(request.redirectURI + "?state=x&code=y")
            foreign.headers.replaceOrAdd(name: "host", value: "evil.example:80")
            if let r = try? await testBrowserClient.execute(foreign, timeout: .seconds(5)) {
                results.withLock { $0.append(Int(r.status.code)) }
            }
            return [("code", self.stub.issueCode(for: request)), ("state", request.state), ("iss", self.stub.issuer)]
        }
        stub.update { $0.idClaims = ["bankid_altsub": "a"] }
        _ = try await provider.login(browser)
        XCTAssertEqual(results.withLock { $0 }, [404, 400])
    }

    func testFixedPortRedirectAndSecondLoginWhileWaiting() async throws {
        let port = try await closedPort()
        let provider = bankID {
            $0.redirect = .fixedPort(UInt16(port), path: "/oidc/bankid")
            $0.redirectTimeout = .seconds(3)
        }
        stub.update { $0.idClaims = ["bankid_altsub": "a"] }
        let waiting = BrowserConversation { _ in nil }
        let first = Task { () async throws(VaultFailure) -> VerifiedLogin in try await provider.login(waiting) }
        while waiting.lastRequest == nil { try await Task.sleep(for: .milliseconds(20)) }
        XCTAssertEqual(waiting.lastRequest?.redirectURI, "http://127.0.0.1:\(port)/oidc/bankid")
        let failure = await assertFailure(.loginFailed) { () async throws(VaultFailure) in
            try await provider.login(BrowserConversation(action: loggingIn(self.stub)))
        }
        XCTAssertEqual(failure?.message, Messages.loginAlreadyWaiting)
        first.cancel()
        _ = await first.result
        // Once the first is gone the port is free again.
        let login = try await provider.login(BrowserConversation(action: loggingIn(stub)))
        XCTAssertEqual(login.subject, "a")
    }

    // MARK: Token endpoint and ID token in the flow

    func testInvalidGrantAtExchangeIsLoginFailed() async throws {
        let browser = BrowserConversation { request in
            _ = self.stub.issueCode(for: request)
            return [("code", "expired-or-unknown"), ("state", request.state), ("iss", self.stub.issuer)]
        }
        let failure = await assertFailure(.loginFailed) { () async throws(VaultFailure) in
            try await self.bankID().login(browser)
        }
        XCTAssertEqual(failure?.message.en, "Login failed — please try again")
        let page = await browser.browserResult()
        XCTAssertTrue(page?.body.contains("Login failed — please try again.") == true)
    }

    func testHostileIDTokensInTheFlowAreTokenInvalid() async throws {
        let rogue = try await TestSigner.es256(kid: "rogue")
        let cases: [(String, @Sendable (inout [String: JSON], inout [String: JSON]) -> Void)] = [
            ("wrong iss", { _, c in c["iss"] = "https://evil.example" }),
            ("wrong aud", { _, c in c["aud"] = "other" }),
            ("expired", { _, c in c["exp"] = .int(unixNow() - 3600) }),
            ("nonce", { _, c in c["nonce"] = "other" }),
            ("at_hash", { _, c in c["at_hash"] = "AAAAAAAAAAAAAAAAAAAAAA" }),
            ("azp", { _, c in c["azp"] = "other" }),
            ("no altsub", { _, c in c["bankid_altsub"] = nil }),
        ]
        for (name, mutate) in cases {
            stub.update {
                $0.idClaims = ["bankid_altsub": "a"]
                $0.mutateIDToken = mutate
            }
            let failure = await assertFailure(.tokenInvalid) { () async throws(VaultFailure) in
                try await self.bankID().login(BrowserConversation(action: loggingIn(self.stub)))
            }
            XCTAssertNotNil(failure, name)
        }
        // Signed with a key the JWKS does not have: one refetch, then token_invalid.
        stub.update {
            $0.mutateIDToken = nil
            $0.idTokenOverride = { nonce, access in
                let now = unixNow()
                return (try? rogue.sign(["iss": .string(self.stub.issuer), "sub": "s", "aud": .string(self.stub.clientID),
                                         "exp": .int(now + 300), "iat": .int(now), "nonce": .string(nonce),
                                         "bankid_altsub": "a"])) ?? ""
            }
        }
        let before = stub.jwksFetches.withLock { $0 }
        _ = await assertFailure(.tokenInvalid) { () async throws(VaultFailure) in
            try await self.bankID().login(BrowserConversation(action: loggingIn(self.stub)))
        }
        XCTAssertEqual(stub.jwksFetches.withLock { $0 } - before, 2, "the first fetch and exactly one refetch")
    }

    func testKeyRotationIsPickedUpByOneRefetch() async throws {
        let provider = bankID()
        stub.update { $0.idClaims = ["bankid_altsub": "a"] }
        _ = try await provider.login(BrowserConversation(action: loggingIn(stub)))
        XCTAssertEqual(stub.jwksFetches.withLock { $0 }, 1)
        let rotated = try await TestSigner.es256(kid: "es-2")
        stub.update {
            $0.jwks.append(rotated.jwk)
            $0.signer = rotated
        }
        _ = try await provider.login(BrowserConversation(action: loggingIn(stub)))
        XCTAssertEqual(stub.jwksFetches.withLock { $0 }, 2)
        _ = try await provider.login(BrowserConversation(action: loggingIn(stub)))
        XCTAssertEqual(stub.jwksFetches.withLock { $0 }, 2, "cached again")
    }

    func testDiscoveryForAnotherIssuerIsRefused() async throws {
        stub.update { $0.discoveryIssuer = "https://elsewhere.example" }
        let browser = BrowserConversation(action: loggingIn(stub))
        _ = await assertFailure(.providerUnavailable) { () async throws(VaultFailure) in
            try await self.bankID().login(browser)
        }
        XCTAssertNil(browser.lastRequest, "no browser is opened for a provider that fails discovery")
    }

    func testMinimumACR() async throws {
        stub.update { $0.idClaims = ["bankid_altsub": "a", "acr": "urn:bankid:bid;LOA=3"] }
        let strict = bankID { $0.minimumACR = "urn:bankid:bid;LOA=4" }
        let browser = BrowserConversation(action: loggingIn(stub))
        let failure = await assertFailure(.loginFailed) { () async throws(VaultFailure) in try await strict.login(browser) }
        XCTAssertEqual(failure?.message, Messages.loginTooWeak(provider: "BankID"))
        XCTAssertEqual(browser.lastRequest?.params["acr_values"], "urn:bankid:bid;LOA=4")
        stub.update { $0.idClaims["acr"] = "urn:bankid:bid;LOA=4" }
        let login = try await strict.login(BrowserConversation(action: loggingIn(stub)))
        XCTAssertEqual(login.acr, "urn:bankid:bid;LOA=4")
    }

    // MARK: Client authentication and gateway

    func testConfidentialClientAuthentication() async throws {
        stub.update { $0.idClaims = ["bankid_altsub": "a"] }
        _ = try await bankID { $0.clientAuthentication = .clientSecretBasic("s3cr:et") }
            .login(BrowserConversation(action: loggingIn(stub)))
        let basic = try XCTUnwrap(stub.server.requests("POST /token").last)
        let expected = "Basic " + Data("client-1:s3cr%3Aet".utf8).base64EncodedString()
        XCTAssertEqual(basic.header("authorization"), expected)
        XCTAssertNil(basic.form["client_secret"])

        _ = try await bankID { $0.clientAuthentication = .clientSecretPost("s3cret") }
            .login(BrowserConversation(action: loggingIn(stub)))
        let post = try XCTUnwrap(stub.server.requests("POST /token").last)
        XCTAssertEqual(post.form["client_secret"], "s3cret")
        XCTAssertEqual(post.form["client_id"], "client-1")
        XCTAssertNil(post.header("authorization"))
    }

    func testGatewayMode() async throws {
        stub.update { $0.idClaims = ["bankid_altsub": "a"] }
        // The gateway holds the secret: it forwards our form to the token endpoint.
        stub.server.route("POST /gateway/token") { request in
            XCTAssertNil(request.form["client_secret"])
            XCTAssertEqual(request.form["client_id"], "client-1")
            if request.form["grant_type"] == "authorization_code" {
                XCTAssertNotNil(request.form["code_verifier"])
                XCTAssertNotNil(request.form["redirect_uri"])
            }
            return await self.stub.server.dispatch(StubRequest(method: "POST", path: "/token", query: [:],
                                                               headers: request.headers, body: request.body))
        }
        let provider = bankID {
            $0.gatewayURL = self.stub.issuer + "/gateway/token"
            $0.clientAuthentication = .clientSecretBasic("never-sent")
        }
        let login = try await provider.login(BrowserConversation(action: loggingIn(stub)))
        XCTAssertEqual(stub.server.requests("POST /gateway/token").count, 1)
        XCTAssertNil(stub.server.requests("POST /gateway/token").last?.header("authorization"))
        let grant = try await provider.refresh(refreshToken: try XCTUnwrap(login.tokens.refreshToken))
        XCTAssertNotNil(grant.refreshToken)
        XCTAssertEqual(stub.server.requests("POST /gateway/token").count, 2)
        let revoked = await provider.revoke(token: "x", isRefreshToken: true)
        XCTAssertFalse(revoked, "no revocation in gateway mode")
    }

    /// Backend mode (docs/backend.md): the backend exchanges the code, answers
    /// with its own tokens and the provider's ID token (whose at_hash names the
    /// provider's access token), refreshes whatever the provider does (Vipps:
    /// none), and hears the logout; its own refusals have their own sentences.
    func testBackendMode() async throws {
        try await useVipps()
        let backendRequests = Locked<[StubRequest]>([])
        let answers = Locked<[StubReply]>([])   // queued answers for refreshes; empty: a fresh rotation
        stub.server.route("POST /backend/token") { request in
            backendRequests.withLock { $0.append(request) }
            XCTAssertNil(request.form["client_secret"])
            XCTAssertEqual(request.form["client_id"], "client-1")
            if request.form["grant_type"] == "authorization_code" {
                // The backend's own exchange (the stub stands in for the provider).
                let upstream = await self.stub.server.dispatch(StubRequest(method: "POST", path: "/token", query: [:],
                                                                           headers: request.headers, body: request.body))
                guard case .json(200, let body) = upstream, let idToken = body["id_token"] else { return upstream }
                return .json(200, ["access_token": "backend-at-1", "token_type": "Bearer", "expires_in": 900,
                                   "refresh_token": "backend-rt-1", "refresh_expires_in": 604_800, "id_token": idToken])
            }
            if let queued = answers.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { return queued }
            return .json(200, ["access_token": "backend-at-2", "token_type": "Bearer", "expires_in": 900,
                               "refresh_token": "backend-rt-2", "refresh_expires_in": 500_000])
        }
        stub.server.route("POST /backend/revoke") { request in
            backendRequests.withLock { $0.append(request) }
            return .json(200, [:])
        }
        let provider = vipps {
            $0.backend = .init(tokenURL: self.stub.issuer + "/backend/token", revocationURL: self.stub.issuer + "/backend/revoke")
        }
        XCTAssertTrue(provider.issuesRefreshTokens, "the backend keeps a Vipps session")
        XCTAssertEqual(provider.backendOrigin, WebOrigin.of(stub.issuer))
        XCTAssertFalse(provider.provesNationalID, "Vipps' nin is in userinfo, which only the backend can read")

        let login = try await provider.login(BrowserConversation(action: loggingIn(stub)))
        XCTAssertEqual(login.tokens.accessToken, "backend-at-1")
        XCTAssertEqual(login.tokens.refreshToken, "backend-rt-1")
        XCTAssertNotNil(login.tokens.refreshExpiresAt)
        XCTAssertEqual(login.subject, "vipps-sub-1")
        XCTAssertNil(login.nationalID)
        XCTAssertEqual(stub.server.requests("GET /userinfo").count, 0, "userinfo needs the provider's token")

        let grant = try await provider.refresh(refreshToken: "backend-rt-1")
        XCTAssertEqual(grant.accessToken, "backend-at-2")
        XCTAssertEqual(grant.refreshToken, "backend-rt-2", "the rotated refresh token")
        XCTAssertEqual(backendRequests.withLock { $0.last?.form["refresh_token"] }, "backend-rt-1")

        answers.withLock { $0 = [.json(400, ["error": "invalid_grant", "error_description": "reused"])] }
        let reused = await assertFailure(.sessionExpired) { () async throws(VaultFailure) in
            _ = try await provider.refresh(refreshToken: "backend-rt-2")
        }
        XCTAssertEqual(reused?.message, Messages.sessionEndedReused)
        answers.withLock { $0 = [.json(400, ["error": "access_denied", "error_description": "membership_ended"])] }
        let ended = await assertFailure(.sessionExpired) { () async throws(VaultFailure) in
            _ = try await provider.refresh(refreshToken: "backend-rt-2")
        }
        XCTAssertEqual(ended?.message, Messages.backendMembershipEnded)
        // Free text from the wire is never a sentence: an unknown word is the general one.
        answers.withLock { $0 = [.json(400, ["error": "invalid_grant", "error_description": "Your token is <b>bad</b>"])] }
        let plain = await assertFailure(.sessionExpired) { () async throws(VaultFailure) in
            _ = try await provider.refresh(refreshToken: "backend-rt-2")
        }
        XCTAssertEqual(plain?.message, Messages.standard(.sessionExpired))

        let revoked = await provider.revoke(token: "backend-rt-2", isRefreshToken: true)
        XCTAssertTrue(revoked)
        let revocation = try XCTUnwrap(backendRequests.withLock { $0.last })
        XCTAssertEqual(revocation.path, "/backend/revoke")
        XCTAssertEqual(revocation.form["token"], "backend-rt-2")
        XCTAssertEqual(revocation.form["client_id"], "client-1")
        XCTAssertEqual(stub.server.requests("POST /token").count, 1, "the provider saw the code exchange only")
    }

    /// The backend's age rule at login: its sentence, not "Login failed".
    func testBackendRefusalByItsOwnRuleHasItsSentence() async throws {
        try await useVipps()
        stub.server.route("POST /backend/token") { _ in .json(400, ["error": "access_denied", "error_description": "age"]) }
        let provider = vipps { $0.backend = .init(tokenURL: self.stub.issuer + "/backend/token") }
        let failure = await assertFailure(.loginFailed) { () async throws(VaultFailure) in
            _ = try await provider.login(BrowserConversation(action: loggingIn(self.stub)))
        }
        XCTAssertEqual(failure?.message, Messages.backendRefusedAge)
        stub.server.route("POST /backend/token") { _ in .json(400, ["error": "access_denied", "error_description": "national_id"]) }
        let noID = await assertFailure(.loginFailed) { () async throws(VaultFailure) in
            _ = try await provider.login(BrowserConversation(action: loggingIn(self.stub)))
        }
        XCTAssertEqual(noID?.message, Messages.backendRefusedNationalID(provider: "Vipps"))
        let revoked = await provider.revoke(token: "t", isRefreshToken: true)
        XCTAssertFalse(revoked, "no revocation endpoint configured")
    }

    func testNonInteractiveClient() async throws {
        final class Silent: FactorConversation {
            let language = Language.en
            func show(_ message: LocalizedText) async {}
            func askSecret(_ prompt: LocalizedText) async throws(FactorError) -> SecureBytes { throw .notInteractive }
            func confirm(_ prompt: LocalizedText) async throws(FactorError) -> Bool { throw .notInteractive }
            func openURL(_ url: String, _ text: LocalizedText) async throws(FactorError) { throw .notInteractive }
        }
        _ = await assertFailure(.badRequest) { () async throws(VaultFailure) in try await self.bankID().login(Silent()) }
    }

    /// `prompt=login` is only a request: the login counts as a fresh
    /// authentication (what re-enrolling a changed fingerprint needs) only
    /// when the ID token's `auth_time` falls within this login.
    func testReauthenticatedOnlyWithAnAuthTimeFromThisLogin() async throws {
        let provider = bankID()
        let options = LoginOptions(reauthenticate: true)
        var seen: [Bool] = []
        for authTime: JSON? in [.int(unixNow() - 3600), nil, .int(unixNow())] {
            stub.update {
                $0.idClaims = ["bankid_altsub": "altsub-kari", "name": "Kari Nordmann", "acr": "urn:bankid:bid;LOA=4"]
                if let authTime { $0.idClaims["auth_time"] = authTime }
            }
            let login = try await provider.login(BrowserConversation(action: loggingIn(stub)), options: options)
            seen.append(login.reauthenticated)
        }
        XCTAssertEqual(seen, [false, false, true], "an hour-old auth_time, none, and one from this login")
    }
}

/// Builds a request with a chosen Host header (AsyncHTTPClient sets it from the URL otherwise).
enum HTTPClientRequestBuilder {
    static func request(_ url: String) -> AsyncHTTPClient.HTTPClientRequest {
        AsyncHTTPClient.HTTPClientRequest(url: url)
    }
}

import AsyncHTTPClient

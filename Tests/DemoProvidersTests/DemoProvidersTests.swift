import DemoProviders
import Foundation
import JWTKit
import NIOCore
import NIOHTTP1
import NIOPosix
import SodiumKit
import VaultProtocol
import XCTest
import VaultTestSupport

final class DemoProvidersTests: XCTestCase {
    var demo: DemoProviders!
    let redirectURI = "http://127.0.0.1:49152/callback"
    let logLines = LogCollector()

    override func setUp() async throws {
        var config = DemoProviders.Configuration()
        let log = logLines
        config.log = { log.append($0) }
        demo = try await DemoProviders.start(group: MultiThreadedEventLoopGroup.singleton, configuration: config)
    }

    override func tearDown() async throws {
        try await demo?.shutdown()
        demo = nil
    }

    // MARK: - Helpers

    struct Login {
        let tokens: JSON
        let nonce: String
        let idToken: String
        let accessToken: String
        var refreshToken: String? { tokens["refresh_token"]?.stringValue }
    }

    func authorizeURL(_ issuer: DemoProviders.Issuer, pkce: PKCE?, state: String, nonce: String,
                      extra: [(String, String)] = [], method: String? = "S256", scope: String? = nil) -> String {
        var q: [(String, String)] = [
            ("response_type", "code"), ("client_id", issuer.clientID), ("redirect_uri", redirectURI),
            ("scope", scope ?? issuer.scopes.joined(separator: " ")), ("state", state), ("nonce", nonce),
        ]
        if let pkce { q.append(("code_challenge", pkce.challenge)) }
        if let method { q.append(("code_challenge_method", method)) }
        return issuer.issuer + "/authorize?" + formBody(q + extra)
    }

    /// Authorize with `demo_user`: returns the code from the 302, having checked state and iss.
    func authorize(_ issuer: DemoProviders.Issuer, user: String, pkce: PKCE, nonce: String = UUID().uuidString,
                   file: StaticString = #filePath, line: UInt = #line) async throws -> String {
        let state = UUID().uuidString
        let reply = try await get(authorizeURL(issuer, pkce: pkce, state: state, nonce: nonce, extra: [("demo_user", user)]))
        XCTAssertEqual(reply.status, 302, reply.text, file: file, line: line)
        let location = try XCTUnwrap(reply.location, file: file, line: line)
        XCTAssertTrue(location.hasPrefix(redirectURI + "?"), location, file: file, line: line)
        let q = queryItems(location)
        XCTAssertEqual(q["state"], state, file: file, line: line)
        XCTAssertEqual(q["iss"], issuer.issuer, "RFC 9207 iss", file: file, line: line)
        XCTAssertNil(q["error"], file: file, line: line)
        return try XCTUnwrap(q["code"], file: file, line: line)
    }

    func exchange(_ issuer: DemoProviders.Issuer, code: String, verifier: String?, redirect: String? = nil) async throws -> Reply {
        var form = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirect ?? redirectURI),
                    ("client_id", issuer.clientID)]
        if let verifier { form.append(("code_verifier", verifier)) }
        return try await post(issuer.issuer + "/token", form: form)
    }

    func login(_ issuer: DemoProviders.Issuer, user: String,
               file: StaticString = #filePath, line: UInt = #line) async throws -> Login {
        let pkce = PKCE()
        let nonce = UUID().uuidString
        let code = try await authorize(issuer, user: user, pkce: pkce, nonce: nonce, file: file, line: line)
        let reply = try await exchange(issuer, code: code, verifier: pkce.verifier)
        XCTAssertEqual(reply.status, 200, reply.text, file: file, line: line)
        XCTAssertEqual(reply.headers.first(name: "cache-control"), "no-store", file: file, line: line)
        let tokens = try reply.json()
        return Login(tokens: tokens, nonce: nonce,
                     idToken: try XCTUnwrap(tokens["id_token"]?.stringValue, file: file, line: line),
                     accessToken: try XCTUnwrap(tokens["access_token"]?.stringValue, file: file, line: line))
    }

    /// Verifies the ID token's signature with jwt-kit against the issuer's JWKS (checking
    /// kid and alg first, as jwt-kit does not) and returns its claims.
    func verifiedClaims(_ token: String, issuer: DemoProviders.Issuer, alg: String,
                        file: StaticString = #filePath, line: UInt = #line) async throws -> [String: JSON] {
        let discovery = try await get(issuer.discoveryURL).json()
        let jwksReply = try await get(try XCTUnwrap(discovery["jwks_uri"]?.stringValue))
        XCTAssertEqual(jwksReply.status, 200, file: file, line: line)
        let jwks = try jwksReply.json()
        let (header, claims) = try jwtParts(token)
        XCTAssertEqual(header["alg"]?.stringValue, alg, file: file, line: line)
        XCTAssertEqual(header["typ"]?.stringValue, "JWT", file: file, line: line)
        let kid = try XCTUnwrap(header["kid"]?.stringValue, file: file, line: line)
        let key = try XCTUnwrap(jwks["keys"]?.arrayValue?.first { $0["kid"]?.stringValue == kid }, "kid not in JWKS",
                                file: file, line: line)
        XCTAssertEqual(key["alg"]?.stringValue, alg, file: file, line: line)

        let keys = JWTKeyCollection()
        try await keys.add(jwksJSON: jwksReply.text)
        let payload = try await keys.verify(token, as: IDTokenPayload.self)
        XCTAssertEqual(payload.iss.value, issuer.issuer, file: file, line: line)
        XCTAssertEqual(payload.aud.value, [issuer.clientID], file: file, line: line)
        XCTAssertLessThanOrEqual(abs(payload.iat.value.timeIntervalSinceNow), 30, file: file, line: line)

        // A changed payload must not verify.
        let parts = token.split(separator: ".")
        var forgedClaims = try XCTUnwrap(claims.objectValue)
        forgedClaims["sub"] = "someone-else"
        let forged = "\(parts[0]).\(base64URL(JSON.object(forgedClaims).serialized())).\(parts[2])"
        do {
            _ = try await keys.verify(forged, as: IDTokenPayload.self)
            XCTFail("a forged ID token verified", file: file, line: line)
        } catch {}
        return try XCTUnwrap(claims.objectValue, file: file, line: line)
    }

    // MARK: - Synthetic identities

    func testSyntheticNationalIDsAreValid() throws {
        XCTAssertGreaterThanOrEqual(DemoIdentity.all.count, 3)
        XCTAssertEqual(Set(DemoIdentity.all.map(\.nationalID)).count, DemoIdentity.all.count)
        for person in DemoIdentity.all {
            let v = try XCTUnwrap(validateFodselsnummer(person.nationalID), "\(person.id): invalid check digits")
            XCTAssertTrue(v.synthetic, "\(person.id): month must carry +80")
            XCTAssertEqual(String(format: "%04d-%02d-%02d", v.year, v.month, v.day), person.birthdate, person.id)
            XCTAssertFalse(person.organization.isEmpty)
            XCTAssertFalse(person.roles.isEmpty)
            XCTAssertFalse(person.description.contains(person.nationalID), "description must not show the number")
        }
        XCTAssertEqual(DemoIdentity.named("kari")?.organization, "Mentorhuset Oslo")
        XCTAssertEqual(DemoIdentity.named("kari")?.roles, ["peer_mentor"])
        XCTAssertEqual(DemoIdentity.named("ola")?.organization, "Likepersonsnettverket Bergen")
        XCTAssertEqual(DemoIdentity.named("ola")?.roles, ["coordinator"])

        // The validator itself rejects what it should.
        let kari = DemoIdentity.named("kari")!.nationalID
        let digits: [Int] = kari.compactMap { $0.wholeNumberValue }
        for i in 0..<digits.count {
            var changed = digits
            changed[i] = (changed[i] + 1) % 10
            let text = changed.map(String.init).joined()
            XCTAssertNil(validateFodselsnummer(text), "one changed digit must break a check digit")
        }
        XCTAssertNil(validateFodselsnummer(kari, allowSynthetic: false))
        XCTAssertNil(validateFodselsnummer("1583851232"))
        XCTAssertNil(validateFodselsnummer("15838512329x"))
        // 01929023400 would need check digit 10 for k1 with individual 234: never valid.
        XCTAssertNil(validateFodselsnummer("01929023400"))
    }

    // MARK: - Server

    func testBoundToLoopbackOnly() async throws {
        XCTAssertEqual(demo.baseURL, "http://127.0.0.1:\(demo.port)")
        XCTAssertEqual(demo.bankID.issuer, "http://127.0.0.1:\(demo.port)/bankid")
        XCTAssertEqual(demo.vipps.issuer, "http://127.0.0.1:\(demo.port)/vipps")

        // The kernel's view: the listening socket's local address is 127.0.0.1, and no
        // IPv6 socket listens on the port.
        let portHex = String(format: "%04X", demo.port)
        XCTAssertEqual(try listeningAddresses(table: "/proc/net/tcp", portHex: portHex), ["0100007F:" + portHex])
        XCTAssertEqual(try listeningAddresses(table: "/proc/net/tcp6", portHex: portHex), [])

        // And from outside: another local address of this machine does not answer.
        for address in nonLoopbackIPv4Addresses() {
            do {
                _ = try await get("http://\(address):\(demo.port)/bankid/jwks", host: "127.0.0.1:\(demo.port)")
                XCTFail("answered on \(address)")
            } catch {}
        }
    }

    func testHostHeaderMustBeLoopback() async throws {
        let url = demo.bankID.discoveryURL
        let rebinding = try await get(url, host: "attacker.example:\(demo.port)")
        XCTAssertEqual(rebinding.status, 421)
        await assertEqual(try await get(url, host: "localhost:\(demo.port)").status, 200)
        await assertEqual(try await get(url).status, 200)
    }

    func testKeepAliveServesSeveralRequestsOnOneConnection() async throws {
        let replies = try await send([
            Req(url: demo.bankID.discoveryURL),
            Req(url: demo.bankID.issuer + "/jwks"),
            Req(url: demo.vipps.discoveryURL),
        ])
        XCTAssertEqual(replies.map(\.status), [200, 200, 200])
        XCTAssertEqual(try replies[2].json()["issuer"]?.stringValue, demo.vipps.issuer)
    }

    func testKeysAreFreshAtEveryStart() async throws {
        let first = try await get(demo.bankID.issuer + "/jwks").json()
        let other = try await DemoProviders.start(group: MultiThreadedEventLoopGroup.singleton)
        let second = try await get(other.bankID.issuer + "/jwks").json()
        let vipps1 = try await get(demo.vipps.issuer + "/jwks").json()
        let vipps2 = try await get(other.vipps.issuer + "/jwks").json()
        try await other.shutdown()
        XCTAssertNotEqual(first["keys"]?.arrayValue?.first?["x"], second["keys"]?.arrayValue?.first?["x"])
        XCTAssertNotEqual(first["keys"]?.arrayValue?.first?["kid"], second["keys"]?.arrayValue?.first?["kid"])
        XCTAssertNotEqual(vipps1["keys"]?.arrayValue?.first?["n"], vipps2["keys"]?.arrayValue?.first?["n"])
    }

    func testShutdownClosesThePort() async throws {
        let other = try await DemoProviders.start(group: MultiThreadedEventLoopGroup.singleton)
        await assertEqual(try await get(other.bankID.discoveryURL).status, 200)
        try await other.shutdown()
        do {
            _ = try await get(other.bankID.discoveryURL)
            XCTFail("still answering after shutdown")
        } catch {}
    }

    func testShutdownClosesIdleKeepAliveConnections() async throws {
        let other = try await DemoProviders.start(group: MultiThreadedEventLoopGroup.singleton)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: other.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        try await channel.executeThenClose { inbound, outbound in
            var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/bankid/jwks")
            head.headers.add(name: "Host", value: "127.0.0.1:\(other.port)")
            try await outbound.write(contentsOf: [.head(head), .end(nil)])
            var iterator = inbound.makeAsyncIterator()
            var ended = false
            while !ended, let part = try await iterator.next() {
                if case .end = part { ended = true }
            }
            XCTAssertTrue(ended)
            // The connection is idle and kept alive; shutdown must not wait for the client.
            let started = Date()
            try await other.shutdown()
            XCTAssertLessThan(Date().timeIntervalSince(started), 5)
            do {
                let next = try await iterator.next()
                XCTAssertNil(next, "the server closed the idle connection")
            } catch {}
        }
    }

    // MARK: - Discovery and JWKS

    func testDiscoveryAndJWKS() async throws {
        for (issuer, alg, grants) in [(demo.bankID, "ES256", ["authorization_code", "refresh_token"]),
                                      (demo.vipps, "RS256", ["authorization_code"])] {
            XCTAssertEqual(issuer.clientID, "sessionvault-demo")
            XCTAssertEqual(issuer.signingAlgorithm, alg)
            let d = try await get(issuer.discoveryURL).json()
            XCTAssertEqual(d["issuer"]?.stringValue, issuer.issuer)
            XCTAssertEqual(d["authorization_endpoint"]?.stringValue, issuer.issuer + "/authorize")
            XCTAssertEqual(d["token_endpoint"]?.stringValue, issuer.issuer + "/token")
            XCTAssertEqual(d["userinfo_endpoint"]?.stringValue, issuer.issuer + "/userinfo")
            XCTAssertEqual(d["revocation_endpoint"]?.stringValue, issuer.issuer + "/revoke")
            XCTAssertEqual(d["code_challenge_methods_supported"], ["S256"])
            XCTAssertEqual(d["authorization_response_iss_parameter_supported"], true)
            XCTAssertEqual(d["id_token_signing_alg_values_supported"], [.string(alg)])
            XCTAssertEqual(d["grant_types_supported"], .array(grants.map { .string($0) }))
            XCTAssertEqual(d["response_types_supported"], ["code"])

            let jwks = try await get(try XCTUnwrap(d["jwks_uri"]?.stringValue)).json()
            let keys = try XCTUnwrap(jwks["keys"]?.arrayValue)
            XCTAssertFalse(keys.isEmpty)
            for key in keys {
                XCTAssertNotNil(key["kid"]?.stringValue)
                XCTAssertEqual(key["alg"]?.stringValue, alg)
                XCTAssertEqual(key["use"]?.stringValue, "sig")
                XCTAssertNil(key["d"], "no private parts in the JWKS")
                XCTAssertNil(key["p"])
            }
            if alg == "RS256" {
                XCTAssertEqual(keys[0]["kty"]?.stringValue, "RSA")
                XCTAssertEqual(keys[0]["e"]?.stringValue, "AQAB")
                let n = try XCTUnwrap(base64URLDecode(Substring(keys[0]["n"]?.stringValue ?? "")))
                XCTAssertEqual(n.count, 256, "RSA-2048")
            } else {
                XCTAssertEqual(keys[0]["kty"]?.stringValue, "EC")
                XCTAssertEqual(keys[0]["crv"]?.stringValue, "P-256")
            }
        }
        XCTAssertEqual(demo.bankID.displayName, "Demo BankID")
        XCTAssertEqual(demo.vipps.displayName, "Demo Vipps")
        await assertEqual(try await get(demo.baseURL + "/elsewhere/.well-known/openid-configuration").status, 404)
    }

    // MARK: - Demo BankID

    func testBankIDCodeFlow() async throws {
        let issuer = demo.bankID
        let login = try await login(issuer, user: "kari")
        XCTAssertEqual(login.tokens["token_type"]?.stringValue, "Bearer")
        XCTAssertEqual(login.tokens["expires_in"]?.intValue, 600)
        XCTAssertNotNil(login.refreshToken)
        XCTAssertGreaterThanOrEqual(login.accessToken.count, 43)
        XCTAssertFalse(login.accessToken.contains("."), "access tokens are opaque")

        let c = try await verifiedClaims(login.idToken, issuer: issuer, alg: "ES256")
        let kari = try XCTUnwrap(DemoIdentity.named("kari"))
        XCTAssertEqual(c["iss"]?.stringValue, issuer.issuer)
        XCTAssertEqual(c["aud"]?.stringValue, issuer.clientID)
        XCTAssertEqual(c["azp"]?.stringValue, issuer.clientID)
        XCTAssertEqual(c["nonce"]?.stringValue, login.nonce)
        XCTAssertEqual(c["at_hash"]?.stringValue, base64URL(Array(Digest.sha256(Array(login.accessToken.utf8)).prefix(16))))
        XCTAssertEqual(c["acr"]?.stringValue, "urn:bankid:bid;LOA=4")
        XCTAssertEqual(c["name"]?.stringValue, "Kari Nordmann")
        XCTAssertEqual(c["nnin_altsub"]?.stringValue, kari.nationalID)
        XCTAssertNotNil(c["bankid_altsub"]?.stringValue)
        XCTAssertNotNil(c["sub"]?.stringValue)
        XCTAssertEqual(c["org"]?.stringValue, "Mentorhuset Oslo")
        XCTAssertEqual(c["roles"], ["peer_mentor"])
        let exp = try XCTUnwrap(c["exp"]?.intValue), iat = try XCTUnwrap(c["iat"]?.intValue)
        XCTAssertGreaterThan(exp, iat)

        // Userinfo with the access token.
        let info = try await get(issuer.issuer + "/userinfo", headers: [("Authorization", "Bearer " + login.accessToken)])
        XCTAssertEqual(info.status, 200, info.text)
        let u = try info.json()
        XCTAssertEqual(u["sub"], c["sub"])
        XCTAssertEqual(u["bankid_altsub"], c["bankid_altsub"])
        await assertEqual(try await get(issuer.issuer + "/userinfo", headers: [("Authorization", "Bearer nope")]).status, 401)
        await assertEqual(try await get(issuer.issuer + "/userinfo").status, 401)

        // The log line names the request, never a token, code or national ID.
        let lines = logLines.all.joined(separator: "\n")
        XCTAssertTrue(lines.contains("POST /bankid/token -> 200"), lines)
        XCTAssertFalse(lines.contains(login.accessToken))
        XCTAssertFalse(lines.contains(kari.nationalID))
        XCTAssertFalse(lines.contains("code="))
    }

    func testBankIDSubChangesButAltsubIsStable() async throws {
        let first = try await verifiedClaims(try await login(demo.bankID, user: "ola").idToken, issuer: demo.bankID, alg: "ES256")
        let second = try await verifiedClaims(try await login(demo.bankID, user: "ola").idToken, issuer: demo.bankID, alg: "ES256")
        let other = try await verifiedClaims(try await login(demo.bankID, user: "kari").idToken, issuer: demo.bankID, alg: "ES256")
        XCTAssertNotEqual(first["sub"], second["sub"], "BankID's sub is new at every login")
        XCTAssertEqual(first["bankid_altsub"], second["bankid_altsub"])
        XCTAssertNotEqual(first["bankid_altsub"], other["bankid_altsub"])
        XCTAssertEqual(first["nnin_altsub"], second["nnin_altsub"])
        XCTAssertEqual(first["org"]?.stringValue, "Likepersonsnettverket Bergen")
        XCTAssertEqual(first["roles"], ["coordinator"])

        // Stable across restarts too (a keyslot bound to the identity survives vaultd restarting).
        let restarted = try await DemoProviders.start(group: MultiThreadedEventLoopGroup.singleton)
        let pkce = PKCE()
        let reply = try await get(restarted.bankID.issuer + "/authorize?" + formBody([
            ("response_type", "code"), ("client_id", "sessionvault-demo"), ("redirect_uri", redirectURI), ("scope", "openid"),
            ("state", "s"), ("code_challenge", pkce.challenge), ("code_challenge_method", "S256"), ("demo_user", "ola"),
        ]))
        let code = try XCTUnwrap(queryItems(reply.location ?? "")["code"])
        let tokens = try await post(restarted.bankID.issuer + "/token", form: [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
            ("client_id", "sessionvault-demo"), ("code_verifier", pkce.verifier),
        ]).json()
        try await restarted.shutdown()
        let claims = try jwtParts(try XCTUnwrap(tokens["id_token"]?.stringValue)).claims
        XCTAssertEqual(claims["bankid_altsub"], first["bankid_altsub"])
    }

    func testBankIDRefreshRotatesAndReuseRevokesTheFamily() async throws {
        let issuer = demo.bankID
        let login = try await login(issuer, user: "kari")
        let r0 = try XCTUnwrap(login.refreshToken)
        let firstClaims = try jwtParts(login.idToken).claims

        func refresh(_ token: String) async throws -> Reply {
            try await post(issuer.issuer + "/token", form: [("grant_type", "refresh_token"), ("refresh_token", token),
                                                            ("client_id", issuer.clientID)])
        }
        let first = try await refresh(r0)
        XCTAssertEqual(first.status, 200, first.text)
        let t1 = try first.json()
        let r1 = try XCTUnwrap(t1["refresh_token"]?.stringValue)
        let a1 = try XCTUnwrap(t1["access_token"]?.stringValue)
        XCTAssertNotEqual(r1, r0, "the refresh token rotates")
        XCTAssertNotEqual(a1, login.accessToken)
        // A refreshed ID token keeps sub and auth_time (OIDC Core §12.2) and has no nonce.
        let refreshedClaims = try await verifiedClaims(try XCTUnwrap(t1["id_token"]?.stringValue), issuer: issuer, alg: "ES256")
        XCTAssertEqual(refreshedClaims["sub"], firstClaims["sub"])
        XCTAssertEqual(refreshedClaims["auth_time"], firstClaims["auth_time"])
        XCTAssertNil(refreshedClaims["nonce"])

        let second = try await refresh(r1)
        XCTAssertEqual(second.status, 200)
        let t2 = try second.json()
        let r2 = try XCTUnwrap(t2["refresh_token"]?.stringValue)
        let a2 = try XCTUnwrap(t2["access_token"]?.stringValue)
        await assertEqual(try await get(issuer.issuer + "/userinfo", headers: [("Authorization", "Bearer " + a2)]).status, 200)

        // Reusing r0 (already rotated): invalid_grant, and the whole family is revoked.
        let reuse = try await refresh(r0)
        XCTAssertEqual(reuse.status, 400)
        XCTAssertEqual(try reuse.json()["error"]?.stringValue, "invalid_grant")
        let afterReuse = try await refresh(r2)
        XCTAssertEqual(afterReuse.status, 400, "the newest refresh token died with its family")
        XCTAssertEqual(try afterReuse.json()["error"]?.stringValue, "invalid_grant")
        await assertEqual(try await get(issuer.issuer + "/userinfo", headers: [("Authorization", "Bearer " + a2)]).status, 401,
                       "and so did its access tokens")

        // Another login is unaffected.
        let other = try await self.login(issuer, user: "kari")
        await assertEqual(try await refresh(try XCTUnwrap(other.refreshToken)).status, 200)
        await assertEqual(try await refresh("made-up").status, 400)
    }

    func testRevocationEndpoint() async throws {
        let issuer = demo.bankID
        let login = try await login(issuer, user: "per")
        let revokeAccess = try await post(issuer.issuer + "/revoke", form: [("token", login.accessToken), ("client_id", issuer.clientID)])
        XCTAssertEqual(revokeAccess.status, 200)
        await assertEqual(try await get(issuer.issuer + "/userinfo", headers: [("Authorization", "Bearer " + login.accessToken)]).status, 401)

        let refreshed = try await post(issuer.issuer + "/token", form: [
            ("grant_type", "refresh_token"), ("refresh_token", try XCTUnwrap(login.refreshToken)), ("client_id", issuer.clientID)])
        XCTAssertEqual(refreshed.status, 200, "revoking an access token leaves the refresh token")
        let r1 = try XCTUnwrap(try refreshed.json()["refresh_token"]?.stringValue)
        let a1 = try XCTUnwrap(try refreshed.json()["access_token"]?.stringValue)
        await assertEqual(try await post(issuer.issuer + "/revoke", form: [("token", r1), ("token_type_hint", "refresh_token"),
                                                                       ("client_id", issuer.clientID)]).status, 200)
        await assertEqual(try await get(issuer.issuer + "/userinfo", headers: [("Authorization", "Bearer " + a1)]).status, 401)
        await assertEqual(try await post(issuer.issuer + "/token", form: [
            ("grant_type", "refresh_token"), ("refresh_token", r1), ("client_id", issuer.clientID)]).status, 400)
        // Unknown tokens: 200 all the same (RFC 7009 §2.2).
        await assertEqual(try await post(issuer.issuer + "/revoke", form: [("token", "unknown"), ("client_id", issuer.clientID)]).status, 200)
    }

    func testAccessTokenExpires() async throws {
        try await demo.shutdown()
        let clock = TestClock()
        var config = DemoProviders.Configuration()
        config.now = { clock.seconds }
        config.bankIDAccessTokenTTL = 120
        demo = try await DemoProviders.start(group: MultiThreadedEventLoopGroup.singleton, configuration: config)
        let login = try await login(demo.bankID, user: "kari")
        XCTAssertEqual(login.tokens["expires_in"]?.intValue, 120)
        let userinfo = demo.bankID.issuer + "/userinfo"
        await assertEqual(try await get(userinfo, headers: [("Authorization", "Bearer " + login.accessToken)]).status, 200)
        clock.advance(121)
        await assertEqual(try await get(userinfo, headers: [("Authorization", "Bearer " + login.accessToken)]).status, 401)

        // An authorization code lives 60 s.
        let pkce = PKCE()
        let code = try await authorize(demo.bankID, user: "kari", pkce: pkce)
        clock.advance(61)
        let late = try await exchange(demo.bankID, code: code, verifier: pkce.verifier)
        XCTAssertEqual(try late.json()["error"]?.stringValue, "invalid_grant")
    }

    // MARK: - Demo Vipps

    func testVippsCodeFlow() async throws {
        let issuer = demo.vipps
        let login = try await login(issuer, user: "ola")
        XCTAssertNil(login.tokens["refresh_token"], "Vipps issues no refresh tokens")
        XCTAssertEqual(login.tokens["expires_in"]?.intValue, 300)

        let c = try await verifiedClaims(login.idToken, issuer: issuer, alg: "RS256")
        let standard: Set = ["iss", "sub", "aud", "azp", "exp", "iat", "auth_time", "nonce", "at_hash", "jti"]
        XCTAssertTrue(Set(c.keys).isSubset(of: standard), "only sub and standard claims: \(c.keys.sorted())")
        XCTAssertNil(c["nin"])
        XCTAssertNil(c["name"])
        XCTAssertEqual(c["nonce"]?.stringValue, login.nonce)

        let info = try await get(issuer.issuer + "/userinfo", headers: [("Authorization", "Bearer " + login.accessToken)])
        XCTAssertEqual(info.status, 200)
        let u = try info.json()
        let ola = try XCTUnwrap(DemoIdentity.named("ola"))
        XCTAssertEqual(u["sub"], c["sub"])
        XCTAssertEqual(u["nin"]?.stringValue, ola.nationalID)
        XCTAssertEqual(u["name"]?.stringValue, "Ola Nordmann")
        XCTAssertEqual(u["phone_number"]?.stringValue, ola.phoneNumber)
        XCTAssertEqual(u["org"]?.stringValue, "Likepersonsnettverket Bergen")
        XCTAssertEqual(u["roles"], ["coordinator"])

        // Vipps' sub is stable across logins.
        let again = try jwtParts(try await self.login(issuer, user: "ola").idToken).claims
        XCTAssertEqual(again["sub"], c["sub"])

        // No refresh grant at all.
        let refresh = try await post(issuer.issuer + "/token", form: [("grant_type", "refresh_token"), ("refresh_token", "x"),
                                                                      ("client_id", issuer.clientID)])
        XCTAssertEqual(refresh.status, 400)
        XCTAssertEqual(try refresh.json()["error"]?.stringValue, "unsupported_grant_type")

        // A BankID token does not verify with Vipps' keys, nor the other way round.
        let bankIDToken = try await self.login(demo.bankID, user: "ola").idToken
        let vippsKeys = JWTKeyCollection()
        try await vippsKeys.add(jwksJSON: try await get(issuer.issuer + "/jwks").text)
        do {
            _ = try await vippsKeys.verify(bankIDToken, as: IDTokenPayload.self)
            XCTFail("a BankID token verified with Vipps' JWKS")
        } catch {}
    }

    // MARK: - PKCE, codes, redirects

    func testPKCEIsRequired() async throws {
        for issuer in demo.issuers {
            // At the authorization endpoint: no challenge, plain, or no method (= plain) are refused.
            let pkce = PKCE()
            for (challenge, method) in [(nil, "S256"), (pkce, "plain"), (pkce, nil)] as [(PKCE?, String?)] {
                let reply = try await get(authorizeURL(issuer, pkce: challenge, state: "st", nonce: "n",
                                                       extra: [("demo_user", "kari")], method: method))
                XCTAssertEqual(reply.status, 302)
                let q = queryItems(reply.location ?? "")
                XCTAssertEqual(q["error"], "invalid_request", "\(issuer.id) \(String(describing: method))")
                XCTAssertNil(q["code"])
                XCTAssertEqual(q["state"], "st")
                XCTAssertEqual(q["iss"], issuer.issuer)
            }
            // At the token endpoint: a missing or wrong verifier fails, and burns the code.
            let missing = try await exchange(issuer, code: try await authorize(issuer, user: "kari", pkce: pkce), verifier: nil)
            XCTAssertEqual(try missing.json()["error"]?.stringValue, "invalid_request")
            let wrong = try await exchange(issuer, code: try await authorize(issuer, user: "kari", pkce: pkce),
                                           verifier: PKCE().verifier)
            XCTAssertEqual(try wrong.json()["error"]?.stringValue, "invalid_grant")
            // The challenge itself as verifier (what "plain" would accept).
            let plain = try await exchange(issuer, code: try await authorize(issuer, user: "kari", pkce: pkce),
                                           verifier: pkce.challenge)
            XCTAssertEqual(try plain.json()["error"]?.stringValue, "invalid_grant")
            let code = try await authorize(issuer, user: "kari", pkce: pkce)
            await assertEqual(try await exchange(issuer, code: code, verifier: "short").status, 400)
            await assertEqual(try await exchange(issuer, code: code, verifier: pkce.verifier).status, 400,
                           "a failed attempt burns the code")
        }
    }

    func testCodeIsOneTimeAndReplayRevokes() async throws {
        for issuer in demo.issuers {
            let pkce = PKCE()
            let code = try await authorize(issuer, user: "per", pkce: pkce)
            let first = try await exchange(issuer, code: code, verifier: pkce.verifier)
            XCTAssertEqual(first.status, 200)
            let access = try XCTUnwrap(try first.json()["access_token"]?.stringValue)
            let replay = try await exchange(issuer, code: code, verifier: pkce.verifier)
            XCTAssertEqual(replay.status, 400)
            XCTAssertEqual(try replay.json()["error"]?.stringValue, "invalid_grant")
            await assertEqual(try await get(issuer.issuer + "/userinfo", headers: [("Authorization", "Bearer " + access)]).status, 401,
                           "tokens from a replayed code are revoked")
            if let refresh = try first.json()["refresh_token"]?.stringValue {
                await assertEqual(try await post(issuer.issuer + "/token", form: [
                    ("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", issuer.clientID)]).status, 400)
            }
            await assertEqual(try await exchange(issuer, code: "made-up", verifier: pkce.verifier).status, 400)
        }
    }

    func testCodeIsBoundToRedirectURIAndClient() async throws {
        let issuer = demo.bankID
        let pkce = PKCE()
        let wrongRedirect = try await exchange(issuer, code: try await authorize(issuer, user: "kari", pkce: pkce),
                                               verifier: pkce.verifier, redirect: "http://127.0.0.1:49153/callback")
        XCTAssertEqual(try wrongRedirect.json()["error"]?.stringValue, "invalid_grant")
        let code = try await authorize(issuer, user: "kari", pkce: pkce)
        let wrongClient = try await post(issuer.issuer + "/token", form: [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
            ("client_id", "someone-else"), ("code_verifier", pkce.verifier)])
        XCTAssertEqual(wrongClient.status, 401)
        XCTAssertEqual(try wrongClient.json()["error"]?.stringValue, "invalid_client")
        // A BankID code means nothing to Vipps.
        let vippsCode = try await authorize(demo.vipps, user: "kari", pkce: pkce)
        await assertEqual(try await exchange(issuer, code: vippsCode, verifier: pkce.verifier).status, 400)
    }

    func testUntrustedRequestsGetAPageNotARedirect() async throws {
        let issuer = demo.bankID
        let pkce = PKCE()
        func authorize(client: String, redirect: String) async throws -> Reply {
            try await get(issuer.issuer + "/authorize?" + formBody([
                ("response_type", "code"), ("client_id", client), ("redirect_uri", redirect), ("scope", "openid"),
                ("state", "s"), ("code_challenge", pkce.challenge), ("code_challenge_method", "S256"), ("demo_user", "kari")]))
        }
        for (client, redirect) in [("other-client", redirectURI),
                                   ("sessionvault-demo", "http://localhost:49152/callback"),
                                   ("sessionvault-demo", "https://127.0.0.1:49152/callback"),
                                   ("sessionvault-demo", "http://127.0.0.1/callback"),
                                   ("sessionvault-demo", "http://127.0.0.1:49152@evil.example/callback"),
                                   ("sessionvault-demo", "http://127.0.0.1.evil.example:80/callback"),
                                   ("sessionvault-demo", "http://127.0.0.1:49152/callback#frag"),
                                   ("sessionvault-demo", "http://evil.example/callback")] {
            let reply = try await authorize(client: client, redirect: redirect)
            XCTAssertEqual(reply.status, 400, "\(client) \(redirect)")
            XCTAssertNil(reply.location)
        }
        // Any loopback port and path is fine.
        let ok = try await authorize(client: "sessionvault-demo", redirect: "http://127.0.0.1:8/cb?x=1")
        XCTAssertEqual(ok.status, 302)
        XCTAssertTrue(ok.location?.hasPrefix("http://127.0.0.1:8/cb?x=1&") ?? false, ok.location ?? "")
        // An unknown demo user is a page too.
        await assertEqual(try await get(authorizeURL(issuer, pkce: pkce, state: "s", nonce: "n", extra: [("demo_user", "nobody")])).status, 400)
    }

    func testCancelRedirectsWithAccessDenied() async throws {
        for issuer in demo.issuers {
            let reply = try await get(authorizeURL(issuer, pkce: PKCE(), state: "st-cancel", nonce: "n", extra: [("demo_cancel", "1")]))
            XCTAssertEqual(reply.status, 302)
            let q = queryItems(try XCTUnwrap(reply.location))
            XCTAssertEqual(q["error"], "access_denied")
            XCTAssertEqual(q["state"], "st-cancel")
            XCTAssertEqual(q["iss"], issuer.issuer)
            XCTAssertNil(q["code"])
        }
    }

    func testLoginPageIsPlainAccessibleHTMLAndPostsBack() async throws {
        for issuer in demo.issuers {
            let pkce = PKCE()
            let url = authorizeURL(issuer, pkce: pkce, state: "st<&>\"", nonce: "n1")
            let page = try await get(url)
            XCTAssertEqual(page.status, 200)
            XCTAssertTrue(page.headers.first(name: "content-type")?.hasPrefix("text/html") ?? false)
            XCTAssertTrue(page.headers.first(name: "content-security-policy")?.contains("default-src 'none'") ?? false)
            let html = page.text
            XCTAssertTrue(html.contains("<html lang=\"nb\">"))
            XCTAssertTrue(html.contains("<h1>DEMO: \(issuer.displayName)"), html)
            XCTAssertTrue(html.contains("ikke ekte"))
            XCTAssertTrue(html.contains("not real"))
            XCTAssertFalse(html.lowercased().contains("<script"))
            XCTAssertFalse(html.contains("st<&>\""), "parameters are escaped")
            for person in DemoIdentity.all {
                XCTAssertTrue(html.contains("name=\"demo_user\" value=\"\(person.id)\""), person.id)
                XCTAssertTrue(html.contains(person.name))
                XCTAssertFalse(html.contains(person.nationalID))
            }
            XCTAssertTrue(html.contains("name=\"demo_cancel\""))
            XCTAssertTrue(html.contains("<form method=\"post\" action=\"/\(issuer.id)/authorize\">"))

            // What a browser sends when "Kari" is clicked: the hidden fields plus the button.
            let hidden = try hiddenFields(html)
            let clicked = try await send([Req(method: .POST, url: issuer.issuer + "/authorize", form: hidden + [("demo_user", "kari")])])[0]
            XCTAssertEqual(clicked.status, 303)
            let q = queryItems(try XCTUnwrap(clicked.location))
            XCTAssertEqual(q["state"], "st<&>\"")
            XCTAssertEqual(q["iss"], issuer.issuer)
            let code = try XCTUnwrap(q["code"])
            let tokens = try await exchange(issuer, code: code, verifier: pkce.verifier)
            XCTAssertEqual(tokens.status, 200)
            XCTAssertEqual(try jwtParts(try XCTUnwrap(try tokens.json()["id_token"]?.stringValue)).claims["nonce"]?.stringValue, "n1")

            let cancelled = try await send([Req(method: .POST, url: issuer.issuer + "/authorize", form: hidden + [("demo_cancel", "1")])])[0]
            XCTAssertEqual(queryItems(try XCTUnwrap(cancelled.location))["error"], "access_denied")
        }
    }

    /// The page's hidden inputs, unescaped.
    func hiddenFields(_ html: String) throws -> [(String, String)] {
        let regex = try NSRegularExpression(pattern: "<input type=\"hidden\" name=\"([^\"]*)\" value=\"([^\"]*)\">")
        let ns = html as NSString
        return regex.matches(in: html, range: NSRange(location: 0, length: ns.length)).map { m in
            func unescape(_ s: String) -> String {
                s.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
                    .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#39;", with: "'")
                    .replacingOccurrences(of: "&amp;", with: "&")
            }
            return (unescape(ns.substring(with: m.range(at: 1))), unescape(ns.substring(with: m.range(at: 2))))
        }
    }

    func testMalformedRequestsAreRefused() async throws {
        let issuer = demo.bankID
        let pkce = PKCE()
        // Repeated parameters (RFC 6749 §3.1).
        let repeated = try await get(authorizeURL(issuer, pkce: pkce, state: "s", nonce: "n",
                                                  extra: [("demo_user", "kari"), ("scope", "openid")]))
        XCTAssertEqual(queryItems(repeated.location ?? "")["error"], "invalid_request")
        // No openid scope, no state.
        let noOpenID = try await get(authorizeURL(issuer, pkce: pkce, state: "s", nonce: "n", extra: [("demo_user", "kari")],
                                                  scope: "profile"))
        XCTAssertEqual(queryItems(noOpenID.location ?? "")["error"], "invalid_scope")
        let noState = try await get(authorizeURL(issuer, pkce: pkce, state: "", nonce: "n", extra: [("demo_user", "kari")]))
        XCTAssertEqual(queryItems(noState.location ?? "")["error"], "invalid_request")
        // Token endpoint: JSON bodies, GET, unknown grants.
        let json = try await send([Req(method: .POST, url: issuer.issuer + "/token",
                                       headers: [("Content-Type", "application/json")], rawBody: "{}")])[0]
        XCTAssertEqual(json.status, 400)
        await assertEqual(try await get(issuer.issuer + "/token").status, 405)
        let grant = try await post(issuer.issuer + "/token", form: [("grant_type", "password"), ("client_id", issuer.clientID)])
        XCTAssertEqual(try grant.json()["error"]?.stringValue, "unsupported_grant_type")
        // A broken percent escape.
        await assertEqual(try await get(issuer.issuer + "/authorize?client_id=%zz").status, 400)
    }
}

final class LogCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ s: String) { lock.withLock { lines.append(s) } }
    var all: [String] { lock.withLock { lines } }
}

/// Local addresses of sockets in LISTEN state (0A) on the port, from /proc/net/tcp(6).
func listeningAddresses(table: String, portHex: String) throws -> [String] {
    let text = try String(contentsOfFile: table, encoding: .utf8)
    var found: [String] = []
    for row in text.split(separator: "\n").dropFirst() {
        let fields: [Substring] = row.split(separator: " ")
        guard fields.count > 3, fields[3] == "0A" else { continue }
        let local = String(fields[1])
        if local.hasSuffix(":" + portHex) { found.append(local) }
    }
    return found
}

/// IPv4 addresses of this machine other than loopback.
func nonLoopbackIPv4Addresses() -> [String] {
    var result: [String] = []
    var ifaddr: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&ifaddr) == 0, let first = ifaddr else { return [] }
    defer { freeifaddrs(ifaddr) }
    var p: UnsafeMutablePointer<ifaddrs>? = first
    while let ifa = p {
        if let sa = ifa.pointee.ifa_addr, sa.pointee.sa_family == UInt16(AF_INET) {
            var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(sa, socklen_t(MemoryLayout<sockaddr_in>.size), &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 {
                let s = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if !s.hasPrefix("127.") { result.append(s) }
            }
        }
        p = ifa.pointee.ifa_next
    }
    return result
}

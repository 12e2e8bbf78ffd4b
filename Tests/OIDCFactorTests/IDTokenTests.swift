import JWTKit
import Locking
import XCTest
@testable import OIDCFactor
@testable import OIDCToken
import VaultFactor

/// Serves fixed key sets and counts fetches: `sets[0]` first, later sets on refresh.
final class FakeKeySource: KeySource {
    private let sets: [KeySet]
    let fetches = Locked(0)
    let refreshes = Locked(0)

    init(_ sets: [KeySet]) { self.sets = sets }

    static func from(_ jwks: [[String: JSON]]..., allowed: Set<SigningAlgorithm>) async throws -> FakeKeySource {
        var sets: [KeySet] = []
        for keys in jwks { sets.append(try KeySet.parse(jwksBody(keys), allowed: allowed)) }
        return FakeKeySource(sets)
    }

    func keys(refresh: Bool) async throws(KeySourceFailure) -> KeySet {
        let n = fetches.withLock { v -> Int in
            v += 1
            return v
        }
        if refresh { refreshes.withLock { $0 += 1 } }
        return sets[min(n - 1, sets.count - 1)]
    }
}

final class IDTokenTests: XCTestCase {
    let issuer = "https://issuer.example"
    let clientID = "client-1"
    let nonce = "n-0123456789"
    let accessToken = "access-token-value"

    func verifier(_ algs: Set<SigningAlgorithm> = [.es256, .rs256, .edDSA], trusted: Set<String> = []) -> IDTokenVerifier {
        IDTokenVerifier(issuer: issuer, clientID: clientID, trustedAudiences: trusted, allowedAlgorithms: algs,
                        clockSkew: 60)
    }

    func claims(_ signer: TestSigner, now: Int64 = unixNow()) -> [String: JSON] {
        ["iss": .string(issuer), "sub": "person-1", "aud": .string(clientID), "exp": .int(now + 300), "iat": .int(now),
         "nonce": .string(nonce),
         "at_hash": .string(IDTokenVerifier.tokenHash(accessToken, algorithm: SigningAlgorithm(rawValue: signer.alg)!))]
    }

    /// Verifies and returns nil on success, or the rejection reason.
    func check(_ token: String, keys: any KeySource, algs: Set<SigningAlgorithm> = [.es256, .rs256, .edDSA],
               trusted: Set<String> = [], nonce: String? = nil) async -> String? {
        do {
            _ = try await verifier(algs, trusted: trusted).verify(token, nonce: nonce ?? self.nonce, accessToken: accessToken,
                                                                  now: unixNow(), keys: keys)
            return nil
        } catch {
            switch error {
            case .invalid(let reason): return reason
            case .keysUnavailable(let f): return "keys unavailable: \(f.reason)"
            }
        }
    }

    func testGoodTokensPassForEachAlgorithm() async throws {
        for signer in [try await TestSigner.es256(), try await TestSigner.rs256(), try await TestSigner.edDSA()] {
            let keys = try await FakeKeySource.from([signer.jwk], allowed: [.es256, .rs256, .edDSA])
            let token = try signer.sign(claims(signer))
            let reason = await check(token, keys: keys)
            XCTAssertNil(reason, "\(signer.alg)")
            XCTAssertEqual(keys.fetches.withLock { $0 }, 1, "a known kid needs no refetch")
        }
    }

    func testEachBrokenClaimIsRejected() async throws {
        let signer = try await TestSigner.es256()
        let keys = try await FakeKeySource.from([signer.jwk], allowed: [.es256])
        let now = unixNow()
        let cases: [(String, (inout [String: JSON]) -> Void)] = [
            ("wrong iss", { $0["iss"] = "https://evil.example" }),
            ("iss with trailing slash", { $0["iss"] = .string(self.issuer + "/") }),
            ("no iss", { $0["iss"] = nil }),
            ("wrong aud", { $0["aud"] = "other-client" }),
            ("aud array without us", { $0["aud"] = ["other-client"] }),
            ("no aud", { $0["aud"] = nil }),
            ("expired", { $0["exp"] = .int(now - 120) }),
            ("no exp", { $0["exp"] = nil }),
            ("iat in the future", { $0["iat"] = .int(now + 600) }),
            ("no iat", { $0["iat"] = nil }),
            ("nbf in the future", { $0["nbf"] = .int(now + 600) }),
            ("nonce mismatch", { $0["nonce"] = "another-nonce" }),
            ("no nonce", { $0["nonce"] = nil }),
            ("at_hash mismatch", { $0["at_hash"] = .string(IDTokenVerifier.tokenHash("other", algorithm: .es256)) }),
            ("azp mismatch", { $0["azp"] = "other-client" }),
            ("extra untrusted audience", { $0["aud"] = [.string(self.clientID), "other-client"]; $0["azp"] = .string(self.clientID) }),
            ("several audiences without azp", { $0["aud"] = [.string(self.clientID), "other-client"] }),
            ("empty sub", { $0["sub"] = "" }),
            ("no sub", { $0["sub"] = nil }),
        ]
        for (name, change) in cases {
            var c = claims(signer, now: now)
            change(&c)
            let reason = await check(try signer.sign(c), keys: keys)
            XCTAssertNotNil(reason, "\(name) must be rejected")
        }
    }

    func testSkewIsToleratedButNoMore() async throws {
        let signer = try await TestSigner.es256()
        let keys = try await FakeKeySource.from([signer.jwk], allowed: [.es256])
        let now = unixNow()
        var c = claims(signer, now: now)
        c["exp"] = .int(now - 30)
        c["iat"] = .int(now + 30)
        let reason1 = await check(try signer.sign(c), keys: keys)
        XCTAssertNil(reason1, "30 s of clock difference is within the 60 s skew")
        c["iat"] = .int(now + 90)
        let reason2 = await check(try signer.sign(c), keys: keys)
        XCTAssertNotNil(reason2)
    }

    func testAudienceRules() async throws {
        let signer = try await TestSigner.rs256()
        let keys = try await FakeKeySource.from([signer.jwk], allowed: [.rs256])
        var c = claims(signer)
        c["aud"] = [.string(clientID)]
        let single = await check(try signer.sign(c), keys: keys)
        XCTAssertNil(single, "an array with just us is fine")
        c["aud"] = [.string(clientID), "https://api.example"]
        c["azp"] = .string(clientID)
        let trusted = await check(try signer.sign(c), keys: keys, trusted: ["https://api.example"])
        XCTAssertNil(trusted, "a trusted extra audience with azp = us is fine")
        let untrusted = await check(try signer.sign(c), keys: keys)
        XCTAssertNotNil(untrusted, "an extra audience is refused unless configured as trusted")
        c["azp"] = nil
        let noAzp = await check(try signer.sign(c), keys: keys, trusted: ["https://api.example"])
        XCTAssertNotNil(noAzp, "several audiences need azp")
        c["aud"] = .string(clientID)
        c["azp"] = .string(clientID)
        let azpUs = await check(try signer.sign(c), keys: keys)
        XCTAssertNil(azpUs, "azp equal to us is fine")
    }

    func testAlgNoneIsRejected() async throws {
        let signer = try await TestSigner.rs256()
        let keys = try await FakeKeySource.from([signer.jwk], allowed: [.rs256])
        let c = claims(signer)
        // Unsigned (empty signature part).
        let h = Base64URL.encode(JSON.object(["alg": "none", "typ": "JWT"]).serialized())
        let p = Base64URL.encode(JSON.object(c).serialized())
        let unsigned = await check("\(h).\(p).", keys: keys)
        XCTAssertNotNil(unsigned)
        // `none` in the header over a valid RS256 signature (jwt-kit alone accepted this).
        let relabelled = try signer.sign(c, header: ["alg": "none", "kid": .string(signer.kid)])
        let reason = await check(relabelled, keys: keys)
        XCTAssertNotNil(reason)
        XCTAssertTrue(reason?.contains("not allowed") == true, reason ?? "")
    }

    func testHS256KeyedWithThePublicKeyIsRejected() async throws {
        let signer = try await TestSigner.rs256()
        let keys = try await FakeKeySource.from([signer.jwk], allowed: [.rs256])
        let token = try await hmacToken(secret: signer.publicPEM!, kid: signer.kid, payload: claims(signer))
        let reason = await check(token, keys: keys)
        XCTAssertNotNil(reason)
        // Also when the profile allows every supported algorithm: HMAC is not one of them.
        let reason2 = await check(token, keys: keys, algs: Set(SigningAlgorithm.allCases))
        XCTAssertNotNil(reason2)
    }

    func testAlgorithmNotAllowedForTheProfileIsRejected() async throws {
        // BankID allows only ES256: a validly RS256-signed token is refused before verification.
        let rsa = try await TestSigner.rs256()
        let keys = try await FakeKeySource.from([rsa.jwk], allowed: [.rs256])
        let reason = await check(try rsa.sign(claims(rsa)), keys: keys, algs: [.es256])
        XCTAssertNotNil(reason)
    }

    func testUnknownKidTriggersExactlyOneRefetchThenRejects() async throws {
        let known = try await TestSigner.es256(kid: "known")
        let rogue = try await TestSigner.es256(kid: "rogue")
        let keys = try await FakeKeySource.from([known.jwk], [known.jwk], allowed: [.es256])
        let reason = await check(try rogue.sign(claims(rogue)), keys: keys)
        XCTAssertNotNil(reason)
        XCTAssertEqual(keys.fetches.withLock { $0 }, 2)
        XCTAssertEqual(keys.refreshes.withLock { $0 }, 1)
        // A forged token naming the known kid but signed by another key: bad signature, no refetch.
        let keys2 = try await FakeKeySource.from([known.jwk], allowed: [.es256])
        let forged = try rogue.sign(claims(rogue), header: ["alg": "ES256", "kid": "known"])
        let reason2 = await check(forged, keys: keys2)
        XCTAssertEqual(reason2, "bad signature")
        XCTAssertEqual(keys2.refreshes.withLock { $0 }, 0)
    }

    func testRotatedKeyIsFoundByTheRefetch() async throws {
        let old = try await TestSigner.es256(kid: "old")
        let new = try await TestSigner.es256(kid: "new")
        let keys = try await FakeKeySource.from([old.jwk], [old.jwk, new.jwk], allowed: [.es256])
        let reason = await check(try new.sign(claims(new)), keys: keys)
        XCTAssertNil(reason)
        XCTAssertEqual(keys.refreshes.withLock { $0 }, 1)
    }

    func testKeysWithoutAlg() async throws {
        let rsa = try await TestSigner.rs256(kid: "rsa-no-alg")
        // An RSA key without alg for a profile that allows only ES256 is never used.
        let esOnly = try KeySet.parse(jwksBody([rsa.jwkWithoutAlg]), allowed: [.es256])
        XCTAssertEqual(esOnly.keys.count, 0)
        XCTAssertEqual(esOnly.skipped, 1)
        let keys = FakeKeySource([esOnly])
        let relabelled = try rsa.sign(claims(rsa), header: ["alg": "ES256", "kid": "rsa-no-alg"])
        let reason = await check(relabelled, keys: keys, algs: [.es256])
        XCTAssertNotNil(reason)

        // For an RS256 profile the key gets RS256 from the profile before jwt-kit sees it,
        // so a junk token first cannot poison it for later valid tokens.
        let rsOnly = FakeKeySource([try KeySet.parse(jwksBody([rsa.jwkWithoutAlg]), allowed: [.rs256])])
        var junk = claims(rsa)
        junk["sub"] = "junk"
        let junkToken = try rsa.sign(junk, header: ["alg": "RS256", "kid": "rsa-no-alg"]).dropLast(4) + "AAAA"
        let junkReason = await check(String(junkToken), keys: rsOnly, algs: [.rs256])
        XCTAssertNotNil(junkReason)
        let valid = await check(try rsa.sign(claims(rsa)), keys: rsOnly, algs: [.rs256])
        XCTAssertNil(valid)
    }

    func testHeaderAlgMustMatchTheKey() async throws {
        let es = try await TestSigner.es256(kid: "k")
        let keys = try await FakeKeySource.from([es.jwk], allowed: [.es256, .rs256])
        let token = try es.sign(claims(es), header: ["alg": "RS256", "kid": "k"])
        let reason = await check(token, keys: keys)
        XCTAssertNotNil(reason)
    }

    func testTamperedPayloadAndCritAreRejected() async throws {
        let signer = try await TestSigner.es256()
        let keys = try await FakeKeySource.from([signer.jwk], allowed: [.es256])
        let token = try signer.sign(claims(signer))
        var parts = token.split(separator: ".").map(String.init)
        var c = claims(signer)
        c["sub"] = "someone-else"
        parts[1] = Base64URL.encode(JSON.object(c).serialized())
        let tampered = await check(parts.joined(separator: "."), keys: keys)
        XCTAssertEqual(tampered, "bad signature")
        var header = signer.defaultHeader
        header["crit"] = ["exp"]
        let crit = await check(try signer.sign(claims(signer), header: header), keys: keys)
        XCTAssertNotNil(crit)
    }

    func testTokenWithoutKidNeedsExactlyOneCandidate() async throws {
        let a = try await TestSigner.es256(kid: "a")
        let b = try await TestSigner.es256(kid: "b")
        let one = try await FakeKeySource.from([a.jwk], allowed: [.es256])
        let ok = await check(try a.sign(claims(a), header: ["alg": "ES256"]), keys: one)
        XCTAssertNil(ok)
        let two = try await FakeKeySource.from([a.jwk, b.jwk], allowed: [.es256])
        let ambiguous = await check(try a.sign(claims(a), header: ["alg": "ES256"]), keys: two)
        XCTAssertNotNil(ambiguous)
    }

    func testDuplicateClaimsAreRefused() async throws {
        // Our JSON parser refuses duplicate keys, so "sub" cannot mean two things.
        let signer = try await TestSigner.es256()
        let keys = try await FakeKeySource.from([signer.jwk], allowed: [.es256])
        let c = claims(signer)
        var payloadText = JSON.object(c).text
        payloadText.removeLast()
        payloadText += ",\"sub\":\"other\"}"
        let h = Base64URL.encode(JSON.object(signer.defaultHeader).serialized())
        let p = Base64URL.encode(Array(payloadText.utf8))
        let sig = try signer.algorithm.sign(Array("\(h).\(p)".utf8))
        let reason = await check("\(h).\(p).\(Base64URL.encode(sig))", keys: keys)
        XCTAssertEqual(reason, "malformed JWS")
    }

    func testJWKSParsingSkipsWhatItCannotTrust() async throws {
        let es = try await TestSigner.es256(kid: "es")
        var encryption = es.jwk
        encryption["use"] = "enc"
        encryption["kid"] = "enc"
        var withPrivate = es.jwk
        withPrivate["d"] = "AAAA"
        withPrivate["kid"] = "priv"
        var hmac: [String: JSON] = ["kty": "oct", "k": "c2VjcmV0", "kid": "hmac", "alg": "HS256"]
        hmac["use"] = "sig"
        var wrongCurve = es.jwk
        wrongCurve["crv"] = "P-384"
        wrongCurve["kid"] = "p384"
        let set = try KeySet.parse(jwksBody([es.jwk, encryption, withPrivate, hmac, wrongCurve]),
                                         allowed: [.es256, .rs256])
        XCTAssertEqual(set.keys.map(\.kid), ["es"])
        XCTAssertEqual(set.skipped, 4)
    }

    /// The signature arithmetic itself (SignatureKey, over swift-crypto): for
    /// each algorithm a flipped signature bit, a signature cut short, and
    /// another key's signature under this kid are all refused.
    func testEachAlgorithmRefusesATamperedOrForeignSignature() async throws {
        let pairs: [(TestSigner, TestSigner, SigningAlgorithm)] = [
            (try await .es256(kid: "k"), try await .es256(kid: "k"), .es256),
            (try await .rs256(kid: "k"), try await .rs256(kid: "k", fresh: true), .rs256),
            (try await .edDSA(kid: "k"), try await .edDSA(kid: "k"), .edDSA),
        ]
        for (signer, other, alg) in pairs {
            let keys = try await FakeKeySource.from([signer.jwk], allowed: [alg])
            let token = try signer.sign(claims(signer))
            let good = await check(token, keys: keys)
            XCTAssertNil(good, "\(alg): the signer's own token")
            var parts = token.split(separator: ".").map(String.init)
            var signature = try XCTUnwrap(Base64URL.decode(parts[2]))
            signature[signature.count / 2] ^= 0x01
            parts[2] = Base64URL.encode(signature)
            let flipped = await check(parts.joined(separator: "."), keys: keys)
            XCTAssertEqual(flipped, "bad signature", "\(alg): a flipped bit")
            parts[2] = Base64URL.encode(Array(signature.dropLast()))
            let short = await check(parts.joined(separator: "."), keys: keys)
            XCTAssertEqual(short, "bad signature", "\(alg): a signature one byte short")
            let foreign = await check(try other.sign(claims(signer)), keys: keys)
            XCTAssertEqual(foreign, "bad signature", "\(alg): another key's signature")
        }
    }

    /// JWKs whose members make no key of their algorithm are skipped, not
    /// trusted: an RSA modulus under 2,048 bits, P-256 coordinates of the wrong
    /// length or off the curve, an Ed25519 key of the wrong length.
    func testJWKsThatMakeNoKeyAreSkipped() throws {
        let rsa1024: [String: JSON] = ["kty": "RSA", "alg": "RS256", "kid": "rsa1024",
                                       "n": .string(Base64URL.encode([0xC3] + [UInt8](repeating: 0x5A, count: 126) + [0x01])),
                                       "e": "AQAB"]
        let shortX: [String: JSON] = ["kty": "EC", "crv": "P-256", "alg": "ES256", "kid": "shortx",
                                      "x": .string(Base64URL.encode([UInt8](repeating: 1, count: 31))),
                                      "y": .string(Base64URL.encode([UInt8](repeating: 2, count: 32)))]
        let offCurve: [String: JSON] = ["kty": "EC", "crv": "P-256", "alg": "ES256", "kid": "offcurve",
                                        "x": .string(Base64URL.encode([UInt8](repeating: 1, count: 32))),
                                        "y": .string(Base64URL.encode([UInt8](repeating: 2, count: 32)))]
        let shortEd: [String: JSON] = ["kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "kid": "shorted",
                                       "x": .string(Base64URL.encode([UInt8](repeating: 7, count: 31)))]
        let set = try KeySet.parse(jwksBody([rsa1024, shortX, offCurve, shortEd]), allowed: Set(SigningAlgorithm.allCases))
        XCTAssertEqual(set.keys.map(\.kid), [])
        XCTAssertEqual(set.skipped, 4)
    }
}

import Foundation
import JWTKit
import OIDCFactor
import OIDCToken
import VaultFactor
import XCTest

/// Replays what fuzz-jwt found (Fuzz/corpus/jwt/regression-*) through the same
/// entry the fuzzer drives, the way the fuzzer reads each input:
/// `J<jwks>\0<token>`, `S<header>\0<payload>` (signed here, with this test's own
/// keys under the fixture's kids), or `T<token>`. Each must come back with a
/// verdict instead of trapping.
final class FuzzRegressionTests: XCTestCase {
    // The fuzzer's verifier settings (Fuzz/gen-jwt-corpus.py).
    let check = IDTokenCheck(issuer: "https://issuer.example", clientID: "fuzz-client",
                             trustedAudiences: ["trusted-audience"], allowedAlgorithms: Set(SigningAlgorithm.allCases),
                             clockSkew: 60)
    let now: Int64 = 1_700_000_000

    func testEveryCommittedFuzzRegressionGetsAVerdict() async throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus/jwt")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("regression-") }
        XCTAssertGreaterThanOrEqual(files.count, 1)
        let signers = [try await TestSigner.es256(kid: "es"), try await TestSigner.rs256(kid: "rs"),
                       try await TestSigner.edDSA(kid: "ed")]
        let fixedKeys = try IDTokenCheck.Keys.parse(jwksBody(signers.map(\.jwk)),
                                                          allowed: Set(SigningAlgorithm.allCases))
        for f in files.sorted() {
            let input = Array(try Data(contentsOf: dir.appendingPathComponent(f)))
            guard let mode = input.first else { continue }
            let rest = input.dropFirst()
            let nul = rest.firstIndex(of: 0) ?? rest.endIndex
            let first = Array(rest[..<nul]), second = nul < rest.endIndex ? Array(rest[(nul + 1)...]) : []
            switch mode {
            case UInt8(ascii: "J"):
                guard let keys = try? IDTokenCheck.Keys.parse(first, allowed: Set(SigningAlgorithm.allCases)) else {
                    continue
                }
                _ = try? verify(String(decoding: second, as: UTF8.self), keys)
            case UInt8(ascii: "S"):
                let token = try sign(header: first, payload: second, with: signers)
                _ = try? verify(token, fixedKeys)
            default:
                _ = try? verify(String(decoding: rest, as: UTF8.self), fixedKeys)
            }
        }
    }

    /// The seeds named t-valid-* were made by PyJWT (Fuzz/gen-jwt-corpus.py): they
    /// must verify against the fixture's JWKS, or the fuzzer starts from nothing
    /// that reaches the claim checks.
    func testGeneratedValidSeedsVerify() async throws {
        let fuzz = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fuzz")
        let source = try String(contentsOf: fuzz.appendingPathComponent("Sources/fuzz-jwt/TestKeys.swift"), encoding: .utf8)
        guard let start = source.range(of: "#\"\"\"\n"), let end = source.range(of: "\n\"\"\"#") else {
            return XCTFail("no JWKS in TestKeys.swift")
        }
        let jwks = Array(source[start.upperBound..<end.lowerBound].utf8)
        let corpus = fuzz.appendingPathComponent("corpus/jwt")
        let seeds = try FileManager.default.contentsOfDirectory(atPath: corpus.path).filter { $0.hasPrefix("t-valid-") }
        XCTAssertEqual(seeds.count, 4)
        let keys = try IDTokenCheck.Keys.parse(jwks, allowed: Set(SigningAlgorithm.allCases))
        XCTAssertEqual(keys.usable, 4)
        for seed in seeds {
            let token = String(decoding: try Data(contentsOf: corpus.appendingPathComponent(seed)).dropFirst(), as: UTF8.self)
            XCTAssertNoThrow(try verify(token, keys), seed)
        }
    }

    /// The first finding: `exp` near Int64.max made `exp + clockSkew` trap.
    func testExtremeNumericDatesAreJudgedNotTrapped() async throws {
        let signer = try await TestSigner.es256(kid: "es")
        let keys = try IDTokenCheck.Keys.parse(jwksBody([signer.jwk]), allowed: [.es256])
        func claims(_ change: (inout [String: JSON]) -> Void) -> [String: JSON] {
            var c: [String: JSON] = ["iss": "https://issuer.example", "sub": "person-1", "aud": "fuzz-client",
                                     "exp": .int(now + 300), "iat": .int(now), "nonce": "fuzz-nonce"]
            change(&c)
            return c
        }
        // A far-future exp is simply not expired.
        let farFuture = try signer.sign(claims { $0["exp"] = .int(.max) })
        let accepted = try verify(farFuture, keys)
        XCTAssertEqual(accepted["exp"], .int(.max))
        for (name, change) in [("iat in the future", { (c: inout [String: JSON]) in c["iat"] = .int(.max) }),
                               ("nbf", { $0["nbf"] = .int(.max) }),
                               ("expired", { $0["exp"] = .int(.min) })] {
            do {
                _ = try verify(try signer.sign(claims(change)), keys)
                XCTFail("\(name): accepted")
            } catch {
                XCTAssertEqual((error as? IDTokenCheck.Rejected)?.reason, name)
            }
        }
    }

    private func verify(_ token: String, _ keys: IDTokenCheck.Keys) throws -> [String: JSON] {
        try check.verify(token, keys: keys, nonce: "fuzz-nonce", accessToken: "fuzz-access-token", now: now)
    }

    /// As the fuzzer does: the key the header's kid names, else the first of its alg, else a junk signature.
    private func sign(header: [UInt8], payload: [UInt8], with signers: [TestSigner]) throws -> String {
        let input = Base64URL.encode(header) + "." + Base64URL.encode(payload)
        var signature: [UInt8] = [0]
        if case .object(let h)? = try? JSON.parse(header) {
            let key = signers.first { $0.kid == h["kid"]?.stringValue } ?? signers.first { $0.alg == h["alg"]?.stringValue }
            if let key { signature = try key.algorithm.sign(Array(input.utf8)) }
        }
        return input + "." + Base64URL.encode(signature)
    }
}

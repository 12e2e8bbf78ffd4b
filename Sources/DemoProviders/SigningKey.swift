import Crypto
import CryptoExtras
import SodiumKit
import VaultProtocol

/// One issuer's signing key, generated fresh at every start, and its public JWK.
struct SigningKey: Sendable {
    let kid: String
    /// `ES256` or `RS256`: written into both the JWK and every token header.
    let alg: String
    /// The public key as a JWK (with `kid`, `alg`, `use`).
    let publicJWK: JSON
    private let privateKey: PrivateKey

    private enum PrivateKey: Sendable {
        case p256(P256.Signing.PrivateKey)
        case rsa(_RSA.Signing.PrivateKey)
    }

    /// A new P-256 key (BankID signs ID tokens with ES256).
    static func es256() -> SigningKey {
        let key = P256.Signing.PrivateKey()
        // x‖y, 32 bytes each (SEC 1's uncompressed point without its 0x04).
        let point = Array(key.publicKey.rawRepresentation)
        let kid = "demo-es256-" + randomToken(bytes: 9)
        let jwk: JSON = ["kty": "EC", "crv": "P-256", "x": .string(base64URL(Array(point[..<32]))),
                         "y": .string(base64URL(Array(point[32...]))), "kid": .string(kid), "alg": "ES256", "use": "sig"]
        return SigningKey(kid: kid, alg: "ES256", publicJWK: jwk, privateKey: .p256(key))
    }

    /// A new RSA-2048 key (Vipps signs ID tokens with RS256).
    static func rs256() throws -> SigningKey {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let primitives = try key.publicKey.getKeyPrimitives()
        let kid = "demo-rs256-" + randomToken(bytes: 9)
        let jwk: JSON = ["kty": "RSA", "n": .string(base64URL(Array(primitives.modulus))),
                         "e": .string(base64URL(Array(primitives.publicExponent))),
                         "kid": .string(kid), "alg": "RS256", "use": "sig"]
        return SigningKey(kid: kid, alg: "RS256", publicJWK: jwk, privateKey: .rsa(key))
    }

    /// A compact JWS over `claims` (RFC 7515 §7.1), header `{alg, typ: JWT, kid}`.
    func sign(_ claims: [String: JSON]) throws -> String {
        let header: JSON = ["alg": .string(alg), "typ": "JWT", "kid": .string(kid)]
        let input = base64URL(Array(header.text.utf8)) + "." + base64URL(Array(JSON.object(claims).text.utf8))
        let signature: [UInt8]
        switch privateKey {
        case .p256(let key):
            signature = Array(try key.signature(for: Array(input.utf8)).rawRepresentation)
        case .rsa(let key):
            signature = Array(try key.signature(for: Array(input.utf8), padding: .insecurePKCS1v1_5).rawRepresentation)
        }
        return input + "." + base64URL(signature)
    }
}

public enum DemoProvidersError: Error, Sendable, CustomStringConvertible {
    case bind(String)

    public var description: String {
        switch self {
        case .bind(let what): return "demo providers: could not listen on 127.0.0.1 (\(what))"
        }
    }
}

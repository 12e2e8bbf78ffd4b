import Crypto
import CryptoExtras
import VaultFactor

/// The public half of one JWK, for the one algorithm `KeySet` fixed for it:
/// swift-crypto's arithmetic (BoringSSL) checks the signature, and nothing
/// else is asked of it — the header, the key choice and the claims are the
/// verifier's (IDTokenVerifier.swift).
package enum SignatureKey: Sendable {
    /// RS256: RSASSA-PKCS1-v1_5 with SHA-256 (RFC 7518 §3.3); 2,048 bits or more
    /// (swift-crypto refuses a smaller modulus, as RFC 7518 asks).
    case rsa(_RSA.Signing.PublicKey)
    /// ES256: ECDSA on P-256 with SHA-256, the signature as r‖s (RFC 7518 §3.4).
    case p256(P256.Signing.PublicKey)
    /// EdDSA with Ed25519 (RFC 8037).
    case ed25519(Curve25519.Signing.PublicKey)

    /// The key a JWK's members describe for `algorithm`; nil when they do not
    /// make one (wrong lengths, a point off the curve, a short modulus).
    package static func make(_ algorithm: SigningAlgorithm, kty: String, jwk o: [String: JSON]) -> SignatureKey? {
        func bytes(_ member: String) -> [UInt8]? { o[member]?.stringValue.flatMap { Base64URL.decode($0) } }
        switch (algorithm, kty) {
        case (.rs256, "RSA"):
            guard let n = bytes("n"), let e = bytes("e"), let key = try? _RSA.Signing.PublicKey(n: n, e: e) else { return nil }
            return .rsa(key)
        case (.es256, "EC"):
            guard o["crv"]?.stringValue == "P-256", let x = bytes("x"), let y = bytes("y"), x.count == 32, y.count == 32,
                  let key = try? P256.Signing.PublicKey(rawRepresentation: x + y) else { return nil }
            return .p256(key)
        case (.edDSA, "OKP"):
            guard o["crv"]?.stringValue == "Ed25519", let x = bytes("x"), x.count == 32,
                  let key = try? Curve25519.Signing.PublicKey(rawRepresentation: x) else { return nil }
            return .ed25519(key)
        default:
            return nil  // alg and kty disagree
        }
    }

    /// Whether `signature` is this key's signature over `input`.
    package func verifies(_ signature: [UInt8], signs input: [UInt8]) -> Bool {
        switch self {
        case .rsa(let key):
            return key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: input,
                                        padding: .insecurePKCS1v1_5)
        case .p256(let key):
            guard signature.count == 64, let s = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else { return false }
            return key.isValidSignature(s, for: input)
        case .ed25519(let key):
            return signature.count == 64 && key.isValidSignature(signature, for: input)
        }
    }
}

import Crypto
import CryptoExtras
import VaultFactor

/// The public half of one JWK, for the one algorithm `KeySet` fixed for it:
/// swift-crypto's arithmetic (BoringSSL) checks the signature, and nothing
/// else is asked of it — the header, the key choice and the claims are the
/// verifier's (IDTokenVerifier.swift).
///
/// Exactly one of the three keys is set. Not an enum with a key in each case:
/// Swift keeps such an enum's case in the spare bits of the key's reference,
/// and LeakSanitizer, which looks for plain addresses, then takes a JWKS kept
/// for the process's life (fuzz-jwt's fixture, vaultd's key cache) for leaked.
package struct SignatureKey: Sendable {
    /// RS256: RSASSA-PKCS1-v1_5 with SHA-256 (RFC 7518 §3.3); 2,048 bits or more
    /// (swift-crypto refuses a smaller modulus, as RFC 7518 asks).
    private var rsa: _RSA.Signing.PublicKey?
    /// ES256: ECDSA on P-256 with SHA-256, the signature as r‖s (RFC 7518 §3.4).
    private var p256: P256.Signing.PublicKey?
    /// EdDSA with Ed25519 (RFC 8037).
    private var ed25519: Curve25519.Signing.PublicKey?

    /// The key a JWK's members describe for `algorithm`; nil when they do not
    /// make one (wrong lengths, a point off the curve, a short modulus).
    package static func make(_ algorithm: SigningAlgorithm, kty: String, jwk o: [String: JSON]) -> SignatureKey? {
        func bytes(_ member: String) -> [UInt8]? { o[member]?.stringValue.flatMap { Base64URL.decode($0) } }
        var key = SignatureKey()
        switch (algorithm, kty) {
        case (.rs256, "RSA"):
            guard let n = bytes("n"), let e = bytes("e") else { return nil }
            key.rsa = try? _RSA.Signing.PublicKey(n: n, e: e)
        case (.es256, "EC"):
            guard o["crv"]?.stringValue == "P-256", let x = bytes("x"), let y = bytes("y"), x.count == 32, y.count == 32
            else { return nil }
            key.p256 = try? P256.Signing.PublicKey(rawRepresentation: x + y)
        case (.edDSA, "OKP"):
            guard o["crv"]?.stringValue == "Ed25519", let x = bytes("x"), x.count == 32 else { return nil }
            key.ed25519 = try? Curve25519.Signing.PublicKey(rawRepresentation: x)
        default:
            return nil  // alg and kty disagree
        }
        return key.rsa != nil || key.p256 != nil || key.ed25519 != nil ? key : nil
    }

    /// Whether `signature` is this key's signature over `input`.
    package func verifies(_ signature: [UInt8], signs input: [UInt8]) -> Bool {
        if let rsa {
            return rsa.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: input,
                                        padding: .insecurePKCS1v1_5)
        }
        if let p256 {
            guard signature.count == 64, let s = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else { return false }
            return p256.isValidSignature(s, for: input)
        }
        if let ed25519 {
            return signature.count == 64 && ed25519.isValidSignature(signature, for: input)
        }
        return false
    }
}

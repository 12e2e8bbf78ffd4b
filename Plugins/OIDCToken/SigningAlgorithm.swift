// The ID-token check on its own: JWKS parsing, the header, key selection,
// the signature and the claims (OpenID Connect Core §3.1.3.7), with no network,
// so that the fuzzer builds only this and jwt-kit (not NIO, AsyncHTTPClient and
// NIOSSL's BoringSSL). OIDCFactor fetches the keys and calls it.

/// Signing algorithms an ID token may use. Only asymmetric ones: `none` and the
/// HMAC family can never be configured (an HMAC "key" would be the public key).
public enum SigningAlgorithm: String, Sendable, CaseIterable, Hashable {
    case rs256 = "RS256"
    case es256 = "ES256"
    case edDSA = "EdDSA"
}

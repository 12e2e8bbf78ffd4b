import VaultFactor

/// The ID-token verifier's entry for callers that hold the JWKS document
/// themselves, with no provider and no network: the fuzzer
/// (Fuzz/Sources/fuzz-jwt). The document goes through the same `KeySet.parse`
/// as a fetched one and the token through the same `IDTokenVerifier` steps
/// (header, kid/alg selection, signature, claims), so nothing here is a second,
/// weaker path; only the cached, refetching key source is left out. The login
/// flow does not use it.
public struct IDTokenCheck: Sendable {
    /// Why a JWKS document or a token was refused (diagnostics only, no token material).
    public struct Rejected: Error, Equatable, Sendable {
        public let reason: String
    }

    /// A JWKS document parsed exactly as `ProviderCache` parses a fetched one.
    public struct Keys: Sendable {
        let keySet: KeySet
        /// Keys that survived parsing (the others were skipped, as for a provider).
        public var usable: Int { keySet.keys.count }

        public static func parse(_ document: [UInt8], allowed: Set<SigningAlgorithm>) throws(Rejected) -> Keys {
            do {
                return Keys(keySet: try KeySet.parse(document, allowed: allowed))
            } catch {
                throw Rejected(reason: "jwks: \(error)")
            }
        }
    }

    let verifier: IDTokenVerifier

    public init(issuer: String, clientID: String, trustedAudiences: Set<String> = [],
                allowedAlgorithms: Set<SigningAlgorithm>, clockSkew: Int64) {
        verifier = IDTokenVerifier(issuer: issuer, clientID: clientID, trustedAudiences: trustedAudiences,
                                   allowedAlgorithms: allowedAlgorithms, clockSkew: clockSkew)
    }

    /// `IDTokenVerifier`'s parse, key selection, signature and claim checks
    /// against fixed keys; returns the verified claims. Synchronous: only the
    /// fetch (and the one refetch for an unknown kid) is async in the verifier,
    /// and a fuzzer must not pay a thread hop per input.
    public func verify(_ token: String, keys: Keys, nonce: String?, accessToken: String?,
                       now: Int64) throws(Rejected) -> [String: JSON] {
        do throws(IDTokenVerifier.Failure) {
            let parsed = try verifier.parse(token)
            guard let claims = try verifier.verify(parsed, keys: keys.keySet, nonce: nonce, accessToken: accessToken,
                                                   now: now)
            else { throw IDTokenVerifier.Failure.invalid("unknown kid") }
            return claims
        } catch {
            switch error {
            case .invalid(let reason): throw Rejected(reason: reason)
            case .keysUnavailable(let failure): throw Rejected(reason: failure.reason)  // no fetch here: unreachable
            }
        }
    }
}

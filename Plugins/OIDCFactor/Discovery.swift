import VaultFactor

/// What we use from an OpenID Provider's discovery document.
struct ProviderMetadata: Sendable, Equatable {
    var issuer: String
    var authorizationEndpoint: String
    var tokenEndpoint: String
    var userinfoEndpoint: String?
    var jwksURI: String
    var revocationEndpoint: String?
    var signingAlgorithms: [String]
    /// RFC 9207: the authorization response carries `iss`, and we then require it.
    var issParameterSupported: Bool

    enum Problem: Error, Equatable {
        case malformed(String)
        /// The document names another issuer: a mix-up or a misconfiguration.
        case issuerMismatch
        /// An endpoint uses plain http outside loopback, or is not a URL.
        case insecureEndpoint(String)
    }

    /// Parses and checks a discovery document against the configured issuer.
    static func parse(_ body: [UInt8], expectedIssuer: String, policy: TransportPolicy) throws(Problem) -> ProviderMetadata {
        let json: JSON
        do { json = try JSON.parse(body) } catch { throw .malformed("not JSON") }
        guard case .object(let o) = json else { throw .malformed("not an object") }
        guard let issuer = o["issuer"]?.stringValue else { throw .malformed("no issuer") }
        // OpenID Connect Discovery §4.3: exactly equal, no normalisation.
        guard issuer == expectedIssuer else { throw .issuerMismatch }

        func endpoint(_ name: String, required: Bool) throws(Problem) -> String? {
            guard let value = o[name] else {
                if required { throw .malformed("no \(name)") }
                return nil
            }
            guard let s = value.stringValue else { throw .malformed("\(name) is not a string") }
            guard policy.allows(s) else { throw .insecureEndpoint(name) }
            return s
        }

        let algs = o["id_token_signing_alg_values_supported"]?.arrayValue?.compactMap(\.stringValue) ?? []
        return ProviderMetadata(
            issuer: issuer,
            authorizationEndpoint: try endpoint("authorization_endpoint", required: true)!,
            tokenEndpoint: try endpoint("token_endpoint", required: true)!,
            userinfoEndpoint: try endpoint("userinfo_endpoint", required: false),
            jwksURI: try endpoint("jwks_uri", required: true)!,
            revocationEndpoint: try endpoint("revocation_endpoint", required: false),
            signingAlgorithms: algs,
            issParameterSupported: o["authorization_response_iss_parameter_supported"]?.boolValue ?? false)
    }
}

import VaultFactor

/// Where verification keys come from: the provider's JWKS (cached), refetched
/// once when a token names a key we do not have.
package protocol KeySource: Sendable {
    func keys(refresh: Bool) async throws(KeySourceFailure) -> KeySet
}

/// Why the keys could not be had: `transport` is the fetcher's own error (for
/// OIDCFactor an `OIDCHTTPClient.Failure`, which says timeout from refused),
/// `reason` the diagnostic line.
package struct KeySourceFailure: Error {
    package var transport: (any Error & Sendable)?
    package var reason: String

    package init(transport: (any Error & Sendable)?, reason: String) {
        self.transport = transport
        self.reason = reason
    }
}

/// ID token validation per OpenID Connect Core §3.1.3.7; swift-crypto does the
/// signature arithmetic (SignatureKey.swift), everything else is here.
package struct IDTokenVerifier: Sendable {
    package var issuer: String
    package var clientID: String
    package var trustedAudiences: Set<String>
    package var allowedAlgorithms: Set<SigningAlgorithm>
    package var clockSkew: Int64
    /// False when the access token beside the ID token is not the provider's:
    /// an organization's backend answers with its own session and passes the
    /// provider's ID token through (docs/backend.md), so `at_hash` names a token
    /// only the backend holds and cannot be checked here.
    package var checksAccessTokenHash: Bool

    package init(issuer: String, clientID: String, trustedAudiences: Set<String>, allowedAlgorithms: Set<SigningAlgorithm>,
                 clockSkew: Int64, checksAccessTokenHash: Bool = true) {
        self.issuer = issuer
        self.clientID = clientID
        self.trustedAudiences = trustedAudiences
        self.allowedAlgorithms = allowedAlgorithms
        self.clockSkew = clockSkew
        self.checksAccessTokenHash = checksAccessTokenHash
    }

    package enum Failure: Error {
        /// The token is not acceptable. The reason is for diagnostics only and
        /// never contains token material.
        case invalid(String)
        /// The keys could not be fetched.
        case keysUnavailable(KeySourceFailure)
    }

    /// Verifies signature and claims; returns the payload's claims.
    /// `nonce`: the login's nonce (nil only for tokens from a refresh).
    /// `accessToken`: checked against `at_hash` when the token carries one.
    package func verify(_ token: String, nonce: String?, accessToken: String?, now: Int64,
                keys source: any KeySource) async throws(Failure) -> [String: JSON] {
        let parsed = try parse(token)
        // A kid we do not have is worth one JWKS refetch (the provider rotated).
        for refresh in [false, true] {
            let set: KeySet
            do { set = try await source.keys(refresh: refresh) } catch { throw .keysUnavailable(error) }
            if let claims = try verify(parsed, keys: set, nonce: nonce, accessToken: accessToken, now: now) {
                return claims
            }
        }
        throw .invalid("unknown kid after one JWKS refetch")
    }

    /// A compact JWS with its header checked, before any key is chosen.
    package struct ParsedToken {
        package let jws: CompactJWS
        package let algorithm: SigningAlgorithm
        package let kid: String?
    }

    package func parse(_ token: String) throws(Failure) -> ParsedToken {
        guard let jws = CompactJWS(token) else { throw .invalid("malformed JWS") }
        let algorithm = try checkHeader(jws.header)
        let kid: String?
        if let k = jws.header["kid"] {
            guard let s = k.stringValue else { throw .invalid("kid is not a string") }
            kid = s
        } else {
            kid = nil
        }
        return ParsedToken(jws: jws, algorithm: algorithm, kid: kid)
    }

    /// Key selection, signature and claims against one key set (synchronous: no
    /// fetch happens here). Nil when the set has no key for the token's kid.
    package func verify(_ token: ParsedToken, keys set: KeySet, nonce: String?, accessToken: String?,
                now: Int64) throws(Failure) -> [String: JSON]? {
        // The key named by kid and alg, never a default one.
        let key: VerificationKey
        switch set.select(kid: token.kid, algorithm: token.algorithm) {
        case .key(let k): key = k
        case .unusable: throw .invalid("no unambiguous key for kid and alg")
        case .unknownKid: return nil
        }
        guard key.algorithm == token.algorithm else { throw .invalid("key algorithm differs from header") }

        guard key.key.verifies(token.jws.signature, signs: token.jws.signingInput) else { throw .invalid("bad signature") }

        try checkClaims(token.jws.payload, algorithm: token.algorithm, nonce: nonce, accessToken: accessToken, now: now)
        return token.jws.payload
    }

    /// The header's `alg` must be one the profile allows, before any verification.
    package func checkHeader(_ header: [String: JSON]) throws(Failure) -> SigningAlgorithm {
        guard let name = header["alg"]?.stringValue else { throw .invalid("no alg") }
        guard let algorithm = SigningAlgorithm(rawValue: name), allowedAlgorithms.contains(algorithm) else {
            throw .invalid("alg \(name.prefix(16)) not allowed")
        }
        // RFC 7515 §4.1.11: extensions we do not understand must make us reject.
        if header["crit"] != nil { throw .invalid("crit header") }
        return algorithm
    }

    package func checkClaims(_ claims: [String: JSON], algorithm: SigningAlgorithm, nonce: String?, accessToken: String?,
                     now: Int64) throws(Failure) {
        guard claims["iss"]?.stringValue == issuer else { throw .invalid("iss") }
        guard let sub = claims["sub"]?.stringValue, !sub.isEmpty else { throw .invalid("sub") }

        // aud: a string or a non-empty array of strings naming us; any other
        // audience must be explicitly trusted, and then azp must name us.
        let audiences: [String]
        switch claims["aud"] {
        case .string(let s)?: audiences = [s]
        case .array(let a)?:
            let strings = a.compactMap(\.stringValue)
            guard strings.count == a.count, !strings.isEmpty else { throw .invalid("aud") }
            audiences = strings
        default: throw .invalid("aud")
        }
        guard audiences.contains(clientID) else { throw .invalid("aud does not contain client") }
        for a in audiences where a != clientID && !trustedAudiences.contains(a) {
            throw .invalid("untrusted extra audience")
        }
        if let azp = claims["azp"] {
            guard azp.stringValue == clientID else { throw .invalid("azp") }
        } else if Set(audiences).count > 1 {
            throw .invalid("several audiences and no azp")
        }

        // Saturating: exp is the provider's number (up to Int64.max), and a
        // trapping `exp + clockSkew` took the whole process down (fuzz-jwt).
        guard let exp = numericDate(claims["exp"]) else { throw .invalid("exp missing") }
        guard now < saturatingAdd(exp, clockSkew) else { throw .invalid("expired") }
        guard let iat = numericDate(claims["iat"]) else { throw .invalid("iat missing") }
        guard iat <= saturatingAdd(now, clockSkew) else { throw .invalid("iat in the future") }
        if let nbfValue = claims["nbf"] {
            guard let nbf = numericDate(nbfValue), nbf <= saturatingAdd(now, clockSkew) else { throw .invalid("nbf") }
        }

        if let nonce {
            guard let got = claims["nonce"]?.stringValue, constantTimeEquals(got, nonce) else {
                throw .invalid("nonce")
            }
        }

        if checksAccessTokenHash, let atHash = claims["at_hash"] {
            guard let accessToken, let got = atHash.stringValue else { throw .invalid("at_hash") }
            guard constantTimeEquals(got, IDTokenVerifier.tokenHash(accessToken, algorithm: algorithm)) else {
                throw .invalid("at_hash mismatch")
            }
        }
    }

    /// OIDC Core §3.1.3.6: base64url of the left half of the hash the signing
    /// algorithm uses (SHA-256 for RS256/ES256, SHA-512 for Ed25519).
    package static func tokenHash(_ token: String, algorithm: SigningAlgorithm) -> String {
        let digest: [UInt8]
        switch algorithm {
        case .rs256, .es256: digest = Digest.sha256(Array(token.utf8))
        case .edDSA: digest = Digest.sha512(Array(token.utf8))
        }
        return Base64URL.encode(Array(digest.prefix(digest.count / 2)))
    }

    private func saturatingAdd(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? (b > 0 ? .max : .min) : sum
    }

    private func numericDate(_ value: JSON?) -> Int64? {
        switch value {
        case .int(let i)?: return i
        case .double(let d)? where d.isFinite && abs(d) < 9.0e15: return Int64(d.rounded(.down))
        default: return nil
        }
    }
}

/// Compares two strings without an early exit on the first difference
/// (nonce and at_hash here; state and sub in OIDCFactor).
package func constantTimeEquals(_ a: String, _ b: String) -> Bool {
    Sodium.constantTimeEqual(Array(a.utf8), Array(b.utf8))
}

import VaultFactor

/// One verification key from a provider's JWKS, with its algorithm fixed.
package struct VerificationKey: Sendable {
    package let kid: String?
    package let algorithm: SigningAlgorithm
    package let key: SignatureKey
}

/// A provider's signing keys, parsed by us (strict JSON), each made into a
/// `SignatureKey` for one algorithm.
///
/// The rules (from the JWT libraries' known pitfalls, which this type was first
/// written to avoid in jwt-kit 5.8.0, and which now hold by construction):
/// - a key is selected by `kid` here, never by falling back to a default key,
///   which also lets an unknown `kid` trigger a refetch;
/// - every key gets an algorithm here (from the JWK or inferred from its type
///   and curve) and must be in the profile's allowed set; the token header's
///   `alg` must equal the key's before any verification;
/// - a key's algorithm never comes from a token.
package struct KeySet: Sendable {
    package var keys: [VerificationKey]
    /// How many JWKs were skipped (wrong use, disallowed alg, unsupported or malformed).
    package var skipped: Int

    package enum Problem: Error, Equatable {
        case malformed(String)
    }

    package static func parse(_ body: [UInt8], allowed: Set<SigningAlgorithm>) throws(Problem) -> KeySet {
        let json: JSON
        do { json = try JSON.parse(body) } catch { throw .malformed("not JSON") }
        guard let list = json["keys"]?.arrayValue else { throw .malformed("no keys array") }
        var keys: [VerificationKey] = []
        var skipped = 0
        for entry in list {
            if let key = makeKey(entry, allowed: allowed) {
                keys.append(key)
            } else {
                skipped += 1
            }
        }
        return KeySet(keys: keys, skipped: skipped)
    }

    private static func makeKey(_ entry: JSON, allowed: Set<SigningAlgorithm>) -> VerificationKey? {
        guard case .object(let o) = entry, let kty = o["kty"]?.stringValue else { return nil }
        if let use = o["use"] { guard use.stringValue == "sig" else { return nil } }
        if let ops = o["key_ops"] {
            guard let list = ops.arrayValue?.compactMap(\.stringValue), list.contains("verify") else { return nil }
        }
        // A published private key is a provider bug; never build a signer from one.
        if o["d"] != nil { return nil }
        let kid: String?
        if let k = o["kid"] {
            guard let s = k.stringValue else { return nil }
            kid = s
        } else {
            kid = nil
        }
        let crv = o["crv"]?.stringValue

        // The algorithm: the JWK's own, or inferred from type and curve.
        let algorithm: SigningAlgorithm
        if let a = o["alg"] {
            guard let s = a.stringValue, let alg = SigningAlgorithm(rawValue: s) else { return nil }
            algorithm = alg
        } else {
            switch (kty, crv) {
            case ("RSA", _): algorithm = .rs256
            case ("EC", "P-256"): algorithm = .es256
            case ("OKP", "Ed25519"): algorithm = .edDSA
            default: return nil
            }
        }
        guard allowed.contains(algorithm), let key = SignatureKey.make(algorithm, kty: kty, jwk: o) else { return nil }
        return VerificationKey(kid: kid, algorithm: algorithm, key: key)
    }

    package enum Selection {
        case key(VerificationKey)
        /// No key with this kid (or, without a kid, none for the alg): worth one JWKS refetch.
        case unknownKid
        /// The kid exists but for another algorithm, or several keys match.
        case unusable
    }

    package func select(kid: String?, algorithm: SigningAlgorithm) -> Selection {
        if let kid {
            let named = keys.filter { $0.kid == kid }
            if named.isEmpty { return .unknownKid }
            let matching = named.filter { $0.algorithm == algorithm }
            return matching.count == 1 ? .key(matching[0]) : .unusable
        }
        let matching = keys.filter { $0.algorithm == algorithm }
        switch matching.count {
        case 0: return .unknownKid
        case 1: return .key(matching[0])
        default: return .unusable
        }
    }
}

/// A compact JWS split into its parts, with header and payload parsed by our
/// strict JSON parser (duplicate keys refused).
package struct CompactJWS {
    package let header: [String: JSON]
    package let payload: [String: JSON]
    package let signingInput: [UInt8]
    package let signature: [UInt8]

    package init?(_ token: String) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let h = Base64URL.decode(parts[0]), let p = Base64URL.decode(parts[1]),
              let s = Base64URL.decode(parts[2]), !s.isEmpty,
              case .object(let header)? = try? JSON.parse(h),
              case .object(let payload)? = try? JSON.parse(p)
        else { return nil }
        self.header = header
        self.payload = payload
        self.signingInput = Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8)
        self.signature = s
    }
}

import CryptoExtras
import JWTKit
import SodiumKit
import VaultProtocol

/// One issuer's signing key, generated fresh at every start, and its public JWK.
struct SigningKey: Sendable {
    let kid: String
    /// `ES256` or `RS256`: written into both the JWK and every token header.
    let alg: String
    /// The public key as a JWK (with `kid`, `alg`, `use`).
    let publicJWK: JSON
    private let keys: JWTKeyCollection

    private init(kid: String, alg: String, publicJWK: JSON, keys: JWTKeyCollection) {
        self.kid = kid
        self.alg = alg
        self.publicJWK = publicJWK
        self.keys = keys
    }

    /// A new P-256 key (BankID signs ID tokens with ES256).
    static func es256() async throws -> SigningKey {
        let key = ES256PrivateKey()
        guard let p = key.publicKey.parameters else { throw DemoProvidersError.keyGeneration("P-256 coordinates") }
        let kid = "demo-es256-" + randomToken(bytes: 9)
        let jwk: JSON = ["kty": "EC", "crv": "P-256", "x": .string(p.x), "y": .string(p.y),
                         "kid": .string(kid), "alg": "ES256", "use": "sig"]
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: key, kid: JWKIdentifier(string: kid))
        return SigningKey(kid: kid, alg: "ES256", publicJWK: jwk, keys: keys)
    }

    /// A new RSA-2048 key (Vipps signs ID tokens with RS256). jwt-kit cannot generate RSA
    /// keys itself: swift-crypto's `_RSA.Signing.PrivateKey(keySize:)` does, and jwt-kit wraps it.
    static func rs256() async throws -> SigningKey {
        let backing = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let key = try Insecure.RSA.PrivateKey(backing: backing)
        let primitives = try backing.publicKey.getKeyPrimitives()
        let kid = "demo-rs256-" + randomToken(bytes: 9)
        let jwk: JSON = ["kty": "RSA", "n": .string(base64URL(Array(primitives.modulus))),
                         "e": .string(base64URL(Array(primitives.publicExponent))),
                         "kid": .string(kid), "alg": "RS256", "use": "sig"]
        let keys = JWTKeyCollection()
        await keys.add(rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
        return SigningKey(kid: kid, alg: "RS256", publicJWK: jwk, keys: keys)
    }

    /// A compact JWS over `claims`, header `{alg, typ: JWT, kid}`.
    func sign(_ claims: [String: JSON]) async throws -> String {
        var header = JWTHeader()
        header.alg = alg
        header.typ = "JWT"
        return try await keys.sign(ClaimSet(claims: claims), kid: JWKIdentifier(string: kid), header: header)
    }
}

public enum DemoProvidersError: Error, Sendable, CustomStringConvertible {
    case keyGeneration(String)
    case bind(String)

    public var description: String {
        switch self {
        case .keyGeneration(let what): return "demo providers: key generation failed (\(what))"
        case .bind(let what): return "demo providers: could not listen on 127.0.0.1 (\(what))"
        }
    }
}

/// A JWT payload made of arbitrary claims, so the ID token can carry exactly what
/// each provider profile puts in it (jwt-kit wants a `Codable` payload).
struct ClaimSet: JWTPayload {
    var claims: [String: JSON]

    init(claims: [String: JSON]) { self.claims = claims }

    func verify(using algorithm: some JWTAlgorithm) async throws {}

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ClaimKey.self)
        for key in claims.keys.sorted() {
            try c.encode(CodableJSON(claims[key] ?? .null), forKey: ClaimKey(key))
        }
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: ClaimKey.self)
        var claims: [String: JSON] = [:]
        for key in c.allKeys {
            claims[key.stringValue] = try c.decode(CodableJSON.self, forKey: key).value
        }
        self.claims = claims
    }
}

struct ClaimKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(_ s: String) { stringValue = s }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// Bridges `VaultProtocol.JSON` to `Codable`.
struct CodableJSON: Codable {
    let value: JSON

    init(_ value: JSON) { self.value = value }

    func encode(to encoder: any Encoder) throws {
        switch value {
        case .null:
            var c = encoder.singleValueContainer()
            try c.encodeNil()
        case .bool(let b):
            var c = encoder.singleValueContainer()
            try c.encode(b)
        case .int(let i):
            var c = encoder.singleValueContainer()
            try c.encode(i)
        case .double(let d):
            var c = encoder.singleValueContainer()
            try c.encode(d)
        case .string(let s):
            var c = encoder.singleValueContainer()
            try c.encode(s)
        case .array(let a):
            var c = encoder.unkeyedContainer()
            for v in a { try c.encode(CodableJSON(v)) }
        case .object(let o):
            var c = encoder.container(keyedBy: ClaimKey.self)
            for key in o.keys.sorted() { try c.encode(CodableJSON(o[key] ?? .null), forKey: ClaimKey(key)) }
        }
    }

    init(from decoder: any Decoder) throws {
        if let c = try? decoder.container(keyedBy: ClaimKey.self) {
            var o: [String: JSON] = [:]
            for key in c.allKeys { o[key.stringValue] = try c.decode(CodableJSON.self, forKey: key).value }
            value = .object(o)
            return
        }
        if var c = try? decoder.unkeyedContainer() {
            var a: [JSON] = []
            while !c.isAtEnd { a.append(try c.decode(CodableJSON.self).value) }
            value = .array(a)
            return
        }
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            value = .null
        } else if let b = try? c.decode(Bool.self) {
            value = .bool(b)
        } else if let i = try? c.decode(Int64.self) {
            value = .int(i)
        } else if let d = try? c.decode(Double.self) {
            value = .double(d)
        } else {
            value = .string(try c.decode(String.self))
        }
    }
}

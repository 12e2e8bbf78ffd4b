import Logging
import SodiumKit
import VaultFactor
import VaultProtocol
import VaultStore

/// What the vault knows about a session without the vault key: sealed under a key
/// derived from the device key, so `status` can list accounts while locked, but
/// the disk alone reveals nothing.
public struct SessionMeta: Sendable, Equatable {
    public var account: String
    public var provider: String
    public var issuer: String
    public var clientID: String
    public var subject: String
    public var name: String
    /// Organization, roles and other claims an app needs for its home screen.
    public var claims: [String: JSON]
    /// Unix seconds; nil = unknown.
    public var accessExpiresAt: Int64?
    public var refreshExpiresAt: Int64?
    public var hasRefreshToken: Bool
    public var createdAt: Int64
    /// The secret half's write count, also in its associated data: an older
    /// secret blob put back into the row (its version column edited to match)
    /// disagrees with this and is refused. 0 = written before versions were kept.
    var version: Int = 0
    /// False for a session stored while the vault key was out of reach: its
    /// secret half is sealed under its own record key, which is stored sealed to
    /// the vault's public key (docs/key-hierarchy.md). It waits for the PIN.
    var sealedForVaultKey = true

    public init(account: String, provider: String, issuer: String, clientID: String, subject: String, name: String,
                claims: [String: JSON], accessExpiresAt: Int64?, refreshExpiresAt: Int64?, hasRefreshToken: Bool, createdAt: Int64) {
        self.account = account
        self.provider = provider
        self.issuer = issuer
        self.clientID = clientID
        self.subject = subject
        self.name = name
        self.claims = claims
        self.accessExpiresAt = accessExpiresAt
        self.refreshExpiresAt = refreshExpiresAt
        self.hasRefreshToken = hasRefreshToken
        self.createdAt = createdAt
    }

    var json: JSON {
        var o: [String: JSON] = [
            "account": .string(account), "provider": .string(provider), "issuer": .string(issuer),
            "client_id": .string(clientID), "subject": .string(subject), "name": .string(name),
            "claims": .object(claims), "has_refresh_token": .bool(hasRefreshToken), "created_at": .int(createdAt),
        ]
        if let accessExpiresAt { o["access_expires_at"] = .int(accessExpiresAt) }
        if let refreshExpiresAt { o["refresh_expires_at"] = .int(refreshExpiresAt) }
        if version > 0 { o["version"] = .int(Int64(version)) }
        if !sealedForVaultKey { o["record_key"] = .bool(true) }
        return .object(o)
    }

    init?(json: JSON) {
        guard let account = json["account"]?.stringValue, let provider = json["provider"]?.stringValue,
              let issuer = json["issuer"]?.stringValue, let clientID = json["client_id"]?.stringValue else { return nil }
        self.init(account: account, provider: provider, issuer: issuer, clientID: clientID,
                  subject: json["subject"]?.stringValue ?? "", name: json["name"]?.stringValue ?? "",
                  claims: json["claims"]?.objectValue ?? [:],
                  accessExpiresAt: json["access_expires_at"]?.intValue,
                  refreshExpiresAt: json["refresh_expires_at"]?.intValue,
                  hasRefreshToken: json["has_refresh_token"]?.boolValue ?? false,
                  createdAt: json["created_at"]?.intValue ?? 0)
        version = json["version"]?.intValue.map { Int($0) } ?? 0
        sealedForVaultKey = json["record_key"]?.boolValue != true
    }
}

/// The secret half of a session, sealed under the vault key.
struct SessionSecret {
    var accessToken: String?
    var refreshToken: String?
    var idToken: String?

    /// A login's tokens, as its session keeps them.
    init(_ tokens: TokenGrant) {
        self.init(accessToken: tokens.accessToken, refreshToken: tokens.refreshToken, idToken: tokens.idToken)
    }

    /// Serialises into a buffer the caller must wipe.
    func serialized() -> [UInt8] {
        var o: [String: JSON] = [:]
        if let accessToken { o["access_token"] = .string(accessToken) }
        if let refreshToken { o["refresh_token"] = .string(refreshToken) }
        if let idToken { o["id_token"] = .string(idToken) }
        return JSON.object(o).serialized()
    }

    init(accessToken: String?, refreshToken: String?, idToken: String?) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.idToken = idToken
    }

    init?(bytes: UnsafeRawBufferPointer) {
        guard let o = (try? JSON.parse(bytes))?.objectValue else { return nil }
        accessToken = o["access_token"]?.stringValue
        refreshToken = o["refresh_token"]?.stringValue
        idToken = o["id_token"]?.stringValue
    }
}

/// Associated data binds each sealed half to its record id and version, so
/// halves can't be swapped between rows or replayed from an older version.
/// A session sealed under its own record key (RK) stores RK sealed to the
/// vault's public key in front of the secret box.
enum SessionSealing {
    /// The version of a record's first write; each write adds one.
    static let recordVersion = 1
    static let wrappedRecordKeySize = KeyDerivation.keySize + PublicKeyBox.overhead
    static let vaultKeyPairLabel = "sessionvault/vault-key-pair/v1"
    static let publicKeyMeta = "vault_public_key"
    /// A MAC of the public key under a device-key-derived key: someone who can
    /// write the data directory but lacks the device key cannot swap in a key
    /// of their own, to which later logins would seal sessions.
    static let publicKeyMACMeta = "vault_public_key_mac"
    static let publicKeyMACLabel = "sessionvault/vault-public-key-mac/v1"

    static func publicKeyMAC(_ publicKey: [UInt8], deviceKey: SecureBytes) throws -> [UInt8] {
        let key = try KeyDerivation.derive(key: deviceKey, parts: [.label(publicKeyMACLabel)])
        return try KeyDerivation.mac(key: key, message: publicKey)
    }

    /// The stored public key when its MAC checks; nil (sealing to it waits for
    /// the vault key) when it is missing, damaged or swapped.
    static func authenticatedPublicKey(store: VaultStore, deviceKey: SecureBytes, logger: Logger) -> [UInt8]? {
        guard let publicKey = try? store.meta(publicKeyMeta) else { return nil }
        guard let mac = try? store.meta(publicKeyMACMeta), let expected = try? publicKeyMAC(publicKey, deviceKey: deviceKey),
              Sodium.constantTimeEqual(mac, expected) else {
            logger.warning("the vault's stored public key does not carry a valid MAC; it is not used until the next unlock")
            return nil
        }
        return publicKey
    }
    static func metaAD(id: String) -> [UInt8] { Array("sessionvault/session-meta/v1|\(id)".utf8) }
    static func secretAD(id: String, version: Int) -> [UInt8] { Array("sessionvault/session-secret/v1|\(id)|\(version)".utf8) }
}

extension SessionMeta {
    /// The member registry's organizations for the person behind the session
    /// (its `orgs` claim, as id and name), and the active one's id: `org`
    /// when it names one of them (a provider's own `org` claim does not count).
    public var organizations: (all: [(id: String, name: String)], active: String?) {
        let all = (claims["orgs"]?.arrayValue ?? []).compactMap { org -> (id: String, name: String)? in
            org["id"]?.stringValue.map { (id: $0, name: org["name"]?.stringValue ?? $0) }
        }
        let active = claims["org"]?.stringValue
        return (all, all.contains { $0.id == active } ? active : nil)
    }
}

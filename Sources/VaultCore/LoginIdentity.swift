import VaultFactor
import VaultProtocol
import VaultStore

/// Which identity record a verified login is checked against, and what it
/// proves: the person (a device-keyed hash of the national ID, never the
/// number) in `login:person`, whichever provider (BankID, Vipps, ID-porten)
/// they use, or else the provider's (issuer, stable subject) in
/// `login:PROVIDER`. A plain value; `LoginRecordVerdict` says what the record
/// makes of it and `Vault.adopt` (Login.swift) applies that.
struct LoginIdentity {
    static let slotPrefix = "login:"
    /// The record of logins that prove a national identity number: one per person.
    static let personSlotID = slotPrefix + "person"

    static func slotID(provider: String) -> String { slotPrefix + provider }

    let slotID: String
    let proof: FactorProof

    init(_ login: VerifiedLogin, deviceKey: SecureBytes) throws(VaultFailure) {
        guard let nin = login.nationalID else {
            slotID = LoginIdentity.slotID(provider: login.provider)
            proof = FactorProof(binding: ["issuer": login.issuer, "subject": login.subject])
            return
        }
        do {
            let person = try KeyDerivation.derive(key: deviceKey, parts: [.label("sessionvault/person/v1"), .secret(nin)])
            slotID = LoginIdentity.personSlotID
            proof = FactorProof(binding: ["person": Digest.hex(person.unsafeCopyToArray())])
        } catch {
            throw .internal()
        }
    }

    /// The subject as stored: a subject that *is* the national ID (ID-porten's
    /// `pid`) only as a device-keyed hash, any other as it is.
    static func storedSubject(of login: VerifiedLogin, deviceKey: SecureBytes) -> String {
        guard let nin = login.nationalID, Sodium.constantTimeEqual(Array(login.subject.utf8), nin.unsafeCopyToArray()) else {
            return login.subject
        }
        let hashed = (try? KeyDerivation.derive(key: deviceKey, parts: [.label("sessionvault/subject/v1"), .secret(nin)]))
            .map { Digest.hex($0.unsafeCopyToArray()) }
        return hashed ?? ""
    }
}

extension SessionMeta {
    /// A login's session as stored: the provider's claims and name, with the
    /// member registry's claims over them (it is authoritative for
    /// organization and roles).
    init(_ login: VerifiedLogin, memberClaims: [String: JSON], createdAt: Int64) {
        var claims = login.claims
        claims["name"] = .string(login.name)
        for (k, v) in memberClaims { claims[k] = v }
        self.init(account: login.provider, provider: login.provider, issuer: login.issuer, clientID: login.clientID,
                  subject: login.subject, name: login.name, claims: claims,
                  accessExpiresAt: login.tokens.accessExpiresAt, refreshExpiresAt: login.tokens.refreshExpiresAt,
                  hasRefreshToken: login.tokens.refreshToken != nil, createdAt: createdAt)
    }
}

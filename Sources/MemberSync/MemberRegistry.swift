import NationalID
import SodiumKit

/// Which member a login belongs to, as the member registry knows it.
///
/// Design choice: the key is the login's identity — provider id plus the
/// provider's *stable* subject (Vipps `sub`, BankID `bankid_altsub`, …) — and
/// the registry maps it to its member (it linked the login to the member when
/// the person signed up or first logged in). A lookup by a keyed hash of the
/// national ID cannot work for the case that matters most: a member record
/// with no number yet has nothing to look up by.
///
/// The subject may itself be sensitive (some providers use the national ID as
/// the subject), so it never appears in logs, audit entries, conflicts or the
/// store in clear: `description` hides it, and the engine keys what it keeps
/// by a keyed hash of the member key.
public struct MemberKey: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The provider id: "vipps", "bankid", "idporten", or a configured name.
    public var provider: String
    /// The provider's stable subject for this person.
    public var subject: String

    public init(provider: String, subject: String) {
        self.provider = provider
        self.subject = subject
    }

    public var description: String { "\(provider):<subject>" }
    public var debugDescription: String { "MemberKey(\(provider), subject hidden)" }
}

/// An organization the member belongs to, with the member's roles there.
public struct Organization: Sendable, Hashable {
    public var id: String
    public var name: String
    public var roles: [String]

    public init(id: String, name: String, roles: [String]) {
        self.id = id
        self.name = name
        self.roles = roles
    }
}

/// What the member record says about the national identity number.
public enum NationalIDOnRecord: Sendable {
    /// No number on record.
    case none
    /// The number on record, as the registry stores it (ASCII digits), in
    /// secure memory. Not necessarily valid: old records may hold anything.
    case number(SecureBytes)
    /// Only a keyed hash of the number (hex BLAKE2b-256, as
    /// `NationalIDNumber.keyedHash(key:)` computes it) with the comparison key
    /// shared with the registry.
    case keyedHash(hex: String, key: SecureBytes)

    /// Whether the record holds exactly this number. Nil for `.none`.
    public func matches(_ number: NationalIDNumber) -> Bool? {
        switch self {
        case .none:
            return nil
        case .number(let stored):
            return stored.constantTimeEquals(number.secureDigits)
        case .keyedHash(let hex, let key):
            guard let mine = try? number.keyedHash(key: key) else { return false }
            return Sodium.constantTimeEqual(Array(mine.utf8), Array(hex.lowercased().utf8))
        }
    }

    public var isPresent: Bool {
        if case .none = self { return false }
        return true
    }
}

/// A member as the registry returns it.
public struct MemberRecord: Sendable {
    /// The registry's own id for the member (not secret; shown in conflicts).
    public var memberID: String
    public var nationalID: NationalIDOnRecord
    public var organizations: [Organization]

    public init(memberID: String, nationalID: NationalIDOnRecord, organizations: [Organization]) {
        self.memberID = memberID
        self.nationalID = nationalID
        self.organizations = organizations
    }
}

/// What a conditional write did.
public enum SetNationalIDResult: String, Sendable, Equatable {
    /// The number was written (the record had none).
    case written
    /// The record already held this number (a replay, or a concurrent write):
    /// nothing was written.
    case unchanged
}

/// Why a registry call failed. Never carries the number, the subject, a
/// request or a response body.
public enum RegistryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No connection, connection refused, timeout, reset.
    case unreachable(String)
    /// The registry answered 5xx (or 408/425/429): it is there but cannot serve now.
    case unavailable(status: Int)
    /// The registry refused the request (4xx other than the above).
    case rejected(status: Int)
    /// A write found a different number on record and did not overwrite it.
    case conflict
    /// The member the write was for is gone.
    case memberNotFound
    /// The answer could not be understood.
    case badResponse(String)
    /// The local (SQLite) registry could not read or write.
    case storage(String)

    /// Worth trying again later: the queue keeps the job. Authentication
    /// failures count too, since they are fixed by configuration, not by the
    /// person logging in, and nothing may be lost meanwhile.
    public var isRetryable: Bool {
        switch self {
        case .unreachable, .unavailable, .badResponse, .storage: return true
        case .rejected(let status): return [401, 403].contains(status)
        case .conflict, .memberNotFound: return false
        }
    }

    public var description: String {
        switch self {
        case .unreachable(let why): return "member registry unreachable (\(why))"
        case .unavailable(let status): return "member registry unavailable (HTTP \(status))"
        case .rejected(let status): return "member registry refused the request (HTTP \(status))"
        case .conflict: return "a different national identity number is on record"
        case .memberNotFound: return "the member is not in the registry"
        case .badResponse(let why): return "member registry answer not understood (\(why))"
        case .storage(let why): return "member registry storage failed (\(why))"
        }
    }

    /// A short stable code for audit details.
    public var code: String {
        switch self {
        case .unreachable: return "unreachable"
        case .unavailable: return "unavailable"
        case .rejected: return "rejected"
        case .conflict: return "conflict"
        case .memberNotFound: return "member_not_found"
        case .badResponse: return "bad_response"
        case .storage: return "storage"
        }
    }
}

/// The member system, seen from the vault. Two backends: `HTTPMemberRegistry`
/// (the organization's member system, API in docs/member-sync.md) and
/// `SQLiteMemberRegistry` (a local file for the demo).
public protocol MemberRegistry: Sendable {
    /// The member linked to this login, or nil if the login is linked to none.
    func lookup(memberKey: MemberKey) async throws(RegistryError) -> MemberRecord?

    /// Writes the number to the member record *only if the record has none*
    /// (a conditional write: a different number on record throws `.conflict`,
    /// the same number returns `.unchanged`).
    ///
    /// `idempotencyKey` names this write: the registry must remember it and
    /// answer a repeat with the first answer without writing again, so a retry
    /// after a lost response never writes twice. `source` is where the number
    /// came from ("vipps-login", "bankid-login", …), for the record's history.
    @discardableResult
    func setNationalID(memberKey: MemberKey, number: NationalIDNumber, source: String,
                       idempotencyKey: String) async throws(RegistryError) -> SetNationalIDResult
}

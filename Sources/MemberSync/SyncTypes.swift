import NationalID
import VaultProtocol

/// How one sync ended.
public enum SyncOutcome: Sendable, Equatable {
    /// The record had no number: it was written.
    case updated
    /// The record already had this number: nothing written ("confirmed, no change").
    case confirmed
    /// The record has a different number: nothing written; a conflict is
    /// listed for a person to resolve (`conflicts()`).
    case conflict
    /// The registry could not be reached (or answered 5xx): the sync waits in
    /// the store's job queue and `runDue()` retries it with backoff.
    case queued
    /// The number from the login is not a valid national identity number:
    /// nothing sent anywhere.
    case invalid(NationalIDError)
    /// No member is linked to this login in the registry.
    case noMember
    /// The registry refused the request for a reason a retry won't fix.
    case failed(RegistryError)

    /// The audit outcome word.
    public var name: String {
        switch self {
        case .updated: return "updated"
        case .confirmed: return "confirmed"
        case .conflict: return "conflict"
        case .queued: return "queued"
        case .invalid: return "invalid"
        case .noMember: return "no_member"
        case .failed: return "failed"
        }
    }
}

/// The outcome plus what the registry said about the member, when it said
/// anything (for the session's `org`/`roles` claims).
public struct SyncResult: Sendable {
    public var outcome: SyncOutcome
    /// The member's organizations and the active one: fresh from the registry,
    /// or the last known ones when it could not be reached. Nil if never known.
    public var context: MemberContext?
}

/// One audit entry for the broker's audit log. `detail` never holds the
/// number in clear: `nin` is the masked form (`DDMMYY*****`), `nin_hash` a
/// keyed hash; the login's subject is never included.
public struct SyncAuditEvent: Sendable, Equatable {
    /// Unix time of the event.
    public var at: Double
    /// Always "member_sync".
    public var event: String
    /// updated | confirmed | conflict | queued | retry_scheduled | invalid |
    /// no_member | failed | dropped | conflict_resolved | context_changed
    public var outcome: String
    /// source (e.g. "vipps-login"), provider, member, nin, nin_hash, message,
    /// reason, job, attempts, retry_at — as they apply.
    public var detail: [String: JSON]

    public init(at: Double, event: String = "member_sync", outcome: String, detail: [String: JSON]) {
        self.at = at
        self.event = event
        self.outcome = outcome
        self.detail = detail
    }
}

/// What one `runDue()` pass did.
public struct RunReport: Sendable, Equatable {
    public var attempted = 0
    public var updated = 0
    public var confirmed = 0
    public var conflicts = 0
    public var rescheduled = 0
    /// Jobs removed without success: no member, refused, unreadable payload.
    public var dropped = 0
    /// Jobs left in the queue after the pass.
    public var pending = 0

    public init() {}
}

/// A different number arrived from a login than the one on record. Listed
/// until a person resolves it (`vaultctl sync conflicts`). Holds no number in
/// clear: masked forms and keyed hashes only.
public struct SyncConflict: Sendable, Equatable {
    public var id: String
    public var firstSeen: Double
    public var lastSeen: Double
    /// How many logins hit the same conflict.
    public var count: Int
    public var provider: String
    public var source: String
    /// The registry's member id.
    public var memberID: String
    /// The number from the login, masked (`DDMMYY*****`).
    public var loginNumber: String
    public var loginHash: String
    /// The number on record, masked, when the registry sent the number (nil
    /// when it sent only a hash or the write was refused without detail).
    public var recordNumber: String?
    public var recordHash: String?
    /// A keyed hash of the member key (provider + subject), not the subject.
    var memberKeyHash: String

    var json: JSON {
        [
            "id": .string(id), "first_seen": .double(firstSeen), "last_seen": .double(lastSeen),
            "count": .int(Int64(count)), "provider": .string(provider), "source": .string(source),
            "member": .string(memberID), "login_nin": .string(loginNumber), "login_nin_hash": .string(loginHash),
            "record_nin": recordNumber.map { .string($0) } ?? .null,
            "record_nin_hash": recordHash.map { .string($0) } ?? .null,
            "member_key": .string(memberKeyHash),
        ]
    }

    init(id: String, firstSeen: Double, lastSeen: Double, count: Int, provider: String, source: String, memberID: String,
         loginNumber: String, loginHash: String, recordNumber: String?, recordHash: String?, memberKeyHash: String) {
        self.id = id
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.count = count
        self.provider = provider
        self.source = source
        self.memberID = memberID
        self.loginNumber = loginNumber
        self.loginHash = loginHash
        self.recordNumber = recordNumber
        self.recordHash = recordHash
        self.memberKeyHash = memberKeyHash
    }

    init?(json: JSON) {
        guard let id = json["id"]?.stringValue, let member = json["member"]?.stringValue,
              let login = json["login_nin"]?.stringValue, let loginHash = json["login_nin_hash"]?.stringValue
        else { return nil }
        self.id = id
        firstSeen = Self.double(json["first_seen"])
        lastSeen = Self.double(json["last_seen"])
        count = Int(json["count"]?.intValue ?? 1)
        provider = json["provider"]?.stringValue ?? ""
        source = json["source"]?.stringValue ?? ""
        memberID = member
        loginNumber = login
        self.loginHash = loginHash
        recordNumber = json["record_nin"]?.stringValue
        recordHash = json["record_nin_hash"]?.stringValue
        memberKeyHash = json["member_key"]?.stringValue ?? ""
    }

    /// For `vaultctl sync conflicts --json`.
    public var publicJSON: JSON {
        var o = json.objectValue ?? [:]
        o["member_key"] = nil
        return .object(o)
    }

    private static func double(_ v: JSON?) -> Double {
        switch v {
        case .double(let d): return d
        case .int(let i): return Double(i)
        default: return 0
        }
    }
}

/// A member's organizations and which one is active for the session.
public struct MemberContext: Sendable, Equatable {
    public var memberID: String
    public var organizations: [Organization]
    /// The active organization: the one remembered (`vaultctl context ORG`),
    /// or the only one. Nil when there are none, or several and none chosen.
    public var active: Organization?

    /// Several organizations and none chosen: ask the person.
    public var needsChoice: Bool { active == nil && organizations.count > 1 }

    /// The claims an app sees in the released session:
    /// `org` (active id), `org_name`, `roles` (the roles in the active org,
    /// [] when none is active), `orgs` ([{id, name, roles}] — all of them, so
    /// an app can offer the choice).
    public var claims: [String: JSON] {
        var c: [String: JSON] = [
            "roles": .array((active?.roles ?? []).map { .string($0) }),
            "orgs": .array(organizations.map {
                ["id": .string($0.id), "name": .string($0.name), "roles": .array($0.roles.map { .string($0) })]
            }),
        ]
        if let active {
            c["org"] = .string(active.id)
            c["org_name"] = .string(active.name)
        }
        return c
    }
}

/// Why the active organization could not be set.
public enum ContextError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No organizations are known for this member yet (no sync has reached the registry).
    case unknownMember
    /// The member does not belong to that organization; `yours`: the names of those they do belong to.
    case notAMember(String, yours: [String])
    case store(String)

    public var description: String {
        switch self {
        case .unknownMember: return "no organizations are known for this login yet"
        case .notAMember(let org, _): return "not a member of \(org)"
        case .store(let why): return why
        }
    }

    /// The person-facing sentence.
    public var message: LocalizedText {
        switch self {
        case .unknownMember:
            return LocalizedText(en: "Your organizations are not known yet. Log in with BankID or Vipps first.",
                                 nb: "Organisasjonene dine er ikke kjent ennå. Logg inn med BankID eller Vipps først.")
        case .notAMember(let org, let yours):
            let names = yours.map { Messages.shown($0) }.joined(separator: ", ")
            return LocalizedText(en: "You are not a member of “\(Messages.shown(org))”. Choose one of yours: \(names).",
                                 nb: "Du er ikke medlem av «\(Messages.shown(org))». Velg en av dine: \(names).")
        case .store:
            return Messages.standard(.internal)
        }
    }
}

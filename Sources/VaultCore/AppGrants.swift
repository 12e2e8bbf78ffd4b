import FoundationEssentials
import Logging
import SodiumKit
import VaultFactor
import VaultProtocol
import VaultStore

/// One app's grant for one account.
public struct AppGrant: Sendable, Equatable {
    public var app: AppIdentity
    public var account: String
    public var grantedAt: Int64
    /// Unix seconds of the last release to this app (kept to the minute).
    public var lastUse: Int64?

    var json: JSON {
        ["kind": .string(app.kind.rawValue), "name": .string(app.name), "account": .string(account),
         "granted_at": .int(grantedAt), "last_use": lastUse.map { .int($0) } ?? .null]
    }

    init(app: AppIdentity, account: String, grantedAt: Int64, lastUse: Int64?) {
        self.app = app
        self.account = account
        self.grantedAt = grantedAt
        self.lastUse = lastUse
    }

    init?(json: JSON) {
        guard let kind = json["kind"]?.stringValue.flatMap(AppIdentity.Kind.init(rawValue:)),
              let name = json["name"]?.stringValue, let account = json["account"]?.stringValue,
              let grantedAt = json["granted_at"]?.intValue else { return nil }
        self.init(app: AppIdentity(kind: kind, name: name), account: account, grantedAt: grantedAt,
                  lastUse: json["last_use"]?.intValue)
    }
}

/// How the person answered “Allow ‘X’ to use your BankID session?”.
public enum GrantAnswer: String, Sendable {
    /// Remembered: the app may use the account from now on.
    case allow
    /// This release only.
    case once
    case deny
}

/// What the grant dialog asks about.
public struct GrantQuestion: Sendable, Equatable {
    public var app: AppIdentity
    public var account: String
    /// The provider's display name (“BankID”).
    public var provider: String
    /// The apps allowed the account already, for context.
    public var allowed: [AppIdentity]
    /// Every other app allowed any account: the dialog warns when one of them
    /// has the name the asking app shows (another app dressed as one the
    /// person already trusts).
    public var othersAllowed: [AppIdentity]
}

/// The grants, in the store and in memory: which app may use which account.
/// One row per app and account, its content sealed under a key derived from
/// the device key (like session metadata, so `vaultctl apps` lists them while
/// locked and a login while the vault key waits for the PIN can still grant),
/// its id a keyed hash of app and account. A row edited or moved to another
/// id fails to open and grants nothing.
///
/// A value owned by the `Vault` actor, as `Sessions` is.
struct AppGrants {
    let store: VaultStore
    let key: SecureBytes
    let logger: Logger
    private(set) var byID: [String: AppGrant] = [:]
    /// Account → the keys (`AppIdentity.key`) of the apps granted it: who
    /// hears that account's events. Kept as grants come and go.
    private(set) var audience: [String: Set<String>] = [:]

    /// A last use is written back at most this often per grant: a release must not wait for a commit each time.
    static let lastUseResolution: Int64 = 60

    init(store: VaultStore, deviceKey: SecureBytes, logger: Logger) throws {
        self.store = store
        self.logger = logger
        self.key = try KeyDerivation.derive(key: deviceKey, parts: [.label("sessionvault/app-grant-key/v1")])
        for row in try store.grants() {
            guard let box = try? SealedBox(bytes: row.sealed),
                  let json = try? SecretBox.withOpened(box, key: key, associatedData: Self.ad(row.id), { try? JSON.parse($0) }),
                  let grant = AppGrant(json: json), id(grant.app, grant.account) == row.id else {
                logger.error("an app grant failed to open and is ignored", metadata: ["record": "\(row.id)"])
                continue
            }
            byID[row.id] = grant
            audience[grant.account, default: []].insert(grant.app.key)
        }
    }

    static func ad(_ id: String) -> [UInt8] { Array("sessionvault/app-grant/v1|\(id)".utf8) }

    func id(_ app: AppIdentity, _ account: String) -> String {
        let message = Array("\(app.key)\u{0}\(account)".utf8)
        return Digest.hex((try? KeyDerivation.mac(key: key, message: message)) ?? Digest.sha256(message))
    }

    /// Counts changes to who is granted what (not last uses): the vault tells
    /// the event feed again only when this moved.
    private(set) var generation = 0

    func allows(_ app: AppIdentity, account: String) -> Bool { byID[id(app, account)] != nil }

    func apps(for account: String) -> [AppIdentity] {
        byID.values.filter { $0.account == account }.map(\.app).sorted { $0.key < $1.key }
    }

    /// Every app granted an account, but `app`.
    func apps(besides app: AppIdentity) -> [AppIdentity] {
        Set(byID.values.map(\.app)).subtracting([app]).sorted { $0.key < $1.key }
    }

    /// How many accounts `app` is granted.
    func accountCount(of app: AppIdentity) -> Int { byID.values.reduce(0) { $0 + ($1.app == app ? 1 : 0) } }

    var all: [AppGrant] { byID.values.sorted { ($0.app.key, $0.account) < ($1.app.key, $1.account) } }

    func row(_ grant: AppGrant, id: String, now: Int64) throws -> GrantRow {
        let sealed = try SecretBox.seal(grant.json.serialized(), key: key, associatedData: Self.ad(id))
        return GrantRow(id: id, sealed: sealed.bytes, updatedAt: now)
    }

    /// Grants `app` the account, durably, with its audit entry in the same commit.
    mutating func grant(_ app: AppIdentity, account: String, now: Int64, auditing entry: AuditLog.Entry) throws(VaultFailure) {
        let id = id(app, account)
        let grant = AppGrant(app: app, account: account, grantedAt: byID[id]?.grantedAt ?? now, lastUse: now)
        let row: GrantRow
        do {
            row = try self.row(grant, id: id, now: now)
        } catch {
            logger.error("sealing an app grant failed", metadata: ["error": "\(error)"])
            throw .internal()
        }
        try storeCall(logger) { () throws(StoreError) in try store.updateGrants(put: [row], delete: [], auditing: entry.make) }
        byID[id] = grant
        audience[account, default: []].insert(app.key)
        generation += 1
    }

    /// The grants as a release reads them (`SessionTable.GrantAccess`).
    func access(perApp: Bool) -> SessionTable.GrantAccess {
        guard perApp else { return SessionTable.GrantAccess(uses: nil) }
        var uses: [String: Int64] = [:]
        for grant in byID.values { uses[SessionTable.GrantAccess.key(grant.app, grant.account)] = grant.lastUse ?? 0 }
        return SessionTable.GrantAccess(uses: uses)
    }

    /// Notes a release; written back (on a task) when the kept last use is older than a minute.
    mutating func used(_ app: AppIdentity, account: String, now: Int64) {
        let id = id(app, account)
        guard var grant = byID[id] else { return }
        let stale = now - (grant.lastUse ?? 0) >= Self.lastUseResolution
        grant.lastUse = now
        byID[id] = grant
        guard stale, let row = try? row(grant, id: id, now: now) else { return }
        // Off the release's path: a commit waits for the disk. An update only,
        // so a grant revoked before this runs is not brought back.
        let store = self.store
        let logger = self.logger
        Task.detached(priority: .utility) {
            do {
                try store.updateGrantIfPresent(row)
            } catch {
                logger.warning("an app grant's last use could not be saved", metadata: ["error": "\(error)"])
            }
        }
    }

    /// After `vaultctl reset` deleted the rows with everything else.
    mutating func forgetAll() {
        byID = [:]
        audience = [:]
        generation += 1
    }

    /// Removes the grants `matching` selects, with `entry` in the same commit.
    mutating func remove(where matching: (AppGrant) -> Bool, auditing entry: AuditLog.Entry?) throws(VaultFailure) -> [AppGrant] {
        let doomed = byID.filter { matching($0.value) }
        guard !doomed.isEmpty else { return [] }
        try storeCall(logger) { () throws(StoreError) in
            try store.updateGrants(put: [], delete: Array(doomed.keys), auditing: entry?.make)
        }
        for (id, grant) in doomed {
            byID[id] = nil
            audience[grant.account]?.remove(grant.app.key)
            if audience[grant.account]?.isEmpty == true { audience[grant.account] = nil }
        }
        generation += 1
        return doomed.values.sorted { ($0.app.key, $0.account) < ($1.app.key, $1.account) }
    }
}

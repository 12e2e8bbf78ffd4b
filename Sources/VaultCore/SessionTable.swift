import Locking
import SodiumKit
import VaultProtocol
import VaultStore

/// The state a release needs (the vault key and the session index) behind one
/// lock. Every change is made by the `Vault` actor, after the store has it
/// durably (one exception: a rotated refresh token the store refused is served
/// from here while it is saved again, `UnsavedRotation`); the lock lets the
/// few nonisolated readers (the idle check, shutdown) see it without the actor.
final class SessionTable: Sendable {
    struct Entry {
        let meta: SessionMeta
        let row: SessionRow
        /// A session stored while the vault key was out of reach (a login while
        /// locked, with a PIN enrolled) is sealed under its own record key; this
        /// run keeps that key, so the session works before the PIN is given.
        let recordKey: SecureBytes?

        init(meta: SessionMeta, row: SessionRow, recordKey: SecureBytes? = nil) {
            self.meta = meta
            self.row = row
            self.recordKey = recordKey
        }

        /// The key that opens this session's secret half now, if any.
        func key(vaultKey: SecureBytes?) -> SecureBytes? {
            meta.sealedForVaultKey ? vaultKey : recordKey
        }

        /// Waits for the vault key: it is out, and nothing else opens this session.
        func waits(vaultKey: SecureBytes?) -> Bool { vaultKey == nil && key(vaultKey: nil) == nil }
    }

    private struct State {
        var vaultKey: SecureBytes?
        var entries: [String: Entry] = [:]
        /// account name → record id: a release is one hash lookup at any scale.
        var accountIndex: [String: String] = [:]
        var lastActivity: Double
        /// When the vault key was last put in: `max_unlocked` counts from here.
        var unlockedAt: Double = 0
        /// Who may be handed which session (published by the actor from its `AppGrants`).
        var grants = GrantAccess(uses: nil)
    }

    /// The grants as a release reads them: here, under the same lock as the
    /// keys and the records, so one look sees one state (a revoked grant and
    /// the record it guarded are never seen half changed).
    struct GrantAccess {
        /// Grant (`key(app, account)`) → when its use was last noted (0: never);
        /// nil when grants are not checked (`per_app = false`).
        var uses: [String: Int64]?

        static func key(_ app: AppIdentity, _ account: String) -> String { app.key + "\u{0}" + account }

        /// Whether `requester` may see `account` in `status` and `sessions`, log
        /// it out or change its organization: no for a sandboxed app not granted
        /// it, which is told `no_session`, as if the account were not there.
        func mayView(_ account: String, _ requester: Requester) -> Bool {
            // Not even `per_app = false` shows an unidentified peer anything.
            if requester.trust == .unidentified { return false }
            guard let uses, let app = requester.sandboxedApp else { return true }
            return uses[GrantAccess.key(app, account)] != nil
        }

        /// Whether the accounts `requester` sees are only some of them.
        func seesSome(_ requester: Requester) -> Bool {
            requester.trust == .unidentified || (uses != nil && requester.sandboxedApp != nil)
        }

        /// `requester`'s grant for `account`, as a release needs it.
        func grant(_ requester: Requester, account: String) -> ReleaseGrant {
            // vaultd's own calls (tests, the broker itself) have no peer.
            guard let uses, requester.trust != .vaultd else { return .unchecked }
            guard requester.trust != .unidentified, let app = requester.app,
                  let lastUse = uses[GrantAccess.key(app, account)] else { return .missing }
            return .granted(app, lastUse: lastUse)
        }
    }

    enum ReleaseGrant {
        /// Grants are not checked for this caller.
        case unchecked
        case missing
        case granted(AppIdentity, lastUse: Int64)
    }

    /// Everything a release decision reads, from one look under the lock.
    struct ReleaseView {
        let id: String
        let entry: Entry
        /// The key that opens the record now (vault key or record key), if any.
        let key: SecureBytes?
        let vaultKeyIn: Bool
        let grant: ReleaseGrant
    }

    private let state: Locked<State>
    /// Hears the vault key come back (`unlocked`), whichever way it came.
    let events: VaultEvents
    /// Announces each session's end when it comes (every change here sets its timer again).
    let ends: SessionEnds

    /// The vault's clock (Unix seconds), for stamps and ends.
    let clock: @Sendable () -> Double

    init(vaultKey: SecureBytes?, entries: [String: Entry], now: Double, events: VaultEvents = VaultEvents(),
         clock: @escaping @Sendable () -> Double) {
        self.events = events
        self.clock = clock
        self.ends = SessionEnds(events: events, clock: clock)
        var s = State(vaultKey: vaultKey, lastActivity: now)
        s.entries = entries
        for (id, e) in entries { s.accountIndex[e.meta.account] = id }
        state = Locked(s)
        ends.replaceAll(entries)
    }

    deinit { ends.stop() }

    var vaultKey: SecureBytes? { state.withLock { $0.vaultKey } }
    var lastActivity: Double { state.withLock { $0.lastActivity } }
    var unlockedAt: Double { state.withLock { $0.unlockedAt } }
    /// The vault key, or a session's record key, is in memory.
    var anythingOpen: Bool { state.withLock { s in s.vaultKey != nil || s.entries.values.contains { $0.recordKey != nil } } }
    var count: Int { state.withLock { $0.entries.count } }

    func setVaultKey(_ key: SecureBytes?, now: Double) {
        // The old key, if any, is released here; sodium_free wipes it.
        let opened = state.withLock { s -> Bool in
            let wasLocked = s.vaultKey == nil
            s.vaultKey = key
            s.unlockedAt = now
            return wasLocked && key != nil
        }
        if opened { events.emit(.unlocked) }
    }

    /// Drops the vault key and the record keys of sessions stored while it was
    /// away (a locked vault releases nothing); returns whether anything was open.
    func lock() -> Bool {
        state.withLock { s in
            var wasOpen = s.vaultKey != nil
            s.vaultKey = nil
            for (id, e) in s.entries where e.recordKey != nil {
                wasOpen = true
                s.entries[id] = Entry(meta: e.meta, row: e.row)
            }
            return wasOpen
        }
    }

    func touch(_ now: Double) { state.withLock { $0.lastActivity = now } }

    func entry(_ id: String) -> Entry? { state.withLock { $0.entries[id] } }

    func id(forAccount account: String) -> String? { state.withLock { $0.accountIndex[account] } }

    func allEntries() -> [String: Entry] { state.withLock { $0.entries } }

    /// Some session waits for the vault key (`Entry.waits`): the PIN, or an unlock, brings it back.
    var anyWaiting: Bool { state.withLock { s in s.entries.values.contains { $0.waits(vaultKey: s.vaultKey) } } }

    /// The record id for `account`, or the only session when none is named
    /// (the only one among the accounts in `visible`, when given).
    func pick(_ account: String?, among visible: Set<String>? = nil) throws(VaultFailure) -> String {
        try state.withLock { SessionTable.pick(account, among: visible, in: $0) }.get()
    }

    private static func pick(_ account: String?, among visible: Set<String>?, in s: State) -> Result<String, VaultFailure> {
        if let account {
            guard let id = s.accountIndex[account] else { return .failure(.noSession(account)) }
            return .success(id)
        }
        let candidates = s.entries.filter { visible?.contains($0.value.meta.account) ?? true }
        if candidates.count == 1, let only = candidates.keys.first { return .success(only) }
        if candidates.isEmpty { return .failure(VaultFailure(.noSession)) }
        let names = candidates.values.map(\.meta.account).sorted()
        return .failure(VaultFailure(.badRequest, message: LocalizedText(
            en: "There are several accounts here (\(names.joined(separator: ", "))). Say which one you want.",
            nb: "Det finnes flere kontoer her (\(names.joined(separator: ", "))). Si hvilken du vil bruke."),
            extra: ["accounts": .array(names.map { .string($0) })]))
    }

    var grantAccess: GrantAccess { state.withLock { $0.grants } }
    func setGrants(_ access: GrantAccess) { state.withLock { $0.grants = access } }

    /// The record `account` names (or the only one `requester` may see, when
    /// none is named), the key that opens it and the asking app's grant for it.
    func releaseView(account: String?, requester: Requester) throws(VaultFailure) -> ReleaseView {
        let result: Result<ReleaseView, VaultFailure> = state.withLock { s in
            let visible: Set<String>? = account == nil && s.grants.seesSome(requester)
                ? Set(s.entries.values.map(\.meta.account).filter { s.grants.mayView($0, requester) }) : nil
            let id: String
            switch SessionTable.pick(account, among: visible, in: s) {
            case .success(let picked): id = picked
            case .failure(let failure): return .failure(failure)
            }
            guard let entry = s.entries[id] else { return .failure(.noSession(account)) }
            return .success(ReleaseView(id: id, entry: entry, key: entry.key(vaultKey: s.vaultKey), vaultKeyIn: s.vaultKey != nil,
                                        grant: s.grants.grant(requester, account: entry.meta.account)))
        }
        return try result.get()
    }

    /// The sessions a logout removes, read under one lock: `account`'s, or with
    /// `all` every one `requester` may see (a sandboxed app's "all" is all of
    /// its own). `everything`: that is every session there is.
    func logoutTargets(account: String?, all: Bool,
                       requester: Requester) throws(VaultFailure) -> (targets: [(String, Entry)], everything: Bool) {
        let (entries, access, index) = state.withLock { ($0.entries, $0.grants, $0.accountIndex) }
        if all {
            let visible = entries.filter { access.mayView($0.value.meta.account, requester) }
            return (visible.map { ($0.key, $0.value) }, visible.count == entries.count)
        }
        guard let account else {
            throw .badRequest(LocalizedText(en: "Say which account to log out, or ask to log out everywhere.",
                                            nb: "Si hvilken konto som skal logges ut, eller be om å logge ut overalt."))
        }
        guard let id = index[account], let entry = entries[id], access.mayView(account, requester) else {
            throw .noSession(account)
        }
        return ([(id, entry)], false)
    }

    /// The accounts `requester` may see, read under one lock (not a lock per
    /// account). `waiting`: what opens a session stored while the vault key
    /// was out, said on each such session while it still is.
    func accounts(visibleTo requester: Requester, waiting: LocalizedText?) -> [Vault.AccountInfo] {
        state.withLock { s in
            s.entries.values.filter { s.grants.mayView($0.meta.account, requester) }.map { e in
                var info = Vault.AccountInfo(account: e.meta.account, provider: e.meta.provider, name: e.meta.name,
                                             tokenHash: e.row.tokenHash, accessExpiresAt: e.meta.accessExpiresAt,
                                             hasRefreshToken: e.meta.hasRefreshToken,
                                             waiting: e.waits(vaultKey: s.vaultKey) ? waiting : nil)
                (info.organizations, info.activeOrganization) = e.meta.organizations
                return info
            }
        }.sorted { $0.account < $1.account }
    }

    func put(_ id: String, _ entry: Entry) {
        state.withLock { s in
            if let old = s.entries[id], old.meta.account != entry.meta.account { s.accountIndex[old.meta.account] = nil }
            s.entries[id] = entry
            s.accountIndex[entry.meta.account] = id
        }
        ends.changed(id, entry)
    }

    func remove(_ id: String) {
        state.withLock { s in
            if let old = s.entries.removeValue(forKey: id) { s.accountIndex[old.meta.account] = nil }
        }
        ends.changed(id, nil)
    }

    func removeAll() {
        state.withLock { s in
            s.entries.removeAll()
            s.accountIndex.removeAll()
        }
        ends.replaceAll([:])
    }
}

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
    }

    private struct State {
        var vaultKey: SecureBytes?
        var entries: [String: Entry] = [:]
        /// account name → record id: a release is one hash lookup at any scale.
        var accountIndex: [String: String] = [:]
        var lastActivity: Double
        /// When the vault key was last put in: `max_unlocked` counts from here.
        var unlockedAt: Double = 0
    }

    private let state: Locked<State>
    /// Hears the vault key come back (`unlocked`), whichever way it came.
    let events: VaultEvents
    /// Announces each session's end when it comes (every change here sets its timer again).
    let ends: SessionEnds

    init(vaultKey: SecureBytes?, entries: [String: Entry], now: Double, events: VaultEvents = VaultEvents()) {
        self.events = events
        self.ends = SessionEnds(events: events)
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

    /// The record id for `account`, or the only session when none is named
    /// (the only one among the accounts in `visible`, when given).
    func pick(_ account: String?, among visible: Set<String>? = nil) throws(VaultFailure) -> String {
        let result: Result<String, VaultFailure> = state.withLock { s in
            if let account {
                guard let id = s.accountIndex[account] else { return .failure(VaultFailure(.noSession)) }
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
        return try result.get()
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

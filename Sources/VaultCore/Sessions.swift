import FoundationEssentials
import Logging
import SodiumKit
import VaultFactor
import VaultProtocol
import VaultStore

/// One job: the session records, sealed and opened. A session is stored as
/// two halves (docs/key-hierarchy.md): its metadata under the meta key (so
/// `status` can list it while locked) and its secret half under the vault key,
/// or, while that is out of reach, under its own record key sealed for the
/// vault's public key. Every write counts the record's version up; it is in
/// the secret's associated data and in the metadata, so an older blob put back
/// is refused. Writes are durable before the in-memory index (`SessionTable`)
/// changes. Rotated refresh tokens the store refused are held here until it
/// takes them (`UnsavedRotation`, Refresh.swift).
///
/// A value owned by the `Vault` actor: synchronous, no lock of its own (the
/// table has one, for its nonisolated readers). When a release may happen,
/// and the refresh single-flight, are the actor's (Vault.swift, Refresh.swift).
struct Sessions {
    let store: VaultStore
    /// Seals session metadata so `status` can list accounts while locked.
    let metaKey: SecureBytes
    let audit: AuditLog
    let logger: Logger
    /// The vault key and the session index.
    let table: SessionTable
    /// The vault's public key: a session stored while the vault key is out of
    /// reach is sealed for it. Nil on a vault nobody can open.
    var publicKey: [UInt8]?
    /// Rotated refresh tokens the store refused, held until it takes them, and
    /// whether shutdown has begun (Refresh.swift).
    var hold = RefreshHold()

    /// A session sealed for the store: the row, its metadata as sealed in it,
    /// and the record key when it is sealed for the PIN (kept in secure memory).
    struct Sealed {
        let row: SessionRow
        let meta: SessionMeta
        let recordKey: SecureBytes?
    }

    // MARK: Opening

    /// The secret half of a session, opened with `key`.
    /// What a logout revokes at the providers (RFC 7009): each session's
    /// refresh token, else its access token; read before the records go.
    /// Sessions whose provider is gone or whose record does not open are skipped.
    func revocations(of targets: [(String, SessionTable.Entry)], key: SecureBytes,
                     providers: any IdentityProviderDirectory) -> [(any IdentityProvider, String, Bool)] {
        targets.compactMap { id, entry in
            guard let provider = providers.provider(for: entry.meta),
                  let secret = try? openSecret(id: id, entry: entry, key: key) else { return nil }
            if let rt = secret.refreshToken { return (provider, rt, true) }
            return secret.accessToken.map { (provider, $0, false) }
        }
    }

    func openSecret(id: String, entry: SessionTable.Entry, key: SecureBytes) throws(VaultFailure) -> SessionSecret {
        try Sessions.openSecret(id: id, entry: entry, key: key, logger: logger)
    }

    /// The same, with no `Sessions` at hand (the release decision, off the actor).
    static func openSecret(id: String, entry: SessionTable.Entry, key: SecureBytes, logger: Logger) throws(VaultFailure) -> SessionSecret {
        guard let secret = try? openSecret(id: id, entry: entry, key: key, reading: SessionSecret.init(bytes:)) else {
            logger.error("a session record failed to open", metadata: ["record": "\(id)"])
            throw .internal()
        }
        return secret
    }

    /// Opens the secret half into a wiped temporary buffer and hands it to
    /// `read`; nil from `read` passes through.
    func openSecret<T>(id: String, entry: SessionTable.Entry, key: SecureBytes,
                       reading read: (UnsafeRawBufferPointer) -> T?) throws -> T? {
        try Sessions.openSecret(id: id, entry: entry, key: key, reading: read)
    }

    static func openSecret<T>(id: String, entry: SessionTable.Entry, key: SecureBytes,
                              reading read: (UnsafeRawBufferPointer) -> T?) throws -> T? {
        // The version column must be the one the metadata recorded: an older
        // secret blob put back with its old version in the column is refused.
        guard entry.meta.version == 0 || entry.meta.version == entry.row.recordVersion else { throw SodiumError.openFailed }
        let sealed = entry.meta.sealedForVaultKey ? entry.row.sealedSecret
            : Array(entry.row.sealedSecret.dropFirst(SessionSealing.wrappedRecordKeySize))
        return try SecretBox.withOpened(SealedBox(bytes: sealed), key: key,
                                        associatedData: SessionSealing.secretAD(id: id, version: entry.row.recordVersion), read)
    }

    /// The record key of a session that waited for VK, read with VK.
    func recordKey(of entry: SessionTable.Entry, vaultKey vk: SecureBytes) -> SecureBytes? {
        guard entry.row.sealedSecret.count > SessionSealing.wrappedRecordKeySize, let pair = try? VaultKeyPair.derive(vk) else { return nil }
        return try? PublicKeyBox.open(Array(entry.row.sealedSecret.prefix(SessionSealing.wrappedRecordKeySize)),
                                      publicKey: pair.publicKey, secretKey: pair.secretKey)
    }

    // MARK: Sealing and storing

    /// Seals a session: under the vault key, or, while it is out of reach,
    /// under the session's record key (sealed for the PIN: `sealSecret`).
    /// `locked` is thrown when neither is possible (no public key yet).
    func seal(id: String, meta input: SessionMeta, secret: SessionSecret, tokenForHash: String,
              locked: @autoclosure () -> VaultFailure) throws(VaultFailure) -> Sealed {
        var plain = secret.serialized()
        defer { Sodium.wipe(&plain) }
        let existing = table.entry(id)
        var meta = input
        do {
            meta.version = (existing?.row.recordVersion ?? 0) + 1
            guard let sealed = try sealSecret(plain, id: id, version: meta.version, existing: existing) else { throw locked() }
            meta.sealedForVaultKey = sealed.recordKey == nil
            let sealedMeta = try SecretBox.seal(meta.json.serialized(), key: metaKey, associatedData: SessionSealing.metaAD(id: id))
            let nowS = Int64(table.clock())
            let row = SessionRow(id: id, tokenHash: Digest.hex(Digest.sha256(Array(tokenForHash.utf8))),
                                 sealedMeta: sealedMeta.bytes, sealedSecret: sealed.bytes,
                                 recordVersion: meta.version, createdAt: existing?.row.createdAt ?? nowS, updatedAt: nowS)
            return Sealed(row: row, meta: meta, recordKey: sealed.recordKey)
        } catch let failure as VaultFailure {
            throw failure
        } catch {
            logger.error("sealing a session failed", metadata: ["error": "\(error)"])
            throw .internal()
        }
    }

    /// Seals a session's secret half: under VK when it is at hand, else under
    /// the session's record key (kept in memory for this run), which is stored
    /// sealed to the vault's public key in front of the box. Nil when neither
    /// key is at hand.
    private func sealSecret(_ plain: [UInt8], id: String, version: Int,
                            existing: SessionTable.Entry?) throws -> (bytes: [UInt8], recordKey: SecureBytes?)? {
        let ad = SessionSealing.secretAD(id: id, version: version)
        if let vk = table.vaultKey {
            return (try SecretBox.seal(plain, key: vk, associatedData: ad).bytes, nil)
        }
        guard let publicKey else { return nil }
        let recordKey = try existing?.recordKey ?? SecureBytes.random(count: KeyDerivation.keySize)
        let wrapped = try PublicKeyBox.seal(recordKey, to: publicKey)
        return (wrapped + (try SecretBox.seal(plain, key: recordKey, associatedData: ad).bytes), recordKey)
    }

    /// Stores a sealed session durably (with its audit entry in the same commit), then indexes it.
    func save(id: String, sealed: Sealed, auditing entry: AuditLog.Entry?) throws(VaultFailure) {
        if let entry {
            try storeCall(logger) { () throws(StoreError) in try store.putSession(sealed.row, auditing: entry.make) }
            audit.written(entry)
        } else {
            try storeCall(logger) { () throws(StoreError) in try store.putSession(sealed.row) }
        }
        table.put(id, SessionTable.Entry(meta: sealed.meta, row: sealed.row, recordKey: sealed.recordKey))
    }

    /// Seals and stores a session durably. `auditing`, when given, is written
    /// in the same transaction: one commit for the change and its record.
    func persist(id: String, meta: SessionMeta, secret: SessionSecret, tokenForHash: String,
                 auditing entry: AuditLog.Entry? = nil, locked: @autoclosure () -> VaultFailure) throws(VaultFailure) {
        try save(id: id, sealed: try seal(id: id, meta: meta, secret: secret, tokenForHash: tokenForHash, locked: locked()),
                 auditing: entry)
    }

    /// Stores `meta.account`'s session, sealed, durably: under the id the
    /// account had (an account holds one session, so a new login or import
    /// replaces the old one in place), else under a new random id, returned.
    func store(_ meta: SessionMeta, secret: SessionSecret, tokenForHash: String, auditing entry: AuditLog.Entry,
               locked: @autoclosure () -> VaultFailure) throws(VaultFailure) -> String {
        let id = table.id(forAccount: meta.account) ?? Digest.hex(Random.bytes(16))
        try persist(id: id, meta: meta, secret: secret, tokenForHash: tokenForHash, auditing: entry, locked: locked())
        return id
    }

    /// Re-seals only the metadata half (claims changed); works while locked.
    func persistMeta(id: String, meta: SessionMeta, row: SessionRow) throws(VaultFailure) {
        var updated = row
        do {
            updated.sealedMeta = try SecretBox.seal(meta.json.serialized(), key: metaKey, associatedData: SessionSealing.metaAD(id: id)).bytes
        } catch {
            throw .internal()
        }
        updated.updatedAt = Int64(table.clock())
        let final = updated
        try storeCall(logger) { () throws(StoreError) in try store.putSession(final) }
        table.put(id, SessionTable.Entry(meta: meta, row: final, recordKey: table.entry(id)?.recordKey))
    }

    /// After the PIN: sessions stored while it was away are re-sealed under VK.
    /// One that fails to open is left as it is (logged), never dropped.
    func resealWaiting(_ vk: SecureBytes) {
        for (id, entry) in table.allEntries() where !entry.meta.sealedForVaultKey {
            guard let rk = entry.recordKey ?? recordKey(of: entry, vaultKey: vk),
                  let secret = try? openSecret(id: id, entry: entry, key: rk, reading: SessionSecret.init(bytes:)) else {
                logger.error("a session stored while locked failed to open with the vault key", metadata: ["record": "\(id)"])
                continue
            }
            do throws(VaultFailure) {
                // The vault key is in the table, so the `locked` case cannot arise.
                try persist(id: id, meta: entry.meta, secret: secret, tokenForHash: secret.refreshToken ?? secret.accessToken ?? "",
                            locked: .internal())
            } catch {
                logger.error("re-sealing a session under the vault key failed; it stays as it is", metadata: ["record": "\(id)"])
            }
        }
    }

    /// Removes a logout's sessions (`everything`: every one there is, in one
    /// statement), each from the store before the table, and tells the event
    /// feed; returns how many records the store had. (A rotation held for
    /// one is dropped at the next `saveHeld`: its row is gone from the table.)
    func remove(_ targets: [(String, SessionTable.Entry)], everything: Bool) throws(VaultFailure) -> Int {
        var removed = 0
        if everything {
            removed = try storeCall(logger) { () throws(StoreError) in try store.deleteAllSessions() }
            table.removeAll()
        } else {
            for (id, _) in targets {
                if try storeCall(logger, { () throws(StoreError) in try store.deleteSession(id: id) }) { removed += 1 }
                table.remove(id)
            }
        }
        for (_, entry) in targets { table.events.emit(.loggedOut(account: entry.meta.account)) }
        return removed
    }

    /// Removes a session whose tokens can no longer be used.
    mutating func forget(id: String, reason: String) {
        hold.unsaved[id] = nil
        let account = table.entry(id)?.meta.account
        // Its end came by the clock and was announced then (SessionEnds).
        let announced = table.ends.wasAnnounced(id)
        _ = try? store.deleteSession(id: id)
        table.remove(id)
        audit.record("session_ended", outcome: reason, detail: ["account": .string(account ?? "")])
        if let account, !announced { table.events.emit(.sessionExpired(account: account)) }
    }

    // MARK: Rotations the store refused

    /// Keeps a rotation the store refused: the table serves it from now on.
    /// Returns whether a retry must be started (none is running).
    mutating func keep(_ rotation: UnsavedRotation, id: String) -> Bool {
        logger.error("the store refused a rotated refresh token; it is kept in memory and saved again",
                     metadata: ["record": "\(id)"])
        table.put(id, SessionTable.Entry(meta: rotation.sealed.meta, row: rotation.sealed.row, recordKey: rotation.sealed.recordKey))
        hold.unsaved[id] = rotation
        return hold.retry == nil
    }

    /// Saves every held rotation the store takes now; returns how many are
    /// still held. A row the session table no longer holds was superseded
    /// (a later write for the session, a login, a logout) and is dropped.
    mutating func saveHeld() -> Int {
        for (id, rotation) in hold.unsaved {
            guard table.entry(id)?.row == rotation.sealed.row else {
                hold.unsaved[id] = nil
                continue
            }
            do {
                try save(id: id, sealed: rotation.sealed, auditing: rotation.audit)
                hold.unsaved[id] = nil
                logger.notice("a held rotated refresh token was saved", metadata: ["record": "\(id)"])
            } catch {
                continue   // still held; storeCall logged why
            }
        }
        if hold.unsaved.isEmpty { hold.retry = nil }
        return hold.unsaved.count
    }
}

/// Runs a store call, turning its failure into a sentence for the person.
func storeCall<T>(_ logger: Logger, _ body: () throws(StoreError) -> T) throws(VaultFailure) -> T {
    do {
        return try body()
    } catch {
        logger.error("store operation failed", metadata: ["error": "\(error)"])
        if case .io = error {
            throw VaultFailure(.internal, message: LocalizedText(
                en: "The vault could not save to disk (it may be full or read-only). Nothing was changed. Free some space and try again.",
                nb: "Hvelvet fikk ikke lagret til disken (den kan være full eller skrivebeskyttet). Ingenting ble endret. Frigjør plass og prøv igjen."))
        }
        throw .internal()
    }
}

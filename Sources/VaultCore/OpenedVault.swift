import FoundationEssentials
import Logging
import VaultFactor
import VaultProtocol
import VaultStore

/// What a vault is at start, read from its store: the keyslots, the vault key
/// when the device slot opens it, the sealing public key and the session
/// index. A value the `Vault` actor starts from; nothing here stays running.
struct OpenedVault {
    var keyslots: Keyslots
    var vaultKey: SecureBytes?
    var publicKey: [UInt8]?
    var entries: [String: SessionTable.Entry]

    /// Checks the device key against the store, creates a fresh vault on an empty
    /// store, migrates v1 keyslots, opens the device slot when there is one, and
    /// loads session metadata. A store whose sessions no slot can open is left as
    /// it is: never a new vault key over sealed sessions (`vaultctl reset` is the
    /// one explicit way to start over).
    static func open(store: VaultStore, deviceKey: SecureBytes, metaKey: SecureBytes, secretFactors: Set<String>,
                     now: Int64, logger: Logger) throws(VaultStartupError) -> OpenedVault {
        func storeFailure(_ e: StoreError) -> VaultStartupError { .store(Messages.storeUnreadable, detail: "\(e)") }
        do {
            let check = try KeyDerivation.derive(key: deviceKey, parts: [.label("sessionvault/device-key-check/v1")]).unsafeCopyToArray()
            if let stored = try store.meta("device_key_check") {
                guard Sodium.constantTimeEqual(stored, check) else { throw VaultStartupError.deviceKeyMismatch }
            } else {
                try store.setMeta("device_key_check", check)
            }
            var slots = try Keyslots.load(store: store, deviceKey: deviceKey, secretFactors: secretFactors)
            let rows = try store.sessions()
            var vaultKey: SecureBytes?
            if slots.isEmpty && rows.isEmpty {
                // A fresh vault: no factor yet, so the device key alone guards it
                // (the seeds' "standard session token resumption" without biometrics).
                let vk = try SecureBytes.random(count: 32)
                let device = try Keyslot.makeDeviceWrap(vaultKey: vk, deviceKey: deviceKey, now: now)
                try slots.replace(put: [device], delete: [])
                vaultKey = vk
                logger.info("created a new vault")
            } else {
                vaultKey = try slots.migrateLegacy(logger: logger)
                if vaultKey == nil, slots[Keyslot.deviceSlotID] != nil {
                    // A device slot that fails to open (edited, or another vault's) is
                    // kept: deleting it could leave sessions nobody can open.
                    vaultKey = slots.openDeviceWrap()
                    if vaultKey == nil { logger.error("the device keyslot failed to open; it is kept as it is") }
                }
            }
            if !slots.hasWrap {
                logger.error("no keyslot can open the vault key; sessions stay sealed until `vaultctl reset`")
            }
            let publicKey = try vaultKey.map { try VaultKeyPair.ensureStored($0, store: store, deviceKey: deviceKey) }
                ?? SessionSealing.authenticatedPublicKey(store: store, deviceKey: deviceKey, logger: logger)
            var entries: [String: SessionTable.Entry] = [:]
            for row in rows {
                // A temporary buffer, not guarded memory: metadata is not a token,
                // and one mmap + mlock per record made start-up slow at 10,000 sessions.
                guard let box = try? SealedBox(bytes: row.sealedMeta),
                      let json = try? SecretBox.withOpened(box, key: metaKey, associatedData: SessionSealing.metaAD(id: row.id), { try? JSON.parse($0) }),
                      let meta = SessionMeta(json: json) else {
                    logger.error("a session record failed to open and is skipped", metadata: ["record": "\(row.id)"])
                    continue
                }
                entries[row.id] = SessionTable.Entry(meta: meta, row: row)
            }
            return OpenedVault(keyslots: slots, vaultKey: vaultKey, publicKey: publicKey, entries: entries)
        } catch let e as VaultStartupError {
            throw e
        } catch let e as StoreError {
            if case .tooNew = e { throw .store(Messages.storeTooNew, detail: "\(e)") }
            throw storeFailure(e)
        } catch {
            throw .crypto("\(error)")
        }
    }
}

import FoundationEssentials
import Logging
import SecurityChip
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
    /// Why the device wrap did not open, when its chip said no (cleared,
    /// replaced, unreachable): a login still gives a working session and then
    /// offers to start over (`Vault.login`).
    var chipRefusal: ChipError?

    /// Checks the device key against the store, creates a fresh vault on an empty
    /// store, migrates v1 keyslots, opens the device slot when there is one, and
    /// loads session metadata. A store whose sessions no slot can open is left as
    /// it is: never a new vault key over sealed sessions (`vaultctl reset` is the
    /// one explicit way to start over).
    static func open(store: VaultStore, deviceKey: SecureBytes, chip: ChipBinding, metaKey: SecureBytes, secretFactors: Set<String>,
                     now: Int64, logger: Logger) throws(VaultStartupError) -> OpenedVault {
        func storeFailure(_ e: StoreError) -> VaultStartupError { .store(Messages.storeUnreadable, detail: "\(e)") }
        do {
            let check = try KeyDerivation.derive(key: deviceKey, parts: [.label("sessionvault/device-key-check/v1")]).unsafeCopyToArray()
            if let stored = try store.meta("device_key_check") {
                guard Sodium.constantTimeEqual(stored, check) else { throw VaultStartupError.deviceKeyMismatch }
            } else {
                try store.setMeta("device_key_check", check)
            }
            var slots = try Keyslots.load(store: store, deviceKey: deviceKey, chip: chip, secretFactors: secretFactors)
            let rows = try store.sessions()
            var vaultKey: SecureBytes?
            var chipRefusal: ChipError?
            if slots.isEmpty && rows.isEmpty {
                // A fresh vault: no factor yet, so the device key alone guards it
                // (the seeds' "standard session token resumption" without biometrics).
                let vk = try SecureBytes.random(count: 32)
                let device = try slots.makeWrap(vaultKey: vk, now: now)
                try slots.replace(put: [device], delete: [])
                vaultKey = vk
                logger.info("created a new vault")
            } else {
                vaultKey = try slots.migrateLegacy(logger: logger)
                if vaultKey == nil, let device = slots[Keyslot.deviceSlotID] {
                    // A device slot that fails to open (edited, another vault's, its
                    // chip cleared) is kept: deleting it could leave sessions nobody can open.
                    switch slots.openDeviceWrap() {
                    case .success(let vk)?:
                        vaultKey = vk
                        slots.rebindIfNeeded(device, vaultKey: vk, secret: nil, now: now, logger: logger)
                    case .failure(let error)?:
                        if case .chip(let refusal) = error { chipRefusal = refusal }
                        logger.error("the device keyslot failed to open; it is kept as it is", metadata: ["error": "\(error)"])
                    case nil:
                        break
                    }
                }
            }
            // A PIN's wrap bound to a chip that was cleared or replaced since is
            // told at start, without a guess: the person goes to BankID/Vipps, not to a PIN that cannot work.
            if chipRefusal == nil {
                for row in slots.rows.values where row.id != Keyslot.deviceSlotID {
                    guard let blob = Keyslot.chipBlob(fromKDF: row.kdf) else { continue }
                    do throws(ChipError) {
                        guard let c = chip.chip else { throw .unreachable("no TPM is in use") }
                        try c.check(blob)
                    } catch {
                        chipRefusal = error
                        logger.error("the PIN's keyslot is bound to a chip that does not take it", metadata: ["error": "\(error)"])
                    }
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
            return OpenedVault(keyslots: slots, vaultKey: vaultKey, publicKey: publicKey, entries: entries, chipRefusal: chipRefusal)
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

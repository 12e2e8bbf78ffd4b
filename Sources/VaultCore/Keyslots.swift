import FoundationEssentials
import Logging
import SecurityChip
import SodiumKit
import VaultFactor
import VaultProtocol
import VaultStore

/// One job: the keyslot rows in the store and their copy in memory, kept the
/// same. Every change is one store transaction first, then the copy, so the
/// broker never sees a slot the disk does not have (or the reverse). What a
/// change must contain is decided here too (`setUp`, `turnOff`: a PIN
/// replaces the device wrap, turning off the last secret factor puts it
/// back; `recordIdentity`), so the actor only asks for it and audits it.
/// The row format and its cryptography are `Keyslot`'s (Keyslot.swift).
///
/// A value owned by the `Vault` actor: synchronous, no lock of its own.
struct Keyslots {
    let store: VaultStore
    let deviceKey: SecureBytes
    /// The chip wraps are bound to, if any (ChipBinding.swift).
    let chip: ChipBinding
    /// The factors whose slot is a secret wrap (the PIN).
    let secretFactors: Set<String>
    /// The rows by id, as the store holds them.
    private(set) var rows: [String: KeyslotRow]

    init(store: VaultStore, deviceKey: SecureBytes, chip: ChipBinding, secretFactors: Set<String>, rows: [String: KeyslotRow] = [:]) {
        self.store = store
        self.deviceKey = deviceKey
        self.chip = chip
        self.secretFactors = secretFactors
        self.rows = rows
    }

    /// The store's keyslots as they are now.
    static func load(store: VaultStore, deviceKey: SecureBytes, chip: ChipBinding, secretFactors: Set<String>) throws(StoreError) -> Keyslots {
        var rows: [String: KeyslotRow] = [:]
        for row in try store.keyslots() { rows[row.id] = row }
        return Keyslots(store: store, deviceKey: deviceKey, chip: chip, secretFactors: secretFactors, rows: rows)
    }

    // MARK: Wraps, made and opened with this vault's device key and chip

    /// A secret factor's wrap (`secret`, `cost`) or the device wrap (neither),
    /// bound to the chip when the binding says so.
    func makeWrap(id: String = Keyslot.deviceSlotID, factor: String = Keyslot.deviceSlotID, vaultKey: SecureBytes,
                  secret: SecureBytes? = nil, cost: PasswordHash.Cost? = nil, now: Int64) throws(WrapError) -> KeyslotRow {
        try Keyslot.makeWrap(id: id, factor: factor, vaultKey: vaultKey, deviceKey: deviceKey, secret: secret, cost: cost,
                             chip: chip.sealingChip, now: now)
    }

    /// A factor's slot as `enroll` writes it (`Keyslot.make`): the PIN's wrap bound as the setting says.
    func make(for d: FactorDescriptor, proof: FactorProof, vaultKey: SecureBytes, cost: PasswordHash.Cost,
              now: Int64) throws(WrapError) -> KeyslotRow {
        try Keyslot.make(for: d, proof: proof, vaultKey: vaultKey, deviceKey: deviceKey, cost: cost, chip: chip.sealingChip, now: now)
    }

    func openWrap(_ row: KeyslotRow, secret: SecureBytes?) throws(WrapError) -> SecureBytes {
        try Keyslot.openWrap(row, deviceKey: deviceKey, secret: secret, chip: chip.chip)
    }

    /// A wrap that opened with `secret`, remade to match the chip binding
    /// (turned on, turned off, or an older vault made without it) and put in
    /// place of the old in one transaction. A failure keeps the old wrap,
    /// which still opens: it is tried again at the next opening.
    mutating func rebindIfNeeded(_ row: KeyslotRow, vaultKey: SecureBytes, secret: SecureBytes?, now: Int64, logger: Logger) {
        guard chip.needsRebinding(row) else { return }
        do {
            let remade = try makeWrap(id: row.id, factor: row.factor, vaultKey: vaultKey, secret: secret,
                                      cost: Keyslot.cost(fromKDF: row.kdf), now: now)
            TestPause.at("BEFORE_REBIND")
            try replace(put: [remade], delete: [])
            logger.info("a keyslot was rebound", metadata: ["slot": "\(row.id)", "chip": "\(chip.bindsNewWraps)"])
        } catch {
            logger.error("could not rebind a keyslot to the chip setting; the old one is kept", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Reading

    subscript(id: String) -> KeyslotRow? { rows[id] }

    var isEmpty: Bool { rows.isEmpty }

    /// Some slot can open the vault key (the device wrap or a secret factor's).
    var hasWrap: Bool { rows.values.contains { Keyslot.isWrap($0, secretFactors: secretFactors) } }

    /// A wrap other than `id`'s exists: removing `id` leaves the vault key reachable.
    func hasWrap(besides id: String) -> Bool {
        rows.values.contains { $0.id != id && Keyslot.isWrap($0, secretFactors: secretFactors) }
    }

    /// Some login's identity is recorded (`login:PROVIDER` or `login:person`): the vault has an owner.
    var hasOwner: Bool { rows.keys.contains { $0.hasPrefix(LoginIdentity.slotPrefix) } }

    /// The record `id`'s MAC check, or nil when there is no such row.
    func check(_ id: String) -> Keyslot.RecordCheck? {
        rows[id].map { Keyslot.check($0, deviceKey: deviceKey) }
    }

    /// The device wrap opened with the device key (and the chip it is bound
    /// to); nil when there is none.
    func openDeviceWrap() -> Result<SecureBytes, WrapError>? {
        guard let device = rows[Keyslot.deviceSlotID] else { return nil }
        do {
            return .success(try openWrap(device, secret: nil))
        } catch {
            return .failure(error)
        }
    }

    /// The factor's enrollment changed (or its v1 slot was dropped) and it
    /// must be set up again: `status` and the login options say so.
    func isStale(_ id: String) -> Bool {
        guard let stale = try? store.meta(Keyslots.staleKey(id)) else { return false }
        return !stale.isEmpty
    }

    static func staleKey(_ id: String) -> String { "stale:\(id)" }

    // MARK: What a change contains (the at-rest rule: docs/key-hierarchy.md)

    /// Sets factor `d` up with `proof` (again: its slot replaced). A secret
    /// factor's slot is a wrap of the vault key (bound to the chip as the
    /// setting says) that replaces the device wrap in the same transaction:
    /// from then on no slot opens with the device key alone. A presence
    /// factor's slot is a record of its enrollment, beside the wrap there is.
    mutating func setUp(_ d: FactorDescriptor, proof: FactorProof, vaultKey: SecureBytes, cost: PasswordHash.Cost,
                        now: Int64, logger: Logger) throws(VaultFailure) {
        let row = try Keyslots.built("a keyslot", logger) { () throws(WrapError) in
            try make(for: d, proof: proof, vaultKey: vaultKey, cost: cost, now: now)
        }
        let replaced = d.contribution == .lowEntropySecret ? [Keyslot.deviceSlotID] : []
        try storeCall(logger) { () throws(StoreError) in try enroll(row, replacing: replaced) }
    }

    /// Turns factor `id` off. When its slot was the only wrap of the vault
    /// key, the device wrap comes back in the same transaction: there is
    /// always exactly one way to the vault key, and the sessions stay reachable.
    mutating func turnOff(_ id: String, vaultKey: SecureBytes, now: Int64, logger: Logger) throws(VaultFailure) {
        var restoring: [KeyslotRow] = []
        if !hasWrap(besides: id) {
            restoring.append(try Keyslots.built("the device wrap", logger) { () throws(WrapError) in
                try makeWrap(vaultKey: vaultKey, now: now)
            })
        }
        let restored = restoring
        try storeCall(logger) { () throws(StoreError) in try disable(id, restoring: restored) }
    }

    /// Records the identity a login proved (`binding`: its issuer and stable
    /// subject, or the person's keyed national ID) under `id`, in place of a
    /// damaged record there. Whether a login may be recorded is
    /// `LoginRecordVerdict.recordsIdentity`'s to say.
    mutating func recordIdentity(_ id: String, binding: [String: String], now: Int64, logger: Logger) throws(VaultFailure) {
        let row: KeyslotRow
        do {
            row = try Keyslot.makeRecord(id: id, factor: "login", binding: binding, deviceKey: deviceKey, now: now)
        } catch {
            logger.error("could not build a login record", metadata: ["error": "\(error)"])
            throw .internal()
        }
        try storeCall(logger) { () throws(StoreError) in try replace(put: [row], delete: []) }
    }

    /// A slot made, or what its failure means to the request: the chip's
    /// refusal in the chip's words, anything else an internal error (logged).
    private static func built(_ what: String, _ logger: Logger,
                              _ make: () throws(WrapError) -> KeyslotRow) throws(VaultFailure) -> KeyslotRow {
        do {
            return try make()
        } catch .chip(let refusal) {
            logger.error("the chip could not seal \(what)", metadata: ["error": "\(refusal)"])
            throw refusal.failure
        } catch {
            logger.error("could not build \(what)", metadata: ["error": "\(error)"])
            throw .internal()
        }
    }

    // MARK: Changing, one transaction each

    /// Deletes `delete` and puts `put` in one transaction (an id in both ends
    /// with the `put` row), then the copy in memory.
    mutating func replace(put: [KeyslotRow], delete: [String]) throws(StoreError) {
        try store.updateKeyslots(put: put, delete: delete)
        for id in delete { rows[id] = nil }
        for row in put { rows[row.id] = row }
    }

    /// A factor set up (or set up again): its row in, `replacing` (the device
    /// wrap, when a PIN comes in) out in the same transaction; its failure
    /// counter and stale mark cleared.
    mutating func enroll(_ row: KeyslotRow, replacing: [String]) throws(StoreError) {
        try store.updateKeyslots(put: [row], delete: replacing)
        try store.resetFailures(factor: row.id)
        if try store.meta(Keyslots.staleKey(row.id)) != nil { try store.setMeta(Keyslots.staleKey(row.id), []) }
        for gone in replacing { rows[gone] = nil }
        rows[row.id] = row
    }

    /// A factor turned off: its row out and `restoring` (the device wrap, when
    /// it was the last secret factor) in, in one transaction; its failure counter cleared.
    mutating func disable(_ id: String, restoring: [KeyslotRow]) throws(StoreError) {
        try store.updateKeyslots(put: restoring, delete: [id])
        try store.resetFailures(factor: id)
        rows[id] = nil
        for row in restoring { rows[row.id] = row }
    }

    /// A presence factor's enrollment changed: its record goes and it is
    /// marked to be set up again. The copy in memory drops it even when the
    /// store fails, so this run never trusts the changed enrollment.
    mutating func dropChanged(_ id: String) throws(StoreError) {
        defer { rows[id] = nil }
        try store.updateKeyslots(put: [], delete: [id])
        try store.setMeta(Keyslots.staleKey(id), [1])
    }

    /// `vaultctl reset`: a new vault key, and every keyslot (and session,
    /// failure counter, stale mark) replaced by its device wrap and its
    /// public key (with the key's MAC), in one transaction. Returns the key,
    /// its public key and how many sessions went.
    mutating func startOver(now: Int64, logger: Logger) throws(VaultFailure) -> (vaultKey: SecureBytes, publicKey: [UInt8], removed: Int) {
        let vk: SecureBytes
        let device: KeyslotRow
        let publicKey: [UInt8]
        let publicKeyMAC: [UInt8]
        do {
            vk = try SecureBytes.random(count: KeyDerivation.keySize)
            device = try makeWrap(vaultKey: vk, now: now)
            publicKey = try VaultKeyPair.derive(vk).publicKey
            publicKeyMAC = try SessionSealing.publicKeyMAC(publicKey, deviceKey: deviceKey)
        } catch {
            throw .internal()
        }
        let meta = [SessionSealing.publicKeyMeta: publicKey, SessionSealing.publicKeyMACMeta: publicKeyMAC]
        let removed = try storeCall(logger) { () throws(StoreError) in try store.reset(slots: [device], meta: meta) }
        rows = [device.id: device]
        return (vk, publicKey, removed)
    }

    // MARK: Migration

    /// v1 stores kept login and fingerprint slots that wrapped VK under DK and
    /// public facts. A login slot becomes an identity record at once (its facts
    /// are stored in clear); when VK has no other way in, it is opened once to
    /// make the device slot first. A v1 fingerprint slot's digest was never
    /// stored, so it cannot become a record: with another way in it is dropped
    /// and the fingerprint is set up again; without one it stays until its next
    /// match migrates it (`Vault.migrateLegacyPresence`). Returns VK when a slot was opened here.
    mutating func migrateLegacy(logger: Logger) throws -> SecureBytes? {
        let legacy = rows.values.filter { $0.version == Keyslot.legacyVersion && !Keyslot.isWrap($0, secretFactors: secretFactors) }
        guard !legacy.isEmpty else { return nil }
        var vaultKey: SecureBytes?
        var put: [KeyslotRow] = []
        var delete: [String] = []
        var hasWrap = self.hasWrap
        for row in legacy where row.factor == "login" {
            if !hasWrap, vaultKey == nil { vaultKey = try? Keyslot.openLegacy(row, deviceKey: deviceKey, enrollmentState: []) }
            put.append(try Keyslot.makeRecord(id: row.id, factor: row.factor, binding: Keyslot.binding(fromJSON: row.binding),
                                              deviceKey: deviceKey, now: row.createdAt))
        }
        if !hasWrap, let vk = vaultKey {
            put.append(try makeWrap(vaultKey: vk, now: Int64(Date().timeIntervalSince1970)))
            hasWrap = true
        }
        for row in legacy where row.factor != "login" && hasWrap {
            delete.append(row.id)
            try store.setMeta(Keyslots.staleKey(row.id), Array("updated".utf8))
        }
        try replace(put: put, delete: delete)
        logger.info("keyslots migrated to v2", metadata: ["records": "\(put.count)", "dropped": "\(delete.count)"])
        return vaultKey
    }
}

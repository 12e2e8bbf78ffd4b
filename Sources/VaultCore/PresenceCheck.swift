import VaultFactor
import VaultStore

/// What a presence factor's proof (a fingerprint match) opens, decided from
/// its record, the proof and the soft box: a plain value the `Vault` actor
/// applies (`presenceOutcome`, Unlocking.swift). Never a key slot is deleted
/// on its word: the vault key's own slot is the device or PIN wrap.
enum PresenceCheck {
    /// The enrollment is the one on record and the soft box opened: the vault key.
    case opened(SecureBytes)
    /// The record fails its MAC (edited, or another device key's) or is of a
    /// newer version: kept, not used, and said so.
    case recordUnusable(newer: Bool)
    /// A good record with another digest: the enrollment changed (fingerprints
    /// added or removed). The record and the soft box go; the person goes to
    /// BankID/Vipps.
    case enrollmentChanged
    /// No live soft box (a restart, its time limit, a fallback): the PIN or a
    /// login is needed once first.
    case needsHardUnlock
    /// A v1 slot (fingerprint-only vault): it still wraps the vault key under
    /// the device key and the digest. Its first match moves the vault to v2: a
    /// device wrap and a record, to write in one transaction (nil: they could
    /// not be made, and the v1 slot stays).
    case legacyOpened(SecureBytes, migration: [KeyslotRow]?)
    /// A v1 slot the proof does not open. It is the only wrap of the vault key:
    /// deleting it would lose every session for good, so it is kept, unused,
    /// and the enrollment put back (or `vaultctl reset`, asked) still decides.
    case legacyUnopened

    /// `softBox` is asked only when the record and the proof agree (it may
    /// expire the box, which is audited).
    init(_ factor: FactorID, record: KeyslotRow, proof: FactorProof, deviceKey: SecureBytes, now: Int64,
         softBox: () -> SoftUnlock?) {
        if record.version == Keyslot.legacyVersion {
            guard let vk = try? Keyslot.openLegacy(record, deviceKey: deviceKey, enrollmentState: proof.enrollmentState) else {
                self = .legacyUnopened
                return
            }
            // Made unbound: opening the vault key binds it to the chip when the setting says so (`Vault.openHard`).
            let device = try? Keyslot.makeDeviceWrap(vaultKey: vk, deviceKey: deviceKey, chip: nil, now: now)
            let presence = try? Keyslot.makePresenceRecord(id: record.id, factor: record.factor, proof: proof, deviceKey: deviceKey, now: now)
            let rows = device.flatMap { d in presence.map { [d, $0] } }
            self = .legacyOpened(vk, migration: rows)
            return
        }
        let check = Keyslot.check(record, deviceKey: deviceKey)
        guard case .intact(let binding) = check, let digest = Keyslot.digest(in: binding) else {
            self = .recordUnusable(newer: check == .newerVersion)
            return
        }
        guard Sodium.constantTimeEqual(digest, proof.enrollmentState) else {
            self = .enrollmentChanged
            return
        }
        guard let vk = softBox()?.open(factor: factor, digest: proof.enrollmentState) else {
            self = .needsHardUnlock
            return
        }
        self = .opened(vk)
    }
}

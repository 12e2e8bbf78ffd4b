import SecurityChip
import VaultFactor
import VaultProtocol
import VaultStore

/// Why a wrap did not open or could not be made.
enum WrapError: Error, Equatable {
    /// A wrong PIN, an edited row, another vault's wrap.
    case didNotOpen
    /// The chip the wrap is bound to said no, or is not there.
    case chip(ChipError)
    case crypto(String)
}

/// The rows of the `keyslots` table (docs/key-hierarchy.md has the picture).
///
/// Two kinds, told apart by their factor:
/// - **wraps**: the vault key (VK) sealed under a key derived from the device
///   key (DK) and, for a secret factor (the PIN), Argon2id of the secret. The
///   `device` wrap exists exactly when no secret factor is enrolled, so there
///   is always one wrap and, with a PIN, none that DK alone opens:
///
///       A    = Argon2id(PIN, salt), or empty for the device wrap
///       KEK  = BLAKE2b_DK("sessionvault/keyslot/v1", id, factor, A, empty, salt, "{}" [, "tpm", T])
///       slot = XChaCha20-Poly1305(KEK, VK, ad = "sessionvault/keyslot/v1|" id "|" factor)
///
///   A wrap bound to this computer also mixes in T, 32 random bytes sealed by
///   the TPM under the auth value BLAKE2b_DK("sessionvault/chip-auth/v1", id,
///   factor, salt, A) — dictionary-attack protected for the PIN — and kept in
///   the row's `kdf` as `"tpm": hex(blob)` (docs/key-hierarchy.md).
///
/// - **records**: what a presence factor (fingerprint) was enrolled with, or
///   which identity a login proved, with a DK-keyed MAC over it. A record holds
///   no key: its inputs are public, so a key from them would protect nothing
///   beyond DK. The MAC tells a changed enrollment (MAC good, facts differ)
///   apart from an edited row (MAC bad).
enum Keyslot {
    /// v2: records carry a MAC instead of a wrapped key. v1 rows are read for migration.
    static let version = 2
    static let legacyVersion = 1
    static let label = "sessionvault/keyslot/v1"
    static let recordLabel = "sessionvault/keyslot-record/v2"
    static let deviceSlotID = "device"
    static let saltSize = PasswordHash.saltSize
    /// The binding key under which a presence record keeps the enrollment digest.
    static let digestKey = "enrollment_digest"
    /// The `kdf` key of a wrap bound to the chip, and the chip's part of its KEK.
    static let chipKey = "tpm"
    static let chipAuthLabel = "sessionvault/chip-auth/v1"

    // MARK: Wraps

    static func isWrap(_ row: KeyslotRow, secretFactors: Set<String>) -> Bool {
        row.id == deviceSlotID || secretFactors.contains(row.factor)
    }

    /// The Argon2id cost recorded beside a secret factor's wrap, and the chip's blob of a bound wrap.
    static func kdfJSON(_ cost: PasswordHash.Cost?, chipBlob: [UInt8]? = nil) -> String {
        var v: [String: JSON] = [:]
        if let cost { v["argon2id"] = ["ops": .int(Int64(cost.opsLimit)), "mem": .int(Int64(cost.memLimit))] }
        if let chipBlob { v[chipKey] = .string(Digest.hex(chipBlob)) }
        return v.isEmpty ? "{}" : JSON.object(v).text
    }

    /// The chip's blob in a bound wrap's `kdf`, or nil when the wrap is not bound.
    static func chipBlob(fromKDF text: String) -> [UInt8]? {
        guard let hex = (try? JSON.parse(text))?[chipKey]?.stringValue else { return nil }
        return Digest.bytes(fromHex: hex)
    }

    static func isBoundToChip(_ row: KeyslotRow) -> Bool { chipBlob(fromKDF: row.kdf) != nil }

    static func cost(fromKDF text: String) -> PasswordHash.Cost? {
        guard let v = try? JSON.parse(text), let a = v["argon2id"],
              let ops = a["ops"]?.intValue, let mem = a["mem"]?.intValue, ops > 0, mem > 0 else { return nil }
        return PasswordHash.Cost(opsLimit: UInt64(ops), memLimit: Int(mem))
    }

    static func bindingJSON(_ binding: [String: String]) -> String {
        JSON.object(binding.mapValues { .string($0) }).text
    }

    static func binding(fromJSON text: String) -> [String: String] {
        guard let o = (try? JSON.parse(text))?.objectValue else { return [:] }
        return o.compactMapValues { $0.stringValue }
    }

    static func associatedData(id: String, factor: String) -> [UInt8] {
        Array("\(label)|\(id)|\(factor)".utf8)
    }

    /// Argon2id of a secret factor's answer; nil for the device wrap, which has none.
    static func stretch(_ secret: SecureBytes?, salt: [UInt8], cost: PasswordHash.Cost?) throws(SodiumError) -> SecureBytes? {
        guard let cost else { return nil }
        // A secret factor without its secret must never derive a key.
        guard let secret else { throw .malformed("missing secret contribution") }
        return try PasswordHash.argon2id(secret, salt: salt, cost: cost)
    }

    /// The slot key. v1 presence slots also mixed in an enrollment digest and a
    /// binding; wraps have neither, so v1 and v2 wraps derive alike. A wrap
    /// bound to the chip adds the chip's secret last, so an unbound wrap
    /// derives exactly as before the TPM layer.
    static func kek(deviceKey: SecureBytes, id: String, factor: String, salt: [UInt8], stretched: SecureBytes?,
                    chipSecret: SecureBytes? = nil, enrollmentState: [UInt8] = [], binding: String = "{}") throws(SodiumError) -> SecureBytes {
        var parts: [KeyDerivation.Part] = [.label(label), .label(id), .label(factor)]
        parts.append(stretched.map { .secret($0) } ?? .bytes([]))
        parts.append(.bytes(enrollmentState))
        parts.append(.bytes(salt))
        parts.append(.label(binding))
        if let chipSecret {
            parts.append(.label(chipKey))
            parts.append(.secret(chipSecret))
        }
        return try KeyDerivation.derive(key: deviceKey, parts: parts)
    }

    /// The auth value the chip checks before it releases a wrap's secret: the
    /// device key and the stretched PIN (nothing for the device wrap), so each
    /// PIN tried at the chip is one guess it counts, and the chip alone cannot
    /// be asked without the device key.
    static func chipAuth(deviceKey: SecureBytes, id: String, factor: String, salt: [UInt8],
                         stretched: SecureBytes?) throws(SodiumError) -> SecureBytes {
        try KeyDerivation.derive(key: deviceKey, parts: [.label(chipAuthLabel), .label(id), .label(factor), .bytes(salt),
                                                         stretched.map { .secret($0) } ?? .bytes([])])
    }

    /// A wrap of VK: the device slot (`secret` nil) or a secret factor's slot,
    /// bound to `chip` when one is given.
    static func makeWrap(id: String, factor: String, vaultKey: SecureBytes, deviceKey: SecureBytes,
                         secret: SecureBytes?, cost: PasswordHash.Cost?, chip: (any SecretChip)?, now: Int64) throws(WrapError) -> KeyslotRow {
        do {
            let salt = Random.bytes(saltSize)
            let stretched = try stretch(secret, salt: salt, cost: cost)
            var chipSecret: SecureBytes?
            var blob: [UInt8]?
            if let chip {
                let t = try SecureBytes.random(count: KeyDerivation.keySize)
                let auth = try chipAuth(deviceKey: deviceKey, id: id, factor: factor, salt: salt, stretched: stretched)
                do {
                    blob = try chip.seal(t, auth: auth, guessProtected: cost != nil)
                } catch {
                    throw WrapError.chip(error)
                }
                chipSecret = t
            }
            let kek = try kek(deviceKey: deviceKey, id: id, factor: factor, salt: salt, stretched: stretched, chipSecret: chipSecret)
            let sealed = try SecretBox.seal(vaultKey, key: kek, associatedData: associatedData(id: id, factor: factor))
            return KeyslotRow(id: id, factor: factor, version: version, salt: salt, kdf: kdfJSON(cost, chipBlob: blob),
                              binding: "{}", sealedKey: sealed.bytes, createdAt: now)
        } catch let e as WrapError {
            throw e
        } catch {
            throw .crypto("\(error)")
        }
    }

    static func makeDeviceWrap(vaultKey: SecureBytes, deviceKey: SecureBytes, chip: (any SecretChip)?, now: Int64) throws(WrapError) -> KeyslotRow {
        try makeWrap(id: deviceSlotID, factor: deviceSlotID, vaultKey: vaultKey, deviceKey: deviceKey, secret: nil, cost: nil,
                     chip: chip, now: now)
    }

    /// Opens a wrap: `.didNotOpen` for a wrong PIN, an edited row or another
    /// vault's; `.chip` when the chip it is bound to said no or is not there.
    static func openWrap(_ row: KeyslotRow, deviceKey: SecureBytes, secret: SecureBytes?,
                         chip: (any SecretChip)?) throws(WrapError) -> SecureBytes {
        guard row.version == version || row.version == legacyVersion else { throw .crypto("unknown keyslot version \(row.version)") }
        do {
            let stretched = try stretch(secret, salt: row.salt, cost: cost(fromKDF: row.kdf))
            var chipSecret: SecureBytes?
            if let blob = chipBlob(fromKDF: row.kdf) {
                guard let chip else { throw WrapError.chip(.unreachable("no TPM is in use")) }
                let auth = try chipAuth(deviceKey: deviceKey, id: row.id, factor: row.factor, salt: row.salt, stretched: stretched)
                do {
                    chipSecret = try chip.unseal(blob, auth: auth)
                } catch .wrongAuth {
                    throw WrapError.didNotOpen
                } catch {
                    throw WrapError.chip(error)
                }
            }
            let kek = try kek(deviceKey: deviceKey, id: row.id, factor: row.factor, salt: row.salt, stretched: stretched,
                              chipSecret: chipSecret)
            return try SecretBox.open(SealedBox(bytes: row.sealedKey), key: kek, associatedData: associatedData(id: row.id, factor: row.factor))
        } catch let e as WrapError {
            throw e
        } catch SodiumError.openFailed {
            throw .didNotOpen
        } catch {
            throw .crypto("\(error)")
        }
    }

    /// Opens a v1 row that wrapped VK under DK and public facts (a login's
    /// identity, a fingerprint's digest): only to migrate it to the v2 layout.
    static func openLegacy(_ row: KeyslotRow, deviceKey: SecureBytes, enrollmentState: [UInt8]) throws(SodiumError) -> SecureBytes {
        guard row.version == legacyVersion else { throw .malformed("not a v1 keyslot") }
        let kek = try kek(deviceKey: deviceKey, id: row.id, factor: row.factor, salt: row.salt, stretched: nil,
                          enrollmentState: enrollmentState, binding: row.binding)
        return try SecretBox.open(SealedBox(bytes: row.sealedKey), key: kek, associatedData: associatedData(id: row.id, factor: row.factor))
    }

    // MARK: Records

    /// A record of public facts (`binding`), MAC'd with DK.
    static func makeRecord(id: String, factor: String, binding: [String: String], deviceKey: SecureBytes,
                           now: Int64) throws(SodiumError) -> KeyslotRow {
        let salt = Random.bytes(saltSize)
        let text = bindingJSON(binding)
        let tag = try recordMAC(deviceKey: deviceKey, id: id, factor: factor, binding: text, salt: salt)
        return KeyslotRow(id: id, factor: factor, version: version, salt: salt, kdf: "{}", binding: text, sealedKey: tag, createdAt: now)
    }

    /// A factor's slot as `enroll` writes it: for a secret factor (the PIN)
    /// a wrap of the vault key under the secret and the device key; for a
    /// presence factor a record of its enrollment, which wraps nothing.
    static func make(for d: FactorDescriptor, proof: FactorProof, vaultKey: SecureBytes, deviceKey: SecureBytes,
                     cost: PasswordHash.Cost, chip: (any SecretChip)?, now: Int64) throws(WrapError) -> KeyslotRow {
        let id = d.id.rawValue
        guard d.contribution == .lowEntropySecret else {
            do {
                return try makePresenceRecord(id: id, factor: id, proof: proof, deviceKey: deviceKey, now: now)
            } catch {
                throw .crypto("\(error)")
            }
        }
        guard let secret = proof.contribution else { throw .crypto("missing secret contribution") }
        return try makeWrap(id: id, factor: id, vaultKey: vaultKey, deviceKey: deviceKey, secret: secret, cost: cost, chip: chip, now: now)
    }

    /// A presence factor's record: its binding plus the enrollment digest.
    static func makePresenceRecord(id: String, factor: String, proof: FactorProof, deviceKey: SecureBytes,
                                   now: Int64) throws(SodiumError) -> KeyslotRow {
        var binding = proof.binding
        binding[digestKey] = Digest.hex(proof.enrollmentState)
        return try makeRecord(id: id, factor: factor, binding: binding, deviceKey: deviceKey, now: now)
    }

    enum RecordCheck: Equatable {
        /// Written by this vault with this device key: these are its facts.
        case intact([String: String])
        /// Edited, or written under another device key.
        case damaged
        /// Written by a newer SessionVault: kept as it is, not used, not overwritten.
        case newerVersion
    }

    static func check(_ row: KeyslotRow, deviceKey: SecureBytes) -> RecordCheck {
        if row.version > version { return .newerVersion }
        guard row.version == version,
              let tag = try? recordMAC(deviceKey: deviceKey, id: row.id, factor: row.factor, binding: row.binding, salt: row.salt),
              Sodium.constantTimeEqual(tag, row.sealedKey) else { return .damaged }
        return .intact(binding(fromJSON: row.binding))
    }

    /// The enrollment digest an intact presence record was made with.
    static func digest(in binding: [String: String]) -> [UInt8]? {
        binding[digestKey].flatMap(Digest.bytes(fromHex:))
    }

    private static func recordMAC(deviceKey: SecureBytes, id: String, factor: String, binding: String,
                                  salt: [UInt8]) throws(SodiumError) -> [UInt8] {
        try KeyDerivation.derive(key: deviceKey, parts: [.label(recordLabel), .label(id), .label(factor), .label(binding), .bytes(salt)])
            .unsafeCopyToArray()
    }
}

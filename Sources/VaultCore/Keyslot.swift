import VaultFactor
import VaultProtocol
import VaultStore

/// The rows of the `keyslots` table (docs/key-hierarchy.md has the picture).
///
/// Two kinds, told apart by their factor:
/// - **wraps**: the vault key (VK) sealed under a key derived from the device
///   key (DK) and, for a secret factor (the PIN), Argon2id of the secret. The
///   `device` wrap exists exactly when no secret factor is enrolled, so there
///   is always one wrap and, with a PIN, none that DK alone opens:
///
///       KEK  = BLAKE2b_DK("sessionvault/keyslot/v1", id, factor, Argon2id(PIN, salt) or empty, empty, salt, "{}")
///       slot = XChaCha20-Poly1305(KEK, VK, ad = "sessionvault/keyslot/v1|" id "|" factor)
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

    // MARK: Wraps

    static func isWrap(_ row: KeyslotRow, secretFactors: Set<String>) -> Bool {
        row.id == deviceSlotID || secretFactors.contains(row.factor)
    }

    /// The Argon2id cost recorded beside a secret factor's wrap.
    static func kdfJSON(_ cost: PasswordHash.Cost?) -> String {
        guard let cost else { return "{}" }
        let v: JSON = ["argon2id": ["ops": .int(Int64(cost.opsLimit)), "mem": .int(Int64(cost.memLimit))]]
        return v.text
    }

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

    /// The slot key. v1 presence slots also mixed in an enrollment digest and a
    /// binding; wraps have neither, so v1 and v2 wraps derive alike.
    static func kek(deviceKey: SecureBytes, id: String, factor: String, salt: [UInt8], cost: PasswordHash.Cost?,
                    secret: SecureBytes?, enrollmentState: [UInt8] = [], binding: String = "{}") throws(SodiumError) -> SecureBytes {
        var parts: [KeyDerivation.Part] = [.label(label), .label(id), .label(factor)]
        if let cost {
            // A secret factor without its secret must never derive a key.
            guard let secret else { throw .malformed("missing secret contribution") }
            parts.append(.secret(try PasswordHash.argon2id(secret, salt: salt, cost: cost)))
        } else {
            parts.append(.bytes([]))
        }
        parts.append(.bytes(enrollmentState))
        parts.append(.bytes(salt))
        parts.append(.label(binding))
        return try KeyDerivation.derive(key: deviceKey, parts: parts)
    }

    /// A wrap of VK: the device slot (`secret` nil) or a secret factor's slot.
    static func makeWrap(id: String, factor: String, vaultKey: SecureBytes, deviceKey: SecureBytes,
                         secret: SecureBytes?, cost: PasswordHash.Cost?, now: Int64) throws(SodiumError) -> KeyslotRow {
        let salt = Random.bytes(saltSize)
        let kek = try kek(deviceKey: deviceKey, id: id, factor: factor, salt: salt, cost: cost, secret: secret)
        let sealed = try SecretBox.seal(vaultKey, key: kek, associatedData: associatedData(id: id, factor: factor))
        return KeyslotRow(id: id, factor: factor, version: version, salt: salt, kdf: kdfJSON(cost),
                          binding: "{}", sealedKey: sealed.bytes, createdAt: now)
    }

    static func makeDeviceWrap(vaultKey: SecureBytes, deviceKey: SecureBytes, now: Int64) throws(SodiumError) -> KeyslotRow {
        try makeWrap(id: deviceSlotID, factor: deviceSlotID, vaultKey: vaultKey, deviceKey: deviceKey, secret: nil, cost: nil, now: now)
    }

    /// Opens a wrap, or throws `.openFailed` (wrong PIN, tampering).
    static func openWrap(_ row: KeyslotRow, deviceKey: SecureBytes, secret: SecureBytes?) throws(SodiumError) -> SecureBytes {
        guard row.version == version || row.version == legacyVersion else { throw .malformed("unknown keyslot version \(row.version)") }
        let kek = try kek(deviceKey: deviceKey, id: row.id, factor: row.factor, salt: row.salt,
                          cost: cost(fromKDF: row.kdf), secret: secret)
        return try SecretBox.open(SealedBox(bytes: row.sealedKey), key: kek, associatedData: associatedData(id: row.id, factor: row.factor))
    }

    /// Opens a v1 row that wrapped VK under DK and public facts (a login's
    /// identity, a fingerprint's digest): only to migrate it to the v2 layout.
    static func openLegacy(_ row: KeyslotRow, deviceKey: SecureBytes, enrollmentState: [UInt8]) throws(SodiumError) -> SecureBytes {
        guard row.version == legacyVersion else { throw .malformed("not a v1 keyslot") }
        let kek = try kek(deviceKey: deviceKey, id: row.id, factor: row.factor, salt: row.salt, cost: nil, secret: nil,
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
                     cost: PasswordHash.Cost, now: Int64) throws(SodiumError) -> KeyslotRow {
        let id = d.id.rawValue
        guard d.contribution == .lowEntropySecret else {
            return try makePresenceRecord(id: id, factor: id, proof: proof, deviceKey: deviceKey, now: now)
        }
        guard let secret = proof.contribution else { throw .malformed("missing secret contribution") }
        return try makeWrap(id: id, factor: id, vaultKey: vaultKey, deviceKey: deviceKey, secret: secret, cost: cost, now: now)
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
        guard let hex = binding[digestKey], hex.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(hex.count / 2)
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            out.append(byte)
            index = next
        }
        return out
    }

    private static func recordMAC(deviceKey: SecureBytes, id: String, factor: String, binding: String,
                                  salt: [UInt8]) throws(SodiumError) -> [UInt8] {
        try KeyDerivation.derive(key: deviceKey, parts: [.label(recordLabel), .label(id), .label(factor), .label(binding), .bytes(salt)])
            .unsafeCopyToArray()
    }
}

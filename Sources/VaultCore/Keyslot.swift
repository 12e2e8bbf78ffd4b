import VaultFactor
import VaultProtocol
import VaultStore

/// A keyslot: the vault key (VK) wrapped once per enrolled factor, as LUKS does.
///
///     KEK = BLAKE2b_DK( "sessionvault/keyslot/v1", slot id, factor,
///                       stretched secret (Argon2id(PIN, salt) or empty),
///                       enrollment-state digest, salt, binding )
///     slot = XChaCha20-Poly1305(KEK, VK, ad = "sessionvault/keyslot/v1|" id "|" factor)
///
/// Without the device key (in the keyring) *and* the factor's proof nothing
/// opens. A changed enrollment state or binding gives a different KEK, so a
/// stale fingerprint slot fails to open: the change is detected by the crypto,
/// not by a comparison someone could edit in the database.
enum Keyslot {
    static let version = 1
    static let label = "sessionvault/keyslot/v1"
    static let deviceSlotID = "device"
    static let saltSize = PasswordHash.saltSize

    /// The Argon2id cost recorded beside a slot (absent for presence-only factors).
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

    static func kek(deviceKey: SecureBytes, id: String, factor: String, salt: [UInt8], cost: PasswordHash.Cost?,
                    proof: FactorProof?, binding: String) throws(SodiumError) -> SecureBytes {
        var parts: [KeyDerivation.Part] = [.label(label), .label(id), .label(factor)]
        if let cost {
            // A secret factor without its secret must never derive a key.
            guard let secret = proof?.contribution else { throw .malformed("missing secret contribution") }
            parts.append(.secret(try PasswordHash.argon2id(secret, salt: salt, cost: cost)))
        } else {
            parts.append(.bytes([]))
        }
        parts.append(.bytes(proof?.enrollmentState ?? []))
        parts.append(.bytes(salt))
        parts.append(.label(binding))
        return try KeyDerivation.derive(key: deviceKey, parts: parts)
    }

    static func make(id: String, factor: String, vaultKey: SecureBytes, deviceKey: SecureBytes,
                     proof: FactorProof?, cost: PasswordHash.Cost?, now: Int64) throws(SodiumError) -> KeyslotRow {
        let salt = Random.bytes(saltSize)
        let binding = bindingJSON(proof?.binding ?? [:])
        let kek = try kek(deviceKey: deviceKey, id: id, factor: factor, salt: salt, cost: cost, proof: proof, binding: binding)
        let sealed = try SecretBox.seal(vaultKey, key: kek, associatedData: associatedData(id: id, factor: factor))
        return KeyslotRow(id: id, factor: factor, version: version, salt: salt, kdf: kdfJSON(cost),
                          binding: binding, sealedKey: sealed.bytes, createdAt: now)
    }

    /// Opens a slot, or throws `.openFailed` (wrong PIN, changed enrollment,
    /// another identity, tampering). The binding that goes into the key is the
    /// one the factor *proves* now, never the one stored beside the slot: the
    /// stored copy only tells `verify` what to check, so editing it opens nothing.
    static func open(_ row: KeyslotRow, deviceKey: SecureBytes, proof: FactorProof?) throws(SodiumError) -> SecureBytes {
        guard row.version == version else { throw .malformed("unknown keyslot version \(row.version)") }
        let kek = try kek(deviceKey: deviceKey, id: row.id, factor: row.factor, salt: row.salt,
                          cost: cost(fromKDF: row.kdf), proof: proof, binding: bindingJSON(proof?.binding ?? [:]))
        let box = try SealedBox(bytes: row.sealedKey)
        return try SecretBox.open(box, key: kek, associatedData: associatedData(id: row.id, factor: row.factor))
    }
}

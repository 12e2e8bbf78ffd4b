import CSodium

/// Argon2id (`crypto_pwhash` with ALG_ARGON2ID13) for stretching low-entropy
/// secrets such as a PIN into key material.
public enum PasswordHash {
    public static let saltSize = Int(crypto_pwhash_SALTBYTES)

    /// Cost parameters, stored beside each keyslot so they can be raised later.
    public struct Cost: Sendable, Equatable, Codable {
        public var opsLimit: UInt64
        public var memLimit: Int
        public init(opsLimit: UInt64, memLimit: Int) {
            self.opsLimit = opsLimit
            self.memLimit = memLimit
        }
        /// libsodium's INTERACTIVE: 2 passes, 64 MiB (≈ 80 ms on the reference machine).
        public static let interactive = Cost(opsLimit: UInt64(crypto_pwhash_OPSLIMIT_INTERACTIVE), memLimit: Int(crypto_pwhash_MEMLIMIT_INTERACTIVE))
        /// libsodium's MODERATE: 3 passes, 256 MiB.
        public static let moderate = Cost(opsLimit: UInt64(crypto_pwhash_OPSLIMIT_MODERATE), memLimit: Int(crypto_pwhash_MEMLIMIT_MODERATE))
        /// The lowest cost a keyslot may be written with (64 MiB).
        public static let minimumMemory = Int(crypto_pwhash_MEMLIMIT_INTERACTIVE)
    }

    public static func argon2id(_ secret: SecureBytes, salt: [UInt8], cost: Cost, outputSize: Int = 32) throws(SodiumError) -> SecureBytes {
        try Sodium.ensureReady()
        guard salt.count == saltSize else { throw .malformed("Argon2id salt must be \(saltSize) bytes") }
        var rc: Int32 = -1
        let out: SecureBytes
        do {
            out = try SecureBytes(count: outputSize) { o in
                secret.withUnsafeBytes { s in
                    salt.withUnsafeBytes { sa in
                        let pw = UnsafeRawPointer(s.bytes).assumingMemoryBound(to: CChar.self)
                        rc = crypto_pwhash(o.mutableBytes, UInt64(outputSize), pw, UInt64(s.count),
                                           sa.bytes, cost.opsLimit, cost.memLimit, crypto_pwhash_ALG_ARGON2ID13)
                    }
                }
            }
        } catch {
            throw (error as? SodiumError) ?? .outOfSecureMemory
        }
        guard rc == 0 else { throw .passwordHashFailed }
        return out
    }
}

import CSodium

/// Anonymous sealing to a public key (`crypto_box_seal`: X25519 + XSalsa20-Poly1305).
/// The vault uses it to store something for the PIN while the PIN is not at
/// hand: anyone may seal to the vault's public key, only the holder of the vault
/// key (from which the secret key is derived) can open.
public enum PublicKeyBox {
    public static let publicKeySize = Int(crypto_box_PUBLICKEYBYTES)
    public static let overhead = Int(crypto_box_sealbytes())

    /// The key pair whose secret half is derived from `seed` (32 bytes).
    public static func keyPair(seed: SecureBytes) throws(SodiumError) -> (publicKey: [UInt8], secretKey: SecureBytes) {
        try Sodium.ensureReady()
        guard seed.count == Int(crypto_box_SEEDBYTES) else { throw .malformed("seed must be 32 bytes") }
        var publicKey = [UInt8](repeating: 0, count: publicKeySize)
        do {
            let secretKey = try SecureBytes(count: Int(crypto_box_SECRETKEYBYTES)) { sk in
                seed.withUnsafeBytes { s in
                    _ = crypto_box_seed_keypair(&publicKey, sk.mutableBytes, s.bytes)
                }
            }
            return (publicKey, secretKey)
        } catch {
            throw (error as? SodiumError) ?? .outOfSecureMemory
        }
    }

    /// Seals `plaintext` so that only the secret key of `publicKey` opens it.
    public static func seal(_ plaintext: SecureBytes, to publicKey: [UInt8]) throws(SodiumError) -> [UInt8] {
        try Sodium.ensureReady()
        guard publicKey.count == publicKeySize else { throw .malformed("public key must be 32 bytes") }
        var out = [UInt8](repeating: 0, count: plaintext.count + overhead)
        let rc = plaintext.withUnsafeBytes { p in crypto_box_seal(&out, p.bytes, UInt64(p.count), publicKey) }
        guard rc == 0 else { throw .malformed("sealing to a public key failed") }
        return out
    }

    /// Opens into secure memory; a changed byte or another key throws `.openFailed`.
    public static func open(_ sealed: [UInt8], publicKey: [UInt8], secretKey: SecureBytes) throws(SodiumError) -> SecureBytes {
        try Sodium.ensureReady()
        guard sealed.count >= overhead, publicKey.count == publicKeySize else { throw .malformed("sealed box too short") }
        var ok = false
        let result: SecureBytes
        do {
            result = try SecureBytes(count: sealed.count - overhead) { out in
                secretKey.withUnsafeBytes { sk in
                    ok = crypto_box_seal_open(out.mutableBytes, sealed, UInt64(sealed.count), publicKey, sk.bytes) == 0
                }
            }
        } catch {
            throw (error as? SodiumError) ?? .outOfSecureMemory
        }
        guard ok else { throw .openFailed }
        return result
    }
}

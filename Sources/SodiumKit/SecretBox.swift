import CSodium

/// A sealed value: XChaCha20-Poly1305 (IETF) with a random 192-bit nonce.
/// Wire form: `nonce (24) || ciphertext || tag (16)`.
public struct SealedBox: Sendable, Equatable {
    public static let nonceSize = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    public static let tagSize = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)
    public static let keySize = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)

    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(SodiumError) {
        guard bytes.count >= SealedBox.nonceSize + SealedBox.tagSize else {
            throw .malformed("sealed box shorter than nonce and tag")
        }
        self.bytes = bytes
    }
}

/// Authenticated encryption with associated data. The associated data binds a
/// sealed blob to where it belongs (record id, schema version), so blobs can't be
/// swapped between rows or replayed from an older schema.
public enum SecretBox {
    public static func seal(_ plaintext: UnsafeRawBufferPointer, key: SecureBytes, associatedData: [UInt8]) throws(SodiumError) -> SealedBox {
        try Sodium.ensureReady()
        guard key.count == SealedBox.keySize else { throw .malformed("key must be 32 bytes") }
        var out = [UInt8](repeating: 0, count: SealedBox.nonceSize + plaintext.count + SealedBox.tagSize)
        out.withUnsafeMutableBytes { o in
            let base = o.mutableBytes
            randombytes_buf(base, SealedBox.nonceSize)
            var clen: UInt64 = 0
            key.withUnsafeBytes { k in
                associatedData.withUnsafeBytes { ad in
                    _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                        base + SealedBox.nonceSize, &clen,
                        plaintext.bytes, UInt64(plaintext.count),
                        ad.bytes, UInt64(ad.count),
                        nil, base, k.bytes)
                }
            }
        }
        return try SealedBox(bytes: out)
    }

    public static func seal(_ plaintext: [UInt8], key: SecureBytes, associatedData: [UInt8]) throws(SodiumError) -> SealedBox {
        // Array.withUnsafeBytes only rethrows untyped errors; pass the result out instead.
        let result: Result<SealedBox, SodiumError> = plaintext.withUnsafeBytes { p in
            Result { () throws(SodiumError) in try seal(p, key: key, associatedData: associatedData) }
        }
        return try result.get()
    }

    public static func seal(_ plaintext: SecureBytes, key: SecureBytes, associatedData: [UInt8]) throws(SodiumError) -> SealedBox {
        try plaintext.withUnsafeBytes { (p: UnsafeRawBufferPointer) throws(SodiumError) -> SealedBox in
            try seal(p, key: key, associatedData: associatedData)
        }
    }

    /// Opens into secure memory. Any changed byte (nonce, ciphertext, tag) or a
    /// different key or associated data throws `.openFailed`.
    public static func open(_ box: SealedBox, key: SecureBytes, associatedData: [UInt8]) throws(SodiumError) -> SecureBytes {
        try Sodium.ensureReady()
        guard key.count == SealedBox.keySize else { throw .malformed("key must be 32 bytes") }
        let plainCount = box.bytes.count - SealedBox.nonceSize - SealedBox.tagSize
        var ok = false
        let result: SecureBytes
        do {
            result = try SecureBytes(count: plainCount) { out in
                box.bytes.withUnsafeBytes { b in
                    let base = b.bytes
                    key.withUnsafeBytes { k in
                        associatedData.withUnsafeBytes { ad in
                            var mlen: UInt64 = 0
                            let rc = crypto_aead_xchacha20poly1305_ietf_decrypt(
                                out.mutableBytes, &mlen, nil,
                                base + SealedBox.nonceSize, UInt64(b.count - SealedBox.nonceSize),
                                ad.bytes, UInt64(ad.count),
                                base, k.bytes)
                            ok = (rc == 0)
                        }
                    }
                }
            }
        } catch {
            throw (error as? SodiumError) ?? .outOfSecureMemory
        }
        guard ok else { throw .openFailed }
        return result
    }

    /// Opens into a plain array (for non-secret metadata). The caller owns wiping.
    public static func openToArray(_ box: SealedBox, key: SecureBytes, associatedData: [UInt8]) throws(SodiumError) -> [UInt8] {
        try open(box, key: key, associatedData: associatedData).unsafeCopyToArray()
    }
}

extension SecretBox {
    /// Opens into a temporary buffer (on the stack when small), hands it to
    /// `body`, and wipes it before returning. For hot paths where the plaintext
    /// is consumed at once: no guarded-page allocation (mmap + mlock) per call.
    public static func withOpened<R>(_ box: SealedBox, key: SecureBytes, associatedData: [UInt8],
                                     _ body: (UnsafeRawBufferPointer) -> R) throws(SodiumError) -> R {
        try Sodium.ensureReady()
        guard key.count == SealedBox.keySize else { throw .malformed("key must be 32 bytes") }
        let plainCount = box.bytes.count - SealedBox.nonceSize - SealedBox.tagSize
        let outcome: R? = withUnsafeTemporaryAllocation(byteCount: max(plainCount, 1), alignment: 16) { out in
            defer { sodium_memzero(out.baseAddress, out.count) }
            var ok = false
            box.bytes.withUnsafeBytes { b in
                key.withUnsafeBytes { k in
                    associatedData.withUnsafeBytes { ad in
                        var mlen: UInt64 = 0
                        ok = crypto_aead_xchacha20poly1305_ietf_decrypt(
                            out.mutableBytes, &mlen, nil,
                            b.bytes + SealedBox.nonceSize, UInt64(b.count - SealedBox.nonceSize),
                            ad.bytes, UInt64(ad.count), b.bytes, k.bytes) == 0
                    }
                }
            }
            guard ok else { return nil }
            return body(UnsafeRawBufferPointer(rebasing: out[0..<plainCount]))
        }
        guard let outcome else { throw .openFailed }
        return outcome
    }
}

import CSodium

/// Key derivation by BLAKE2b keyed hashing (`crypto_generichash` with a key), over
/// length-prefixed parts so that no two different part lists hash the same input.
public enum KeyDerivation {
    public static let keySize = 32

    /// One part of the derivation input; secret parts stay in secure memory.
    public enum Part {
        case label(String)
        case bytes([UInt8])
        case secret(SecureBytes)
    }

    public static func derive(key: SecureBytes, parts: [Part], outputSize: Int = keySize) throws(SodiumError) -> SecureBytes {
        try Sodium.ensureReady()
        guard key.count >= Int(crypto_generichash_KEYBYTES_MIN), key.count <= Int(crypto_generichash_KEYBYTES_MAX) else {
            throw .malformed("derivation key has the wrong size")
        }
        // Length-prefix every part into one guarded buffer, then hash it in one call
        // (the streaming state type is over-aligned and does not import into Swift).
        var total = 0
        for part in parts {
            switch part {
            case .label(let s): total += 8 + s.utf8.count
            case .bytes(let b): total += 8 + b.count
            case .secret(let s): total += 8 + s.count
            }
        }
        do {
            let input = try SecureBytes(count: total) { buf in
                var offset = 0
                func put(_ p: UnsafeRawBufferPointer) {
                    var len = UInt64(p.count).littleEndian
                    withUnsafeBytes(of: &len) { l in
                        UnsafeMutableRawBufferPointer(rebasing: buf[offset..<offset + 8]).copyMemory(from: l)
                    }
                    offset += 8
                    if p.count > 0 {
                        UnsafeMutableRawBufferPointer(rebasing: buf[offset..<offset + p.count]).copyMemory(from: p)
                    }
                    offset += p.count
                }
                for part in parts {
                    switch part {
                    case .label(let s): Array(s.utf8).withUnsafeBytes(put)
                    case .bytes(let b): b.withUnsafeBytes(put)
                    case .secret(let s): s.withUnsafeBytes(put)
                    }
                }
            }
            return try SecureBytes(count: outputSize) { out in
                input.withUnsafeBytes { i in
                    key.withUnsafeBytes { k in
                        _ = crypto_generichash(out.mutableBytes, outputSize, i.bytes, UInt64(i.count), k.bytes, k.count)
                    }
                }
            }
        } catch {
            throw (error as? SodiumError) ?? .outOfSecureMemory
        }
    }

    /// A keyed MAC (BLAKE2b-256) over non-secret data, e.g. for the audit chain.
    /// The same bytes as `derive(key:parts: [.bytes(message)])`, hashed from
    /// plain memory: neither the message nor the MAC is secret, and it runs on
    /// every release (an app grant's id), where two guarded allocations
    /// (mmap + mlock each) cost more than the release itself.
    public static func mac(key: SecureBytes, message: [UInt8]) throws(SodiumError) -> [UInt8] {
        try Sodium.ensureReady()
        guard key.count >= Int(crypto_generichash_KEYBYTES_MIN), key.count <= Int(crypto_generichash_KEYBYTES_MAX) else {
            throw .malformed("derivation key has the wrong size")
        }
        var input = [UInt8]()
        input.reserveCapacity(8 + message.count)
        withUnsafeBytes(of: UInt64(message.count).littleEndian) { input.append(contentsOf: $0) }
        input.append(contentsOf: message)
        var out = [UInt8](repeating: 0, count: keySize)
        input.withUnsafeBytes { i in
            key.withUnsafeBytes { k in
                _ = crypto_generichash(&out, keySize, i.bytes, UInt64(i.count), k.bytes, k.count)
            }
        }
        return out
    }
}

/// SHA-256 for indexing (e.g. a session by the hash of its refresh token).
public enum Digest {
    public static func sha256(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        data.withUnsafeBytes { d in
            _ = crypto_hash_sha256(&out, d.bytes, UInt64(d.count))
        }
        return out
    }

    public static func sha256(_ secret: SecureBytes) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        secret.withUnsafeBytes { d in
            _ = crypto_hash_sha256(&out, d.bytes, UInt64(d.count))
        }
        return out
    }

    /// SHA-512 (e.g. an OpenID Connect `at_hash` for Ed25519-signed tokens).
    public static func sha512(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(crypto_hash_sha512_BYTES))
        data.withUnsafeBytes { d in
            _ = crypto_hash_sha512(&out, d.bytes, UInt64(d.count))
        }
        return out
    }

    public static func hex(_ bytes: [UInt8]) -> String {
        let digits: [Character] = Array("0123456789abcdef")
        var s = ""
        s.reserveCapacity(bytes.count * 2)
        for b in bytes {
            s.append(digits[Int(b >> 4)])
            s.append(digits[Int(b & 0x0f)])
        }
        return s
    }

    /// The bytes of hex text (either case); nil unless it is pairs of hex digits only.
    public static func bytes(fromHex hex: some StringProtocol) -> [UInt8]? {
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let high = nibble(digits[i]), let low = nibble(digits[i + 1]) else { return nil }
            out.append(high << 4 | low)
        }
        return out
    }
}

/// Non-secret random bytes (salts, nonces, ids).
public enum Random {
    public static func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { buf in
            if let base = buf.baseAddress { randombytes_buf(base, buf.count) }
        }
        return out
    }
}

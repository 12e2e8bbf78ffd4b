import CSodium

/// libsodium must be initialised once per process before any other call.
/// `sodium_init` is idempotent and thread-safe; a global `let` runs it exactly once.
private let sodiumInitResult: Int32 = sodium_init()

/// Errors from the crypto layer. They never carry key material or plaintext.
public enum SodiumError: Error, Equatable, Sendable, CustomStringConvertible {
    /// `sodium_init` failed: the process cannot do any crypto.
    case unavailable
    /// `sodium_malloc` could not allocate guarded memory (usually RLIMIT_MEMLOCK).
    case outOfSecureMemory
    /// Authentication failed: wrong key, wrong associated data, or a changed byte.
    case openFailed
    /// Input had the wrong size for the primitive (e.g. a truncated record).
    case malformed(String)
    /// Argon2id could not run (not enough memory for the chosen limit).
    case passwordHashFailed

    public var description: String {
        switch self {
        case .unavailable: return "libsodium could not be initialised"
        case .outOfSecureMemory: return "secure memory could not be allocated"
        case .openFailed: return "sealed data failed authentication (wrong key or tampered bytes)"
        case .malformed(let what): return "malformed sealed data: \(what)"
        case .passwordHashFailed: return "Argon2id failed (not enough memory)"
        }
    }
}

public enum Sodium {
    /// Call early (e.g. at daemon start) to fail fast if libsodium is unusable.
    public static func ensureReady() throws(SodiumError) {
        if sodiumInitResult < 0 { throw .unavailable }
    }

    /// Constant-time equality for secrets of the same length.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in
                sodium_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0
            }
        }
    }

    /// Zeroes a Swift array in place (for transient copies that had to exist).
    public static func wipe(_ bytes: inout [UInt8]) {
        let n = bytes.count
        if n == 0 { return }
        bytes.withUnsafeMutableBytes { sodium_memzero($0.baseAddress, n) }
    }
}

/// libsodium's headers mark most pointers non-null, even for zero-length input.
/// Empty Swift buffers have no base address, so they borrow this one byte instead.
nonisolated(unsafe) private let emptyByte: UnsafeMutablePointer<UInt8> = {
    let p = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
    p.initialize(to: 0)
    return p
}()

extension UnsafeRawBufferPointer {
    /// A non-null byte pointer (valid for `count` bytes; a dummy byte when empty).
    var bytes: UnsafePointer<UInt8> {
        if let base = baseAddress { return base.assumingMemoryBound(to: UInt8.self) }
        return UnsafePointer(emptyByte)
    }
}

extension UnsafeMutableRawBufferPointer {
    var mutableBytes: UnsafeMutablePointer<UInt8> {
        if let base = baseAddress { return base.assumingMemoryBound(to: UInt8.self) }
        return emptyByte
    }
}

import CSodium

/// A fixed-size secret held in libsodium guarded memory: `sodium_malloc`'d (guard pages,
/// canary), `mlock`ed so it is never swapped, and zeroed by `sodium_free` when released.
///
/// Contents are written once at creation and then only read, which is why the type can
/// be shared across tasks. Never copy the bytes into a Swift array unless the copy is
/// wiped; use `withUnsafeBytes` instead.
public final class SecureBytes: @unchecked Sendable {
    private let pointer: UnsafeMutableRawPointer
    public let count: Int

    /// Allocates `count` bytes and lets `initialize` fill them.
    public init(count: Int, initialize: (UnsafeMutableRawBufferPointer) throws -> Void) throws {
        try Sodium.ensureReady()
        // sodium_malloc(0) is legal but we never want an empty secret buffer to be special.
        guard let p = sodium_malloc(max(count, 1)) else { throw SodiumError.outOfSecureMemory }
        pointer = p
        self.count = count
        do {
            try initialize(UnsafeMutableRawBufferPointer(start: p, count: count))
        } catch {
            sodium_free(p)
            throw error
        }
    }

    /// Fresh random bytes from the OS CSPRNG (`randombytes_buf`).
    public static func random(count: Int) throws(SodiumError) -> SecureBytes {
        do {
            return try SecureBytes(count: count) { buf in
                if let base = buf.baseAddress { randombytes_buf(base, buf.count) }
            }
        } catch {
            throw (error as? SodiumError) ?? .outOfSecureMemory
        }
    }

    /// Copies `bytes` into secure memory and wipes the source array.
    public static func consuming(_ bytes: inout [UInt8]) throws(SodiumError) -> SecureBytes {
        // Read `bytes` itself, never a second reference to its storage: with
        // one, wiping would copy the array first and wipe only the copy.
        defer { Sodium.wipe(&bytes) }
        do {
            return try SecureBytes(count: bytes.count) { buf in
                bytes.withUnsafeBytes { src in buf.copyMemory(from: src) }
            }
        } catch {
            throw (error as? SodiumError) ?? .outOfSecureMemory
        }
    }

    /// Copies UTF-8 text into secure memory (for PINs typed by a person).
    public static func utf8(_ text: String) throws(SodiumError) -> SecureBytes {
        var bytes = Array(text.utf8)
        return try consuming(&bytes)
    }

    deinit {
        // sodium_free zeroes the region before unmapping it.
        sodium_free(pointer)
    }

    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Constant-time comparison with another secret.
    public func constantTimeEquals(_ other: SecureBytes) -> Bool {
        guard count == other.count else { return false }
        return sodium_memcmp(pointer, other.pointer, count) == 0
    }

    /// A copy into a plain array, for the few places that must hand bytes to
    /// a library (e.g. writing a key to the keyring). The caller wipes it.
    public func unsafeCopyToArray() -> [UInt8] {
        withUnsafeBytes { Array($0) }
    }
}

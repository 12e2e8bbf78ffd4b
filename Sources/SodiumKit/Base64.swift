import CSodium

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Base64 for secrets that must travel as text (the Secret Service stores a
// password string). Both directions stay in guarded memory, so the text form of a
// key never sits in a Swift String or an unwiped heap buffer.

extension SecureBytes {
    /// Calls `body` with the secret as NUL-terminated base64 (standard alphabet, padded).
    /// The text lives in `sodium_malloc`'d memory and is wiped when `body` returns.
    public func withBase64CString<R>(_ body: (UnsafePointer<CChar>) -> R) throws(SodiumError) -> R {
        try Sodium.ensureReady()
        // sodium_base64_ENCODED_LEN is a function-like macro Swift cannot import;
        // this is its value for the padded variant, including the terminating NUL.
        let encodedLength = (count + 2) / 3 * 4 + 1
        guard let text = sodium_malloc(encodedLength) else { throw .outOfSecureMemory }
        defer { sodium_free(text) }
        let chars = text.bindMemory(to: CChar.self, capacity: encodedLength)
        withUnsafeBytes { source in
            _ = sodium_bin2base64(chars, encodedLength, source.bytes, source.count,
                                  sodium_base64_VARIANT_ORIGINAL)
        }
        return body(UnsafePointer(chars))
    }

    /// Decodes NUL-terminated base64 (standard alphabet, padded; ASCII whitespace
    /// ignored, since keys restored by hand often carry a trailing newline).
    public static func fromBase64(_ text: UnsafePointer<CChar>) throws(SodiumError) -> SecureBytes {
        try Sodium.ensureReady()
        let textLength = strlen(text)
        // The decoded size is only known afterwards, so decode into a guarded scratch
        // buffer of the largest possible size and copy the exact bytes out of it.
        let capacity = textLength / 4 * 3 + 3
        guard let scratch = sodium_malloc(capacity) else { throw .outOfSecureMemory }
        defer { sodium_free(scratch) }
        var decodedLength = 0
        let status = sodium_base642bin(scratch.bindMemory(to: UInt8.self, capacity: capacity), capacity,
                                       text, textLength, " \t\r\n", &decodedLength, nil,
                                       sodium_base64_VARIANT_ORIGINAL)
        guard status == 0 else { throw .malformed("not valid base64") }
        do {
            return try SecureBytes(count: decodedLength) { destination in
                if decodedLength > 0 {
                    destination.copyMemory(from: UnsafeRawBufferPointer(start: scratch, count: decodedLength))
                }
            }
        } catch {
            throw (error as? SodiumError) ?? .outOfSecureMemory
        }
    }
}

import SodiumKit
internal import TPMSeal

/// The TPM 2.0, through ESAPI (tpm_seal.c). Each call opens its own
/// connection, so the value is freely shared; the TPM (or its resource
/// manager) serializes commands.
public struct TPMChip: SecretChip {
    /// The TCTI configuration: "device:/dev/tpmrm0" on a real machine, "swtpm:path=S" in tests.
    public let location: String

    public static let defaultLocation = "device:/dev/tpmrm0"

    public init(location: String = TPMChip.defaultLocation) {
        self.location = location
    }

    public func seal(_ secret: SecureBytes, auth: SecureBytes, guessProtected: Bool) throws(ChipError) -> [UInt8] {
        var blob = [UInt8](repeating: 0, count: Int(TPM_SEAL_BLOB_MAX))
        var length = 0
        let rc = secret.withUnsafeBytes { s in
            auth.withUnsafeBytes { a in
                tpm_seal(location, s.bindMemory(to: UInt8.self).baseAddress, s.count, a.bindMemory(to: UInt8.self).baseAddress,
                         a.count, guessProtected ? 1 : 0, &blob, blob.count, &length)
            }
        }
        guard rc == 0 else { throw try mapped(rc) }
        return Array(blob.prefix(length))
    }

    public func unseal(_ blob: [UInt8], auth: SecureBytes) throws(ChipError) -> SecureBytes {
        var length = 0
        var out = [UInt8](repeating: 0, count: Int(TPM_SEAL_SECRET_MAX))
        let rc = auth.withUnsafeBytes { a in
            tpm_unseal(location, blob, blob.count, a.bindMemory(to: UInt8.self).baseAddress, a.count, &out, out.count, &length)
        }
        guard rc == 0 else {
            Sodium.wipe(&out)
            throw try mapped(rc)
        }
        var secret = Array(out.prefix(length))
        Sodium.wipe(&out)
        do {
            return try SecureBytes.consuming(&secret)
        } catch {
            throw .failed(code: 0)
        }
    }

    public func check(_ blob: [UInt8]) throws(ChipError) {
        let rc = tpm_seal_check(location, blob, blob.count)
        guard rc == 0 else { throw ChipError.from(rc) }
    }

    public func status() throws(ChipError) -> ChipStatus {
        var s = tpm_seal_status()
        let rc = tpm_seal_status(location, &s)
        guard rc == 0 else { throw ChipError.from(rc) }
        return ChipStatus(failures: Int(s.lockout_counter), maxTries: Int(s.max_tries), interval: Int(s.interval),
                          inLockout: s.in_lockout != 0, lockoutArmed: s.lockout_auth_set != 0)
    }

    /// A lockout answer carries how long it lasts, which only `status` knows.
    private func mapped(_ rc: UInt32) throws(ChipError) -> ChipError {
        let error = ChipError.from(rc)
        guard case .lockedOut = error else { return error }
        return .lockedOut(retryAfter: (try? status().retryAfter) ?? 0)
    }
}

extension ChipError {
    /// What a TSS2 response code means here. TPM answers (layer 0) are read as
    /// TPM 2.0 Part 2 §6.6 lays them out: format one (bit 7) carries a
    /// parameter, handle or session number beside its error number.
    static func from(_ rc: UInt32) -> ChipError {
        let layer = rc >> 16, base = rc & 0xFFFF
        // TSS2_TCTI_RC_LAYER (the loader too), and ESAPI's "no connection" (8) or "I/O error" (10).
        if layer == 10 || (layer == 7 && (base == 8 || base == 10)) { return .unreachable(tctiReason(rc)) }
        guard layer == 0 else { return .failed(code: rc) }
        if rc & 0x80 != 0 {
            switch rc & 0x3F {
            case 0x0E, 0x22: return .wrongAuth          // TPM_RC_AUTH_FAIL, TPM_RC_BAD_AUTH
            case 0x1F: return .notThisChip              // TPM_RC_INTEGRITY: sealed under another primary
            default: return .failed(code: rc)
            }
        }
        if rc == 0x921 { return .lockedOut(retryAfter: 0) }  // TPM_RC_LOCKOUT
        return .failed(code: rc)
    }

    private static func tctiReason(_ rc: UInt32) -> String {
        "no TPM could be reached (TSS2 code 0x\(String(rc, radix: 16)); no device, or no permission: on Debian, be in group tss)"
    }
}

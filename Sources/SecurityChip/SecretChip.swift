import SodiumKit

/// A security chip that keeps a small secret bound to this computer: it
/// releases it only to the right `auth`, and only on the chip that sealed it.
/// `TPMChip` is the real one (TPM 2.0); tests of the broker use fakes.
/// docs/key-hierarchy.md ("Bound to this computer") says what is sealed.
public protocol SecretChip: Sendable {
    /// Where the chip is reached (a TCTI such as "device:/dev/tpmrm0"), for logs.
    var location: String { get }
    /// Seals `secret` under `auth`. `guessProtected`: wrong `auth` values count
    /// towards the chip's lockout (for an auth derived from a PIN).
    func seal(_ secret: SecureBytes, auth: SecureBytes, guessProtected: Bool) throws(ChipError) -> [UInt8]
    /// Opens what `seal` made, with the same `auth`.
    func unseal(_ blob: [UInt8], auth: SecureBytes) throws(ChipError) -> SecureBytes
    /// Whether this chip, as it is now, sealed `blob`, asked without its auth
    /// (no guess is counted): `.notThisChip` when another chip did, or this one before it was cleared.
    func check(_ blob: [UInt8]) throws(ChipError)
    /// The chip's guessing limits as they are now.
    func status() throws(ChipError) -> ChipStatus
}

public enum ChipError: Error, Equatable, Sendable {
    /// The chip cannot be reached: no device, no permission (on Debian the
    /// user must be in group `tss`), or its library could not be loaded.
    case unreachable(String)
    /// `auth` was wrong; the chip counted it.
    case wrongAuth
    /// The chip refuses every guess-protected secret for about `retryAfter` seconds.
    case lockedOut(retryAfter: Int)
    /// The blob was not sealed by this chip, or the chip was cleared since.
    case notThisChip
    /// Anything else the chip or its library answered (a TSS2 response code).
    case failed(code: UInt32)
}

/// The chip's dictionary-attack state (TPM2_PT_LOCKOUT_* and TPMA_PERMANENT).
public struct ChipStatus: Equatable, Sendable {
    /// Wrong answers it counts now, and how many it takes to lock out.
    public var failures: Int
    public var maxTries: Int
    /// Seconds for one counted failure to be forgiven.
    public var interval: Int
    public var inLockout: Bool
    /// The machine's owner set a lockout authorization: without one, any
    /// program that reaches the chip can reset its count, so the lockout binds nobody.
    public var lockoutArmed: Bool

    public init(failures: Int, maxTries: Int, interval: Int, inLockout: Bool, lockoutArmed: Bool) {
        self.failures = failures
        self.maxTries = maxTries
        self.interval = interval
        self.inLockout = inLockout
        self.lockoutArmed = lockoutArmed
    }

    /// Seconds until the chip takes a guess again: one failure is forgiven per
    /// `interval`, and it takes guesses once fewer than `maxTries` are counted.
    public var retryAfter: Int {
        guard inLockout || failures >= maxTries else { return 0 }
        return max(1, (failures - maxTries + 1) * max(interval, 1))
    }
}

import SecurityChip
import VaultProtocol
import VaultStore

/// How the vault's wraps are bound to this computer's security chip (the
/// TPM; docs/key-hierarchy.md, "Bound to this computer"). Decided once at
/// start by the composition root from `tpm = "auto" | "required" | "off"`
/// and whether a chip answers.
public struct ChipBinding: Sendable {
    /// The chip that opens wraps bound to it; nil when none answers.
    public var chip: (any SecretChip)?
    /// New wraps are bound to `chip` (`auto` with a chip, `required`); a wrap
    /// bound otherwise is remade to match the next time the vault key and its
    /// inputs are in hand.
    public var bindsNewWraps: Bool
    /// Why no chip is used, in the person's words (nil when one is, or with `tpm = "off"`).
    public var unavailable: LocalizedText?

    public init(chip: (any SecretChip)?, bindsNewWraps: Bool, unavailable: LocalizedText? = nil) {
        self.chip = chip
        self.bindsNewWraps = bindsNewWraps && chip != nil
        self.unavailable = unavailable
    }

    /// No chip: wraps are made and opened as before the TPM layer (tests, `tpm = "off"` without one).
    public static let none = ChipBinding(chip: nil, bindsNewWraps: false)

    /// The chip new wraps are bound to, if any.
    var sealingChip: (any SecretChip)? { bindsNewWraps ? chip : nil }

    /// A wrap bound otherwise than the policy says: remade when it next opens.
    func needsRebinding(_ row: KeyslotRow) -> Bool { Keyslot.isBoundToChip(row) != bindsNewWraps }
}

extension ChipBinding {
    /// What `status` says of the chip, in one sentence: what it refused, why
    /// none is used, that it comes in with the next PIN (`anyWrapUnbound`:
    /// a wrap of the vault key is not bound to it yet), or that it is in use
    /// and, with a PIN, whether its guess limit binds anyone (`lockoutArmed`,
    /// asked only then: nil when the chip does not say).
    func protection(refusal: ChipError?, anyWrapUnbound: Bool, hasPIN: Bool,
                    lockoutArmed: (any SecretChip) -> Bool?) -> LocalizedText? {
        if let refusal { return refusal.failure.message }
        guard bindsNewWraps, let chip else { return unavailable }
        if anyWrapUnbound { return Messages.chipFromNextPIN }
        let inUse = Messages.chipInUse(withPIN: hasPIN)
        guard hasPIN, let armed = lockoutArmed(chip), !armed else { return inUse }
        return LocalizedText(en: inUse.en + " " + Messages.chipLockoutNotArmed.en, nb: inUse.nb + " " + Messages.chipLockoutNotArmed.nb)
    }
}

/// Whether the chip's lockout binds anyone (its owner set a lockout
/// authorization), for `status`: asked of the chip at most once a minute.
/// Each ask is a round trip to the TPM, which the whole system shares, made
/// on the actor; an app polling `status`, or asking in a loop, must not make
/// one per request. (The lockout before a PIN is asked is read afresh each
/// time: `Vault.chipLockout`.)
struct ChipLockoutWatch {
    static let askedEvery: Double = 60
    private var seen: (armed: Bool, at: Double)?

    mutating func armed(_ chip: any SecretChip, now: Double) -> Bool? {
        if let seen, now - seen.at < Self.askedEvery { return seen.armed }
        guard let status = try? chip.status() else { return nil }
        seen = (status.lockoutArmed, now)
        return status.lockoutArmed
    }
}

/// What a refusal of the chip means to the person, in one sentence with a way on.
extension ChipError {
    var failure: VaultFailure {
        switch self {
        case .lockedOut(let seconds):
            return VaultFailure(.lockedOut, message: Messages.chipLockedOut(seconds: seconds),
                                extra: ["retry_after": .int(Int64(seconds))])
        case .notThisChip:
            return VaultFailure(.factorUnavailable, message: Messages.chipReplaced)
        case .unreachable:
            return VaultFailure(.factorUnavailable, message: Messages.chipUnreachable)
        case .wrongAuth, .failed:
            return VaultFailure(.factorUnavailable, message: Messages.chipFailed)
        }
    }

    /// The audit's word for it.
    var auditOutcome: String {
        switch self {
        case .lockedOut: "chip_locked_out"
        case .notThisChip: "chip_replaced"
        case .unreachable: "chip_unreachable"
        case .wrongAuth: "failed"
        case .failed: "chip_failed"
        }
    }
}

import VaultFactor
import VaultProtocol

/// What a factor's end means: the failure a request gets and the audit log's
/// word for it. Plain values, shared by unlocking, enrolling and the broker's
/// questions.
extension FactorError {
    func failure(whenNotInteractive locked: @autoclosure () -> VaultFailure) -> VaultFailure {
        switch self {
        case .cancelled, .pressed: return VaultFailure(.cancelled)
        case .noMatch: return .noMatch(attemptsLeft: 0)
        case .tooManyAttempts:
            return VaultFailure(.noMatch, message: Messages.tooManyMisses, extra: ["attempts_left": 0])
        case .unavailable(let reason): return VaultFailure(.factorUnavailable, message: reason)
        case .rejected(let reason): return VaultFailure(.badRequest, message: reason)
        case .notInteractive: return locked()
        case .timeout:
            return VaultFailure(.timeout, message: Messages.noAnswerInTime)
        }
    }

    /// The audit log's word for how the factor ended.
    var auditOutcome: String {
        switch self {
        case .cancelled: return "cancelled"
        case .noMatch: return "no_match"
        case .tooManyAttempts: return "too_many_attempts"
        case .unavailable: return "unavailable"
        case .rejected: return "rejected"
        case .notInteractive: return "not_interactive"
        case .timeout: return "timeout"
        case .pressed(.wayIn): return "chose_other"
        case .pressed(.cancel): return "cancelled"
        }
    }
}

extension VaultFailure {
    /// A factor whose enrollment changed (new fingerprints): its record was dropped.
    static func enrollmentChanged(_ d: FactorDescriptor) -> VaultFailure {
        if let changed = d.changed { return VaultFailure(.enrollmentChanged, message: changed) }
        let name = d.displayName
        return VaultFailure(.enrollmentChanged, message: LocalizedText(
            en: "\(name.en) on this computer has changed, so it was turned off. Use another way in, then set \(name.en) up again.",
            nb: "\(name.nb) på denne datamaskinen er endret og ble derfor slått av. Bruk en annen måte inn, og sett opp \(name.nb) igjen."))
    }
}

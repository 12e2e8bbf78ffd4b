import SodiumKit
import VaultFactor
import VaultProtocol

/// How one factor's turn in an unlock ended (`Vault.attempt`), for the
/// unlock's loop (`Vault.runPolicy`, which asks `UnlockRun` what comes next).
enum UnlockAttempt {
    case opened(SecureBytes)
    /// This factor can't open the vault now; try the next one.
    case next(VaultFailure)
    /// Stop the whole unlock (the client can't answer questions, or the person does not want in).
    case stop(VaultFailure)
    /// The person pressed another way in (a button of the fingerprint
    /// dialog): a later factor of the policy, or `loginChoice`.
    case chose(String)

    /// The value of the “Use BankID or Vipps” button (not a factor id: those have no colon).
    static let loginChoice = ":login"

    /// What a factor's refusal (`error`, thrown by its `verify`) means for this
    /// unlock. `options`: the buttons its dialog offered; `locked`: what a
    /// client that cannot answer questions is told.
    init(refused error: FactorError, offering options: [ChoiceOption], locked: @autoclosure () -> VaultFailure) {
        switch error {
        case .notInteractive:
            self = .stop(locked())
        case .pressed(.wayIn(let choice)):
            self = .chose(choice)
        case .pressed(.cancel):
            // Cancel on the fingerprint offers the PIN when there is one
            // (seed 001); a client that went away gets no dialog from it
            // (its conversation answers every question as cancelled).
            // Otherwise: the person does not want in now.
            if let other = options.first(where: { $0.value != UnlockAttempt.loginChoice }) {
                self = .chose(other.value)
            } else {
                self = .stop(VaultFailure(.cancelled))
            }
        default:
            self = .next(error.failure(whenNotInteractive: locked()))
        }
    }

    /// Whether a refusal is written to the audit log: all but a client that
    /// cannot answer (nothing was asked of the person).
    static func audits(_ error: FactorError) -> Bool { error != .notInteractive }

    /// Too many failed scans is the fingerprint's fallback: after it the PIN or
    /// a login is needed once before it reopens the vault (as on phones), so
    /// its soft box goes.
    static func dropsSoftBox(after error: FactorError, presence: Bool) -> Bool { presence && error == .tooManyAttempts }
}

import VaultFactor
import VaultProtocol

/// Changing or turning off a secret factor (the PIN) asks for the current
/// one first, as LUKS, Android and `gpg --passwd` do: an unlocked vault shows
/// only that someone was there (a fingerprint, a PIN an hour ago), not that
/// the person at the keyboard knows the PIN. The check is the unlock's own
/// (`attempt`): counted durably before it is checked, and throttled.
extension Vault {
    /// Asks for `factor`'s current secret unless it was typed for this very
    /// request (`openingsBefore`: `hardOpenings` before the request unlocked).
    func checkCurrentSecret(_ factor: any UnlockFactor, openingsBefore: Int,
                            _ conversation: any ClientConversation) async throws(VaultFailure) {
        let d = factor.descriptor
        guard d.contribution == .lowEntropySecret, let slot = keyslots[d.id.rawValue] else { return }
        if hardOpenings != openingsBefore { return }
        // A client that cannot be asked cannot give it: say so, not "locked".
        guard conversation.isInteractive else { throw .badRequest(Messages.currentPINNeedsPerson) }
        let asking = CurrentSecretConversation(base: conversation, prompt: Messages.currentPINFirst)
        switch await attempt(factor, slot: slot, asking) {
        case .opened:
            return
        case .next(let failure), .stop(let failure):
            audit.record("change_secret", factor: d.id.rawValue, outcome: "current_not_given", requester: conversation.requester)
            throw failure
        case .chose:
            throw VaultFailure(.cancelled)
        }
    }
}

/// The person's conversation, with the secret question reworded: “first
/// enter the PIN you use now”, not the unlock's “Enter your PIN”.
struct CurrentSecretConversation: ClientConversation {
    let base: any ClientConversation
    let prompt: LocalizedText

    var language: Language { base.language }
    var isInteractive: Bool { base.isInteractive }
    var requester: Requester { base.requester }
    var rateLimitKey: String { base.rateLimitKey }
    func show(_ message: LocalizedText) async { await base.show(message) }
    func askSecret(_ ignored: LocalizedText) async throws(FactorError) -> SecureBytes { try await base.askSecret(prompt) }
    func confirm(_ question: LocalizedText) async throws(FactorError) -> Bool { try await base.confirm(question) }
    func confirmLoss(_ question: LocalizedText) async throws(FactorError) -> Bool { try await base.confirmLoss(question) }
    func openURL(_ url: String, _ text: LocalizedText) async throws(FactorError) { try await base.openURL(url, text) }
    func showWhile<T: Sendable>(_ message: LocalizedText, offering options: [ChoiceOption],
                                _ work: @escaping @Sendable () async -> T) async -> Waited<T> {
        await base.showWhile(message, offering: options, work)
    }
    func waitForBrowser<T: Sendable>(_ message: LocalizedText, _ work: @escaping @Sendable () async -> T) async throws(FactorError) -> T {
        try await base.waitForBrowser(message, work)
    }
}

@_exported import VaultProtocol

/// The factor's side of the conversation with the person, in the spirit of PAM's
/// conversation function. The vault relays each call to the person's client as a
/// `prompt` event and waits for the answer; a client that is not interactive
/// makes every question throw `.notInteractive`.
public protocol FactorConversation: Sendable {
    var language: Language { get }
    /// Shows a message (progress, "Touch the reader"). Does not wait for an answer.
    func show(_ message: LocalizedText) async
    /// Asks for a secret (typed without echo). Cancel throws `.cancelled`.
    func askSecret(_ prompt: LocalizedText) async throws(FactorError) -> SecureBytes
    /// Asks a yes/no question.
    func confirm(_ prompt: LocalizedText) async throws(FactorError) -> Bool
    /// Asks the client to open a URL in the system browser (an `open_url`
    /// prompt). Does not wait: the answer arrives elsewhere (a loopback redirect).
    func openURL(_ url: String, _ text: LocalizedText) async throws(FactorError)
    /// Shows `message` while `work` runs (a fingerprint scan) and closes it
    /// when `work` ends: the factor waits for something other than an answer.
    /// A conversation with its own dialog (vaultd's pinentry) gives it buttons
    /// for the other ways in; when the person presses one, `work` is cancelled
    /// and awaited, and this throws `.cancelled`.
    func showWhile<T: Sendable>(_ message: LocalizedText, _ work: @escaping @Sendable () async -> T) async throws(FactorError) -> T
    /// The wait for a login in the browser (`work`: the redirect, minutes at
    /// most). vaultd's own dialog shows `message` with Cancel, so a person
    /// whose browser tab closed has a way back at once; a Cancel cancels
    /// `work` and throws `.cancelled`. A client that relays prompts has its
    /// own way to stop (it closes the connection), so by default this only waits.
    func waitForBrowser<T: Sendable>(_ message: LocalizedText, _ work: @escaping @Sendable () async -> T) async throws(FactorError) -> T
}

extension FactorConversation {
    /// For conversations that have no browser to offer: show the address as text.
    public func openURL(_ url: String, _ text: LocalizedText) async throws(FactorError) {
        await show(LocalizedText(en: "\(text.en) \(url)", nb: "\(text.nb) \(url)"))
    }

    /// For conversations without a dialog of their own: only the wait (the
    /// `open_url` prompt before it said what to do).
    public func waitForBrowser<T: Sendable>(_ message: LocalizedText, _ work: @escaping @Sendable () async -> T) async throws(FactorError) -> T {
        await work()
    }

    /// For conversations without a dialog of their own: the message, then the wait.
    public func showWhile<T: Sendable>(_ message: LocalizedText, _ work: @escaping @Sendable () async -> T) async throws(FactorError) -> T {
        await show(message)
        return await work()
    }
}

/// A conversation that has a new secret typed twice in one dialog (pinentry's
/// `SETREPEAT`), which says a mismatch itself.
public protocol RepeatingSecretConversation: FactorConversation {
    /// The new secret, or nil when the two entries differed (already said to the person).
    func askNewSecret(_ prompt: LocalizedText, again: LocalizedText, mismatch: LocalizedText) async throws(FactorError) -> SecureBytes?
}

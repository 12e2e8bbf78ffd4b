import Locking
import VaultFactor
import VaultProtocol

/// How a wait shown with buttons (`ClientConversation.showWhile(_:offering:_:)`) ended.
public enum Waited<T: Sendable>: Sendable {
    /// The work ended first; the dialog was closed.
    case done(T)
    /// The person pressed the button of this option; the work was cancelled.
    case chose(String)
    /// The person pressed Cancel (or the client went away); the work was cancelled.
    case cancelled
}

extension ClientConversation {
    /// Without a dialog of its own (the prompt relay): the message, then the
    /// wait, as before; the other ways in come after it in the policy's order.
    public func showWhile<T: Sendable>(_ message: LocalizedText, offering options: [ChoiceOption],
                                       _ work: @escaping @Sendable () async -> T) async -> Waited<T> {
        await show(message)
        return .done(await work())
    }
}

/// Said when the client behind a connection has gone: its dialogs close and
/// its later dialogs are not shown. One per connection; a dialog watches it
/// only while it is open.
public final class Hangup: Sendable {
    private struct State {
        var fired = false
        var next = 0
        var watchers: [Int: @Sendable () -> Void] = [:]
    }
    private let state = Locked(State())

    public init() {}

    public var hasFired: Bool { state.withLock { $0.fired } }

    /// Runs `body` when the client goes; at once (returning nil) if it has gone already.
    public func watch(_ body: @escaping @Sendable () -> Void) -> Int? {
        let token = state.withLock { s -> Int? in
            guard !s.fired else { return nil }
            s.next += 1
            s.watchers[s.next] = body
            return s.next
        }
        if token == nil { body() }
        return token
    }

    public func unwatch(_ token: Int?) {
        guard let token else { return }
        _ = state.withLock { $0.watchers.removeValue(forKey: token) }
    }

    public func fire() {
        let all = state.withLock { s -> [@Sendable () -> Void] in
            s.fired = true
            defer { s.watchers.removeAll() }
            return Array(s.watchers.values)
        }
        for body in all { body() }
    }
}

/// The conversation a presence factor (the fingerprint) gets during an
/// unlock: its wait is shown with buttons for the other ways in the policy
/// has left; a button pressed ends the factor with `FactorError.pressed`,
/// which `attempt` reads.
struct OfferingConversation: FactorConversation {
    let base: any ClientConversation
    let options: [ChoiceOption]

    var language: Language { base.language }
    func show(_ message: LocalizedText) async { await base.show(message) }
    func askSecret(_ prompt: LocalizedText) async throws(FactorError) -> SecureBytes { try await base.askSecret(prompt) }
    func confirm(_ prompt: LocalizedText) async throws(FactorError) -> Bool { try await base.confirm(prompt) }
    func openURL(_ url: String, _ text: LocalizedText) async throws(FactorError) { try await base.openURL(url, text) }
    func waitForBrowser<T: Sendable>(_ message: LocalizedText, _ work: @escaping @Sendable () async -> T) async throws(FactorError) -> T {
        try await base.waitForBrowser(message, work)
    }

    func showWhile<T: Sendable>(_ message: LocalizedText, _ work: @escaping @Sendable () async -> T) async throws(FactorError) -> T {
        switch await base.showWhile(message, offering: options, work) {
        case .done(let value): return value
        case .chose(let value): throw .pressed(.wayIn(value))
        case .cancelled: throw .pressed(.cancel)
        }
    }
}

import Locking
import VaultFactor

/// A factor conversation that records what the factor shows (and can react to
/// it, as a person would: put a finger on the reader when asked to touch it)
/// and answers secrets from a script. Made without secrets, it answers no
/// question (`notInteractive`): the fingerprint factor asks none. Made with
/// them, each `askSecret` takes the next; nil, or none left, is Cancel.
public final class ScriptedConversation: FactorConversation, Sendable {
    public let language: Language
    private let answersQuestions: Bool
    private let state: Locked<(secrets: [String?], shown: [LocalizedText], asked: [String])>
    private let onShow: @Sendable (LocalizedText) -> Void

    public init(language: Language = .en, onShow: @escaping @Sendable (LocalizedText) -> Void = { _ in }) {
        self.language = language
        self.onShow = onShow
        answersQuestions = false
        state = Locked(([], [], []))
    }

    /// Answers each secret question with the next of `secrets`, and every yes/no question with yes.
    public init(_ secrets: [String?], language: Language = .en) {
        self.language = language
        onShow = { _ in }
        answersQuestions = true
        state = Locked((secrets, [], []))
    }

    /// Everything shown, in order.
    public var shownTexts: [LocalizedText] { state.withLock { $0.shown } }
    /// The English side of everything shown.
    public var shown: [String] { shownTexts.map(\.en) }
    /// The secret questions asked (English), in order.
    public var asked: [String] { state.withLock { $0.asked } }

    public func show(_ message: LocalizedText) async {
        state.withLock { $0.shown.append(message) }
        onShow(message)
    }

    public func askSecret(_ prompt: LocalizedText) async throws(FactorError) -> SecureBytes {
        guard answersQuestions else { throw .notInteractive }
        let next: String? = state.withLock { s in
            s.asked.append(prompt.en)
            return s.secrets.isEmpty ? nil : s.secrets.removeFirst()
        }
        guard let next else { throw .cancelled }
        do { return try SecureBytes.utf8(next) } catch { throw .cancelled }
    }

    public func confirm(_ prompt: LocalizedText) async throws(FactorError) -> Bool {
        guard answersQuestions else { throw .notInteractive }
        return true
    }
}

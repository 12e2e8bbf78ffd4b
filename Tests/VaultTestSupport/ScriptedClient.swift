import Locking
import VaultCore
import VaultFactor

/// A client conversation that answers from a script, as a person at the app
/// would, and records what it was shown and asked. Each kind of question has
/// its own queue: secrets (nil: Cancel), yes/no answers (nil: Cancel), choices,
/// and the buttons pressed in a dialog shown while a presence factor waits.
/// When a queue runs out: a secret is Cancel unless `thenSecret` is set, a
/// yes/no is `thenConfirm` (no, by default; nil: Cancel), a choice throws
/// `chooseError`, and a wait runs to its end.
public final class ScriptedClient: ClientConversation, Sendable {
    public let language: Language
    public let isInteractive: Bool
    /// One app, as a socket peer would be: the sessions it logs in to are its own.
    public let requester: Requester
    public static let testApp = Requester(pid: 1, uid: 0, executable: "/usr/bin/test-app",
                                          app: AppIdentity(kind: .executable, name: "/usr/bin/test-app"))
    /// What a choice fails with when the script has no choice left.
    public let chooseError: FactorError
    private let thenSecret: String?
    private let thenConfirm: Bool?
    /// How long the "person" takes to answer each secret or yes/no question.
    private let delay: Duration?

    private struct Script {
        var secrets: [String?]
        var confirms: [Bool?]
        var choices: [String]
        /// The buttons pressed while a presence factor waits (nil: none; "cancel": Cancel).
        var presses: [String?]
        var shown: [String] = []
        /// The secret and yes/no questions, in order (English).
        var prompts: [String] = []
        var secretsAsked = 0
        var confirmQuestions: [String] = []
        var offeredChoices: [[String]] = []
        /// The text of each choice (English).
        var choicePrompts: [String] = []
        var offeredButtons: [[String]] = []
    }
    private let script: Locked<Script>

    public init(secrets: [String?] = [], confirms: [Bool?] = [], choices: [String] = [], interactive: Bool = true,
                presses: [String?] = [], chooseError: FactorError = .cancelled,
                thenSecret: String? = nil, thenConfirm: Bool? = false, language: Language = .en, delay: Duration? = nil,
                requester: Requester = ScriptedClient.testApp) {
        self.requester = requester
        self.isInteractive = interactive
        self.chooseError = chooseError
        self.thenSecret = thenSecret
        self.thenConfirm = thenConfirm
        self.language = language
        self.delay = delay
        script = Locked(Script(secrets: secrets, confirms: confirms, choices: choices, presses: presses))
    }

    public var shown: [String] { script.withLock { $0.shown } }
    /// How many secrets were asked for.
    public var asked: Int { script.withLock { $0.secretsAsked } }
    public var prompts: [String] { script.withLock { $0.prompts } }
    public var confirmQuestions: [String] { script.withLock { $0.confirmQuestions } }
    public var offeredChoices: [[String]] { script.withLock { $0.offeredChoices } }
    public var choicePrompts: [String] { script.withLock { $0.choicePrompts } }
    public var offeredButtons: [[String]] { script.withLock { $0.offeredButtons } }

    public func show(_ message: LocalizedText) async { script.withLock { $0.shown.append(message.en) } }

    public func askSecret(_ prompt: LocalizedText) async throws(FactorError) -> SecureBytes {
        guard isInteractive else { throw .notInteractive }
        let next: String? = script.withLock { s in
            s.secretsAsked += 1
            s.prompts.append(prompt.en)
            return s.secrets.isEmpty ? thenSecret : s.secrets.removeFirst()
        }
        if let delay { try? await Task.sleep(for: delay) }
        guard let next else { throw .cancelled }
        do { return try SecureBytes.utf8(next) } catch { throw .cancelled }
    }

    public func confirm(_ prompt: LocalizedText) async throws(FactorError) -> Bool {
        guard isInteractive else { throw .notInteractive }
        let answer: Bool? = script.withLock { s in
            s.prompts.append(prompt.en)
            s.confirmQuestions.append(prompt.en)
            return s.confirms.isEmpty ? thenConfirm : s.confirms.removeFirst()
        }
        if let delay { try? await Task.sleep(for: delay) }
        guard let answer else { throw .cancelled }
        return answer
    }

    public func choose(_ prompt: LocalizedText, options: [ChoiceOption]) async throws(FactorError) -> String {
        guard isInteractive else { throw .notInteractive }
        let pick: String? = script.withLock { s in
            s.offeredChoices.append(options.map(\.value))
            s.choicePrompts.append(prompt.en)
            return s.choices.isEmpty ? nil : s.choices.removeFirst()
        }
        guard let pick else { throw chooseError }
        return pick
    }

    public func showWhile<T: Sendable>(_ message: LocalizedText, offering options: [ChoiceOption],
                                       _ work: @escaping @Sendable () async -> T) async -> Waited<T> {
        await show(message)
        let press = script.withLock { s -> String?? in
            s.offeredButtons.append(options.map(\.value))
            return s.presses.isEmpty ? .none : s.presses.removeFirst()
        }
        switch press {
        case .some(.some("cancel")): return .cancelled
        case .some(.some(let value)): return .chose(value)
        default: return .done(await work())
        }
    }
}

/// The `VaultFailure` `body` threw (nil when it returned); any other error is
/// an `internal` failure naming it, so a test asserting a code sees what came instead.
public func failure(_ body: () async throws -> Void) async -> VaultFailure? {
    do {
        try await body()
        return nil
    } catch let f as VaultFailure {
        return f
    } catch {
        return VaultFailure(.internal, message: LocalizedText(en: "unexpected \(error)", nb: "uventet \(error)"))
    }
}

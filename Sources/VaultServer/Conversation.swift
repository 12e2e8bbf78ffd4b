import VaultCore
import VaultFactor
import VaultProtocol
import VaultWire

/// How a person answered a prompt.
enum PromptAnswer: Sendable {
    case value(JSON)
    /// A string answer, in secure memory from the read buffer on (`answer`'s
    /// `value` never becomes a Swift String on its way to a PIN check).
    case secret(SecureBytes)
    case cancelled
    case timedOut
}

/// The factor conversation for one request of one client: each question
/// becomes a `prompt` event carrying the request's id, answered by an `answer` op.
struct ServerConversation: ClientConversation {
    let client: Connection
    let requestID: JSON
    let promptTimeout: Int64
    /// The authorization-endpoint origins of the configured providers.
    let openableOrigins: @Sendable () async -> [String]

    var language: Language { client.language }
    var isInteractive: Bool { client.interactive }
    var requester: Requester { client.requester }

    func send(_ prompt: Prompt) {
        client.link.send(Response.prompt(id: requestID, prompt: prompt).encoded())
    }

    func show(_ message: LocalizedText) async {
        guard isInteractive else { return }
        send(Prompt(pid: client.newPromptID(), kind: .message, text: message.text(language)))
    }

    func ask(_ kind: Prompt.Kind, _ text: LocalizedText, extra: [String: JSON] = [:]) async throws(FactorError) -> JSON {
        switch try await prompt(kind, text, extra: extra) {
        case .value(let v): return v
        // Not a secret prompt (a confirm or a choice): its answer may be a String.
        case .secret(let bytes): return .string(bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) })
        case .cancelled: throw .cancelled
        case .timedOut: throw .timeout
        }
    }

    /// Sends a prompt and waits for its answer (or its timeout).
    func prompt(_ kind: Prompt.Kind, _ text: LocalizedText, extra: [String: JSON] = [:]) async throws(FactorError) -> PromptAnswer {
        guard isInteractive else { throw .notInteractive }
        let pid = client.newPromptID()
        let client = self.client
        let timeout = Duration.seconds(promptTimeout)
        let timer = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { client.resolve(pid, with: .timedOut) }
        }
        let prompt = Prompt(pid: pid, kind: kind, text: text.text(language), extra: extra)
        let answer = await client.wait(for: pid) { send(prompt) }
        timer.cancel()
        return answer
    }

    func askSecret(_ text: LocalizedText) async throws(FactorError) -> SecureBytes {
        // A PIN (current or new) is never relayed to a sandboxed or unidentified
        // app: it would learn it. Such an app lets vaultd ask in its own dialog
        // (`"prompter": "vault"`), or gets `locked`.
        guard !requester.isConfined else { throw .notInteractive }
        switch try await prompt(.secret, text) {
        case .secret(let bytes): return bytes
        case .timedOut: throw .timeout
        case .value, .cancelled: throw .cancelled
        }
    }

    func openURL(_ url: String, _ text: LocalizedText) async throws(FactorError) {
        guard isInteractive else { throw .notInteractive }
        // The login's launch page leads once to its whole request: a sandboxed
        // or unidentified app sent it would open it before the person's browser
        // and log in there as whoever it likes (the person's browser, coming
        // second, only ends the login). Such an app lets vaultd open the page
        // (`"prompter": "vault"`).
        guard !requester.isConfined else { throw .notInteractive }
        // The client opens only a URL on one of these origins (docs/protocol.md):
        // a plugin or anything else that names another page gets it printed.
        let origins = await openableOrigins().map { JSON.string($0) }
        send(Prompt(pid: client.newPromptID(), kind: .openURL, text: text.text(language),
                    extra: ["url": .string(url), "origins": .array(origins)]))
    }

    func choose(_ prompt: LocalizedText, options: [ChoiceOption]) async throws(FactorError) -> String {
        let values = options.map { o -> JSON in ["value": .string(o.value), "label": .string(o.label.text(language))] }
        switch try await ask(.choice, prompt, extra: ["options": .array(values)]) {
        case .string(let s) where options.contains(where: { $0.value == s }): return s
        default: throw .cancelled
        }
    }

    func confirm(_ prompt: LocalizedText) async throws(FactorError) -> Bool {
        try await confirm(prompt, extra: [:])
    }

    /// Says `"loses": true` with it: a client drawing the question makes No its default.
    func confirmLoss(_ prompt: LocalizedText) async throws(FactorError) -> Bool {
        try await confirm(prompt, extra: ["loses": true])
    }

    private func confirm(_ prompt: LocalizedText, extra: [String: JSON]) async throws(FactorError) -> Bool {
        // A confined app's “yes” is not the person's: it could answer itself.
        guard !requester.isConfined else { throw .notInteractive }
        switch try await ask(.confirm, prompt, extra: extra) {
        case .bool(let b): return b
        case .string(let s): return ["yes", "y", "ja", "j", "true"].contains(s.lowercased())
        default: return false
        }
    }
}

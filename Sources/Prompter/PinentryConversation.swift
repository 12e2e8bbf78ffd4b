import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Locking
import SodiumKit
import VaultCore
import VaultFactor
import VaultProtocol

/// The conversation for a client that said `"prompter": "vault"`: vaultd
/// asks the person itself, through pinentry, and the client only waits for
/// the answer to its request. What is typed goes from pinentry into secure
/// memory and never passes the client's socket.
public struct PinentryConversation: ClientConversation, RepeatingSecretConversation {
    public let language: Language
    public let requester: Requester
    let prompter: Prompter
    let display: PromptDisplay
    /// Fired when the asking client disconnects: its dialogs close, and no new one opens.
    let hangup: Hangup?
    let state = ConversationState()

    /// Says so even without a pinentry: a client that asked vaultd to prompt
    /// gets `factor_unavailable` with a sentence on how to install one, not
    /// a bare `locked`.
    public var isInteractive: Bool { true }

    public init(prompter: Prompter, language: Language, requester: Requester, display: PromptDisplay, hangup: Hangup? = nil) {
        self.hangup = hangup
        self.prompter = prompter
        self.language = language
        self.requester = requester
        self.display = display
    }

    /// A message shown on its own waits this long for a question it can go
    /// with: “That did not match” belongs in the next PIN dialog's error line,
    /// not in a dialog of its own before it.
    static let messageGrace: Duration = .milliseconds(300)

    public func show(_ message: LocalizedText) async {
        await show(message, onlyUntilAQuestion: false)
    }

    /// `onlyUntilAQuestion`: the message says what is happening now (“log in
    /// in your browser”); a question that follows means it is over, so the
    /// message is dropped rather than put on top of that question.
    func show(_ message: LocalizedText, onlyUntilAQuestion: Bool) async {
        guard hangup?.hasFired != true else { return }
        let generation = state.setPending(message.text(language), onlyUntilAQuestion: onlyUntilAQuestion)
        let dialog = self.dialog(.message, text: "", ok: Messages.dialogClose)
        let state = self.state
        Task {
            try? await Task.sleep(for: Self.messageGrace)
            guard let text = state.takePendingMessage(ifGeneration: generation) else { return }
            var d = dialog
            d.description += text
            _ = try? await self.present(d, preemptible: true)
        }
    }

    /// The wait of a fingerprint scan: “Touch the fingerprint reader” with a
    /// button per option (“Use PIN instead”, “Use BankID or Vipps”; pinentry
    /// has two besides Cancel), closed by vaultd itself when the scan ends.
    /// A button pressed first cancels the scan. A dialog that cannot be shown
    /// or times out leaves the scan running: the reader still works.
    public func showWhile<T: Sendable>(_ message: LocalizedText, offering options: [ChoiceOption],
                                       _ work: @escaping @Sendable () async -> T) async -> Waited<T> {
        guard hangup?.hasFired != true else { return .cancelled }
        let buttons = Array(options.prefix(2))
        var d = dialog(.confirm, text: message.text(language), ok: buttons.first?.label ?? Messages.dialogCancel)
        if buttons.count > 1 { d.notOK = buttons[1].label.text(language) }
        // No other way in: one button, Cancel.
        d.oneButton = buttons.isEmpty
        let dialog = d
        let closer = DialogCloser()
        return await withTaskGroup(of: WaitEvent<T>.self) { group in
            group.addTask { .done(await work()) }
            group.addTask {
                do throws(DialogFailure) {
                    return .answered(.success(try await self.present(dialog, closer: closer)))
                } catch {
                    return .answered(.failure(error))
                }
            }
            var result: Waited<T>?
            while let event = await group.next() {
                switch event {
                case .done(let value):
                    // The scan ended (match, no match, error): the dialog goes with it.
                    closer.close()
                    if result == nil { result = .done(value) }
                case .answered(let answer):
                    guard result == nil else { continue }
                    switch answer {
                    case .success(.ok): result = buttons.first.map { .chose($0.value) } ?? .cancelled
                    case .success(.notOK): result = buttons.count > 1 ? .chose(buttons[1].value) : .cancelled
                    case .success(.pin), .success(.tooSoon), .failure(.cancelled): result = .cancelled
                    case .failure: continue
                    }
                    group.cancelAll()
                }
            }
            return result ?? .cancelled
        }
    }

    /// The same wait without other ways to offer (turning fingerprint login on): Cancel only.
    public func showWhile<T: Sendable>(_ message: LocalizedText, _ work: @escaping @Sendable () async -> T) async throws(FactorError) -> T {
        switch await showWhile(message, offering: [], work) {
        case .done(let value): return value
        case .chose, .cancelled: throw .cancelled
        }
    }

    /// The wait for the browser's login: the same dialog, Cancel only. It
    /// closes by itself when the browser comes back; Cancel ends the login at
    /// once (a closed tab would otherwise wait out the redirect's minutes).
    public func waitForBrowser<T: Sendable>(_ message: LocalizedText, _ work: @escaping @Sendable () async -> T) async throws(FactorError) -> T {
        try await showWhile(message, work)
    }

    public func askSecret(_ prompt: LocalizedText) async throws(FactorError) -> SecureBytes {
        var d = dialog(.pin, text: prompt.text(language), ok: Messages.dialogOK)
        d.prompt = Messages.dialogPINLabel.text(language)
        d.error = state.takePendingForQuestion()
        switch try await run(d) {
        case .pin(let bytes, _): return bytes
        case .ok, .notOK, .tooSoon: throw .cancelled
        }
    }

    /// A new PIN typed twice in one dialog (`SETREPEAT`); pinentry says a
    /// mismatch itself. A flavour without SETREPEAT answers once, and the
    /// second entry is then asked in a dialog of its own.
    public func askNewSecret(_ prompt: LocalizedText, again: LocalizedText, mismatch: LocalizedText) async throws(FactorError) -> SecureBytes? {
        var d = dialog(.newPIN(again: again.text(language), mismatch: mismatch.text(language)), text: prompt.text(language), ok: Messages.dialogOK)
        d.prompt = Messages.dialogPINLabel.text(language)
        d.error = state.takePendingForQuestion()
        guard case .pin(let first, let repeated) = try await run(d) else { throw .cancelled }
        if repeated { return first }
        let second = try await askSecret(again)
        guard first.constantTimeEquals(second) else {
            await show(mismatch)
            return nil
        }
        return first
    }

    public func confirm(_ prompt: LocalizedText) async throws(FactorError) -> Bool {
        try await confirm(prompt, yes: Messages.dialogYes, no: Messages.dialogNo)
    }

    /// A yes/no question with named buttons (“Turn on” / “Not now”).
    public func confirm(_ prompt: LocalizedText, yes: LocalizedText, no: LocalizedText) async throws(FactorError) -> Bool {
        var d = dialog(.confirm, text: prompt.text(language), ok: yes)
        d.notOK = no.text(language)
        switch try await run(d) {
        case .ok: return true
        case .notOK: return false
        case .pin, .tooSoon: throw .cancelled
        }
    }

    /// Yes and No as `confirm`, with No the default (`Dialog.keepsNo`).
    public func confirmLoss(_ prompt: LocalizedText) async throws(FactorError) -> Bool {
        var d = dialog(.confirm, text: prompt.text(language), ok: Messages.dialogYes)
        d.notOK = Messages.dialogNo.text(language)
        d.keepsNo = true
        switch try await run(d) {
        case .ok: return true
        case .notOK: return false
        case .pin, .tooSoon: throw .cancelled
        }
    }

    /// “Allow ‘X’ to use your BankID session?”: Allow (OK), Only this time
    /// (pinentry's second button), Deny (Cancel, and closing the dialog).
    /// An app known only by its program gets a plain sentence saying so, and when to allow it.
    /// An app that shows the name of another app already allowed (a Flatpak
    /// may call itself anything) is said to be another app, by both ids.
    public func askGrant(_ question: GrantQuestion) async throws(FactorError) -> GrantAnswer {
        let app = question.app
        let name = AppName.display(app, language: language)
        var text = Messages.allowAppQuestion(Messages.appLabel(name), provider: question.provider).text(language)
        let namesakes = question.othersAllowed.filter { AppName.display($0, language: language) == name }
        if !namesakes.isEmpty {
            text += "\n\n" + Messages.sameNameAsAllowed(name, asking: app.name, allowed: namesakes.map(\.name)).text(language)
        }
        if !app.verified { text += "\n\n" + Messages.unverifiedApp(app.shortName).text(language) }
        if !question.allowed.isEmpty {
            text += "\n\n" + Messages.otherAppsAllowed(question.allowed.map { AppName.display($0, language: language) }).text(language)
        }
        // The dialog takes the keyboard the moment it appears, so an app can
        // raise it while the person types in another window and have their
        // Enter allow it: a Yes before the question could be read is not
        // taken; it is asked again, saying why, and closed after three.
        for early in 0..<Self.answersTooSoonBeforeClosing {
            let why = early == 0 ? "" : Messages.answeredBeforeRead.text(language) + "\n\n"
            var d = Dialog(kind: .confirm, title: Messages.dialogTitle.text(language), description: why + text,
                           ok: Messages.dialogAllow.text(language), notOK: Messages.dialogOnlyThisTime.text(language),
                           cancel: Messages.dialogDeny.text(language), timeout: prompter.timeout)
            d.readFirst = true
            switch try await run(d) {
            case .ok: return .allow
            case .notOK: return .once
            case .pin: return .deny
            case .tooSoon: continue
            }
        }
        throw .cancelled
    }

    /// A grant question answered too soon this many times in a row is closed (a No).
    static let answersTooSoonBeforeClosing = 3

    /// One button per option. pinentry has three (OK, not-OK, Cancel), so
    /// with more than two options the second button says “Other choices”
    /// and the next dialog offers the rest, one page after another.
    public func choose(_ prompt: LocalizedText, options: [ChoiceOption]) async throws(FactorError) -> String {
        // “Cancel” is pinentry's own button.
        let choices = options.filter { $0.value != "cancel" }
        guard !choices.isEmpty else { throw .cancelled }
        var index = 0
        while true {
            let remaining = choices.count - index
            var d = dialog(.confirm, text: prompt.text(language), ok: choices[index].label)
            if remaining == 2 {
                d.notOK = choices[index + 1].label.text(language)
            } else if remaining > 2 {
                d.notOK = Messages.dialogOtherChoices.text(language)
            }
            switch try await run(d) {
            case .ok: return choices[index].value
            case .notOK where remaining == 2: return choices[index + 1].value
            case .notOK where remaining > 2: index += 1
            default: throw .cancelled
            }
        }
    }

    /// vaultd opens the login page itself (`xdg-open`, on the client's
    /// display) and says so.
    public func openURL(_ url: String, _ text: LocalizedText) async throws(FactorError) {
        var env = display.environment(over: prompter.baseEnvironment)
        env["SESSIONVAULT_PINENTRY"] = nil
        if Prompter.resolve("xdg-open", path: env["PATH"]).map({ spawnDetached($0, [url], environment: env) }) == true {
            await show(text, onlyUntilAQuestion: true)
        } else {
            await show(LocalizedText(en: "\(text.en) \(url)", nb: "\(text.nb) \(url)"), onlyUntilAQuestion: true)
        }
    }

    /// A dialog of `kind` naming the app that asks, then `text`.
    func dialog(_ kind: Dialog.Kind, text: String, ok: LocalizedText) -> Dialog {
        let asking = state.appName(requester, language: language).map { Messages.appAsks($0) } ?? Messages.unknownAppAsks
        var description = asking.text(language) + "\n\n" + text
        // A message shown just before a question that is not a PIN goes on top of it.
        if kind == .confirm, let pending = state.takePendingForQuestion() {
            description = asking.text(language) + "\n\n" + pending + "\n\n" + text
        }
        return Dialog(kind: kind, title: Messages.dialogTitle.text(language), description: description,
                      ok: ok.text(language), cancel: Messages.dialogCancel.text(language), timeout: prompter.timeout)
    }

    /// Shows `d`, closed early if the client disconnects (or already has).
    func present(_ d: Dialog, preemptible: Bool = false, closer: DialogCloser = DialogCloser()) async throws(DialogFailure) -> DialogAnswer {
        let token = hangup?.watch { closer.close() }
        defer { hangup?.unwatch(token) }
        return try await prompter.show(d, on: display, preemptible: preemptible, closer: closer)
    }

    func run(_ d: Dialog) async throws(FactorError) -> DialogAnswer {
        do {
            return try await present(d)
        } catch {
            switch error {
            case .cancelled: throw .cancelled
            case .timeout: throw .timeout
            case .missing: throw .unavailable(Messages.pinentryMissing)
            case .broken: throw .unavailable(Messages.pinentryFailed)
            }
        }
    }
}

/// What finished first in `showWhile`: the work or the dialog.
enum WaitEvent<T: Sendable>: Sendable {
    case done(T)
    case answered(Result<DialogAnswer, DialogFailure>)
}

/// What one conversation remembers between its dialogs.
final class ConversationState: Sendable {
    private struct Inner {
        /// Messages not shown yet, each with whether a question drops it.
        var pending: [(text: String, onlyUntilAQuestion: Bool)] = []
        var generation = 0
        var appName: String??
    }
    private let inner = Locked(Inner())

    func setPending(_ text: String, onlyUntilAQuestion: Bool) -> Int {
        inner.withLock { s in
            // Two messages in a row are both said.
            s.pending.append((text, onlyUntilAQuestion))
            s.generation += 1
            return s.generation
        }
    }

    /// For a message dialog of its own: every pending message, if none came after `generation`'s.
    func takePendingMessage(ifGeneration generation: Int) -> String? {
        inner.withLock { s in
            guard generation == s.generation, !s.pending.isEmpty else { return nil }
            defer { s.pending = [] }
            return s.pending.map(\.text).joined(separator: "\n")
        }
    }

    /// For a question: the messages that belong on top of it.
    func takePendingForQuestion() -> String? {
        inner.withLock { s in
            defer { s.pending = [] }
            let kept = s.pending.filter { !$0.onlyUntilAQuestion }.map(\.text)
            return kept.isEmpty ? nil : kept.joined(separator: "\n")
        }
    }

    /// Read once per conversation, at its first dialog (most requests never show one).
    func appName(_ requester: Requester, language: Language) -> String? {
        if let known = inner.withLock({ $0.appName }) { return known }
        let name = AppName.of(requester, language: language)
        inner.withLock { $0.appName = .some(name) }
        return name
    }
}

/// Starts a program without waiting for it (xdg-open hands the page to the
/// browser and leaves); a thread reaps it so no zombie stays behind.
func spawnDetached(_ program: String, _ arguments: [String], environment: [String: String]) -> Bool {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for fd in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] {
        posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0)
    }
    var argv: [UnsafeMutablePointer<CChar>?] = ([program] + arguments).map { strdup($0) }
    argv.append(nil)
    var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") }
    envp.append(nil)
    defer {
        for p in argv { free(p) }
        for p in envp { free(p) }
    }
    var pid: pid_t = 0
    guard posix_spawn(&pid, program, &actions, nil, argv, envp) == 0 else { return false }
    let child = pid
    runOnNewThread(named: "pinentry-reaper") {
        var status: Int32 = 0
        _ = waitpid(child, &status, 0)
    }
    return true
}

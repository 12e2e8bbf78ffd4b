import VaultFactor
#if canImport(Glibc)
import Glibc
#endif

/// Who is asking: the peer process behind a socket connection, from `SO_PEERCRED`.
/// Recorded in the audit log for every release.
public struct Requester: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    /// Set only when known some other way (tests); otherwise read from /proc on demand.
    private var knownExecutable: String?
    /// Which app it is, read once when the connection opened (`AppIdentity.of`);
    /// nil for vaultd's own calls and when the process could not be read.
    public var app: AppIdentity?
    /// Set by the server when the peer's identity could not be established:
    /// it exited before it was read, its pid is 0 (another pid namespace), or
    /// /proc said nothing. Such a peer is trusted least (`Trust.unidentified`).
    public var unidentified: Bool

    public init(pid: Int32, uid: UInt32, executable: String? = nil, app: AppIdentity? = nil, unidentified: Bool = false) {
        self.pid = pid
        self.uid = uid
        self.knownExecutable = executable
        self.app = app
        self.unidentified = unidentified
    }

    public static let inProcess = Requester(pid: 0, uid: 0)

    /// How far vaultd trusts the program behind a request: what it may see
    /// and which ops it may call (docs/protocol.md, "Who may call what").
    public enum Trust: Sendable, Equatable {
        /// vaultd's own calls (the broker itself, tests): no peer at all.
        case vaultd
        /// A process of the user outside any sandbox. It could run vaultctl,
        /// or read the store and the keyring itself, so it manages everything.
        case unconfined
        /// A Flatpak or Snap app: only what it is granted, no admin op, and
        /// never a PIN question relayed to it.
        case sandboxed
        /// A peer whose identity could not be established: the least trusted
        /// kind, seeing no account and calling no admin op.
        case unidentified
    }

    public var trust: Trust {
        if unidentified { return .unidentified }
        if let app { return app.kind == .flatpak || app.kind == .snap ? .sandboxed : .unconfined }
        return pid == 0 ? .vaultd : .unconfined
    }

    /// A sandboxed or unidentified peer: held to its grants, no admin op,
    /// no secret asked through it.
    public var isConfined: Bool { trust == .sandboxed || trust == .unidentified }

    /// What a confined peer's counts are kept under (closed dialogs, locks,
    /// writes): its app, and one key for every unidentified peer, so a new
    /// process each time does not start afresh. Nil: not confined, never counted.
    public var confinedKey: String? {
        switch trust {
        case .vaultd, .unconfined: nil
        case .unidentified: "unidentified"
        case .sandboxed: app?.key ?? "unidentified"
        }
    }

    /// The same peer with its executable read now (an entry written later,
    /// on a task or when a count's minute ends, still names it).
    public var withExecutableRead: Requester {
        Requester(pid: pid, uid: uid, executable: executable, app: app, unidentified: unidentified)
    }

    /// The peer's executable, for the audit log. Read when an entry is written,
    /// not per connection: most connections never need it. Best effort: the
    /// process may be gone.
    public var executable: String? {
        if let knownExecutable { return knownExecutable }
        guard pid > 0 else { return nil }
        var buf = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/\(pid)/exe", &buf, buf.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// A factor conversation bound to one client request. The broker checks
/// `isInteractive` before starting a flow that needs the person: a client
/// that can't answer gets `locked` with the factors to try instead.
public protocol ClientConversation: FactorConversation {
    var isInteractive: Bool { get }
    var requester: Requester { get }
    /// Offers a choice (a `choice` prompt); returns the chosen option's value.
    func choose(_ prompt: LocalizedText, options: [ChoiceOption]) async throws(FactorError) -> String
    /// A yes/no question whose buttons say what they do (“Turn on” / “Not now”);
    /// conversations without buttons ask a plain `confirm`.
    func confirm(_ prompt: LocalizedText, yes: LocalizedText, no: LocalizedText) async throws(FactorError) -> Bool
    /// A yes/no question whose Yes loses something for good (every session
    /// deleted, one replaced, a way in turned off): a dialog that can makes
    /// No its default, so Enter alone loses nothing. Others ask a plain `confirm`.
    func confirmLoss(_ prompt: LocalizedText) async throws(FactorError) -> Bool
    /// A client identity for rate limiting (its executable, else its pid).
    var rateLimitKey: String { get }
    /// Shows `message` while `work` runs, with one button per option (the
    /// other ways in: “Use PIN instead”, “Use BankID or Vipps”), and closes
    /// it when `work` ends. A button pressed first cancels `work`
    /// (WaitingDialog.swift has the default: the message, then the wait).
    func showWhile<T: Sendable>(_ message: LocalizedText, offering options: [ChoiceOption],
                                _ work: @escaping @Sendable () async -> T) async -> Waited<T>
    /// “Allow ‘X’ to use your BankID session?” in a dialog the asking app
    /// cannot answer itself (vaultd's own); others throw `notInteractive`.
    func askGrant(_ question: GrantQuestion) async throws(FactorError) -> GrantAnswer
}

/// One option of a choice prompt.
public struct ChoiceOption: Sendable, Equatable {
    public var value: String
    public var label: LocalizedText
    public init(value: String, label: LocalizedText) {
        self.value = value
        self.label = label
    }
}

extension ClientConversation {
    public func choose(_ prompt: LocalizedText, options: [ChoiceOption]) async throws(FactorError) -> String {
        throw .notInteractive
    }
    /// Whose login starts count together: the app as grants name it (two
    /// Flatpak apps on one runtime share an executable, and one in a loop
    /// must not hold back the other's logins), else its executable.
    public var rateLimitKey: String { requester.app?.key ?? requester.executable ?? "pid:\(requester.pid)" }
    public func askGrant(_ question: GrantQuestion) async throws(FactorError) -> GrantAnswer { throw .notInteractive }
    public func confirm(_ prompt: LocalizedText, yes: LocalizedText, no: LocalizedText) async throws(FactorError) -> Bool {
        try await confirm(prompt)
    }
    public func confirmLoss(_ prompt: LocalizedText) async throws(FactorError) -> Bool { try await confirm(prompt) }
}

/// A conversation with nobody: every question fails as not interactive.
public struct SilentConversation: ClientConversation {
    public let language: Language
    public let requester: Requester
    public var isInteractive: Bool { false }

    public init(language: Language = .en, requester: Requester = .inProcess) {
        self.language = language
        self.requester = requester
    }

    public func show(_ message: LocalizedText) async {}
    public func askSecret(_ prompt: LocalizedText) async throws(FactorError) -> SecureBytes { throw .notInteractive }
    public func confirm(_ prompt: LocalizedText) async throws(FactorError) -> Bool { throw .notInteractive }
}

// The broker's own questions, asked the same way wherever they come up.
extension ClientConversation {
    /// Asks a yes/no question before something that cannot be undone. A client
    /// that cannot be asked gets `unasked` (how to go on without a dialog);
    /// No, Cancel or a closed dialog stops with `cancelled`, saying that
    /// nothing was changed.
    func confirmOrStop(_ question: LocalizedText, unasked: VaultFailure,
                       locked: VaultFailure) async throws(VaultFailure) {
        let yes: Bool
        do {
            yes = try await confirmLoss(question)
        } catch {
            if error == .notInteractive { throw unasked }
            if error == .cancelled { throw VaultFailure(.cancelled, message: Messages.nothingChanged) }
            throw error.failure(whenNotInteractive: locked)
        }
        guard yes else { throw VaultFailure(.cancelled, message: Messages.nothingChanged) }
    }

    /// Asks the person which provider to log in with: one button each, the
    /// `beside` choices after them (another factor), and Cancel. `saying`
    /// comes first in the same dialog: why a login is asked for.
    func chooseProvider(_ candidates: [any IdentityProvider], toContinue: Bool, saying: LocalizedText? = nil,
                        beside: [ChoiceOption] = []) async throws(FactorError) -> ProviderChoice {
        var options = candidates.map { ChoiceOption(value: $0.id, label: Messages.useProvider($0.displayName)) }
        options += beside
        options.append(ChoiceOption(value: "cancel", label: Messages.dialogCancel))
        // What happened already says to log in (“… Log in with BankID or Vipps to …”).
        let prompt = saying ?? Messages.chooseLogin(candidates.map(\.displayName), toContinue: toContinue)
        let choice = try await choose(prompt, options: options)
        if let provider = candidates.first(where: { $0.id == choice }) { return .provider(provider) }
        if beside.contains(where: { $0.value == choice }) { return .other(choice) }
        return .cancelled
    }
}

extension ClientConversation {
    /// The offer to turn a factor on after a login (its own words, or the
    /// catalog's), answered with a button: Turn on, Not now, or none (the
    /// dialog closed, left to time out, the app gone: not a "Not now").
    func offerToTurnOn(_ d: FactorDescriptor) async -> TurnOnAnswer {
        do {
            return try await confirm(d.offerText ?? Messages.turnOnOffer(d.displayName), yes: Messages.dialogTurnOn,
                                     no: Messages.dialogNotNow) ? .turnOn : .notNow
        } catch {
            return .unanswered
        }
    }

    /// Which of `organizations` the person acts for now: one button each and
    /// Cancel. Nil: Cancel, or no answer.
    func chooseOrganization(_ organizations: [(id: String, name: String)]) async -> String? {
        var options = organizations.map { org in
            ChoiceOption(value: org.id, label: LocalizedText(en: Messages.shown(org.name), nb: Messages.shown(org.name)))
        }
        options.append(ChoiceOption(value: "cancel", label: Messages.dialogCancel))
        guard let chosen = try? await choose(Messages.chooseOrganization, options: options), chosen != "cancel" else { return nil }
        return chosen
    }
}

/// The button pressed at the offer to turn a factor on.
enum TurnOnAnswer: Equatable {
    case turnOn
    case notNow
    /// Closed, left to time out, or the app gone: asked again after the next login.
    case unanswered
}

/// What the person chose in the provider choice.
enum ProviderChoice {
    case provider(any IdentityProvider)
    /// One of the other buttons (a factor's id).
    case other(String)
    case cancelled
}

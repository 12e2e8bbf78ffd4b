import Foundation
import Logging
import Locking
import VaultCore
import VaultFactor
@testable import VaultStore
import VaultTestSupport

/// A conversation that answers from a script and records everything shown.
final class ScriptedClient: ClientConversation, Sendable {
    let language: Language = .en
    let isInteractive: Bool
    /// One app, as a socket peer would be: the sessions it logs in to are its own.
    let requester = Requester(pid: 1, uid: 0, executable: "/usr/bin/test-app",
                              app: AppIdentity(kind: .executable, name: "/usr/bin/test-app"))
    private let state: Locked<(secrets: [String?], confirms: [Bool], shown: [String], asked: Int)>
    private let choiceState: Locked<(choices: [String], offered: [[String]], confirmed: [String])>
    /// The buttons pressed in dialogs shown while a presence factor waits
    /// (nil: none, the wait ends by itself; "cancel": Cancel), and the buttons offered.
    private let waitState: Locked<(presses: [String?], offered: [[String]])>
    /// What a choice fails with when the script has no choice left.
    let chooseError: FactorError

    init(secrets: [String?] = [], confirms: [Bool] = [], choices: [String] = [], interactive: Bool = true,
         presses: [String?] = [], chooseError: FactorError = .cancelled) {
        self.isInteractive = interactive
        state = Locked((secrets, confirms, [], 0))
        choiceState = Locked((choices, [], []))
        waitState = Locked((presses, []))
        self.chooseError = chooseError
    }

    var offeredButtons: [[String]] { waitState.withLock { $0.offered } }

    func showWhile<T: Sendable>(_ message: LocalizedText, offering options: [ChoiceOption],
                                _ work: @escaping @Sendable () async -> T) async -> Waited<T> {
        await show(message)
        let press = waitState.withLock { s -> String?? in
            s.offered.append(options.map(\.value))
            return s.presses.isEmpty ? .none : s.presses.removeFirst()
        }
        switch press {
        case .some(.some("cancel")): return .cancelled
        case .some(.some(let value)): return .chose(value)
        default: return .done(await work())
        }
    }

    var offeredChoices: [[String]] { choiceState.withLock { $0.offered } }
    var confirmQuestions: [String] { choiceState.withLock { $0.confirmed } }

    func choose(_ prompt: LocalizedText, options: [ChoiceOption]) async throws(FactorError) -> String {
        guard isInteractive else { throw .notInteractive }
        let pick: String? = choiceState.withLock { s in
            s.offered.append(options.map(\.value))
            return s.choices.isEmpty ? nil : s.choices.removeFirst()
        }
        guard let pick else { throw chooseError }
        return pick
    }

    var shown: [String] { state.withLock { $0.shown } }
    var asked: Int { state.withLock { $0.asked } }

    func show(_ message: LocalizedText) async { state.withLock { $0.shown.append(message.en) } }
    func askSecret(_ prompt: LocalizedText) async throws(FactorError) -> SecureBytes {
        guard isInteractive else { throw .notInteractive }
        let next: String? = state.withLock { s in
            s.asked += 1
            return s.secrets.isEmpty ? nil : s.secrets.removeFirst()
        }
        guard let next else { throw .cancelled }
        do { return try SecureBytes.utf8(next) } catch { throw .cancelled }
    }
    func confirm(_ prompt: LocalizedText) async throws(FactorError) -> Bool {
        guard isInteractive else { throw .notInteractive }
        choiceState.withLock { $0.confirmed.append(prompt.en) }
        return state.withLock { s in s.confirms.isEmpty ? false : s.confirms.removeFirst() }
    }
}

/// An identity provider the test scripts: who logs in, what refresh answers.
final class FakeIdentityProvider: IdentityProvider, Sendable {
    let id: String
    let displayName: String
    let issuesRefreshTokens: Bool
    struct State {
        var subject = "subject-kari"
        var loginError: VaultFailure?
        var refreshError: VaultFailure?
        var refreshCalls = 0
        var refreshTokensSeen: [String] = []
        var revoked: [String] = []
        var accessTTL: Int64 = 3600
        /// The refresh token's life as the provider states it (`refresh_expires_in`); nil: not stated.
        var refreshTTL: Int64?
        /// How long the token endpoint takes.
        var refreshDelay: Duration = .milliseconds(100)
        var generation = 0
        /// The national ID this provider's logins prove (nil: none).
        var nationalID: String?
        /// The `acr` its logins reach, and how each login was asked for.
        var acr: String?
        var optionsSeen: [LoginOptions] = []
    }
    let state = Locked(State())

    let provesNationalID: Bool

    init(id: String = "bankid", name: String = "BankID", refreshTokens: Bool = true, provesNationalID: Bool = false) {
        self.id = id
        self.displayName = name
        self.issuesRefreshTokens = refreshTokens
        self.provesNationalID = provesNationalID
    }

    func set(_ body: (inout State) -> Void) { state.withLock { body(&$0) } }
    var snapshot: State { state.withLock { $0 } }

    func grant(_ generation: Int) -> TokenGrant {
        let (ttl, refreshTTL) = state.withLock { ($0.accessTTL, $0.refreshTTL) }
        let now = Int64(Date().timeIntervalSince1970)
        return TokenGrant(accessToken: "AT-\(id)-\(generation)", accessExpiresAt: now + ttl,
                          refreshToken: issuesRefreshTokens ? "RT-\(id)-\(generation)" : nil,
                          refreshExpiresAt: issuesRefreshTokens ? refreshTTL.map { now + $0 } : nil)
    }

    let reenrollMinimumACR: String? = "urn:bankid:bid;LOA=4"

    func login(_ conversation: any FactorConversation) async throws(VaultFailure) -> VerifiedLogin {
        try await login(conversation, options: LoginOptions())
    }

    func login(_ conversation: any FactorConversation, options: LoginOptions) async throws(VaultFailure) -> VerifiedLogin {
        let (error, subject, generation, nin, acr) = state.withLock { s -> (VaultFailure?, String, Int, String?, String?) in
            s.generation += 1
            s.optionsSeen.append(options)
            return (s.loginError, s.subject, s.generation, s.nationalID, s.acr)
        }
        try? await conversation.openURL("https://idp.example.test/authorize?state=x", LocalizedText(en: "Log in", nb: "Logg inn"))
        if let error { throw error }
        var verified = VerifiedLogin(provider: id, providerName: displayName, issuer: "https://idp.example.test/\(id)", clientID: "app",
                             subject: subject, name: "Kari Nordmann", claims: ["org": "Mentorhuset", "roles": ["peer_mentor"]],
                             nationalID: nin.flatMap { try? SecureBytes.utf8($0) }, acr: acr, tokens: grant(generation))
        verified.reauthenticated = options.reauthenticate
        return verified
    }

    func refresh(refreshToken: String) async throws(VaultFailure) -> TokenGrant {
        let (error, generation, delay) = state.withLock { s -> (VaultFailure?, Int, Duration) in
            s.refreshCalls += 1
            s.refreshTokensSeen.append(refreshToken)
            s.generation += 1
            return (s.refreshError, s.generation, s.refreshDelay)
        }
        // A slow token endpoint, so concurrent callers overlap.
        try? await Task.sleep(for: delay)
        if let error { throw error }
        return grant(generation)
    }

    func revoke(token: String, isRefreshToken: Bool) async -> Bool {
        state.withLock { $0.revoked.append(token) }
        return true
    }
}

struct FakeDirectory: IdentityProviderDirectory {
    let providers: [FakeIdentityProvider]
    var loginProviders: [any IdentityProvider] { providers }
    func provider(for session: SessionMeta) -> (any IdentityProvider)? { providers.first { $0.id == session.provider } }
}

/// A presence-only factor (shaped like the fingerprint) whose outcome and
/// enrollment state the test controls.
final class FakePresenceFactor: UnlockFactor, Sendable {
    enum Outcome: Sendable { case present, fail(FactorError) }
    private let state = Locked<(enrollment: [UInt8], outcome: Outcome, verifies: Int, available: Bool)>(([1, 2, 3], .present, 0, true))
    let descriptor: FactorDescriptor

    /// Waits in `showWhile`, as the fingerprint's scan does.
    let waits: Bool

    /// `offerAfterLogin`: offered after a login, as the fingerprint is.
    init(offerAfterLogin: Bool = false, waits: Bool = false) {
        self.waits = waits
        descriptor = FactorDescriptor(id: "fake", displayName: LocalizedText(en: "Fake", nb: "Falsk"),
                                      rank: 10, contribution: .presenceOnly, offerAfterLogin: offerAfterLogin)
    }

    var enrollment: [UInt8] {
        get { state.withLock { $0.enrollment } }
        set { state.withLock { $0.enrollment = newValue } }
    }
    var outcome: Outcome {
        get { state.withLock { $0.outcome } }
        set { state.withLock { $0.outcome = newValue } }
    }
    var available: Bool {
        get { state.withLock { $0.available } }
        set { state.withLock { $0.available = newValue } }
    }
    var verifies: Int { state.withLock { $0.verifies } }

    func probe() async -> FactorPresence {
        available ? .available : .unavailable(LocalizedText(en: "Fake reader not found", nb: "Fant ikke falsk leser"))
    }
    func enroll(_ conversation: any FactorConversation) async throws(FactorError) -> FactorProof {
        FactorProof(enrollmentState: enrollment)
    }
    func verify(_ conversation: any FactorConversation, slot: EnrolledSlot) async throws(FactorError) -> FactorProof {
        let (outcome, enrollment) = state.withLock { s in
            s.verifies += 1
            return (s.outcome, s.enrollment)
        }
        // A slow sensor: lets concurrent requests pile up behind one unlock.
        if waits {
            try await conversation.showWhile(LocalizedText(en: "Touch the fake reader.", nb: "Berør den falske leseren.")) {
                try? await Task.sleep(for: .milliseconds(50))
            }
        } else {
            try? await Task.sleep(for: .milliseconds(50))
        }
        if case .fail(let e) = outcome { throw e }
        return FactorProof(enrollmentState: enrollment)
    }
}

extension VaultFixture {
    /// SQLite refuses writes (SQLITE_READONLY) while on, as a full or read-only disk would.
    func refuseWrites(_ on: Bool) throws {
        try store.pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA query_only = \(on ? 1 : 0)") }
    }
}

func importRequest(account: String, token: String) -> ImportRequest {
    ImportRequest(issuer: "https://login.example.org", clientID: "app", account: account, name: "Kari Nordmann",
                  refreshToken: "rt-\(token)", accessToken: "at-\(token)", accessExpiresAt: 4_102_444_800)
}

import Foundation
import Logging
import Locking
import VaultCore
import VaultFactor
@testable import VaultStore
import VaultTestSupport

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
        try store.onWriter { try $0.execute("PRAGMA query_only = \(on ? 1 : 0)") }
    }
}

func importRequest(account: String, token: String) -> ImportRequest {
    ImportRequest(issuer: "https://login.example.org", clientID: "app", account: account, name: "Kari Nordmann",
                  refreshToken: "rt-\(token)", accessToken: "at-\(token)", accessExpiresAt: 4_102_444_800)
}

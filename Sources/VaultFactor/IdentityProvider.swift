/// The plugin interface for identity providers (BankID, Vipps, ID-porten, any
/// OpenID Connect issuer). A provider logs a person in and keeps tokens fresh;
/// the vault decides what a verified login opens (a keyslot bound to the
/// identity) and stores the session. Providers never see vault keys.
public protocol IdentityProvider: Sendable {
    /// Profile id on the wire and the command line: "bankid", "vipps", "idporten", or a configured name.
    var id: String { get }
    /// "BankID", "Vipps", "ID-porten": for messages and choices.
    var displayName: String { get }
    /// Whether a session can outlive its access token. Vipps issues no refresh
    /// tokens, so without the organization's backend its session ends with the
    /// access token.
    var issuesRefreshTokens: Bool { get }
    /// The origin of the organization's backend that keeps this provider's
    /// sessions (docs/backend.md), or nil when the provider's own are kept.
    var backendOrigin: String? { get }
    /// Whether a login proves a national identity number (BankID, Vipps,
    /// ID-porten do). Such logins can open the person's login slot whichever
    /// of these providers the person uses.
    var provesNationalID: Bool { get }

    /// A full interactive login: sends the authorization URL through
    /// `conversation.openURL`, waits for the loopback redirect, exchanges the
    /// code, and verifies everything (ID token, nonce, state, iss, userinfo).
    /// Errors are the normalised ones (`cancelled`, `login_failed`,
    /// `provider_unavailable`, `timeout`, `state_mismatch`, `token_invalid`, …)
    /// with the provider's sentence; after any error nothing is pending.
    func login(_ conversation: any FactorConversation) async throws(VaultFailure) -> VerifiedLogin

    /// The same, asked for as `options` says (`prompt=login`, an `acr` level).
    /// A provider that sets `VerifiedLogin.reauthenticated` must have sent them.
    func login(_ conversation: any FactorConversation, options: LoginOptions) async throws(VaultFailure) -> VerifiedLogin

    /// The `acr` a login must reach to set a changed fingerprint up again
    /// (BankID: `urn:bankid:bid;LOA=4`); nil = any fresh login.
    var reenrollMinimumACR: String? { get }

    /// Whether `login` reached `reenrollMinimumACR`.
    func meetsReenrollLevel(_ login: VerifiedLogin) -> Bool

    /// Uses a refresh token. `session_expired` means the grant is dead
    /// (`invalid_grant`, revoked) and the vault deletes the session on it;
    /// throw it for nothing else. A refused client registration, the provider
    /// down or slow, an unreadable answer: another code, and the session is
    /// kept. A rotated refresh token comes back in the grant; the caller
    /// stores it before anyone sees the new access token (or, when the store
    /// refuses, keeps it in memory and saves it again).
    func refresh(refreshToken: String) async throws(VaultFailure) -> TokenGrant

    /// RFC 7009 revocation when the provider advertises it. Best effort:
    /// returns true when the provider confirmed, false otherwise.
    func revoke(token: String, isRefreshToken: Bool) async -> Bool
}

extension IdentityProvider {
    public var provesNationalID: Bool { false }
    public var backendOrigin: String? { nil }
    public var reenrollMinimumACR: String? { nil }
    public func login(_ conversation: any FactorConversation, options: LoginOptions) async throws(VaultFailure) -> VerifiedLogin {
        try await login(conversation)
    }
    public func meetsReenrollLevel(_ login: VerifiedLogin) -> Bool {
        guard let minimum = reenrollMinimumACR else { return true }
        return login.acr == minimum
    }
}

/// How a login is asked for.
public struct LoginOptions: Sendable, Equatable {
    /// Send `prompt=login`: the person must authenticate again, a remembered
    /// browser session cannot finish the login silently.
    public var reauthenticate: Bool
    /// Ask for this `acr` (`acr_values`), over the provider's usual minimum.
    public var acr: String?

    public init(reauthenticate: Bool = false, acr: String? = nil) {
        self.reauthenticate = reauthenticate
        self.acr = acr
    }
}

/// A login the provider verified.
public struct VerifiedLogin: Sendable {
    public var provider: String
    public var providerName: String
    public var issuer: String
    public var clientID: String
    /// The *stable* subject (BankID's `bankid_altsub`, Vipps' `sub`, ID-porten's `pid`).
    public var subject: String
    public var name: String
    /// Claims an app may see (organization, roles, …). Never the national ID.
    public var claims: [String: JSON]
    /// The national identity number when the provider gave one (Vipps `nin`
    /// from userinfo, BankID `nnin_altsub`, ID-porten `pid`), in secure memory.
    /// Used for member sync only; never logged, never stored in clear.
    public var nationalID: SecureBytes?
    /// The authentication context class, e.g. `urn:bankid:bid;LOA=4`.
    public var acr: String?
    /// The login was asked for with `prompt=login` (`LoginOptions.reauthenticate`)
    /// *and* the ID token's `auth_time` says the person authenticated during
    /// this login, not at an earlier one the provider's session remembered.
    public var reauthenticated = false
    /// The ID token's `auth_time` (OIDC Core §2): when the person last authenticated at the provider.
    public var authTime: Int64?
    public var tokens: TokenGrant

    public init(provider: String, providerName: String, issuer: String, clientID: String, subject: String, name: String,
                claims: [String: JSON], nationalID: SecureBytes?, acr: String?, tokens: TokenGrant) {
        self.provider = provider
        self.providerName = providerName
        self.issuer = issuer
        self.clientID = clientID
        self.subject = subject
        self.name = name
        self.claims = claims
        self.nationalID = nationalID
        self.acr = acr
        self.tokens = tokens
    }
}

/// Tokens from a token endpoint.
public struct TokenGrant: Sendable, Equatable {
    public var accessToken: String
    /// Unix seconds.
    public var accessExpiresAt: Int64?
    public var refreshToken: String?
    public var refreshExpiresAt: Int64?
    public var idToken: String?

    public init(accessToken: String, accessExpiresAt: Int64?, refreshToken: String?, refreshExpiresAt: Int64? = nil, idToken: String? = nil) {
        self.accessToken = accessToken
        self.accessExpiresAt = accessExpiresAt
        self.refreshToken = refreshToken
        self.refreshExpiresAt = refreshExpiresAt
        self.idToken = idToken
    }
}

import OIDCToken
import VaultFactor

/// Everything that makes one identity provider different from another, as plain
/// values, so vaultd can fill it from TOML. Start from a built-in profile
/// (`.bankID`, `.vipps`, `.idPorten`, `.generic`) and override what the config says.
public struct ProviderProfile: Sendable, Equatable {
    public enum Environment: String, Sendable, CaseIterable {
        case test
        case production
    }

    /// How the client authenticates at the token endpoint. A public client (PKCE
    /// only) sends its `client_id`; a confidential one adds its secret.
    public enum ClientAuthentication: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
        case none
        case clientSecretBasic(String)
        case clientSecretPost(String)

        /// Never shows the secret (profiles end up in logs and error reports).
        public var description: String {
            switch self {
            case .none: return "none"
            case .clientSecretBasic: return "client_secret_basic(<redacted>)"
            case .clientSecretPost: return "client_secret_post(<redacted>)"
            }
        }
        public var debugDescription: String { description }
    }

    /// Where the national identity number comes from, if anywhere.
    public enum NationalIDSource: Sendable, Equatable {
        case none
        /// A claim in the (signed) ID token, e.g. BankID's `nnin_altsub`, ID-porten's `pid`.
        case idToken(claim: String)
        /// A claim from the userinfo endpoint only, e.g. Vipps' `nin`.
        case userinfo(claim: String)
    }

    /// Where the browser is sent back to (RFC 8252 §7.3: loopback only).
    public enum RedirectMode: Sendable, Equatable {
        /// `http://127.0.0.1:<ephemeral port><path>`: for providers that accept any loopback port.
        case ephemeralPort(path: String)
        /// `http://127.0.0.1:<port><path>`: for providers that need the exact URI registered.
        case fixedPort(UInt16, path: String)
    }

    /// The organization's backend: the code and every refresh go to its token
    /// endpoint, which answers with *its own* session (rotating refresh token)
    /// and the provider's ID token passed through; every logout goes to its
    /// revocation endpoint. The person still logs in at the provider.
    public struct Backend: Sendable, Equatable {
        public var tokenURL: String
        /// RFC 7009; nil: logouts stay on this computer.
        public var revocationURL: String?
        public init(tokenURL: String, revocationURL: String? = nil) {
            self.tokenURL = tokenURL
            self.revocationURL = revocationURL
        }
    }

    /// Another provider to offer when this one fails.
    public struct Alternative: Sendable, Equatable {
        public var id: String
        public var displayName: String
        public init(id: String, displayName: String) {
            self.id = id
            self.displayName = displayName
        }
    }

    // Identity
    public var id: String
    public var displayName: String

    // Where the provider is
    /// Must equal the discovery document's `issuer` exactly (and every ID token's `iss`).
    public var issuer: String
    public var discoveryURL: String

    // Who we are
    public var clientID: String
    public var clientAuthentication: ClientAuthentication
    /// Gateway mode: code + `code_verifier` + `redirect_uri` go to this backend,
    /// which holds the client secret and answers with the provider's token response.
    /// Refreshes go there too. See `OIDCProvider` for the exact request.
    public var gatewayURL: String?
    /// The organization's backend (docs/backend.md), which keeps the session
    /// instead of the provider. Nil: the provider's own session is kept.
    public var backend: Backend?

    // What we ask for
    public var scopes: [String]
    /// Extra authorization request parameters (e.g. `ui_locales`, `prompt`). They
    /// can never replace the ones the flow sets itself (state, nonce, PKCE, …).
    public var extraAuthorizationParameters: [String: String]
    public var redirect: RedirectMode

    // What we trust and take
    /// The claim that identifies the person stably (BankID's `sub` can change).
    public var subjectClaim: String
    public var nationalID: NationalIDSource
    /// Nil: whatever discovery advertises, limited to the supported set.
    public var allowedAlgorithms: Set<SigningAlgorithm>?
    /// Audiences besides our client id that may appear in `aud` (then `azp` must be us).
    public var trustedAudiences: Set<String>
    /// Whether to call the userinfo endpoint (required for Vipps' `nin` and profile claims).
    public var fetchUserinfo: Bool
    /// Claims an app may see, taken from the ID token and userinfo when present.
    /// National ID claims are never released, whatever this says.
    public var releasedClaims: [String]

    // Strength
    /// When set, the login's `acr` must be at least this (by `acrOrder`; equality
    /// when either value is not in the order). Also sent as `acr_values`.
    public var minimumACR: String?
    /// The `acr` a login must reach to set a changed fingerprint up again
    /// (docs/key-hierarchy.md); nil = any fresh login with `prompt=login`.
    public var reenrollMinimumACR: String?
    /// `acr` values from weakest to strongest.
    public var acrOrder: [String]

    // Behaviour
    public var issuesRefreshTokens: Bool
    public var alternatives: [Alternative]

    // Limits
    public var redirectTimeout: Duration
    public var requestTimeout: Duration
    public var maxResponseBytes: Int
    /// Allowed clock difference for `exp`, `iat`, `nbf`, in seconds.
    public var clockSkew: Int64
    /// How long discovery and JWKS are cached.
    public var metadataCacheSeconds: Int64

    public init(
        id: String, displayName: String, issuer: String, discoveryURL: String? = nil,
        clientID: String, clientAuthentication: ClientAuthentication = .none, gatewayURL: String? = nil,
        scopes: [String] = ["openid"], extraAuthorizationParameters: [String: String] = [:],
        redirect: RedirectMode = .ephemeralPort(path: "/callback"),
        subjectClaim: String = "sub", nationalID: NationalIDSource = .none,
        allowedAlgorithms: Set<SigningAlgorithm>? = nil, trustedAudiences: Set<String> = [],
        fetchUserinfo: Bool = false, releasedClaims: [String] = ProviderProfile.defaultReleasedClaims,
        minimumACR: String? = nil, acrOrder: [String] = [],
        issuesRefreshTokens: Bool = true, alternatives: [Alternative] = [],
        redirectTimeout: Duration = .seconds(300), requestTimeout: Duration = .seconds(10),
        maxResponseBytes: Int = 1 << 20, clockSkew: Int64 = 60, metadataCacheSeconds: Int64 = 3600
    ) {
        self.id = id
        self.displayName = displayName
        self.issuer = issuer
        self.discoveryURL = discoveryURL ?? ProviderProfile.discoveryURL(forIssuer: issuer)
        self.clientID = clientID
        self.clientAuthentication = clientAuthentication
        self.gatewayURL = gatewayURL
        self.scopes = scopes
        self.extraAuthorizationParameters = extraAuthorizationParameters
        self.redirect = redirect
        self.subjectClaim = subjectClaim
        self.nationalID = nationalID
        self.allowedAlgorithms = allowedAlgorithms
        self.trustedAudiences = trustedAudiences
        self.fetchUserinfo = fetchUserinfo
        self.releasedClaims = releasedClaims
        self.minimumACR = minimumACR
        self.acrOrder = acrOrder
        self.issuesRefreshTokens = issuesRefreshTokens
        self.alternatives = alternatives
        self.redirectTimeout = redirectTimeout
        self.requestTimeout = requestTimeout
        self.maxResponseBytes = maxResponseBytes
        self.clockSkew = clockSkew
        self.metadataCacheSeconds = metadataCacheSeconds
    }

    /// Whether a session can outlive its access token: the provider issues
    /// refresh tokens, or a backend keeps the session (whatever the provider does:
    /// Vipps issues none).
    public var refreshes: Bool { issuesRefreshTokens || backend != nil }

    /// Whether userinfo is read at login. Not with a backend: userinfo needs the
    /// provider's access token, which only the backend holds.
    public var readsUserinfo: Bool { fetchUserinfo && backend == nil }

    /// Where the national ID comes from in this setup: a userinfo claim is out
    /// of reach with a backend (the backend reads it and applies its rules).
    public var nationalIDInReach: NationalIDSource {
        if case .userinfo = nationalID, !readsUserinfo { return .none }
        return nationalID
    }

    /// OpenID Connect Discovery §4: issuer + `/.well-known/openid-configuration`.
    public static func discoveryURL(forIssuer issuer: String) -> String {
        var base = issuer
        while base.hasSuffix("/") { base.removeLast() }
        return base + "/.well-known/openid-configuration"
    }

    public static let defaultReleasedClaims = [
        "name", "given_name", "family_name", "email", "email_verified", "phone_number", "birthdate",
        "org", "organization", "organization_number", "orgno", "roles", "role", "groups",
        "acr", "amr", "auth_time", "locale",
    ]

    /// Claims that carry a national identity number in one provider or another.
    static let nationalIDClaims: Set<String> = ["nin", "nnin", "nnin_altsub", "pid", "socialno", "ssn"]

    // MARK: - Built-in profiles

    static let builtInNames = ["bankid": "BankID", "vipps": "Vipps", "idporten": "ID-porten"]

    /// A provider to offer instead, by id, with its usual display name.
    public static func alternative(_ id: String) -> Alternative {
        Alternative(id: id, displayName: builtInNames[id] ?? id)
    }

    /// BankID (OIDC): ES256-signed ID tokens; `sub` can change, so the stable
    /// subject is `bankid_altsub`; the national ID is `nnin_altsub` in the ID token.
    public static func bankID(_ environment: Environment, clientID: String,
                              clientAuthentication: ClientAuthentication = .none) -> ProviderProfile {
        let issuer = environment == .test
            ? "https://auth.current.bankid.no/auth/realms/current"
            : "https://auth.bankid.no/auth/realms/prod"
        var profile = ProviderProfile(
            id: "bankid", displayName: "BankID", issuer: issuer,
            clientID: clientID, clientAuthentication: clientAuthentication,
            scopes: ["openid", "profile", "nnin_altsub"],
            subjectClaim: "bankid_altsub", nationalID: .idToken(claim: "nnin_altsub"),
            allowedAlgorithms: [.es256],
            acrOrder: ["urn:bankid:bid;LOA=3", "urn:bankid:bid;LOA=4"],
            issuesRefreshTokens: true, alternatives: [alternative("vipps")])
        // A changed fingerprint is set up again only after BankID on the high level.
        profile.reenrollMinimumACR = "urn:bankid:bid;LOA=4"
        return profile
    }

    /// Vipps Login: RS256; profile claims and `nin` from userinfo only; no refresh tokens.
    public static func vipps(_ environment: Environment, clientID: String,
                             clientAuthentication: ClientAuthentication = .none) -> ProviderProfile {
        let issuer = environment == .test
            ? "https://apitest.vipps.no/access-management-1.0/access/"
            : "https://api.vipps.no/access-management-1.0/access/"
        return ProviderProfile(
            id: "vipps", displayName: "Vipps", issuer: issuer,
            clientID: clientID, clientAuthentication: clientAuthentication,
            scopes: ["openid", "name", "phoneNumber", "nin"],
            subjectClaim: "sub", nationalID: .userinfo(claim: "nin"),
            allowedAlgorithms: [.rs256], fetchUserinfo: true,
            issuesRefreshTokens: false, alternatives: [alternative("bankid")])
    }

    /// ID-porten: RS256; the person is identified by `pid`.
    public static func idPorten(_ environment: Environment, clientID: String,
                                clientAuthentication: ClientAuthentication = .none) -> ProviderProfile {
        let issuer = environment == .test ? "https://test.idporten.no" : "https://idporten.no"
        return ProviderProfile(
            id: "idporten", displayName: "ID-porten", issuer: issuer,
            clientID: clientID, clientAuthentication: clientAuthentication,
            scopes: ["openid", "profile"],
            subjectClaim: "pid", nationalID: .idToken(claim: "pid"),
            allowedAlgorithms: [.rs256],
            acrOrder: ["idporten-loa-low", "idporten-loa-substantial", "idporten-loa-high"],
            issuesRefreshTokens: true, alternatives: [alternative("bankid"), alternative("vipps")])
    }

    /// Any OpenID Connect issuer, by discovery. Algorithms: what discovery
    /// advertises ∩ {RS256, ES256, EdDSA}.
    public static func generic(id: String, displayName: String, issuer: String, clientID: String,
                               clientAuthentication: ClientAuthentication = .none) -> ProviderProfile {
        ProviderProfile(
            id: id, displayName: displayName, issuer: issuer,
            clientID: clientID, clientAuthentication: clientAuthentication,
            scopes: ["openid", "profile"], fetchUserinfo: true)
    }

    /// A built-in profile by id ("bankid", "vipps", "idporten"), or nil.
    public static func builtIn(_ id: String, environment: Environment, clientID: String,
                               clientAuthentication: ClientAuthentication = .none) -> ProviderProfile? {
        switch id {
        case "bankid": return bankID(environment, clientID: clientID, clientAuthentication: clientAuthentication)
        case "vipps": return vipps(environment, clientID: clientID, clientAuthentication: clientAuthentication)
        case "idporten": return idPorten(environment, clientID: clientID, clientAuthentication: clientAuthentication)
        default: return nil
        }
    }
}

extension ProviderProfile {
    /// What is wrong with this profile as configured, one sentence each (empty
    /// when it is usable). vaultd reports these as configuration errors.
    public func problems() -> [String] {
        var out: [String] = []
        if id.isEmpty { out.append("provider id is empty") }
        if clientID.isEmpty { out.append("\(id): client_id is empty") }
        let policy = TransportPolicy(issuer: issuer)
        if !policy.allows(issuer) { out.append("\(id): issuer must be an https URL (http only on loopback)") }
        if !policy.allows(discoveryURL) { out.append("\(id): discovery URL must be https (http only for a loopback issuer)") }
        if let gatewayURL, !policy.allows(gatewayURL) {
            out.append("\(id): gateway URL must be https (http only for a loopback issuer)")
        }
        if let backend {
            if gatewayURL != nil { out.append("\(id): use either a gateway or a backend, not both") }
            if !policy.allows(backend.tokenURL) {
                out.append("\(id): backend URL must be https (http only for a loopback issuer)")
            }
            if let revocation = backend.revocationURL, !policy.allows(revocation) {
                out.append("\(id): backend_revocation URL must be https (http only for a loopback issuer)")
            }
        }
        if !scopes.contains("openid") { out.append("\(id): scopes must include openid") }
        switch redirect {
        case .ephemeralPort(let path), .fixedPort(_, let path):
            if !path.hasPrefix("/") || path.contains("?") || path.contains("#") {
                out.append("\(id): redirect path must start with / and have no query")
            }
        }
        if case .fixedPort(0, _) = redirect { out.append("\(id): fixed redirect port must not be 0") }
        if let allowedAlgorithms, allowedAlgorithms.isEmpty { out.append("\(id): no signing algorithm allowed") }
        if let minimumACR, !acrOrder.isEmpty, !acrOrder.contains(minimumACR) {
            out.append("\(id): minimum acr is not one of the known levels")
        }
        if maxResponseBytes < 4096 { out.append("\(id): response size limit is too small") }
        if redirectTimeout <= .zero || requestTimeout <= .zero { out.append("\(id): timeouts must be positive") }
        return out
    }
}

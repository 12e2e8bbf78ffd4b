import FoundationEssentials
import VaultFactor
import VaultProtocol
import VaultStore

// The values the broker (`Vault`) answers with and takes in: plain data, no
// state. The server turns them into the wire's shapes (VaultWire).

/// A factor's state as `status` and `factors` show it.
public struct FactorStatus: Sendable, Equatable {
    public enum State: String, Sendable {
        case enabled
        case notEnrolled = "not_enrolled"
        case unavailable
        case lockedOut = "locked_out"
    }
    public var factor: FactorID
    public var state: State
    public var label: LocalizedText
    public var retryAfter: Int?
}

extension FactorStatus {
    /// A factor's state and label for `status`, from what the vault knows of
    /// it; the sentences are the message catalog's (`Messages.factorLabel…`).
    /// `lockedFor`: the seconds its lockout has left. `softBoxLive` is asked
    /// last, only for a presence factor that is otherwise fine (it may expire
    /// the box, which is audited).
    init(_ d: FactorDescriptor, presence: FactorPresence, slot: KeyslotRow?, stale: Bool, lockedFor: Int?,
         deviceKey: SecureBytes, hasPIN: Bool, softBoxLive: () -> Bool) {
        let name = d.displayName
        if case .unavailable(let reason) = presence {
            self.init(factor: d.id, state: .unavailable, label: Messages.shortLabel(reason))
        } else if let slot {
            if let wait = lockedFor {
                self.init(factor: d.id, state: .lockedOut, label: Messages.factorLabelLockedOut(name, seconds: wait), retryAfter: wait)
                return
            }
            if d.contribution == .presenceOnly, slot.version != Keyslot.legacyVersion {
                switch Keyslot.check(slot, deviceKey: deviceKey) {
                case .intact: break
                case .damaged:
                    self.init(factor: d.id, state: .unavailable, label: Messages.factorRecordDamaged(name))
                    return
                case .newerVersion:
                    self.init(factor: d.id, state: .unavailable, label: Messages.factorRecordNewer(name))
                    return
                }
            }
            if d.contribution == .presenceOnly, !softBoxLive() {
                // A soft unlock: after a restart, its time limit or a fallback, the PIN
                // (or a login) is needed once before it works again.
                self.init(factor: d.id, state: .enabled, label: Messages.factorLabelEnabledAfterOnce(name, hasPIN: hasPIN))
            } else {
                self.init(factor: d.id, state: .enabled, label: Messages.factorLabelEnabled(name, detail: d.enabledDetail))
            }
        } else if stale {
            self.init(factor: d.id, state: .notEnrolled, label: Messages.factorLabelSetUpAgain(name, why: d.changedReason))
        } else {
            self.init(factor: d.id, state: .notEnrolled, label: Messages.factorLabelNotSetUp(name))
        }
    }
}

/// A login provider as `status` shows it.
public struct ProviderStatus: Sendable {
    public var id: String
    public var name: String
    /// A login with it can unlock this vault (its login slot exists).
    public var unlocks: Bool
    /// The organization's backend that keeps its sessions (an origin), if any.
    public var backend: String?
    /// Who keeps the session, for a person: the backend, or that the session
    /// ends with the access token. Nil: the provider's own refresh.
    public var sessionNote: LocalizedText?

    init(_ p: any IdentityProvider, unlocks: Bool) {
        (id, name, self.unlocks, backend) = (p.id, p.displayName, unlocks, p.backendOrigin)
        sessionNote = if let origin = p.backendOrigin {
            Messages.sessionKeptByBackend(origin: origin)
        } else if !p.issuesRefreshTokens {
            Messages.sessionLastsOnlyAccessToken(provider: p.displayName)
        } else {
            nil
        }
    }
}

/// A session as handed to an app: access token and claims, never the refresh token.
public struct ReleasedSession: Sendable {
    public var accessToken: String
    public var expiresAt: Int64?
    public var meta: SessionMeta

    public init(accessToken: String, expiresAt: Int64?, meta: SessionMeta) {
        self.accessToken = accessToken
        self.expiresAt = expiresAt
        self.meta = meta
    }
}

/// An existing session brought in from elsewhere (as oidc-agent's `--rt`).
public struct ImportRequest: Sendable {
    public var issuer: String
    public var clientID: String
    public var account: String?
    public var provider: String?
    public var name: String?
    public var subject: String?
    public var refreshToken: String?
    public var accessToken: String?
    public var accessExpiresAt: Int64?

    public init(issuer: String, clientID: String, account: String? = nil, provider: String? = nil, name: String? = nil,
                subject: String? = nil, refreshToken: String?, accessToken: String?, accessExpiresAt: Int64?) {
        self.issuer = issuer
        self.clientID = clientID
        self.account = account
        self.provider = provider
        self.name = name
        self.subject = subject
        self.refreshToken = refreshToken
        self.accessToken = accessToken
        self.accessExpiresAt = accessExpiresAt
    }
}

extension ImportRequest {
    /// The account an import is stored under (the one named, else the
    /// issuer's host), once the request has what an import needs.
    func validatedAccount() throws(VaultFailure) -> String {
        guard refreshToken != nil || accessToken != nil else {
            throw .badRequest(LocalizedText(
                en: "Give a refresh token or an access token to import: with vaultctl on its standard input or in a file (--secrets-file).",
                nb: "Oppgi et oppfriskingstoken eller et tilgangstoken som skal importeres: med vaultctl på standard inn eller i en fil (--secrets-file)."))
        }
        guard let url = URL(string: issuer), let host = url.host, let scheme = url.scheme,
              scheme == "https" || (scheme == "http" && ["127.0.0.1", "localhost", "::1"].contains(host)) else {
            throw .badRequest(LocalizedText(
                en: "The issuer must be an https:// address (http:// only on this computer).",
                nb: "Utstederen må være en https://-adresse (http:// bare på denne maskinen)."))
        }
        guard !clientID.isEmpty else {
            throw .badRequest(LocalizedText(en: "A client id is needed to import a session.",
                                            nb: "En klient-ID trengs for å importere en økt."))
        }
        return account ?? host
    }

    /// The session an import stores under `account`: its metadata (no claims:
    /// nothing was verified here) and its secret half.
    func session(account: String, createdAt: Int64) -> (SessionMeta, SessionSecret) {
        let meta = SessionMeta(account: account, provider: provider ?? "generic", issuer: issuer, clientID: clientID,
                               subject: subject ?? "", name: name ?? account, claims: [:], accessExpiresAt: accessExpiresAt,
                               refreshExpiresAt: nil, hasRefreshToken: refreshToken != nil, createdAt: createdAt)
        return (meta, SessionSecret(accessToken: accessToken, refreshToken: refreshToken, idToken: nil))
    }
}

extension Vault {
    public struct AccountInfo: Sendable {
        public var account: String
        public var provider: String
        public var name: String
        public var tokenHash: String
        public var accessExpiresAt: Int64?
        public var hasRefreshToken: Bool
        /// Its secrets are sealed under the vault key, which is not open now:
        /// `waiting` says, in words, what opens it.
        public var waiting: LocalizedText?
        /// The member registry's organizations for the person behind it, as
        /// (id, name), and the active one's id: what the settings app offers
        /// to change (nothing secret: the session's own `orgs` and `org` claims).
        public var organizations: [(id: String, name: String)] = []
        public var activeOrganization: String?
    }

    public struct LogoutResult: Sendable {
        public var removed: Int
        public var revokedAtProvider: Int
    }
}

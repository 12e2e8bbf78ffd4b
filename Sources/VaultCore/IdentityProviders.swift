import VaultFactor

/// Where the broker finds identity providers. vaultd implements it from its
/// configuration; tests pass fakes. The broker never knows OIDC itself.
public protocol IdentityProviderDirectory: Sendable {
    /// Providers a person can log in with, in the order they are offered.
    var loginProviders: [any IdentityProvider] { get }
    /// The provider that can refresh or revoke a stored session: a configured
    /// profile by id, or (for an imported session) one for its issuer and client.
    func provider(for session: SessionMeta) -> (any IdentityProvider)?
}

/// A directory with no providers: sessions can be imported and released, never refreshed.
public struct NoIdentityProviders: IdentityProviderDirectory {
    public init() {}
    public var loginProviders: [any IdentityProvider] { [] }
    public func provider(for session: SessionMeta) -> (any IdentityProvider)? { nil }
}

/// Login starts per client, limited as seed 002 asks (10 per minute).
struct LoginRateLimiter {
    let limit: Int
    let window: Double
    private var starts: [String: [Double]] = [:]

    init(limit: Int = 10, window: Double = 60) {
        self.limit = limit
        self.window = window
    }

    /// Records a start, or returns the seconds to wait when over the limit.
    mutating func admit(_ client: String, now: Double) -> Int? {
        var recent = (starts[client] ?? []).filter { now - $0 < window }
        if recent.count >= limit, let oldest = recent.first {
            starts[client] = recent
            return max(1, Int((oldest + window - now).rounded(.up)))
        }
        recent.append(now)
        starts[client] = recent
        // A process per request (each its own key) must not grow this without
        // end: past a few hundred keys, those with nothing in the window go.
        if starts.count > Self.keysKept {
            starts = starts.filter { _, times in times.contains { now - $0 < window } }
        }
        return nil
    }

    static let keysKept = 256
    var keyCount: Int { starts.count }
}

/// The member registry side of a login (the member record's national identity
/// number kept in step with what logins say): vaultd implements it with member sync; the broker only asks it to review logins and for claims.
public protocol MemberDirectory: Sendable {
    /// After a provider verified a login and before anything is stored. May
    /// refuse it (a minimum age: `age_requirement`); returns claims to add to
    /// the session (organization and roles from the member record). Runs the
    /// national-ID sync when the login carries a number.
    func review(_ login: VerifiedLogin) async throws(VaultFailure) -> [String: JSON]
    /// Chooses the active organization for a member of several.
    func setActiveOrganization(_ org: String, provider: String, subject: String) async throws(VaultFailure) -> [String: JSON]
    /// Conflicts for a person to resolve (`vaultctl sync conflicts`); no numbers in clear.
    func conflicts() async -> [JSON]
}

public struct NoMemberDirectory: MemberDirectory {
    public init() {}
    public func review(_ login: VerifiedLogin) async throws(VaultFailure) -> [String: JSON] { [:] }
    public func setActiveOrganization(_ org: String, provider: String, subject: String) async throws(VaultFailure) -> [String: JSON] {
        throw VaultFailure(.badRequest, message: LocalizedText(
            en: "No member registry is set up here, so there are no organizations to choose from.",
            nb: "Ingen medlemsregister er satt opp her, så det finnes ingen organisasjoner å velge mellom."))
    }
    public func conflicts() async -> [JSON] { [] }
}

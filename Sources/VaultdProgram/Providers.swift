import DaemonConfig
import FoundationEssentials
import Logging
import OIDCFactor
import Locking
import VaultCore
import VaultFactor
import VaultProtocol

/// The identity providers vaultd offers, from `[providers.NAME]` tables (or the
/// built-in demo providers with `--demo`), plus generic providers made on demand
/// for imported sessions, so they can be refreshed and revoked too.
final class ProviderDirectory: IdentityProviderDirectory {
    let configured: [OIDCProvider]
    let http: OIDCHTTPClient
    let logger: Logger
    /// vaultd's clock (DaemonClock), also for providers made on demand.
    let clock: @Sendable () -> Int64
    private let imported = Locked<[String: OIDCProvider]>([:])

    init(profiles: [ProviderProfile], http: OIDCHTTPClient, logger: Logger, clock: @escaping @Sendable () -> Double) {
        self.http = http
        self.logger = logger
        let seconds: @Sendable () -> Int64 = { Int64(clock()) }
        self.clock = seconds
        let log = logger
        configured = profiles.map { profile in
            OIDCProvider(profile: profile, http: http, diagnostics: { line in
                log.info("provider", metadata: ["provider": "\(profile.id)", "detail": "\(line)"])
            }, clock: seconds)
        }
    }

    var loginProviders: [any IdentityProvider] { configured }

    /// Where a client may open a browser for a login: the launch pages of the
    /// logins waiting now (each starts at vaultd's own loopback listener).
    func loginPageOrigins() -> [String] {
        configured.flatMap(\.loginPageOrigins)
    }

    func provider(for session: SessionMeta) -> (any IdentityProvider)? {
        if let p = configured.first(where: { $0.id == session.provider && $0.profile.issuer == session.issuer }) { return p }
        if let p = configured.first(where: { $0.profile.issuer == session.issuer && $0.profile.clientID == session.clientID }) { return p }
        // An imported session (like oidc-agent's --rt): a generic provider for its issuer and client.
        let key = session.issuer + " " + session.clientID
        return imported.withLock { cache in
            if let p = cache[key] { return p }
            let profile = ProviderProfile.generic(id: session.provider, displayName: session.issuer,
                                                  issuer: session.issuer, clientID: session.clientID)
            guard profile.problems().isEmpty else { return nil }
            let p = OIDCProvider(profile: profile, http: http, clock: clock)
            cache[key] = p
            return p
        }
    }

    /// Profiles from the config file; problems are returned as sentences for the config error.
    static func profiles(from tables: [String: FileConfig.ProviderSection]) -> (profiles: [ProviderProfile], problems: [String]) {
        var out: [ProviderProfile] = []
        var problems: [String] = []
        let order = ["bankid", "vipps", "idporten"]
        let names = tables.keys.sorted { (order.firstIndex(of: $0) ?? 99, $0) < (order.firstIndex(of: $1) ?? 99, $1) }
        for name in names {
            guard let t = tables[name] else { continue }
            guard let clientID = t.client_id, !clientID.isEmpty else {
                problems.append("providers.\(name): client_id is missing")
                continue
            }
            let auth: ProviderProfile.ClientAuthentication
            switch (t.client_secret, t.client_auth ?? "basic") {
            case (nil, _): auth = .none
            case (let secret?, "post"): auth = .clientSecretPost(secret)
            case (let secret?, _): auth = .clientSecretBasic(secret)
            }
            let kind = t.profile ?? (order.contains(name) ? name : "generic")
            let environment = ProviderProfile.Environment(rawValue: t.environment ?? "production") ?? .production
            var profile: ProviderProfile
            if let builtIn = ProviderProfile.builtIn(kind, environment: environment, clientID: clientID, clientAuthentication: auth) {
                profile = builtIn
                profile.id = name
                if let issuer = t.issuer {
                    profile.issuer = issuer
                    profile.discoveryURL = ProviderProfile.discoveryURL(forIssuer: issuer)
                }
            } else {
                guard kind == "generic", let issuer = t.issuer else {
                    problems.append("providers.\(name): a generic provider needs an issuer (or profile = bankid | vipps | idporten)")
                    continue
                }
                profile = .generic(id: name, displayName: t.display_name ?? name, issuer: issuer, clientID: clientID, clientAuthentication: auth)
            }
            if let d = t.display_name { profile.displayName = d }
            profile.gatewayURL = t.gateway
            if let token = t.backend {
                profile.backend = .init(tokenURL: token, revocationURL: t.backend_revocation)
            } else if t.backend_revocation != nil {
                problems.append("providers.\(name): backend_revocation needs backend")
            }
            if let port = t.redirect_port {
                guard let p = UInt16(exactly: port), p > 0 else {
                    problems.append("providers.\(name): redirect_port must be 1–65535")
                    continue
                }
                profile.redirect = .fixedPort(p, path: t.redirect_path ?? "/callback")
            } else if let path = t.redirect_path {
                profile.redirect = .ephemeralPort(path: path)
            }
            if let acr = t.min_acr { profile.minimumACR = acr }
            if let acr = t.reenroll_min_acr { profile.reenrollMinimumACR = acr }
            if let s = t.request_timeout { profile.requestTimeout = .seconds(max(1, s)) }
            if let s = t.redirect_timeout { profile.redirectTimeout = .seconds(max(1, s)) }
            problems += profile.problems()
            out.append(profile)
        }
        // Offer only providers that are actually configured here as alternatives.
        let ids = Set(out.map(\.id))
        for i in out.indices { out[i].alternatives = out[i].alternatives.filter { ids.contains($0.id) } }
        return (out, problems)
    }
}

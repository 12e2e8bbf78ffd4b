import NIOCore
import NIOHTTP1

/// Built-in local OpenID Connect providers for `vaultd --demo`: "Demo BankID" and
/// "Demo Vipps", two issuers behind one HTTP/1.1 server on 127.0.0.1 (ephemeral port),
/// with synthetic test people (``DemoIdentity/all``) and fresh signing keys at every start.
///
///     let demo = try await DemoProviders.start(group: MultiThreadedEventLoopGroup.singleton)
///     demo.bankID.issuer     // "http://127.0.0.1:PORT/bankid"
///     demo.vipps.clientID    // "sessionvault-demo"
///     try await demo.shutdown()
///
/// Log in without a browser by adding `demo_user=kari` to the authorization URL (auto-approve),
/// or `demo_cancel=1` (the user cancels: `error=access_denied`). Without either, the
/// authorization endpoint shows a page with one button per person.
///
/// Nothing here logs tokens, codes or national ID numbers: the optional log sees method,
/// path (never the query) and status.
public final class DemoProviders: Sendable {
    /// One demo issuer, as a client configures it.
    public struct Issuer: Sendable, Equatable {
        /// Profile id: `bankid` or `vipps`.
        public let id: String
        /// "Demo BankID", "Demo Vipps".
        public let displayName: String
        /// Exact issuer, no trailing slash: `http://127.0.0.1:PORT/bankid`.
        public let issuer: String
        /// The one registered client (public, PKCE S256, loopback redirect URIs on any port).
        public let clientID: String
        /// `ES256` (BankID) or `RS256` (Vipps).
        public let signingAlgorithm: String
        /// BankID: yes (rotating, with reuse detection). Vipps: no.
        public let issuesRefreshTokens: Bool
        /// Scopes worth asking for (all profile claims are given regardless).
        public let scopes: [String]
        /// The claim that names a person across logins: `bankid_altsub` (BankID's `sub`
        /// changes at every login) or `sub` (Vipps).
        public let stableSubjectClaim: String
        /// Where the national ID number comes from: `nnin_altsub` (ID token) or `nin` (userinfo).
        public let nationalIDClaim: String

        public var discoveryURL: String { issuer + "/.well-known/openid-configuration" }
    }

    public struct Configuration: Sendable {
        public var clientID = "sessionvault-demo"
        /// Access token lifetimes in seconds.
        public var bankIDAccessTokenTTL: Int64 = 600
        public var vippsAccessTokenTTL: Int64 = 300
        /// BankID refresh token lifetime (each one; a rotated one is replaced).
        public var refreshTokenTTL: Int64 = 24 * 3600
        public var idTokenTTL: Int64 = 600
        /// Authorization code lifetime.
        public var codeTTL: Int64 = 60
        /// The clock (Unix seconds): tests move it to expire tokens.
        public var now: @Sendable () -> Int64 = { unixNow() }
        /// Receives one line per request: method, path (no query), status. Never a secret.
        public var log: (@Sendable (String) -> Void)?

        public init() {}
    }

    public let bankID: Issuer
    public let vipps: Issuer
    /// The listening port on 127.0.0.1.
    public let port: Int
    /// `http://127.0.0.1:PORT`
    public var baseURL: String { "http://127.0.0.1:\(port)" }
    public var issuers: [Issuer] { [bankID, vipps] }
    /// The synthetic people both issuers know.
    public var identities: [DemoIdentity] { DemoIdentity.all }

    private let server: LoopbackHTTPServer

    private init(bankID: Issuer, vipps: Issuer, port: Int, server: LoopbackHTTPServer) {
        self.bankID = bankID
        self.vipps = vipps
        self.port = port
        self.server = server
    }

    /// Generates the signing keys (P-256 for BankID, RSA-2048 for Vipps), binds
    /// 127.0.0.1 on an ephemeral port and starts serving both issuers.
    public static func start(group: any EventLoopGroup, configuration: Configuration = Configuration()) async throws -> DemoProviders {
        let bankIDKey = SigningKey.es256()
        let vippsKey = try SigningKey.rs256()
        let router = Router(configuration: configuration, keys: (bankIDKey, vippsKey))
        let server = try await LoopbackHTTPServer.start(group: group) { request in
            await router.handle(request)
        }
        let engines = await router.attach(port: server.port)
        return DemoProviders(bankID: engines.bankID.publicDescription, vipps: engines.vipps.publicDescription,
                             port: server.port, server: server)
    }

    /// Stops listening and closes all connections. Outstanding tokens die with the process state.
    public func shutdown() async throws {
        await server.shutdown()
    }
}

extension IssuerEngine {
    nonisolated var publicDescription: DemoProviders.Issuer {
        DemoProviders.Issuer(
            id: settings.id, displayName: settings.displayName, issuer: settings.issuer, clientID: settings.clientID,
            signingAlgorithm: key.alg, issuesRefreshTokens: settings.kind == .bankID,
            scopes: settings.kind == .bankID ? ["openid", "profile", "nnin_altsub"] : ["openid", "name", "phoneNumber", "nin"],
            stableSubjectClaim: settings.kind == .bankID ? "bankid_altsub" : "sub",
            nationalIDClaim: settings.kind == .bankID ? "nnin_altsub" : "nin")
    }
}

/// Routes `/bankid/…` and `/vipps/…` to their issuers. The engines exist only once the
/// port is known (the issuer URL contains it), so the router is attached after bind;
/// a request that arrives before that gets 503.
private final class Router: Sendable {
    private let configuration: DemoProviders.Configuration
    private let keys: (bankID: SigningKey, vipps: SigningKey)
    private let slot = EngineSlot()

    init(configuration: DemoProviders.Configuration, keys: (SigningKey, SigningKey)) {
        self.configuration = configuration
        self.keys = (keys.0, keys.1)
    }

    func attach(port: Int) async -> (bankID: IssuerEngine, vipps: IssuerEngine) {
        let c = configuration
        let base = "http://127.0.0.1:\(port)"
        func settings(_ kind: ProviderKind) -> IssuerSettings {
            switch kind {
            case .bankID:
                return IssuerSettings(kind: .bankID, id: "bankid", displayName: "Demo BankID", issuer: base + "/bankid",
                                      clientID: c.clientID, accessTokenTTL: c.bankIDAccessTokenTTL,
                                      refreshTokenTTL: c.refreshTokenTTL, idTokenTTL: c.idTokenTTL, codeTTL: c.codeTTL,
                                      scopesSupported: ["openid", "profile", "nnin_altsub", "email", "phone"])
            case .vipps:
                return IssuerSettings(kind: .vipps, id: "vipps", displayName: "Demo Vipps", issuer: base + "/vipps",
                                      clientID: c.clientID, accessTokenTTL: c.vippsAccessTokenTTL,
                                      refreshTokenTTL: 0, idTokenTTL: c.idTokenTTL, codeTTL: c.codeTTL,
                                      scopesSupported: ["openid", "name", "phoneNumber", "nin", "email", "birthDate", "address"])
            }
        }
        let engines = (bankID: IssuerEngine(settings: settings(.bankID), key: keys.bankID, now: c.now),
                       vipps: IssuerEngine(settings: settings(.vipps), key: keys.vipps, now: c.now))
        await slot.set(Engines(port: port, bankID: engines.bankID, vipps: engines.vipps))
        return engines
    }

    func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let response = await route(request)
        configuration.log?("demo-providers: \(request.method.rawValue) \(request.path) -> \(response.status.code)")
        return response
    }

    private func route(_ request: HTTPRequest) async -> HTTPResponse {
        guard let engines = await slot.get() else { return .text(.serviceUnavailable, "Starting up.") }
        // DNS rebinding: a web page on another name that resolves to 127.0.0.1 sends its own Host.
        let host = request.headers.first(name: "host")?.lowercased()
        guard host == "127.0.0.1:\(engines.port)" || host == "localhost:\(engines.port)" else {
            return .text(.misdirectedRequest, "Unexpected Host header: use http://127.0.0.1:\(engines.port).")
        }
        let path = request.path
        for (prefix, engine) in [("/bankid", engines.bankID), ("/vipps", engines.vipps)] where path.hasPrefix(prefix + "/") {
            return await engine.handle(endpoint: String(path.dropFirst(prefix.count)), request: request)
        }
        return .text(.notFound, "Not found. Issuers: /bankid and /vipps.")
    }
}

private struct Engines: Sendable {
    let port: Int
    let bankID: IssuerEngine
    let vipps: IssuerEngine
}

/// Set once after bind, read by every request.
private actor EngineSlot {
    private var engines: Engines?

    func set(_ e: Engines) { engines = e }
    func get() -> Engines? { engines }
}

import AsyncHTTPClient
import CryptoExtras
import Foundation
import JWTKit
import NIOCore
import NIOHTTP1
import NIOPosix
import Locking
import XCTest
@testable import OIDCFactor
@testable import OIDCToken
import VaultFactor

// MARK: - Keys and tokens made in the test

/// A 2048-bit RSA key generated once for these tests only (jwt-kit cannot generate
/// RSA keys, and the test target should not depend on swift-crypto directly).
let testRSAPrivateKeyPEM = """
-----BEGIN PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCuq297b5v3zzDS
eLAQH6kdr0ZcN9m8WhMX+J3GtBnSraENs5q6+PHUjFEWTXIgB8gPZ+/toCIF6R1d
UfA40opMv7Wcw1z5wZ6kDuDZFJSIhd6RwQSUovxhZwU9CWEPZqdB8Eq/LAfPRNR5
tI+MfSEdM4ic+GMoC6fLdtBY0PNIzVgWcC5EU9ZRW44o5M9udGMzr+c67Mia6KiE
vEny9Scdtk+9Wtq5HysymOE57REcYCQa7OEXuax8ypYRXHtletXmPVF6E5J/FI1I
MG+kjHQx+/O3C+DKSenHstWhmNXJZgs3PjltwWltLpcMLebamAxSWPFVGwe24N5g
o86dIrqbAgMBAAECggEABldnBr44lWNKTHnhOn9Lw9jMidCP8SH8C3oVOv+S6G6G
qFla8WrUV3kjVddIoMJnkFefrargpqzzSfi4QKKJhDEkRiVkR2pbeMKphc1qJG1n
yow4FFq5JaLN3TdtSgKEvq9wp0bRScR1SliJ1aSSrTK6b6h868PwkEHSB/IeGF3S
BTSpKWoS0Imof49WfSbbCP8O5CYzKO02qaA0i/hlwq8FRpcMJyFFgwjNrJKgAKZN
zipuIns6yO1S4GJb4b53sSmaANzsFVCPmjmT5ZfXZ5Sna3S47881hiMdQinomZql
NmDBZZ6RW+C9YIW1+38FCc/MxgU6BIN1OOXjo+QzAQKBgQDvDxpCORMaipeTOq3b
vHl5p6YElreByNBkcbifj6CoiDyiLPUaxzxgFAc/4k2aI7jK0amhYQr4B68wXaVN
i5svmzeIVpA5BGrpqJerVx9h1eAa2H6iRvrFJOTDDbTBmuEezAGJf6vtRCK0RM3W
Fq0YShM+srBLIyTdWAYI3yqa2wKBgQC7DDYtqu6B+BBnQN0kawoG5mgmJtovB2u7
DcGoEuRpTr0JIcHFBL2j/os96+0DbC0AlDGknBFW1aRrnX17BSkEXol/bFyV/iTX
nSyoj5aRKq5swyLUApyukaozlDIb+xlizgLTifRQEieChsYnKIRlM91ptKLTDmAT
gFsBux4LQQKBgQCJY/OidazeByLf8cxzyhlCarCGWJx0kZX69ES4J1KdKVc3mYDw
d+riCQC1nXkeCkOtBNxprB0iuT/dGyTisUZqENnUmHNg4YIUcdlhFrwpfULECwKU
fximbvKui1UEI+AX1AVaIa8MuKj9U8G8teGbYQ84bHfXZwZL08f8F04kGwKBgGpM
Gk4BoeGCk+/Z0NLtcZlSP0XPNpcbZIG8450cf2nJMWyLHo9UjmEwOvlJpjwXsctu
bHfbqY7rgrEVo0XSPOkawJEFh+hFsbJGxCZW035T/yQYESbjBR+/8DW3tnJoVJjt
8nU9JPaMGp/27405XWQWAXIdEZtXxAnRG+bz67MBAoGABypkTSoMmzv03JAVXFxF
NK4sACbjvhi436d6GZR4N3X01cb7yUd38V+2RDXlkO41I7cQVbu/3gJuT4ag+dBC
rfajJXrXf0myAaJBZ8VGhkGaZOEVsRXAm+X5upluWmbLEchWGmWZ1yNh+B42lyUA
17ZwGRfZ85PDibhuNGjErpw=
-----END PRIVATE KEY-----
"""

/// One signing key with its public JWK, able to mint compact JWS with any header.
struct TestSigner: Sendable {
    let kid: String
    let alg: String
    let algorithm: any JWTAlgorithm
    let jwk: [String: JSON]
    /// For the "HS256 keyed with the public key" attack.
    let publicPEM: String?

    static func es256(kid: String = "es-1") async throws -> TestSigner {
        let key = ES256PrivateKey()
        guard let params = key.publicKey.parameters else { throw TestError("no EC parameters") }
        let collection = JWTKeyCollection()
        await collection.add(ecdsa: key, kid: JWKIdentifier(string: kid))
        let algorithm = try await collection.getKey(for: JWKIdentifier(string: kid))
        return TestSigner(kid: kid, alg: "ES256", algorithm: algorithm,
                          jwk: ["kty": "EC", "crv": "P-256", "x": .string(params.x), "y": .string(params.y),
                                "kid": .string(kid), "alg": "ES256", "use": "sig"],
                          publicPEM: key.publicKey.pemRepresentation)
    }

    /// The fixed test key, or with `fresh` a new RSA-2048 one.
    static func rs256(kid: String = "rs-1", fresh: Bool = false) async throws -> TestSigner {
        let key = fresh ? try Insecure.RSA.PrivateKey(backing: _RSA.Signing.PrivateKey(keySize: .bits2048))
                        : try Insecure.RSA.PrivateKey(pem: testRSAPrivateKeyPEM)
        let primitives = try key.publicKey.getKeyPrimitives()
        let collection = JWTKeyCollection()
        await collection.add(rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: kid))
        let algorithm = try await collection.getKey(for: JWKIdentifier(string: kid))
        return TestSigner(kid: kid, alg: "RS256", algorithm: algorithm,
                          jwk: ["kty": "RSA", "n": .string(Base64URL.encode(Array(primitives.modulus))),
                                "e": .string(Base64URL.encode(Array(primitives.publicExponent))),
                                "kid": .string(kid), "alg": "RS256", "use": "sig"],
                          publicPEM: key.publicKey.pemRepresentation)
    }

    static func edDSA(kid: String = "ed-1") async throws -> TestSigner {
        let key = try EdDSA.PrivateKey(curve: .ed25519)
        let collection = JWTKeyCollection()
        await collection.add(eddsa: key, kid: JWKIdentifier(string: kid))
        let algorithm = try await collection.getKey(for: JWKIdentifier(string: kid))
        return TestSigner(kid: kid, alg: "EdDSA", algorithm: algorithm,
                          jwk: ["kty": "OKP", "crv": "Ed25519",
                                "x": .string(Base64URL.encode(Array(key.publicKey.rawRepresentation))),
                                "kid": .string(kid), "alg": "EdDSA", "use": "sig"],
                          publicPEM: nil)
    }

    /// The JWK without its `alg` member.
    var jwkWithoutAlg: [String: JSON] {
        var j = jwk
        j["alg"] = nil
        return j
    }

    var defaultHeader: [String: JSON] { ["alg": .string(alg), "kid": .string(kid), "typ": "JWT"] }

    func sign(_ payload: [String: JSON], header: [String: JSON]? = nil) throws -> String {
        let h = Base64URL.encode(JSON.object(header ?? defaultHeader).serialized())
        let p = Base64URL.encode(JSON.object(payload).serialized())
        let signature = try algorithm.sign(Array("\(h).\(p)".utf8))
        return "\(h).\(p).\(Base64URL.encode(signature))"
    }
}

/// Signs with HMAC-SHA256 under an arbitrary key (the classic RS256→HS256 confusion).
func hmacToken(secret: String, kid: String, payload: [String: JSON]) async throws -> String {
    let collection = JWTKeyCollection()
    await collection.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256, kid: JWKIdentifier(string: "h"))
    let algorithm = try await collection.getKey(for: JWKIdentifier(string: "h"))
    let header: [String: JSON] = ["alg": "HS256", "kid": .string(kid), "typ": "JWT"]
    let h = Base64URL.encode(JSON.object(header).serialized())
    let p = Base64URL.encode(JSON.object(payload).serialized())
    return "\(h).\(p).\(Base64URL.encode(try algorithm.sign(Array("\(h).\(p)".utf8))))"
}

func jwksBody(_ keys: [[String: JSON]]) -> [UInt8] {
    JSON.object(["keys": .array(keys.map { .object($0) })]).serialized()
}

struct TestError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

func unixNow() -> Int64 { Int64(Date().timeIntervalSince1970) }

// MARK: - An in-process HTTP server (the provider stub)

struct StubRequest: Sendable {
    var method: String
    var path: String
    var query: [String: String]
    var headers: [(String, String)]
    var body: [UInt8]

    var form: [String: String] {
        var out: [String: String] = [:]
        for (k, v) in FormEncoding.parseQuery(String(decoding: body, as: UTF8.self)) ?? [] { out[k] = v }
        return out
    }
    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }
}

indirect enum StubReply: Sendable {
    case json(Int, JSON)
    case raw(Int, [(String, String)], [UInt8])
    /// Waits, then answers.
    case delayed(Duration, StubReply)
    /// Sends the head at once and the body after a delay.
    case slowBody(Duration, [UInt8])
    /// A body of `bytes` bytes, chunked (no content-length) unless `declareLength`.
    case huge(bytes: Int, declareLength: Bool)
}

typealias StubHandler = @Sendable (StubRequest) async -> StubReply

final class StubServer: Sendable {
    let port: Int
    private let channel: any Channel
    private let routes = Locked<[String: StubHandler]>([:])
    private let log = Locked<[StubRequest]>([])

    var base: String { "http://127.0.0.1:\(port)" }

    private init(channel: any Channel, port: Int) {
        self.channel = channel
        self.port = port
    }

    static func start() async throws -> StubServer {
        let boxRef = BoxRef()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(StubHandlerAdapter(server: boxRef))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let server = StubServer(channel: channel, port: channel.localAddress!.port!)
        boxRef.set(server)
        return server
    }

    func stop() async {
        try? await channel.close()
    }

    /// `key` is "METHOD /path".
    func route(_ key: String, _ handler: @escaping StubHandler) {
        routes.withLock { $0[key] = handler }
    }

    func requests(_ key: String) -> [StubRequest] {
        log.withLock { $0.filter { "\($0.method) \($0.path)" == key } }
    }

    func dispatch(_ request: StubRequest) async -> StubReply {
        log.withLock { $0.append(request) }
        let handler = routes.withLock { $0["\(request.method) \(request.path)"] }
        guard let handler else { return .json(404, ["error": "not_found"]) }
        return await handler(request)
    }
}

final class BoxRef: Sendable {
    private let box = Locked<StubServer?>(nil)
    func set(_ server: StubServer) { box.withLock { $0 = server } }
    var server: StubServer? { box.withLock { $0 } }
}

private final class StubHandlerAdapter: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let server: BoxRef
    var head: HTTPRequestHead?
    var body: [UInt8] = []

    init(server: BoxRef) { self.server = server }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            body = []
        case .body(var buf):
            body += buf.readBytes(length: buf.readableBytes) ?? []
        case .end:
            guard let h = head, let server = server.server else { return }
            let uri = h.uri
            let path = String(uri.split(separator: "?", maxSplits: 1).first ?? "")
            var query: [String: String] = [:]
            if let q = uri.firstIndex(of: "?") {
                for (k, v) in FormEncoding.parseQuery(uri[uri.index(after: q)...]) ?? [] { query[k] = v }
            }
            let request = StubRequest(method: h.method.rawValue, path: path, query: query,
                                      headers: h.headers.map { ($0.name, $0.value) }, body: body)
            let bound = NIOLoopBound(StubWriter(context: context, handler: self), eventLoop: context.eventLoop)
            startReply(server: server, request: request, bound: bound, loop: context.eventLoop)
        }
    }

    fileprivate static func send(_ reply: StubReply, bound: NIOLoopBound<StubWriter>, loop: any EventLoop) async {
        switch reply {
        case .delayed(let d, let inner):
            try? await Task.sleep(for: d)
            await send(inner, bound: bound, loop: loop)
        case .json(let status, let json):
            let bytes = json.serialized()
            loop.execute {
                let (ctx, h) = (bound.value.context, bound.value.handler)
                h.write(ctx, status: status, headers: [("content-type", "application/json")], body: bytes, close: false)
            }
        case .raw(let status, let headers, let bytes):
            loop.execute {
                let (ctx, h) = (bound.value.context, bound.value.handler)
                h.write(ctx, status: status, headers: headers, body: bytes, close: false)
            }
        case .slowBody(let d, let bytes):
            loop.execute {
                let (ctx, h) = (bound.value.context, bound.value.handler)
                var headers = HTTPHeaders([("content-type", "application/json"), ("content-length", "\(bytes.count)")])
                headers.add(name: "connection", value: "close")
                ctx.writeAndFlush(h.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))),
                                  promise: nil)
            }
            try? await Task.sleep(for: d)
            loop.execute {
                let (ctx, h) = (bound.value.context, bound.value.handler)
                ctx.write(h.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: bytes)))), promise: nil)
                ctx.writeAndFlush(h.wrapOutboundOut(.end(nil)), promise: nil)
            }
        case .huge(let total, let declare):
            loop.execute {
                let (ctx, h) = (bound.value.context, bound.value.handler)
                var headers = HTTPHeaders([("content-type", "application/json")])
                if declare { headers.add(name: "content-length", value: "\(total)") }
                ctx.write(h.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))),
                          promise: nil)
                let chunk = ByteBuffer(repeating: UInt8(ascii: " "), count: 64 * 1024)
                var sent = 0
                while sent < total {
                    let n = min(chunk.readableBytes, total - sent)
                    ctx.write(h.wrapOutboundOut(.body(.byteBuffer(chunk.getSlice(at: 0, length: n)!))), promise: nil)
                    sent += n
                }
                ctx.writeAndFlush(h.wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }

    fileprivate func write(_ context: ChannelHandlerContext, status: Int, headers: [(String, String)], body: [UInt8],
                       close: Bool) {
        var h = HTTPHeaders(headers)
        h.replaceOrAdd(name: "content-length", value: "\(body.count)")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status),
                                                             headers: h))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        if close { context.close(promise: nil) }
    }
}

private struct StubWriter {
    let context: ChannelHandlerContext
    let handler: StubHandlerAdapter
}

private func startReply(server: StubServer, request: StubRequest, bound: NIOLoopBound<StubWriter>, loop: any EventLoop) {
    Task {
        let reply = await server.dispatch(request)
        await StubHandlerAdapter.send(reply, bound: bound, loop: loop)
    }
}

/// A port with nothing listening on it (bound, then closed).
func closedPort() async throws -> Int {
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .bind(host: "127.0.0.1", port: 0).get()
    let port = channel.localAddress!.port!
    try await channel.close()
    return port
}

// MARK: - A provider on the stub server

/// What the stub provider does; tests change it between steps.
struct StubOIDCConfig: Sendable {
    var signer: TestSigner
    var jwks: [[String: JSON]]
    var issParameterSupported = false
    var revocation = true
    var subject = "user-1"
    var idClaims: [String: JSON] = [:]
    var userinfoClaims: [String: JSON] = [:]
    var userinfoSub: String?
    var issueRefreshTokens = true
    var expiresIn: Int64 = 300
    var refreshExpiresIn: Int64? = 86_400
    /// Changes the ID token just before signing (hostile providers).
    var mutateIDToken: (@Sendable (inout [String: JSON], inout [String: JSON]) -> Void)?
    /// Replaces the ID token entirely.
    var idTokenOverride: (@Sendable (_ nonce: String, _ accessToken: String) async -> String)?
    var discoveryIssuer: String?
    var signingAlgs: [String]?
}

final class StubOIDC: Sendable {
    struct Pending: Sendable {
        var nonce: String
        var challenge: String
        var redirectURI: String
    }

    let server: StubServer
    let clientID = "client-1"
    let config: Locked<StubOIDCConfig>
    private let codes = Locked<[String: Pending]>([:])
    private let refreshTokens = Locked<Set<String>>([])
    let jwksFetches = Locked(0)

    var issuer: String { server.base }

    private init(server: StubServer, config: StubOIDCConfig) {
        self.server = server
        self.config = Locked(config)
    }

    static func start(signer: TestSigner) async throws -> StubOIDC {
        let server = try await StubServer.start()
        let stub = StubOIDC(server: server, config: StubOIDCConfig(signer: signer, jwks: [signer.jwk]))
        stub.installRoutes()
        return stub
    }

    func stop() async { await server.stop() }

    func update(_ change: (inout StubOIDCConfig) -> Void) {
        config.withLock { change(&$0) }
    }

    private func installRoutes() {
        server.route("GET /.well-known/openid-configuration") { [self] _ in
            let c = config.withLock { $0 }
            var doc: [String: JSON] = [
                "issuer": .string(c.discoveryIssuer ?? issuer),
                "authorization_endpoint": .string(issuer + "/authorize"),
                "token_endpoint": .string(issuer + "/token"),
                "userinfo_endpoint": .string(issuer + "/userinfo"),
                "jwks_uri": .string(issuer + "/jwks"),
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": .array((c.signingAlgs ?? [c.signer.alg]).map { .string($0) }),
                "code_challenge_methods_supported": ["S256"],
                "authorization_response_iss_parameter_supported": .bool(c.issParameterSupported),
            ]
            if c.revocation { doc["revocation_endpoint"] = .string(issuer + "/revoke") }
            return .json(200, .object(doc))
        }
        server.route("GET /jwks") { [self] _ in
            jwksFetches.withLock { $0 += 1 }
            return .raw(200, [("content-type", "application/json")], jwksBody(config.withLock { $0.jwks }))
        }
        server.route("POST /token") { [self] request in await token(request) }
        server.route("GET /userinfo") { [self] request in
            let c = config.withLock { $0 }
            guard let auth = request.header("authorization"), auth.hasPrefix("Bearer ") else {
                return .json(401, ["error": "invalid_token"])
            }
            var claims = c.userinfoClaims
            claims["sub"] = .string(c.userinfoSub ?? c.subject)
            return .json(200, .object(claims))
        }
        server.route("POST /revoke") { _ in .raw(200, [], []) }
    }

    /// Plays the provider's login page: remembers nonce and PKCE challenge for the code.
    func issueCode(for request: AuthRequest) -> String {
        let code = "code-" + UUID().uuidString
        codes.withLock {
            $0[code] = Pending(nonce: request.params["nonce"] ?? "", challenge: request.params["code_challenge"] ?? "",
                               redirectURI: request.redirectURI)
        }
        return code
    }

    func tokenResponse(nonce: String, includeIDToken: Bool) async -> [String: JSON] {
        let c = config.withLock { $0 }
        let access = "at-" + UUID().uuidString
        var body: [String: JSON] = ["access_token": .string(access), "token_type": "Bearer",
                                    "expires_in": .int(c.expiresIn)]
        if c.issueRefreshTokens {
            let refresh = "rt-" + UUID().uuidString
            refreshTokens.withLock { _ = $0.insert(refresh) }
            body["refresh_token"] = .string(refresh)
            if let r = c.refreshExpiresIn { body["refresh_expires_in"] = .int(r) }
        }
        if includeIDToken {
            if let override = c.idTokenOverride {
                body["id_token"] = .string(await override(nonce, access))
            } else {
                let now = unixNow()
                var claims: [String: JSON] = [
                    "iss": .string(issuer), "sub": .string(c.subject), "aud": .string(clientID),
                    "exp": .int(now + 300), "iat": .int(now), "nonce": .string(nonce),
                    "at_hash": .string(IDTokenVerifier.tokenHash(access, algorithm: SigningAlgorithm(rawValue: c.signer.alg)!)),
                ]
                for (k, v) in c.idClaims { claims[k] = v }
                var header = c.signer.defaultHeader
                c.mutateIDToken?(&header, &claims)
                body["id_token"] = .string((try? c.signer.sign(claims, header: header)) ?? "x.y.z")
            }
        }
        return body
    }

    func token(_ request: StubRequest) async -> StubReply {
        let form = request.form
        switch form["grant_type"] {
        case "authorization_code":
            guard let code = form["code"], let pending = codes.withLock({ $0.removeValue(forKey: code) }) else {
                return .json(400, ["error": "invalid_grant"])
            }
            guard let verifier = form["code_verifier"], PKCE.challenge(for: verifier) == pending.challenge,
                  form["redirect_uri"] == pending.redirectURI else {
                return .json(400, ["error": "invalid_grant", "error_description": "PKCE or redirect_uri"])
            }
            return .json(200, .object(await tokenResponse(nonce: pending.nonce, includeIDToken: true)))
        case "refresh_token":
            guard let rt = form["refresh_token"], refreshTokens.withLock({ $0.remove(rt) }) != nil else {
                return .json(400, ["error": "invalid_grant"])
            }
            return .json(200, .object(await tokenResponse(nonce: "", includeIDToken: false)))
        default:
            return .json(400, ["error": "unsupported_grant_type"])
        }
    }

    /// A profile for this stub, shaped like `base` (a built-in profile).
    func profile(_ base: ProviderProfile) -> ProviderProfile {
        var p = base
        p.issuer = issuer
        p.discoveryURL = ProviderProfile.discoveryURL(forIssuer: issuer)
        p.clientID = clientID
        p.redirectTimeout = .seconds(10)
        p.requestTimeout = .seconds(5)
        return p
    }
}

// MARK: - The browser, played by the test

struct AuthRequest: Sendable {
    var url: String
    /// The launch page the browser was started at, which led to `url`.
    var launchURL: String
    var params: [String: String]
    var redirectURI: String { params["redirect_uri"] ?? "" }
    var state: String { params["state"] ?? "" }

    init(url: String, launchURL: String = "") {
        self.url = url
        self.launchURL = launchURL
        var params: [String: String] = [:]
        if let q = url.firstIndex(of: "?") {
            for (k, v) in FormEncoding.parseQuery(url[url.index(after: q)...]) ?? [] { params[k] = v }
        }
        self.params = params
    }
}

struct BrowserResult: Sendable {
    var status: Int
    var body: String
}

/// The browser for tests: a client that does not follow redirects.
let testBrowserClient: HTTPClient = {
    var config = HTTPClient.Configuration()
    config.redirectConfiguration = .disallow
    config.connectionPool.retryConnectionEstablishment = false
    return HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: config)
}()

/// The HTTP client the providers under test share.
let sharedTestHTTP = OIDCHTTPClient()

func browserGET(_ url: String, timeout: Duration = .seconds(20)) async throws -> (status: Int, headers: HTTPHeaders, body: String) {
    let response = try await testBrowserClient.execute(HTTPClientRequest(url: url), timeout: TimeAmount(timeout))
    let body = try await response.body.collect(upTo: 1 << 20)
    return (Int(response.status.code), response.headers, String(buffer: body))
}

/// A browser's first step: the loopback listener's one-time launch page
/// redirects to the provider's authorization request. "" when it does not.
func followLaunchPage(_ launchURL: String) async -> String {
    guard let r = try? await browserGET(launchURL), r.status == 302 else { return "" }
    return r.headers["location"].first ?? ""
}

/// A person's client whose "browser" is `action`: given the authorization
/// request, it returns the redirect query to send back (nil: never comes back).
final class BrowserConversation: FactorConversation {
    typealias Action = @Sendable (AuthRequest) async -> [(String, String)]?

    let language: Language
    let action: Action
    let opened = Locked<[(url: String, text: LocalizedText)]>([])
    /// The addresses the browser was started at (the listener's launch pages).
    let launched = Locked<[String]>([])
    private let task = Locked<Task<BrowserResult?, Never>?>(nil)

    init(language: Language = .en, action: @escaping Action) {
        self.language = language
        self.action = action
    }

    func show(_ message: LocalizedText) async {}
    func askSecret(_ prompt: LocalizedText) async throws(FactorError) -> SecureBytes { throw .notInteractive }
    func confirm(_ prompt: LocalizedText) async throws(FactorError) -> Bool { throw .notInteractive }

    /// Opens the launch page as a browser does, and records where it leads: the
    /// authorization request (`opened`), never on the launch page's address.
    func openURL(_ launchURL: String, _ text: LocalizedText) async throws(FactorError) {
        launched.withLock { $0.append(launchURL) }
        let url = await followLaunchPage(launchURL)
        opened.withLock { $0.append((url, text)) }
        let request = AuthRequest(url: url, launchURL: launchURL)
        let action = self.action
        task.withLock {
            $0 = Task {
                guard let query = await action(request) else { return nil }
                let target = request.redirectURI + "?" + FormEncoding.encode(query)
                guard let r = try? await browserGET(target) else { return BrowserResult(status: -1, body: "") }
                return BrowserResult(status: r.status, body: r.body)
            }
        }
    }

    /// What the browser showed after the redirect (nil if it never went back).
    func browserResult() async -> BrowserResult? {
        await task.withLock { $0 }?.value
    }

    var lastRequest: AuthRequest? {
        opened.withLock { $0.last.map { AuthRequest(url: $0.url) } }
    }
}

/// The usual happy browser for a stub provider: log in and come back with code + state (+ iss).
func loggingIn(_ stub: StubOIDC, iss: Bool = true, extra: [(String, String)] = []) -> BrowserConversation.Action {
    { request in
        let code = stub.issueCode(for: request)
        var q: [(String, String)] = [("code", code), ("state", request.state)]
        if iss { q.append(("iss", stub.issuer)) }
        return q + extra
    }
}

func assertFailure<T>(_ code: ErrorCode, _ body: () async throws(VaultFailure) -> T,
                      file: StaticString = #filePath, line: UInt = #line) async -> VaultFailure? {
    do {
        _ = try await body()
        XCTFail("expected \(code.rawValue), but it succeeded", file: file, line: line)
        return nil
    } catch {
        XCTAssertEqual(error.code, code, "message: \(error.message.en)", file: file, line: line)
        return error
    }
}

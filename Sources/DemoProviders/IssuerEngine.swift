import NIOHTTP1
import SodiumKit
import VaultProtocol

/// Which provider an issuer imitates.
enum ProviderKind: Sendable {
    /// ES256; `sub` new on every login, `bankid_altsub` stable, `nnin_altsub` and profile
    /// claims in the ID token; refresh tokens rotate on every use with reuse detection.
    case bankID
    /// RS256; stable `sub` and nothing else personal in the ID token; profile claims
    /// (`name`, `phone_number`, `nin`, …) from userinfo only; no refresh tokens.
    case vipps
}

struct IssuerSettings: Sendable {
    let kind: ProviderKind
    /// Path segment and profile id: `bankid`, `vipps`.
    let id: String
    let displayName: String
    /// `http://127.0.0.1:PORT/bankid`, no trailing slash.
    let issuer: String
    let clientID: String
    let accessTokenTTL: Int64
    let refreshTokenTTL: Int64
    let idTokenTTL: Int64
    let codeTTL: Int64
    let scopesSupported: [String]
}

/// One issuer's OAuth 2.0 / OpenID Connect endpoints and all its state. An actor, so
/// every grant is decided atomically: state changes happen before the only suspension
/// point (signing the ID token), never across it.
actor IssuerEngine {
    let settings: IssuerSettings
    let key: SigningKey
    private let now: @Sendable () -> Int64

    private struct PendingCode {
        let clientID: String
        let redirectURI: String
        let challenge: String
        let nonce: String?
        let scope: String
        let identity: DemoIdentity
        let loginSubject: String
        let authTime: Int64
        let expires: Int64
        var used = false
        var family: String?
    }

    /// Everything issued from one login (one authorization code).
    private struct Family {
        let identity: DemoIdentity
        let loginSubject: String
        let clientID: String
        let scope: String
        let authTime: Int64
        var revoked = false
        var refreshKeys: [String] = []
        var accessKeys: [String] = []
    }

    private struct AccessRecord {
        let family: String
        let scope: String
        let expires: Int64
        var revoked = false
    }

    private enum RefreshState { case active, rotated, revoked }

    private struct RefreshRecord {
        let family: String
        var state: RefreshState
        let expires: Int64
    }

    // Keyed by `tokenKey(token)` (a SHA-256): the provider remembers hashes, not tokens.
    private var codes: [String: PendingCode] = [:]
    private var families: [String: Family] = [:]
    private var accessTokens: [String: AccessRecord] = [:]
    private var refreshTokens: [String: RefreshRecord] = [:]
    private var lastPrune: Int64 = 0

    init(settings: IssuerSettings, key: SigningKey, now: @escaping @Sendable () -> Int64) {
        self.settings = settings
        self.key = key
        self.now = now
    }

    private var issuesRefreshTokens: Bool { settings.kind == .bankID }

    // MARK: - Dispatch

    func handle(endpoint: String, request: HTTPRequest) async -> HTTPResponse {
        switch endpoint {
        case "/.well-known/openid-configuration":
            guard request.method == .GET || request.method == .HEAD else { return methodNotAllowed("GET") }
            return jsonResponse(discovery())
        case "/jwks":
            guard request.method == .GET || request.method == .HEAD else { return methodNotAllowed("GET") }
            return jsonResponse(["keys": [key.publicJWK]])
        case "/authorize":
            guard request.method == .GET || request.method == .POST else { return methodNotAllowed("GET, POST") }
            return authorize(request)
        case "/token":
            guard request.method == .POST else { return methodNotAllowed("POST") }
            return await token(request)
        case "/userinfo":
            guard request.method == .GET || request.method == .POST else { return methodNotAllowed("GET, POST") }
            return userinfo(request)
        case "/revoke":
            guard request.method == .POST else { return methodNotAllowed("POST") }
            return revoke(request)
        default:
            return jsonResponse(["error": "not_found"], status: .notFound)
        }
    }

    // MARK: - Discovery

    func discovery() -> JSON {
        let iss = settings.issuer
        var doc: [String: JSON] = [
            "issuer": .string(iss),
            "authorization_endpoint": .string(iss + "/authorize"),
            "token_endpoint": .string(iss + "/token"),
            "userinfo_endpoint": .string(iss + "/userinfo"),
            "jwks_uri": .string(iss + "/jwks"),
            "revocation_endpoint": .string(iss + "/revoke"),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": .array(issuesRefreshTokens ? ["authorization_code", "refresh_token"] : ["authorization_code"]),
            "subject_types_supported": [settings.kind == .bankID ? "pairwise" : "public"],
            "id_token_signing_alg_values_supported": [.string(key.alg)],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "revocation_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": .array(settings.scopesSupported.map { .string($0) }),
            "claims_supported": .array(claimsSupported.map { .string($0) }),
            "authorization_response_iss_parameter_supported": true,
            "request_parameter_supported": false,
            "claims_parameter_supported": false,
            "ui_locales_supported": ["nb", "en"],
        ]
        if settings.kind == .bankID {
            doc["acr_values_supported"] = ["urn:bankid:bid;LOA=3", "urn:bankid:bid;LOA=4"]
        }
        return .object(doc)
    }

    private var claimsSupported: [String] {
        let standard = ["iss", "sub", "aud", "azp", "exp", "iat", "auth_time", "nonce", "at_hash"]
        switch settings.kind {
        case .bankID:
            return standard + ["acr", "amr", "bankid_altsub", "nnin_altsub", "name", "given_name", "family_name",
                               "birthdate", "org", "roles"]
        case .vipps:
            return standard + ["name", "given_name", "family_name", "phone_number", "nin", "email", "email_verified",
                               "birthdate", "org", "roles"]
        }
    }

    // MARK: - Authorization endpoint

    private func authorize(_ request: HTTPRequest) -> HTTPResponse {
        guard var pairs = parseForm(request.query.utf8) else { return errorPage("The request's query is malformed.") }
        if request.method == .POST {
            guard isFormBody(request), let form = parseForm(request.body) else {
                return errorPage("The form could not be read.")
            }
            pairs += form
        }
        let (p, repeated) = singleValued(pairs)

        // 1. Problems that must not be redirected: the redirect_uri is not trusted yet.
        guard let clientID = p["client_id"], clientID == settings.clientID else {
            return errorPage("Unknown client_id. The demo providers know only \(settings.clientID).")
        }
        guard let redirectURI = p["redirect_uri"], isLoopbackRedirect(redirectURI) else {
            return errorPage("redirect_uri must be a loopback URI: http://127.0.0.1:PORT/… (RFC 8252).")
        }
        if repeated.contains("client_id") || repeated.contains("redirect_uri") {
            return errorPage("client_id or redirect_uri was given more than once.")
        }

        // 2. Problems reported to the client through the redirect (with state and iss).
        let state = p["state"]
        func fail(_ error: String, _ description: String) -> HTTPResponse {
            var params = [("error", error), ("error_description", description)]
            if let state { params.append(("state", state)) }
            params.append(("iss", settings.issuer))
            return redirect(to: redirectURI, params, after: request.method)
        }
        if !repeated.isEmpty {
            return fail("invalid_request", "parameters repeated: " + repeated.sorted().joined(separator: ", "))
        }
        guard p["response_type"] == "code" else {
            return fail("unsupported_response_type", "only response_type=code is supported")
        }
        if let mode = p["response_mode"], mode != "query" {
            return fail("invalid_request", "only response_mode=query is supported")
        }
        let requestedScopes = (p["scope"] ?? "").split(separator: " ").map(String.init)
        guard requestedScopes.contains("openid") else { return fail("invalid_scope", "scope must contain openid") }
        guard let state, !state.isEmpty else { return fail("invalid_request", "state is required") }
        guard let challenge = p["code_challenge"], !challenge.isEmpty else {
            return fail("invalid_request", "PKCE is required: code_challenge is missing")
        }
        guard p["code_challenge_method"] == "S256" else {
            return fail("invalid_request", "PKCE code_challenge_method must be S256")
        }
        guard isS256Challenge(challenge) else {
            return fail("invalid_request", "code_challenge must be a base64url SHA-256 (43 characters)")
        }

        // 3. The person: cancelled, chosen (automation or the form), or not yet (the page).
        if let cancel = p["demo_cancel"], !cancel.isEmpty, cancel != "0" {
            return fail("access_denied", "the user cancelled the login")
        }
        guard let userID = p["demo_user"], !userID.isEmpty else {
            if request.method == .GET {
                let carried = pairs.filter { $0.0 != "demo_user" && $0.0 != "demo_cancel" }
                return loginPage(settings: settings, carried: carried)
            }
            return errorPage("No test person was chosen.")
        }
        guard let identity = DemoIdentity.named(userID) else {
            return errorPage("Unknown demo user. Known: " + DemoIdentity.all.map(\.id).joined(separator: ", ") + ".")
        }

        // 4. A one-time code bound to the client, the redirect URI and the challenge.
        let t = now()
        pruneIfDue(t)
        let code = randomToken()
        let granted = requestedScopes.filter { settings.scopesSupported.contains($0) }
        codes[tokenKey(code)] = PendingCode(
            clientID: clientID, redirectURI: redirectURI, challenge: challenge,
            nonce: p["nonce"], scope: granted.joined(separator: " "), identity: identity,
            // BankID may give a new `sub` at every login; Vipps' `sub` is stable.
            loginSubject: settings.kind == .bankID ? randomUUID() : identity.stableSubject(provider: "vipps"),
            authTime: t, expires: t + settings.codeTTL)
        return redirect(to: redirectURI, [("code", code), ("state", state), ("iss", settings.issuer)], after: request.method)
    }

    // MARK: - Token endpoint

    private func token(_ request: HTTPRequest) async -> HTTPResponse {
        guard isFormBody(request), let pairs = parseForm(request.body) else {
            return oauthError("invalid_request", "the body must be application/x-www-form-urlencoded")
        }
        let (p, repeated) = singleValued(pairs)
        guard repeated.isEmpty else {
            return oauthError("invalid_request", "parameters repeated: " + repeated.sorted().joined(separator: ", "))
        }
        let clientID: String
        switch authenticateClient(request, p) {
        case .success(let id): clientID = id
        case .failure(let failure): return failure.response
        }
        switch p["grant_type"] {
        case "authorization_code":
            return await codeGrant(p, clientID: clientID)
        case "refresh_token" where issuesRefreshTokens:
            return await refreshGrant(p, clientID: clientID)
        case "refresh_token":
            return oauthError("unsupported_grant_type", "\(settings.displayName) issues no refresh tokens")
        default:
            return oauthError("unsupported_grant_type", "only authorization_code" + (issuesRefreshTokens ? " and refresh_token are" : " is") + " supported")
        }
    }

    private struct ClientAuthFailure: Error { let response: HTTPResponse }

    /// A public client: `client_id` in the body (a Basic header is accepted for its user part;
    /// a secret, if any, is ignored).
    private func authenticateClient(_ request: HTTPRequest, _ p: [String: String]) -> Result<String, ClientAuthFailure> {
        var id = p["client_id"]
        if let auth = request.headers.first(name: "authorization"), auth.lowercased().hasPrefix("basic ") {
            guard let decoded = base64Decode(auth.dropFirst(6).trimmingSpaces),
                  let text = String(validating: decoded, as: UTF8.self) else {
                return .failure(ClientAuthFailure(response: oauthError("invalid_client", "malformed Basic authorization", status: .unauthorized)))
            }
            let user = String(text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
            let basicID = parseForm(user.utf8)?.first?.0 ?? user  // RFC 6749 §2.3.1: form-encoded
            if let bodyID = id, bodyID != basicID {
                return .failure(ClientAuthFailure(response: oauthError("invalid_request", "client_id differs from the Basic user")))
            }
            id = basicID
        }
        guard let id, id == settings.clientID else {
            return .failure(ClientAuthFailure(response: oauthError("invalid_client", "unknown client", status: .unauthorized)))
        }
        return .success(id)
    }

    private func codeGrant(_ p: [String: String], clientID: String) async -> HTTPResponse {
        let t = now()
        let codeKey = tokenKey(p["code"] ?? "")
        guard var code = codes[codeKey] else { return oauthError("invalid_grant", "unknown authorization code") }
        if code.used {
            // RFC 6749 §4.1.2: refuse a replayed code and revoke what it gave.
            if let family = code.family { revokeFamily(family) }
            return oauthError("invalid_grant", "authorization code already used")
        }
        code.used = true  // burnt by the first attempt, even a failed one
        codes[codeKey] = code
        guard t < code.expires else { return oauthError("invalid_grant", "authorization code expired") }
        guard code.clientID == clientID else { return oauthError("invalid_grant", "the code was issued to another client") }
        guard p["redirect_uri"] == code.redirectURI else {
            return oauthError("invalid_grant", "redirect_uri differs from the authorization request")
        }
        guard let verifier = p["code_verifier"] else { return oauthError("invalid_request", "code_verifier is missing (PKCE)") }
        guard isCodeVerifier(verifier) else { return oauthError("invalid_grant", "code_verifier is malformed (RFC 7636 §4.1)") }
        guard Sodium.constantTimeEqual(Array(pkceS256(verifier).utf8), Array(code.challenge.utf8)) else {
            return oauthError("invalid_grant", "PKCE verification failed")
        }

        let familyID = randomToken(bytes: 12)
        families[familyID] = Family(identity: code.identity, loginSubject: code.loginSubject, clientID: clientID,
                                    scope: code.scope, authTime: code.authTime)
        code.family = familyID
        codes[codeKey] = code
        let access = issueAccessToken(family: familyID, scope: code.scope, now: t)
        var body: [String: JSON] = [
            "access_token": .string(access), "token_type": "Bearer",
            "expires_in": .int(settings.accessTokenTTL), "scope": .string(code.scope),
        ]
        if issuesRefreshTokens {
            body["refresh_token"] = .string(issueRefreshToken(family: familyID, now: t))
            body["refresh_expires_in"] = .int(settings.refreshTokenTTL)
        }
        let claims = idTokenClaims(family: families[familyID]!, accessToken: access, nonce: code.nonce, now: t)
        do {
            body["id_token"] = .string(try key.sign(claims))
        } catch {
            revokeFamily(familyID)
            return oauthError("server_error", "the ID token could not be signed", status: .internalServerError)
        }
        return jsonResponse(.object(body), extraHeaders: [("Pragma", "no-cache")])
    }

    private func refreshGrant(_ p: [String: String], clientID: String) async -> HTTPResponse {
        let t = now()
        let oldKey = tokenKey(p["refresh_token"] ?? "")
        guard var old = refreshTokens[oldKey], let family = families[old.family] else {
            return oauthError("invalid_grant", "unknown refresh token")
        }
        guard family.clientID == clientID else { return oauthError("invalid_grant", "the refresh token was issued to another client") }
        switch old.state {
        case .rotated:
            // A rotated token came back: someone holds a copy. Revoke the whole family.
            revokeFamily(old.family)
            return oauthError("invalid_grant", "refresh token reuse detected; the session is revoked")
        case .revoked:
            return oauthError("invalid_grant", "refresh token revoked")
        case .active:
            break
        }
        guard !family.revoked else { return oauthError("invalid_grant", "refresh token revoked") }
        guard t < old.expires else { return oauthError("invalid_grant", "refresh token expired") }
        var scope = family.scope
        if let asked = p["scope"] {
            let askedSet = Set(asked.split(separator: " ").map(String.init))
            guard askedSet.isSubset(of: Set(family.scope.split(separator: " ").map(String.init))) else {
                return oauthError("invalid_scope", "a refresh may not widen the scope")
            }
            scope = asked
        }
        old.state = .rotated
        refreshTokens[oldKey] = old
        let access = issueAccessToken(family: old.family, scope: scope, now: t)
        let newRefresh = issueRefreshToken(family: old.family, now: t)
        var body: [String: JSON] = [
            "access_token": .string(access), "token_type": "Bearer",
            "expires_in": .int(settings.accessTokenTTL), "scope": .string(scope),
            "refresh_token": .string(newRefresh), "refresh_expires_in": .int(settings.refreshTokenTTL),
        ]
        // OIDC Core §12.2: same iss, sub, aud and auth_time; a new iat; no nonce.
        let claims = idTokenClaims(family: family, accessToken: access, nonce: nil, now: t)
        do {
            body["id_token"] = .string(try key.sign(claims))
        } catch {
            return oauthError("server_error", "the ID token could not be signed", status: .internalServerError)
        }
        return jsonResponse(.object(body), extraHeaders: [("Pragma", "no-cache")])
    }

    private func idTokenClaims(family: Family, accessToken: String, nonce: String?, now t: Int64) -> [String: JSON] {
        var c: [String: JSON] = [
            "iss": .string(settings.issuer), "sub": .string(family.loginSubject),
            "aud": .string(family.clientID), "azp": .string(family.clientID),
            "exp": .int(t + settings.idTokenTTL), "iat": .int(t), "auth_time": .int(family.authTime),
            "at_hash": .string(leftHalfHash(accessToken)), "jti": .string(randomUUID()),
        ]
        if let nonce { c["nonce"] = .string(nonce) }
        if settings.kind == .bankID {
            let person = family.identity
            c["bankid_altsub"] = .string(person.stableSubject(provider: "bankid"))
            c["nnin_altsub"] = .string(person.nationalID)
            c["name"] = .string(person.name)
            c["given_name"] = .string(person.givenName)
            c["family_name"] = .string(person.familyName)
            c["birthdate"] = .string(person.birthdate)
            c["acr"] = "urn:bankid:bid;LOA=4"
            c["amr"] = ["BID"]
            c["org"] = .string(person.organization)
            c["roles"] = .array(person.roles.map { .string($0) })
        }
        return c
    }

    private func issueAccessToken(family: String, scope: String, now t: Int64) -> String {
        let token = randomToken()
        let key = tokenKey(token)
        accessTokens[key] = AccessRecord(family: family, scope: scope, expires: t + settings.accessTokenTTL)
        families[family]?.accessKeys.append(key)
        return token
    }

    private func issueRefreshToken(family: String, now t: Int64) -> String {
        let token = randomToken(bytes: 48)
        let key = tokenKey(token)
        refreshTokens[key] = RefreshRecord(family: family, state: .active, expires: t + settings.refreshTokenTTL)
        families[family]?.refreshKeys.append(key)
        return token
    }

    private func revokeFamily(_ id: String) {
        guard var family = families[id] else { return }
        family.revoked = true
        for k in family.refreshKeys { refreshTokens[k]?.state = .revoked }
        for k in family.accessKeys { accessTokens[k]?.revoked = true }
        families[id] = family
    }

    /// Forgets what has expired (at most once a minute): codes, tokens, and logins with
    /// nothing left. A rotated refresh token is remembered until it would have expired,
    /// so reuse is detected for as long as the token could have been used.
    private func pruneIfDue(_ t: Int64) {
        guard t - lastPrune >= 60 else { return }
        lastPrune = t
        accessTokens = accessTokens.filter { $0.value.expires > t }
        refreshTokens = refreshTokens.filter { $0.value.expires > t }
        families = families.filter { _, f in
            f.refreshKeys.contains { refreshTokens[$0] != nil } || f.accessKeys.contains { accessTokens[$0] != nil }
        }
        codes = codes.filter { $0.value.expires > t || families[$0.value.family ?? ""] != nil }
    }

    // MARK: - Userinfo

    private func userinfo(_ request: HTTPRequest) -> HTTPResponse {
        let challenge = "Bearer realm=\"\(settings.id)\""
        guard let auth = request.headers.first(name: "authorization"), auth.lowercased().hasPrefix("bearer ") else {
            return jsonResponse(["error": "invalid_request", "error_description": "a Bearer access token is required"],
                                status: .unauthorized, extraHeaders: [("WWW-Authenticate", challenge)])
        }
        let token = auth.dropFirst(7).trimmingSpaces
        let t = now()
        guard let record = accessTokens[tokenKey(token)], !record.revoked, t < record.expires,
              let family = families[record.family], !family.revoked else {
            return jsonResponse(["error": "invalid_token", "error_description": "the access token is unknown, expired or revoked"],
                                status: .unauthorized,
                                extraHeaders: [("WWW-Authenticate", challenge + ", error=\"invalid_token\"")])
        }
        let person = family.identity
        var claims: [String: JSON] = [
            "sub": .string(family.loginSubject),
            "name": .string(person.name), "given_name": .string(person.givenName),
            "family_name": .string(person.familyName), "birthdate": .string(person.birthdate),
            "org": .string(person.organization), "roles": .array(person.roles.map { .string($0) }),
        ]
        switch settings.kind {
        case .bankID:
            claims["bankid_altsub"] = .string(person.stableSubject(provider: "bankid"))
            claims["nnin_altsub"] = .string(person.nationalID)
        case .vipps:
            claims["phone_number"] = .string(person.phoneNumber)
            claims["nin"] = .string(person.nationalID)
            claims["email"] = .string(person.email)
            claims["email_verified"] = true
        }
        return jsonResponse(.object(claims))
    }

    // MARK: - Revocation (RFC 7009)

    private func revoke(_ request: HTTPRequest) -> HTTPResponse {
        guard isFormBody(request), let pairs = parseForm(request.body) else {
            return oauthError("invalid_request", "the body must be application/x-www-form-urlencoded")
        }
        let (p, _) = singleValued(pairs)
        let clientID: String
        switch authenticateClient(request, p) {
        case .success(let id): clientID = id
        case .failure(let failure): return failure.response
        }
        guard let token = p["token"], !token.isEmpty else { return oauthError("invalid_request", "token is missing") }
        let k = tokenKey(token)
        if let r = refreshTokens[k], families[r.family]?.clientID == clientID {
            revokeFamily(r.family)  // §2.1: a refresh token takes its access tokens with it
        } else if let a = accessTokens[k], families[a.family]?.clientID == clientID {
            accessTokens[k]?.revoked = true
        }
        // Unknown tokens are fine too (§2.2): the answer is the same.
        return HTTPResponse(status: .ok, headers: [("Cache-Control", "no-store")])
    }

    // MARK: - Responses

    private func jsonResponse(_ value: JSON, status: HTTPResponseStatus = .ok,
                              extraHeaders: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status,
                     headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")] + extraHeaders,
                     body: value.serialized())
    }

    private func oauthError(_ error: String, _ description: String, status: HTTPResponseStatus = .badRequest) -> HTTPResponse {
        var headers: [(String, String)] = []
        if status == .unauthorized { headers.append(("WWW-Authenticate", "Basic realm=\"\(settings.id)\"")) }
        return jsonResponse(["error": .string(error), "error_description": .string(description)],
                            status: status, extraHeaders: headers)
    }

    private func methodNotAllowed(_ allow: String) -> HTTPResponse {
        var r = jsonResponse(["error": "invalid_request", "error_description": "method not allowed"], status: .methodNotAllowed)
        r.headers.append(("Allow", allow))
        return r
    }

    private func redirect(to uri: String, _ params: [(String, String)], after method: HTTPMethod) -> HTTPResponse {
        let separator = uri.contains("?") ? "&" : "?"
        // 303 after the form's POST, so the browser follows with a GET.
        return HTTPResponse(status: method == .POST ? .seeOther : .found,
                            headers: [("Location", uri + separator + formEncode(params)),
                                      ("Cache-Control", "no-store"), ("Referrer-Policy", "no-referrer")])
    }

    private func errorPage(_ message: String) -> HTTPResponse {
        demoErrorPage(settings: settings, message: message)
    }
}

// MARK: - Request checks

func isFormBody(_ request: HTTPRequest) -> Bool {
    guard let ctype = request.headers.first(name: "content-type") else { return request.body.isEmpty }
    return ctype.lowercased().split(separator: ";").first?.trimmed(of: " ") == "application/x-www-form-urlencoded"
}

/// RFC 8252 §7.3 loopback redirect: `http://127.0.0.1:PORT` then a path and/or query;
/// no fragment, no user info, no spaces or non-ASCII.
func isLoopbackRedirect(_ uri: String) -> Bool {
    let prefix = Array("http://127.0.0.1:".utf8)
    let bytes = Array(uri.utf8)
    guard bytes.count <= 2048, bytes.starts(with: prefix) else { return false }
    for c in bytes where c <= 0x20 || c >= 0x7F || c == UInt8(ascii: "#") || c == UInt8(ascii: "\\") {
        return false
    }
    var i = prefix.count
    var port = 0
    var digits = 0
    while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 {
        port = port * 10 + Int(bytes[i] - 0x30)
        digits += 1
        i += 1
        if digits > 5 { return false }
    }
    guard digits > 0, (1...65535).contains(port) else { return false }
    return i == bytes.count || bytes[i] == UInt8(ascii: "/") || bytes[i] == UInt8(ascii: "?")
}

private func isUnreservedASCII(_ c: UInt8) -> Bool {
    (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39)
        || c == UInt8(ascii: "-") || c == UInt8(ascii: ".") || c == UInt8(ascii: "_") || c == UInt8(ascii: "~")
}

/// RFC 7636 §4.1: 43–128 unreserved characters.
func isCodeVerifier(_ s: String) -> Bool {
    (43...128).contains(s.utf8.count) && s.utf8.allSatisfy(isUnreservedASCII)
}

/// A base64url SHA-256 without padding: 43 characters of the base64url alphabet.
func isS256Challenge(_ s: String) -> Bool {
    s.utf8.count == 43 && s.utf8.allSatisfy { isUnreservedASCII($0) && $0 != UInt8(ascii: ".") && $0 != UInt8(ascii: "~") }
}

/// Standard base64 (padding optional), for HTTP Basic credentials.
func base64Decode(_ s: String) -> [UInt8]? {
    var out: [UInt8] = []
    var acc: UInt32 = 0
    var bits = 0
    var sawPadding = false
    for c in s.utf8 {
        let v: UInt32
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = UInt32(c - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): v = UInt32(c - UInt8(ascii: "a") + 26)
        case UInt8(ascii: "0")...UInt8(ascii: "9"): v = UInt32(c - UInt8(ascii: "0") + 52)
        case UInt8(ascii: "+"): v = 62
        case UInt8(ascii: "/"): v = 63
        case UInt8(ascii: "="): sawPadding = true; continue
        default: return nil
        }
        if sawPadding { return nil }
        acc = acc << 6 | v
        bits += 6
        if bits >= 8 {
            bits -= 8
            out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
        }
    }
    return out
}

extension StringProtocol {
    func trimmed(of set: String) -> String {
        var s = Substring(self)
        while let f = s.first, set.contains(f) { s = s.dropFirst() }
        while let l = s.last, set.contains(l) { s = s.dropLast() }
        return String(s)
    }
}

import Locking
import NIOCore
import NIOHTTP1
import OIDCToken
import VaultFactor

/// An OpenID Connect identity provider (BankID, Vipps, ID-porten, any issuer):
/// authorization code flow with PKCE S256 through the system browser and a
/// loopback redirect (RFC 8252), full ID token validation, userinfo, refresh and
/// RFC 7009 revocation.
///
/// Wiring (vaultd): create one `OIDCHTTPClient` and share it; build one
/// `ProviderProfile` per configured provider (start from `.bankID(...)`,
/// `.vipps(...)`, `.idPorten(...)` or `.generic(...)` and override from config;
/// `profile.problems()` lists config errors); create
/// `OIDCProvider(profile:http:diagnostics:)`. On shutdown call
/// `await http.shutdown()` (after logins have ended: a pending login ends with
/// `cancelled` when its task is cancelled, and its listener closes).
///
/// Gateway mode (`profile.gatewayURL`): the code exchange and refreshes are sent
/// to the gateway instead of the token endpoint, as the same
/// `application/x-www-form-urlencoded` body a public client would send
/// (`grant_type`, `code`, `redirect_uri`, `code_verifier`, `client_id`, or
/// `grant_type=refresh_token`, `refresh_token`, `client_id`); the gateway adds
/// the client secret and returns the provider's token response unchanged, so the
/// ID token is verified here as usual. Revocation is not attempted in gateway mode.
///
/// Backend mode (`profile.backend`, docs/backend.md): the same requests go to the
/// organization's backend, which answers with *its own* session and the
/// provider's ID token passed through. The ID token is verified as usual except
/// `at_hash` (it names the provider's access token, which only the backend
/// holds), userinfo is not read (same reason), refreshes go to the backend
/// whatever the provider does, and logouts are revoked there. The backend's
/// refusals by its own rules (`access_denied` with `age`, `not_member`,
/// `membership_ended`) and a reused refresh token (`invalid_grant` with
/// `reused`) have their own sentences.
///
/// Errors (all `VaultFailure`, extras `provider` and `alternatives`):
/// - person cancelled at the provider (`access_denied`) → `cancelled`, "BankID login was cancelled"
/// - `server_error` / `temporarily_unavailable`, HTTP 5xx, refused, unreachable,
///   oversized or redirected responses, bad discovery → `provider_unavailable`
///   ("BankID is temporarily unavailable. Try Vipps instead or retry later")
/// - request deadline, or no redirect within `redirectTimeout` → `timeout`
/// - wrong or missing `state`, duplicated parameters, RFC 9207 `iss` missing (when
///   advertised) or different → `state_mismatch`
/// - `error` together with `code`, `invalid_grant`, other OAuth errors → `login_failed`
/// - anything wrong with the ID token or userinfo `sub` → `token_invalid`
/// - refresh: only `invalid_grant` → `session_expired` (vaultd then deletes the session);
///   other OAuth errors → `login_failed`, 5xx, transport and unreadable answers →
///   `provider_unavailable`, deadline → `timeout`, each with a sentence that says
///   the session is kept and what is wrong
public final class OIDCProvider: IdentityProvider {
    public let profile: ProviderProfile
    public var id: String { profile.id }
    public var displayName: String { profile.displayName }
    public var issuesRefreshTokens: Bool { profile.refreshes }
    public var provesNationalID: Bool { profile.nationalIDInReach != .none }
    public var backendOrigin: String? { profile.backend.flatMap { WebOrigin.of($0.tokenURL) } }

    let http: OIDCHTTPClient
    let cache: ProviderCache
    let now: @Sendable () -> Int64
    let failures: FailureFactory
    let diagnostics: @Sendable (String) -> Void
    private let waitingLogins = Locked<[String]>([])

    /// - Parameters:
    ///   - diagnostics: receives one line per failure with a reason that never
    ///     contains a token, code, verifier or national ID (route it to the log).
    ///   - clock: Unix seconds (tests inject one).
    public init(profile: ProviderProfile, http: OIDCHTTPClient,
                diagnostics: @escaping @Sendable (String) -> Void = { _ in },
                clock: @escaping @Sendable () -> Int64 = systemUnixTime) {
        self.profile = profile
        self.http = http
        self.now = clock
        self.cache = ProviderCache(profile: profile, http: http, now: clock)
        self.failures = FailureFactory(profile: profile, log: diagnostics)
        self.diagnostics = diagnostics
    }

    /// The origins of the launch pages of this provider's logins waiting now
    /// (`http://127.0.0.1:PORT`): the only places a client opens a browser at.
    public var loginPageOrigins: [String] { waitingLogins.withLock { $0 } }

    // MARK: - Login

    public func login(_ conversation: any FactorConversation) async throws(VaultFailure) -> VerifiedLogin {
        try await login(conversation, options: LoginOptions())
    }

    public var reenrollMinimumACR: String? { profile.reenrollMinimumACR }

    public func meetsReenrollLevel(_ login: VerifiedLogin) -> Bool {
        guard let minimum = profile.reenrollMinimumACR else { return true }
        return acrSatisfies(login.acr, minimum: minimum)
    }

    public func login(_ conversation: any FactorConversation, options: LoginOptions) async throws(VaultFailure) -> VerifiedLogin {
        let language = conversation.language
        let metadata = try await loadMetadata()

        let (port, path): (UInt16, String)
        switch profile.redirect {
        case .ephemeralPort(let p): (port, path) = (0, p)
        case .fixedPort(let fixed, let p): (port, path) = (fixed, p)
        }
        let state = Randomness.token(bytes: 32)
        let listener: LoopbackListener
        do {
            listener = try await LoopbackListener.start(group: http.eventLoopGroup, port: port, path: path,
                                                        language: language, expectedState: state)
        } catch .portInUse {
            throw failures.make(.loginFailed, Messages.loginAlreadyWaiting, reason: "redirect port \(port) in use")
        } catch .portHeldByAnotherUser {
            throw failures.make(.loginFailed, Messages.redirectPortHeldByAnotherUser(provider: profile.displayName),
                                reason: "redirect port \(port) held by another user's program")
        } catch {
            throw failures.make(.internal, reason: "could not start the redirect listener")
        }

        let origin = WebOrigin.of(listener.launchURL)
        if let origin { waitingLogins.withLock { $0.append(origin) } }
        defer {
            if let origin {
                waitingLogins.withLock { o in o.firstIndex(of: origin).map { _ = o.remove(at: $0) } }
            }
        }
        var outcome: Result<VerifiedLogin, VaultFailure>
        let started = now()
        do {
            var verified = try await run(conversation, metadata: metadata, listener: listener, state: state, options: options)
            // `prompt=login` is a request; only `auth_time` says the provider
            // honoured it (OIDC Core §3.1.2.1). A provider that reused an older
            // authentication, or sent no auth_time, does not count as fresh.
            verified.reauthenticated = options.reauthenticate
                && verified.authTime.map { $0 + profile.clockSkew >= started } ?? false
            outcome = .success(verified)
        } catch {
            outcome = .failure(error)
        }
        // The person's browser may come to the launch page only after another
        // program used it and logged in: until the listener stops, a second
        // request for it means that login is not theirs, and that is what the
        // person hears, as the second browser's page said.
        // (When the flow's own wait ended so, it has said it already.)
        let saidAlready = if case .failure(let f) = outcome { f.message == Messages.loginPageOpenedTwice } else { false }
        if listener.stop(), !saidAlready { outcome = .failure(openedTwice()) }
        let page: BrowserPage
        switch outcome {
        case .success:
            page = BrowserPage(status: .ok, language: language, heading: profile.displayName,
                               message: Messages.browserLoggedIn(provider: profile.displayName).text(language))
        case .failure(let failure):
            var text = failure.message.text(language)
            if let last = text.last, !".!?".contains(last) { text += "." }
            page = BrowserPage(status: .ok, language: language, heading: profile.displayName,
                               message: text + " " + Messages.browserCloseWindow.text(language))
        }
        await listener.finish(page)
        if listener.strayRequests > 0 {
            diagnostics("ignored \(listener.strayRequests) request(s) on the redirect path without this login's state")
        }
        if listener.otherUsersRefused > 0 {
            diagnostics("refused \(listener.otherUsersRefused) connection(s) to the redirect port from another user's programs")
        }
        if listener.silentClosed > 0 {
            diagnostics("closed \(listener.silentClosed) connection(s) to the redirect port that sent no request in time")
        }
        return try outcome.get()
    }

    private func run(_ conversation: any FactorConversation, metadata: ProviderMetadata,
                     listener: LoopbackListener, state: String, options: LoginOptions) async throws(VaultFailure) -> VerifiedLogin {
        let nonce = Randomness.token(bytes: 32)
        let verifier = Randomness.token(bytes: 48)  // 64 characters (RFC 7636: 43…128)
        let redirectURI = listener.redirectURI
        let url = authorizationURL(metadata: metadata, redirectURI: redirectURI, state: state, nonce: nonce,
                                   challenge: PKCE.challenge(for: verifier), language: conversation.language, options: options)

        do {
            // The browser gets the listener's one-time page, not `url` (LoopbackListener).
            try await conversation.openURL(listener.launch(to: url), Messages.openBrowserToLogIn(provider: profile.displayName))
        } catch {
            switch error {
            case .cancelled: throw failures.cancelled(reason: "cancelled at the client")
            case .timeout: throw failures.timeout(reason: "client did not answer")
            case .notInteractive:
                throw failures.make(.badRequest, Messages.loginNeedsBrowser(provider: profile.displayName),
                                    reason: "client is not interactive")
            default: throw failures.loginFailed(reason: "client could not open the browser")
            }
        }

        // vaultd's own dialog waits beside the browser with Cancel: a person
        // who closed the tab is not left to wait out the redirect's minutes.
        let timeout = profile.redirectTimeout
        let waited: Result<LoopbackListener.Redirect, LoopbackListener.WaitError>
        do {
            waited = try await conversation.waitForBrowser(Messages.waitingForBrowserLogin(provider: profile.displayName)) {
                do throws(LoopbackListener.WaitError) {
                    return .success(try await listener.nextRedirect(timeout: timeout))
                } catch {
                    return .failure(error)
                }
            }
        } catch {
            throw failures.cancelled(reason: "Cancel pressed while waiting for the browser")
        }
        let redirect: LoopbackListener.Redirect
        switch waited {
        case .success(let r): redirect = r
        case .failure(.timeout): throw failures.timeout(reason: "no redirect within \(timeout)")
        case .failure(.openedTwice): throw openedTwice()
        case .failure: throw failures.cancelled(reason: "login task cancelled while waiting for the redirect")
        }

        let code = try evaluateRedirect(redirect, expectedState: state, metadata: metadata)

        var form: [(String, String)] = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirectURI),
            ("code_verifier", verifier),
        ]
        let tokens: TokenResponse
        do {
            tokens = try await postToToken(&form, metadata: metadata)
        } catch {
            throw mapTokenError(error)
        }
        guard let idToken = tokens.idToken else { throw failures.tokenInvalid(reason: "no id_token in the token response") }

        let verifierConfig = IDTokenVerifier(
            issuer: profile.issuer, clientID: profile.clientID, trustedAudiences: profile.trustedAudiences,
            allowedAlgorithms: cache.allowedAlgorithms(metadata), clockSkew: profile.clockSkew,
            checksAccessTokenHash: profile.backend == nil)
        let idClaims: [String: JSON]
        do {
            idClaims = try await verifierConfig.verify(idToken, nonce: nonce, accessToken: tokens.accessToken,
                                                       now: now(), keys: cache)
        } catch {
            switch error {
            case .invalid(let reason): throw failures.tokenInvalid(reason: "id_token: \(reason)")
            case .keysUnavailable(let f): throw failures.transport(f.transport as? OIDCHTTPClient.Failure, reason: f.reason)
            }
        }
        // Verified above: a non-empty string.
        let sub = idClaims["sub"]?.stringValue ?? ""

        var userClaims: [String: JSON] = [:]
        if profile.readsUserinfo {
            userClaims = try await userinfo(metadata: metadata, accessToken: tokens.accessToken, expectedSub: sub)
        }
        return try assemble(idClaims: idClaims, userClaims: userClaims, tokens: tokens)
    }

    private func openedTwice() -> VaultFailure {
        failures.make(.loginFailed, Messages.loginPageOpenedTwice, reason: "the login page was opened twice")
    }

    func authorizationURL(metadata: ProviderMetadata, redirectURI: String, state: String, nonce: String,
                          challenge: String, language: Language, options: LoginOptions = LoginOptions()) -> String {
        var params: [(String, String)] = [
            ("response_type", "code"),
            ("client_id", profile.clientID),
            ("redirect_uri", redirectURI),
            ("scope", profile.scopes.joined(separator: " ")),
            ("state", state),
            ("nonce", nonce),
            ("code_challenge", challenge),
            // Always explicit: Vipps defaults to `plain` without it.
            ("code_challenge_method", "S256"),
        ]
        let acr = options.acr ?? profile.minimumACR
        if let acr { params.append(("acr_values", acr)) }
        // After an enrollment change: the person must authenticate again.
        if options.reauthenticate { params.append(("prompt", "login")) }
        if profile.extraAuthorizationParameters["ui_locales"] == nil {
            params.append(("ui_locales", language == .nb ? "nb" : "en"))
        }
        let reserved: Set<String> = [
            "response_type", "client_id", "redirect_uri", "scope", "state", "nonce", "code_challenge",
            "code_challenge_method", "response_mode", "request", "request_uri",
        ]
        for (name, value) in profile.extraAuthorizationParameters.sorted(by: { $0.key < $1.key })
        where !reserved.contains(name) && !(name == "acr_values" && acr != nil) && !(name == "prompt" && options.reauthenticate) {
            params.append((name, value))
        }
        let endpoint = metadata.authorizationEndpoint
        return endpoint + (endpoint.contains("?") ? "&" : "?") + FormEncoding.encode(params)
    }

    /// Checks the redirect and returns the authorization code.
    func evaluateRedirect(_ redirect: LoopbackListener.Redirect, expectedState: String,
                          metadata: ProviderMetadata) throws(VaultFailure) -> String {
        var params: [String: String] = [:]
        var duplicated = false
        for (name, value) in redirect.query {
            if params.updateValue(value, forKey: name) != nil { duplicated = true }
        }
        // The listener hands over only a request that carries the state; checked
        // again here so the flow never depends on who called it.
        guard let state = params["state"], constantTimeEquals(state, expectedState) else {
            throw failures.stateMismatch(reason: "state missing or different")
        }
        // A parameter given twice is ambiguous from someone who knows the state:
        // the redirect was tampered with, so the login ends as forged.
        guard !duplicated else {
            throw failures.stateMismatch(reason: "duplicated redirect parameters")
        }
        // RFC 9207 (mix-up defence): when the provider says it sends `iss`, it must;
        // when present it must be this issuer. A failure means the response may come
        // from another provider, so it is treated like a forged redirect.
        if let iss = params["iss"] {
            guard iss == profile.issuer else { throw failures.stateMismatch(reason: "iss parameter is another issuer") }
        } else if metadata.issParameterSupported {
            throw failures.stateMismatch(reason: "iss parameter missing")
        }
        let error = params["error"]
        let code = params["code"]
        if error != nil, code != nil { throw failures.loginFailed(reason: "redirect has both error and code") }
        if let error {
            switch error {
            case "access_denied": throw failures.cancelled(reason: "access_denied")
            case "server_error", "temporarily_unavailable": throw failures.unavailable(reason: "authorization \(error)")
            default: throw failures.loginFailed(reason: "authorization error \(error.prefix(40))")
            }
        }
        guard let code, !code.isEmpty else { throw failures.loginFailed(reason: "redirect without code") }
        return code
    }

    // MARK: - Token endpoint

    struct TokenResponse {
        var accessToken: String
        var expiresIn: Int64?
        var refreshToken: String?
        var refreshExpiresIn: Int64?
        var idToken: String?
    }

    enum TokenError: Error {
        case transport(OIDCHTTPClient.Failure)
        /// An RFC 6749 §5.2 error and, when it is one of the backend's fixed
        /// words (docs/backend.md, section 5), its `error_description`.
        case oauth(String, word: BackendWord? = nil)
        case status(Int)
        case malformed(String)
    }

    /// The backend's fixed `error_description` values; any other text from the
    /// wire is never used.
    enum BackendWord: String {
        case age, notMember = "not_member", membershipEnded = "membership_ended", nationalID = "national_id", reused
    }

    /// Posts `form` to the token endpoint (with client authentication) or, in
    /// gateway or backend mode, there. Redirects are not followed.
    private func postToToken(_ form: inout [(String, String)], metadata: ProviderMetadata?) async throws(TokenError) -> TokenResponse {
        var headers: [(String, String)] = [
            ("content-type", "application/x-www-form-urlencoded"),
            ("accept", "application/json"),
        ]
        let url: String
        if let intermediary = profile.backend?.tokenURL ?? profile.gatewayURL {
            url = intermediary
            form.append(("client_id", profile.clientID))
        } else {
            guard let metadata else { throw .transport(.forbiddenURL) }
            url = metadata.tokenEndpoint
            addClientAuthentication(&form, &headers)
        }
        guard cache.policy.allows(url) else { throw .transport(.forbiddenURL) }
        let response: OIDCHTTPClient.Response
        do {
            response = try await http.send(.POST, url, headers: headers, body: Array(FormEncoding.encode(form).utf8),
                                           timeout: profile.requestTimeout, maxBytes: profile.maxResponseBytes)
        } catch {
            throw .transport(error)
        }
        let json = try? JSON.parse(response.body)
        guard response.status == 200 else {
            if response.status >= 500 { throw .status(response.status) }
            if response.status >= 400, response.status != 429, let error = json?["error"]?.stringValue {
                let word = profile.backend == nil ? nil : json?["error_description"]?.stringValue.flatMap(BackendWord.init)
                throw .oauth(error, word: word)
            }
            throw .status(response.status)
        }
        guard case .object(let o)? = json else { throw .malformed("token response is not a JSON object") }
        guard let access = o["access_token"]?.stringValue, !access.isEmpty else { throw .malformed("no access_token") }
        if let type = o["token_type"] {
            guard type.stringValue?.lowercased() == "bearer" else { throw .malformed("token_type is not Bearer") }
        }
        func seconds(_ key: String) throws(TokenError) -> Int64? {
            guard let v = o[key] else { return nil }
            guard let n = v.intValue, n >= 0, n < 100 * 365 * 86_400 else { throw .malformed("\(key) is not a duration") }
            return n
        }
        func string(_ key: String) throws(TokenError) -> String? {
            guard let v = o[key] else { return nil }
            if case .null = v { return nil }
            guard let s = v.stringValue, !s.isEmpty else { throw .malformed("\(key) is not a string") }
            return s
        }
        return TokenResponse(accessToken: access, expiresIn: try seconds("expires_in"),
                             refreshToken: try string("refresh_token"),
                             refreshExpiresIn: try seconds("refresh_expires_in"),
                             idToken: try string("id_token"))
    }

    private func addClientAuthentication(_ form: inout [(String, String)], _ headers: inout [(String, String)]) {
        switch profile.clientAuthentication {
        case .none:
            form.append(("client_id", profile.clientID))
        case .clientSecretPost(let secret):
            form.append(("client_id", profile.clientID))
            form.append(("client_secret", secret))
        case .clientSecretBasic(let secret):
            // RFC 6749 §2.3.1: each part form-encoded, then Basic.
            let credentials = FormEncoding.escape(profile.clientID) + ":" + FormEncoding.escape(secret)
            headers.append(("authorization", "Basic " + Base64Standard.encode(Array(credentials.utf8))))
        }
    }

    /// The code exchange's failures (a login).
    private func mapTokenError(_ error: TokenError) -> VaultFailure {
        switch error {
        case .transport(let f):
            return failures.transport(f, reason: "token endpoint: \(f)")
        case .oauth(let code, let word):
            switch (code, word) {
            case ("server_error", _), ("temporarily_unavailable", _):
                return failures.unavailable(reason: "token endpoint \(code)")
            case ("access_denied", .age?):
                return failures.make(.loginFailed, Messages.backendRefusedAge, reason: "backend: access_denied (age)")
            case ("access_denied", .notMember?):
                return failures.make(.loginFailed, Messages.backendRefusedNotMember, reason: "backend: access_denied (not_member)")
            case ("access_denied", .membershipEnded?):
                return failures.make(.loginFailed, Messages.backendMembershipEnded, reason: "backend: access_denied (membership_ended)")
            case ("access_denied", .nationalID?):
                return failures.make(.loginFailed, Messages.backendRefusedNationalID(provider: profile.displayName),
                                     reason: "backend: access_denied (national_id)")
            default:
                return failures.loginFailed(reason: "token endpoint error \(code.prefix(40))")
            }
        case .status(let status):
            return failures.unavailable(reason: "token endpoint HTTP \(status)")
        case .malformed(let reason):
            return failures.loginFailed(reason: reason)
        }
    }

    /// RFC 6749 §5.2's error codes: the only ones a sentence may name (the
    /// rest is text from the wire).
    static let oauthErrorCodes: Set<String> = [
        "invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type", "invalid_scope",
    ]

    /// A refresh's failures. vaultd deletes a session on `session_expired`,
    /// so only the provider's word that the grant is dead gives it
    /// (`invalid_grant`: expired, revoked, or a reused rotated token). The
    /// app's registration refused, a malformed request, the provider down or
    /// slow, an answer that cannot be read: the session is kept, and the
    /// sentence says what is wrong (docs/oidc.md, "Error mapping").
    private func mapRefreshError(_ error: TokenError) -> VaultFailure {
        // With a backend it is the organization's service that renews, not the
        // provider: named by its host, so nobody is told "Vipps is unavailable"
        // (and tries BankID) while Vipps is fine.
        let name = profile.backend.flatMap { URLParts($0.tokenURL)?.host } ?? profile.displayName
        switch error {
        case .oauth("invalid_grant", .reused?):
            return failures.make(.sessionExpired, Messages.sessionEndedReused, reason: "refresh: invalid_grant (reused)")
        case .oauth("invalid_grant", _):
            return failures.sessionExpired(reason: "refresh: invalid_grant")
        // The backend's own rules: its word ends the session, as invalid_grant does.
        case .oauth("access_denied", .membershipEnded?) where profile.backend != nil:
            return failures.make(.sessionExpired, Messages.backendMembershipEnded, reason: "refresh: access_denied (membership_ended)")
        case .oauth("access_denied", _) where profile.backend != nil:
            return failures.sessionExpired(reason: "refresh: access_denied")
        case .oauth("server_error", _), .oauth("temporarily_unavailable", _):
            return failures.make(.providerUnavailable, Messages.refreshUnavailable(provider: name), reason: "refresh: provider error")
        case .oauth(let code, _) where code == "invalid_client" || code == "unauthorized_client":
            return failures.make(.loginFailed, Messages.refreshClientRefused(provider: name, error: code), reason: "refresh: \(code)")
        case .oauth(let code, _):
            let known = Self.oauthErrorCodes.contains(code) ? code : nil
            return failures.make(.loginFailed, Messages.refreshRefused(provider: name, error: known),
                                 reason: "refresh: \(known ?? "unknown OAuth error")")
        case .status(let status):
            return failures.make(.providerUnavailable, Messages.refreshUnavailable(provider: name), reason: "refresh: HTTP \(status)")
        case .malformed(let reason):
            return failures.make(.providerUnavailable, Messages.refreshUnreadable(provider: name), reason: "refresh: \(reason)")
        case .transport(.timeout):
            return failures.make(.timeout, Messages.refreshTimedOut(provider: name), reason: "refresh: token endpoint timed out")
        case .transport(.cancelled):
            return failures.make(.cancelled, Messages.refreshInterrupted(provider: name), reason: "refresh: cancelled")
        case .transport(let f):
            return failures.make(.providerUnavailable, Messages.refreshUnavailable(provider: name), reason: "refresh: \(f)")
        }
    }

    // MARK: - Userinfo

    private func userinfo(metadata: ProviderMetadata, accessToken: String,
                          expectedSub: String) async throws(VaultFailure) -> [String: JSON] {
        guard let endpoint = metadata.userinfoEndpoint else {
            throw failures.loginFailed(reason: "profile wants userinfo but discovery has no userinfo_endpoint")
        }
        let response: OIDCHTTPClient.Response
        do {
            response = try await http.send(.GET, endpoint, headers: [("authorization", "Bearer " + accessToken),
                                                                     ("accept", "application/json")],
                                           timeout: profile.requestTimeout, maxBytes: profile.maxResponseBytes)
        } catch {
            throw failures.transport(error, reason: "userinfo: \(error)")
        }
        if response.status >= 500 { throw failures.unavailable(reason: "userinfo HTTP \(response.status)") }
        guard response.status == 200 else { throw failures.loginFailed(reason: "userinfo HTTP \(response.status)") }
        // Signed or encrypted userinfo (application/jwt) is not supported: refuse rather than guess.
        guard response.contentType.hasPrefix("application/json") else {
            throw failures.tokenInvalid(reason: "userinfo is not JSON")
        }
        guard case .object(let claims)? = try? JSON.parse(response.body) else {
            throw failures.tokenInvalid(reason: "userinfo is not a JSON object")
        }
        // OIDC Core §5.3.2: the sub in userinfo must equal the ID token's.
        guard let sub = claims["sub"]?.stringValue, constantTimeEquals(sub, expectedSub) else {
            throw failures.tokenInvalid(reason: "userinfo sub differs from the ID token")
        }
        return claims
    }

    // MARK: - Result

    private func assemble(idClaims: [String: JSON], userClaims: [String: JSON],
                          tokens: TokenResponse) throws(VaultFailure) -> VerifiedLogin {
        // The stable subject comes from the signed ID token; userinfo (bound to it
        // by `sub`) only when the ID token lacks the claim.
        guard let subject = (idClaims[profile.subjectClaim] ?? userClaims[profile.subjectClaim])?.stringValue,
              !subject.isEmpty else {
            throw failures.tokenInvalid(reason: "no \(profile.subjectClaim) claim")
        }

        let acr = idClaims["acr"]?.stringValue
        if let minimum = profile.minimumACR, !acrSatisfies(acr, minimum: minimum) {
            throw failures.make(.loginFailed, Messages.loginTooWeak(provider: profile.displayName),
                                reason: "acr below the configured minimum")
        }

        var nationalID: SecureBytes?
        let nationalIDClaim: String?
        switch profile.nationalIDInReach {
        case .none: nationalIDClaim = nil
        case .idToken(let claim):
            nationalIDClaim = claim
            if let value = idClaims[claim]?.stringValue { nationalID = try secure(value) }
        case .userinfo(let claim):
            nationalIDClaim = claim
            if let value = userClaims[claim]?.stringValue { nationalID = try secure(value) }
        }

        // Claims an app may see: the allowlist, never a national ID.
        var excluded = ProviderProfile.nationalIDClaims
        if let nationalIDClaim { excluded.insert(nationalIDClaim) }
        var claims: [String: JSON] = [:]
        for name in profile.releasedClaims where !excluded.contains(name) {
            if let v = idClaims[name] ?? userClaims[name] { claims[name] = v }
        }

        let name: String
        if let n = (userClaims["name"] ?? idClaims["name"])?.stringValue, !n.isEmpty {
            name = n
        } else {
            let given = (userClaims["given_name"] ?? idClaims["given_name"])?.stringValue ?? ""
            let family = (userClaims["family_name"] ?? idClaims["family_name"])?.stringValue ?? ""
            name = [given, family].filter { !$0.isEmpty }.joined(separator: " ")
        }

        let issuedAt = now()
        let grant = TokenGrant(
            accessToken: tokens.accessToken,
            accessExpiresAt: tokens.expiresIn.map { issuedAt + $0 },
            refreshToken: profile.refreshes ? tokens.refreshToken : nil,
            refreshExpiresAt: profile.refreshes ? tokens.refreshExpiresIn.map { issuedAt + $0 } : nil,
            idToken: tokens.idToken)
        var verified = VerifiedLogin(provider: profile.id, providerName: profile.displayName, issuer: profile.issuer,
                                     clientID: profile.clientID, subject: subject, name: name, claims: claims,
                                     nationalID: nationalID, acr: acr, tokens: grant)
        verified.authTime = idClaims["auth_time"]?.intValue
        return verified
    }

    private func secure(_ value: String) throws(VaultFailure) -> SecureBytes {
        do { return try SecureBytes.utf8(value) } catch { throw failures.make(.internal, reason: "secure memory") }
    }

    func acrSatisfies(_ acr: String?, minimum: String) -> Bool {
        guard let acr else { return false }
        if acr == minimum { return true }
        guard let have = profile.acrOrder.firstIndex(of: acr),
              let need = profile.acrOrder.firstIndex(of: minimum) else { return false }
        return have >= need
    }

    // MARK: - Refresh and revoke

    public func refresh(refreshToken: String) async throws(VaultFailure) -> TokenGrant {
        guard profile.refreshes else {
            throw failures.sessionExpired(reason: "\(profile.id) issues no refresh tokens")
        }
        // A backend or gateway refreshes without the provider: it need not be up.
        let metadata = profile.backend == nil && profile.gatewayURL == nil ? try await loadMetadata() : nil
        var form: [(String, String)] = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        let tokens: TokenResponse
        do {
            tokens = try await postToToken(&form, metadata: metadata)
        } catch {
            throw mapRefreshError(error)
        }
        let issuedAt = now()
        // No new refresh token: the old one stays valid (RFC 6749 §6). A new ID
        // token from a refresh is not passed on (it is not needed and would need
        // its own verification against the original login).
        return TokenGrant(accessToken: tokens.accessToken,
                          accessExpiresAt: tokens.expiresIn.map { issuedAt + $0 },
                          refreshToken: tokens.refreshToken ?? refreshToken,
                          refreshExpiresAt: tokens.refreshExpiresIn.map { issuedAt + $0 },
                          idToken: nil)
    }

    public func revoke(token: String, isRefreshToken: Bool) async -> Bool {
        var form: [(String, String)] = [("token", token),
                                        ("token_type_hint", isRefreshToken ? "refresh_token" : "access_token")]
        var headers: [(String, String)] = [("content-type", "application/x-www-form-urlencoded")]
        let endpoint: String
        if let backend = profile.backend {
            // The backend's session, revoked at the backend (a public client: client_id only).
            guard let revocation = backend.revocationURL else { return false }
            endpoint = revocation
            form.append(("client_id", profile.clientID))
        } else {
            guard profile.gatewayURL == nil, let metadata = try? await cache.metadata(),
                  let advertised = metadata.revocationEndpoint else { return false }
            endpoint = advertised
            addClientAuthentication(&form, &headers)
        }
        guard cache.policy.allows(endpoint) else { return false }
        guard let response = try? await http.send(.POST, endpoint, headers: headers,
                                                  body: Array(FormEncoding.encode(form).utf8),
                                                  timeout: profile.requestTimeout, maxBytes: 64 * 1024)
        else { return false }
        return response.status == 200
    }

    // MARK: - Helpers

    private func loadMetadata() async throws(VaultFailure) -> ProviderMetadata {
        do {
            return try await cache.metadata()
        } catch {
            throw failures.transport(error.transport, reason: error.reason)
        }
    }
}

/// Builds the failures of one provider: the right sentence, the provider's id
/// and the alternatives to offer, and one diagnostics line with the reason.
struct FailureFactory: Sendable {
    let profile: ProviderProfile
    let log: @Sendable (String) -> Void

    func make(_ code: ErrorCode, _ message: LocalizedText? = nil, reason: String) -> VaultFailure {
        log("\(profile.id) login: \(code.rawValue): \(reason)")
        return VaultFailure(code, message: message, extra: [
            "provider": .string(profile.id),
            "alternatives": .array(profile.alternatives.map { .string($0.id) }),
        ])
    }

    func cancelled(reason: String) -> VaultFailure {
        make(.cancelled, Messages.loginCancelled(provider: profile.displayName), reason: reason)
    }
    func unavailable(reason: String) -> VaultFailure {
        make(.providerUnavailable,
             Messages.providerUnavailable(provider: profile.displayName,
                                          alternatives: profile.alternatives.map(\.displayName)),
             reason: reason)
    }
    func timeout(reason: String) -> VaultFailure { make(.timeout, reason: reason) }
    func loginFailed(reason: String) -> VaultFailure { make(.loginFailed, reason: reason) }
    func stateMismatch(reason: String) -> VaultFailure { make(.stateMismatch, reason: reason) }
    func tokenInvalid(reason: String) -> VaultFailure { make(.tokenInvalid, reason: reason) }
    func sessionExpired(reason: String) -> VaultFailure { make(.sessionExpired, reason: reason) }

    /// Transport failures: timeouts are `timeout`, a cancelled task `cancelled`,
    /// everything else (refused, reset, oversized, bad document) `provider_unavailable`.
    func transport(_ failure: OIDCHTTPClient.Failure?, reason: String) -> VaultFailure {
        switch failure {
        case .timeout?: return timeout(reason: reason)
        case .cancelled?: return cancelled(reason: reason)
        default: return unavailable(reason: reason)
        }
    }
}

enum Base64Standard {
    static func encode(_ bytes: [UInt8]) -> String {
        var s = String(Base64URL.encode(bytes).map { c -> Character in c == "-" ? "+" : (c == "_" ? "/" : c) })
        while s.utf8.count % 4 != 0 { s += "=" }
        return s
    }
}

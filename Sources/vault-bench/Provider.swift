import Foundation
import SodiumKit
import VaultProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The project's strict test provider (Tests/providers/strict_provider.py) on
/// 127.0.0.1, generic profile: refresh tokens that do not rotate (so two tools
/// can each hold a family of their own), `offline_access` among its scopes
/// (oidc-agent asks for it on refresh), a confidential client (oidc-gen wants a
/// secret), and per-call timing of its token endpoint in `/_admin/stats`.
final class StrictProvider {
    let process: Process
    let issuer: String
    let clientID = "sessionvault-test"
    let clientSecret = "vault-bench-secret"

    /// `profile`: generic (the default, above), or vipps for the line through the
    /// organization's backend (no refresh tokens; `nin` from userinfo).
    init(python: String, script: String, accessTTL: Int, profile: String = "generic") throws {
        let out = Pipe()
        // --watch-pid: it also goes when vault-bench dies without cleaning up.
        process = try startChild(python, [script, "--profile", profile, "--client-id", clientID,
                                          "--client-secret", clientSecret, "--access-ttl", "\(accessTTL)",
                                          "--watch-pid", "\(getpid())", "--idle-exit", "900"], stdout: out)
        let line = readFirstLine(out, timeout: 20)
        guard line.hasPrefix("READY ") else {
            stopChild(process)
            throw BenchError("the strict provider did not start: \(line)")
        }
        issuer = String(line.dropFirst("READY ".count))
    }

    func stop() { stopChild(process) }

    @discardableResult
    func admin(_ path: String, _ body: JSON? = nil) throws -> JSON {
        let url = issuer + "/_admin/" + path
        let r = try body.map { try HTTP.postJSON(url, $0) } ?? HTTP.get(url)
        guard r.status == 200, let j = r.json else { throw BenchError("provider admin \(path): HTTP \(r.status) \(r.text)") }
        return j
    }

    struct TokenCall {
        var grant: String
        var status: Int64
        var start: UInt64
        var end: UInt64
        var ns: UInt64 { end - start }
    }

    /// The token-endpoint calls it served so far (start/end on CLOCK_MONOTONIC).
    func tokenCalls() throws -> [TokenCall] {
        try (admin("stats")["token_calls"]?.arrayValue ?? []).compactMap { c in
            guard let s = c["start_ns"]?.intValue, let e = c["end_ns"]?.intValue, s >= 0, e >= s else { return nil }
            return TokenCall(grant: c["grant"]?.stringValue ?? "", status: c["status"]?.intValue ?? 0,
                             start: UInt64(s), end: UInt64(e))
        }
    }

    /// A refresh token of the bench's own: the authorization code flow with
    /// PKCE, the login automated (`test_user`), the redirect not followed.
    func refreshToken(scope: String, user: String = "kari") throws -> String {
        let redirect = "http://127.0.0.1:9/callback"  // never contacted: the 302 is read, not followed
        let verifier = Base64URL.encode(Random.bytes(48))
        let query = HTTP.formEncode([
            ("client_id", clientID), ("redirect_uri", redirect), ("response_type", "code"), ("scope", scope),
            ("state", Base64URL.encode(Random.bytes(16))), ("nonce", Base64URL.encode(Random.bytes(16))),
            ("code_challenge", Base64URL.encode(Digest.sha256(Array(verifier.utf8)))),
            ("code_challenge_method", "S256"), ("test_user", user),
        ])
        let authorize = try HTTP.get(issuer + "/authorize?" + query)
        guard authorize.status == 302, let location = authorize.header("location"),
              let code = URLComponents(string: location)?.queryItems?.first(where: { $0.name == "code" })?.value else {
            throw BenchError("the provider gave no code: HTTP \(authorize.status) \(authorize.text)")
        }
        let token = try HTTP.postForm(issuer + "/token", [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirect),
            ("code_verifier", verifier), ("client_id", clientID), ("client_secret", clientSecret),
        ])
        guard token.status == 200, let rt = token.json?["refresh_token"]?.stringValue else {
            throw BenchError("the provider gave no refresh token: HTTP \(token.status) \(token.text)")
        }
        return rt
    }
}

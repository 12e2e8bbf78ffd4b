import Foundation
import Synchronization
import VaultTestSupport
import XCTest
@testable import OIDCFactor
import VaultFactor

/// The project's strict Python provider (Tests/providers/strict_provider.py), run
/// as a real process on 127.0.0.1. Skipped when the script or a Python with
/// `cryptography` is not there (set STRICT_PROVIDER / PROVIDER_PYTHON to point at
/// them); under CI=true that fails instead.
final class StrictProviderProcess: @unchecked Sendable {
    let process: Process
    let issuer: String

    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    static func locate() -> (python: String, script: String)? {
        let env = ProcessInfo.processInfo.environment
        let script = env["STRICT_PROVIDER"] ?? packageRoot.appendingPathComponent("Tests/providers/strict_provider.py").path
        guard FileManager.default.fileExists(atPath: script) else { return nil }
        var candidates: [String] = []
        if let p = env["PROVIDER_PYTHON"] { candidates.append(p) }
        candidates.append(packageRoot.appendingPathComponent(".venv/bin/python").path)
        candidates += ["/usr/bin/env python3"]
        for candidate in candidates {
            let parts = candidate.split(separator: " ").map(String.init)
            guard parts[0] == "/usr/bin/env" || FileManager.default.isExecutableFile(atPath: parts[0]) else { continue }
            // Ask for the real interpreter: a wrapper (pyenv's shim is a shell script)
            // would not pass SIGTERM on while it waits for its child.
            let probe = Process()
            probe.executableURL = URL(fileURLWithPath: parts[0])
            probe.arguments = Array(parts.dropFirst()) + ["-c", "import cryptography, sys; print(sys.executable)"]
            let out = Pipe()
            probe.standardOutput = out
            probe.standardError = FileHandle.nullDevice
            guard (try? probe.run()) != nil else { continue }
            let data = out.fileHandleForReading.readDataToEndOfFile()
            probe.waitUntilExit()
            let executable = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if probe.terminationStatus == 0, FileManager.default.isExecutableFile(atPath: executable) {
                return (executable, script)
            }
        }
        return nil
    }

    init(profile: String, arguments: [String] = []) async throws {
        guard let (python, script) = StrictProviderProcess.locate() else {
            throw cannotRunHere("strict_provider.py or a Python with `cryptography` not found (scripts/provider-venv makes one)")
        }
        let parts = python.split(separator: " ").map(String.init)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: parts[0])
        process.arguments = Array(parts.dropFirst()) + [script, "--profile", profile, "--client-id", "sessionvault-test",
                                                        "--idle-exit", "120", "--watch-pid", "\(getpid())"] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        let handle = out.fileHandleForReading
        let line = await Task.detached { () -> String in
            var bytes: [UInt8] = []
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                bytes += chunk
                if bytes.contains(UInt8(ascii: "\n")) { break }
            }
            return String(decoding: bytes, as: UTF8.self)
        }.value
        guard line.hasPrefix("READY ") else {
            process.terminate()
            throw TestError("strict provider did not start: \(line)")
        }
        issuer = String(line.dropFirst(6).prefix { $0 != "\n" })
    }

    func stop() {
        // SIGKILL, not terminate(): a child started by Foundation's Process from the test
        // runner inherits a signal mask that blocks SIGTERM, so Python would ignore it.
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    @discardableResult
    func admin(_ path: String, _ body: JSON = [:]) async throws -> JSON {
        var request = HTTPClientRequest(url: issuer + path)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body.serialized()))
        let response = try await testBrowserClient.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return try JSON.parse(Array(buffer: bytes))
    }

    func stats() async throws -> JSON {
        let r = try await browserGET(issuer + "/_admin/stats")
        return try JSON.parse(r.body)
    }

    /// The browser: opens the authorization URL as test user `user` and follows the
    /// provider's redirect back to the loopback listener.
    func browser(user: String = "kari", language: Language = .en) -> BrowserConversation {
        BrowserConversation(language: language) { request in
            guard let r = try? await browserGET(request.url + "&test_user=" + user), (300..<400).contains(r.status),
                  let location = r.headers.first(name: "location"), location.hasPrefix(request.redirectURI + "?")
            else { return nil }
            return FormEncoding.parseQuery(location.dropFirst(request.redirectURI.count + 1))
        }
    }

    func profile(_ base: ProviderProfile) -> ProviderProfile {
        var p = base
        p.issuer = issuer
        p.discoveryURL = ProviderProfile.discoveryURL(forIssuer: issuer)
        p.clientID = "sessionvault-test"
        p.redirectTimeout = .seconds(5)
        p.requestTimeout = .seconds(5)
        return p
    }
}

final class StrictProviderTests: XCTestCase, @unchecked Sendable {
    func testBankIDLoginRefreshRotationAndRevocation() async throws {
        let strict = try await StrictProviderProcess(profile: "bankid")
        defer { strict.stop() }
        let provider = OIDCProvider(profile: strict.profile(.bankID(.test, clientID: "x")), http: sharedTestHTTP)

        let first = try await provider.login(strict.browser())
        let second = try await provider.login(strict.browser())
        XCTAssertEqual(first.subject, second.subject, "bankid_altsub is stable although sub changes per login")
        XCTAssertEqual(first.name, "Kari Nordmann")
        XCTAssertEqual(first.acr, "urn:bankid:bid;LOA=4")
        XCTAssertEqual(first.claims["org"], "mentor-oslo")
        XCTAssertEqual(first.claims["roles"], ["mentor"])
        XCTAssertNil(first.claims["nnin_altsub"])
        XCTAssertEqual(first.nationalID?.count, 11)

        let rt = try XCTUnwrap(first.tokens.refreshToken)
        let grant = try await provider.refresh(refreshToken: rt)
        XCTAssertNotEqual(grant.refreshToken, rt, "BankID rotates refresh tokens")
        // Reusing the old one is detected by the provider: the family is revoked.
        _ = await assertFailure(.sessionExpired) { () async throws(VaultFailure) in
            try await provider.refresh(refreshToken: rt)
        }
        let rotated = try XCTUnwrap(grant.refreshToken)
        _ = await assertFailure(.sessionExpired) { () async throws(VaultFailure) in
            try await provider.refresh(refreshToken: rotated)
        }
        let revoked = await provider.revoke(token: try XCTUnwrap(second.tokens.refreshToken), isRefreshToken: true)
        XCTAssertTrue(revoked)
    }

    func testVippsLogin() async throws {
        let strict = try await StrictProviderProcess(profile: "vipps")
        defer { strict.stop() }
        let provider = OIDCProvider(profile: strict.profile(.vipps(.test, clientID: "x")), http: sharedTestHTTP)
        let login = try await provider.login(strict.browser(user: "ola"))
        XCTAssertEqual(login.name, "Ola Nordmann")
        XCTAssertEqual(login.nationalID?.count, 11, "nin from userinfo")
        XCTAssertEqual(login.claims["roles"], ["coordinator", "mentor"])
        XCTAssertNil(login.tokens.refreshToken)
        _ = await assertFailure(.sessionExpired) { () async throws(VaultFailure) in
            try await provider.refresh(refreshToken: "none")
        }

        try await strict.admin("/_admin/behavior", ["userinfo_sub_mismatch": true])
        _ = await assertFailure(.tokenInvalid) { () async throws(VaultFailure) in
            try await OIDCProvider(profile: strict.profile(.vipps(.test, clientID: "x")), http: sharedTestHTTP)
                .login(strict.browser())
        }
    }

    func testHostileAndFaultyBehaviours() async throws {
        let strict = try await StrictProviderProcess(profile: "bankid")
        defer { strict.stop() }
        let cases: [(String, JSON, ErrorCode?)] = [
            ("wrong_iss", true, .tokenInvalid),
            ("wrong_aud", true, .tokenInvalid),
            ("extra_aud", true, .tokenInvalid),
            ("expired_id_token", true, .tokenInvalid),
            ("iat_in_future", true, .tokenInvalid),
            ("nonce_mismatch", true, .tokenInvalid),
            ("missing_nonce", true, .tokenInvalid),
            ("wrong_at_hash", true, .tokenInvalid),
            ("alg_none", true, .tokenInvalid),
            ("hs256_with_public_key", true, .tokenInvalid),
            ("unknown_kid", true, .tokenInvalid),
            ("no_kid", true, nil),
            ("mixup_iss", true, .stateMismatch),
            ("no_iss_parameter", true, .stateMismatch),
            ("error_and_code", true, .loginFailed),
            ("authorize_error", true, .cancelled),
            ("authorize_error", "server_error", .providerUnavailable),
            ("authorize_error", "temporarily_unavailable", .providerUnavailable),
            ("token_error", "invalid_grant", .loginFailed),
            ("token_error", "server_error", .providerUnavailable),
            ("token_error", 500, .providerUnavailable),
            ("huge_token_response", true, .providerUnavailable),
            ("slow_token", 3, .timeout),
            ("drop_connection", true, .providerUnavailable),
            ("discovery_issuer_mismatch", true, .providerUnavailable),
            ("endpoint_status", ["jwks": 503], .providerUnavailable),
        ]
        for (behaviour, value, expected) in cases {
            try await strict.admin("/_admin/reset")
            try await strict.admin("/_admin/behavior", .object([behaviour: value]))
            var profile = strict.profile(.bankID(.test, clientID: "x"))
            profile.requestTimeout = .seconds(1)
            let provider = OIDCProvider(profile: profile, http: sharedTestHTTP)
            let label = "\(behaviour)=\(value.text)"
            do {
                let login = try await provider.login(strict.browser())
                XCTAssertNil(expected, "\(label) should have failed; got a login for \(login.subject)")
            } catch {
                XCTAssertEqual(error.code, expected, "\(label): \(error.message.en)")
            }
        }
        // unknown_kid: the JWKS was fetched once more before giving up.
        try await strict.admin("/_admin/reset")
        try await strict.admin("/_admin/behavior", ["unknown_kid": true])
        _ = await assertFailure(.tokenInvalid) { () async throws(VaultFailure) in
            try await OIDCProvider(profile: strict.profile(.bankID(.test, clientID: "x")), http: sharedTestHTTP)
                .login(strict.browser())
        }
        let stats = try await strict.stats()
        XCTAssertEqual(stats["requests"]?["jwks"], 2)
    }

    /// A refresh ends the session (`session_expired`) only on `invalid_grant`.
    /// Every other answer keeps the grant, with a code and a sentence saying
    /// what is wrong, and the same refresh token works afterwards.
    func testRefreshEndsTheSessionOnlyOnInvalidGrant() async throws {
        let strict = try await StrictProviderProcess(profile: "bankid")
        defer { strict.stop() }
        var profile = strict.profile(.bankID(.test, clientID: "x"))
        profile.requestTimeout = .seconds(1)
        let provider = OIDCProvider(profile: profile, http: sharedTestHTTP)
        let name = profile.displayName
        func once(_ value: JSON) -> JSON { ["value": value, "times": 1, "grant": "refresh_token"] }
        let cases: [(String, JSON, ErrorCode, LocalizedText)] = [
            ("token_error", once("invalid_client"), .loginFailed, Messages.refreshClientRefused(provider: name, error: "invalid_client")),
            ("token_error", once("unauthorized_client"), .loginFailed,
             Messages.refreshClientRefused(provider: name, error: "unauthorized_client")),
            ("token_error", once("invalid_request"), .loginFailed, Messages.refreshRefused(provider: name, error: "invalid_request")),
            ("token_error", once("unsupported_grant_type"), .loginFailed,
             Messages.refreshRefused(provider: name, error: "unsupported_grant_type")),
            ("token_error", once("invalid_scope"), .loginFailed, Messages.refreshRefused(provider: name, error: "invalid_scope")),
            ("token_error", once("<b>made up</b>"), .loginFailed, Messages.refreshRefused(provider: name, error: nil)),
            ("token_error", once("server_error"), .providerUnavailable, Messages.refreshUnavailable(provider: name)),
            ("token_error", once("temporarily_unavailable"), .providerUnavailable, Messages.refreshUnavailable(provider: name)),
            ("token_error", once(500), .providerUnavailable, Messages.refreshUnavailable(provider: name)),
            ("token_error", once(429), .providerUnavailable, Messages.refreshUnavailable(provider: name)),
            ("malformed_token_response", once(true), .providerUnavailable, Messages.refreshUnreadable(provider: name)),
            ("drop_connection", ["value": "token", "times": 1], .providerUnavailable, Messages.refreshUnavailable(provider: name)),
        ]
        let login = try await provider.login(strict.browser())
        var refreshToken = try XCTUnwrap(login.tokens.refreshToken)
        for (behaviour, value, code, message) in cases {
            try await strict.admin("/_admin/behavior", .object([behaviour: value]))
            let failure = await assertFailure(code) { () async throws(VaultFailure) in
                try await provider.refresh(refreshToken: refreshToken)
            }
            XCTAssertEqual(failure?.message, message, "\(behaviour)=\(value.text)")
            // The grant lives on: the same refresh token is accepted (and rotated).
            let grant = try await provider.refresh(refreshToken: refreshToken)
            refreshToken = try XCTUnwrap(grant.refreshToken)
        }
        // A token endpoint slower than the request timeout. (The provider
        // rotates after its pause, so this one comes last.)
        try await strict.admin("/_admin/behavior", ["slow_token": once(3)])
        let slow = await assertFailure(.timeout) { () async throws(VaultFailure) in
            try await provider.refresh(refreshToken: refreshToken)
        }
        XCTAssertEqual(slow?.message, Messages.refreshTimedOut(provider: name))
        XCTAssertEqual(slow?.message.nb, "\(name) svarte ikke i tide, så økten din kunne ikke fornyes. Økten din er beholdt; prøv igjen om litt.")

        // invalid_grant, and only it, is the end of the session.
        try await strict.admin("/_admin/behavior", ["token_error": once("invalid_grant")])
        let expired = await assertFailure(.sessionExpired) { () async throws(VaultFailure) in
            try await provider.refresh(refreshToken: refreshToken)
        }
        XCTAssertEqual(expired?.message.en, "Your session has expired — please log in again")
    }

    func testConfidentialClientAgainstTheStrictProvider() async throws {
        let strict = try await StrictProviderProcess(profile: "generic", arguments: ["--client-secret", "s3cret"])
        defer { strict.stop() }
        for auth in [ProviderProfile.ClientAuthentication.clientSecretBasic("s3cret"), .clientSecretPost("s3cret")] {
            var profile = strict.profile(.generic(id: "test", displayName: "Test", issuer: "x", clientID: "x"))
            profile.clientAuthentication = auth
            let provider = OIDCProvider(profile: profile, http: sharedTestHTTP)
            let login = try await provider.login(strict.browser())
            XCTAssertEqual(login.subject, "kari")
            let rt = try XCTUnwrap(login.tokens.refreshToken)
            let grant = try await provider.refresh(refreshToken: rt)
            XCTAssertEqual(grant.refreshToken, rt, "a provider that does not rotate: the old token stays")
        }
        var wrong = strict.profile(.generic(id: "test", displayName: "Test", issuer: "x", clientID: "x"))
        wrong.clientAuthentication = .clientSecretPost("wrong")
        _ = await assertFailure(.loginFailed) { () async throws(VaultFailure) in
            try await OIDCProvider(profile: wrong, http: sharedTestHTTP).login(strict.browser())
        }
    }
}

import AsyncHTTPClient
import NIOCore

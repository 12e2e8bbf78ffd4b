import Foundation
import VaultProtocol
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The organization's reference backend (examples/backend/backend.py) as a
/// child process on 127.0.0.1, in front of one strict test provider, with its
/// admin API (its clock, its sessions table, its counters).
final class TestBackend {
    let process: Process
    let url: String
    let upstream: TestProvider
    /// Every token it handed out, in order (access, then refresh, per grant), for the secrets scan.
    let issuedLog: String?

    /// `upstream` must have been started with `--client-secret SECRET`.
    /// `rotationGrace`: seconds the previous refresh token stays usable while its
    /// successor is unused (0: strict rotation).
    init(upstream: TestProvider, secret: String, accessTTL: Int = 30, sessionDays: Int = 7, rotationGrace: Int = 0) throws {
        self.upstream = upstream
        let issuedLog = SecretLedger.issuedLog("backend")
        self.issuedLog = issuedLog
        (process, url) = try startPythonProvider(
            "backend.py",
            ["--upstream", "\(upstream.profile)=\(upstream.issuer),\(upstream.clientID),\(secret)",
             "--access-ttl", "\(accessTTL)", "--session-days", "\(sessionDays)", "--rotation-grace", "\(rotationGrace)",
             "--watch-pid", "\(getpid())", "--idle-exit", "300"]
                + (issuedLog.map { ["--issued-log", $0] } ?? []),
            timeout: 20, directory: "examples/backend")
    }

    deinit { stop() }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    var tokenURL: String { "\(url)/\(upstream.profile)/token" }
    var revocationURL: String { "\(url)/\(upstream.profile)/revoke" }

    /// vaultd's `[providers.NAME]` table: the upstream provider, kept by this backend.
    func configTable() -> String {
        upstream.configTable(extra: "backend = \"\(tokenURL)\"\nbackend_revocation = \"\(revocationURL)\"\n")
    }

    @discardableResult
    func admin(_ path: String, _ body: JSON? = nil) throws -> JSON {
        let (_, answer) = try loopbackHTTP(url + "/_admin/" + path, json: body)
        return try XCTUnwrap(answer, "backend admin \(path): no JSON answer")
    }

    /// Moves the backend's clock on (days of a person's life in a test).
    func advance(seconds: Int64) throws { try admin("clock", ["advance": .int(seconds)]) }

    /// GET /me with the backend's access token, as an app would.
    func me(_ accessToken: String) throws -> (status: Int, body: JSON?) {
        try loopbackHTTP(url + "/me", bearer: accessToken)
    }

    func sessions() throws -> [JSON] { try admin("sessions")["sessions"]?.arrayValue ?? [] }
    func stats() throws -> JSON { try admin("stats") }
}

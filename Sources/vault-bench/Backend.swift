import Foundation
import VaultProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The refresh line through the organization's backend (docs/backend.md): a
/// Vipps-like strict provider (no refresh tokens), the reference backend
/// (examples/backend, Flask and SQLite) holding the client secret, and a vaultd
/// configured with the backend. A forced refresh there never reaches the
/// provider; the line stands beside the forced refresh at the provider itself.
func measureBackendRefresh(_ setup: OIDCBenchSetup, python: String, rounds: Int) throws -> Latency {
    let backendScript = URL(fileURLWithPath: setup.providerScript).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("examples/backend/backend.py").path
    guard FileManager.default.fileExists(atPath: backendScript) else { throw BenchError("no \(backendScript)") }
    let accessTTL = 3600
    let vipps = try StrictProvider(python: python, script: setup.providerScript, accessTTL: accessTTL, profile: "vipps")
    defer { vipps.stop() }
    let out = Pipe()
    var environment = ProcessInfo.processInfo.environment
    environment["BENCH_CLIENT_SECRET"] = vipps.clientSecret
    // The bench's own rate of refreshes is far above a person's: no rate limit here.
    let backend = try startChild(python, [backendScript, "--upstream", "vipps=\(vipps.issuer),\(vipps.clientID),env:BENCH_CLIENT_SECRET",
                                          "--access-ttl", "\(accessTTL)", "--rotation-grace", "60", "--rate-limit", "1000000",
                                          "--watch-pid", "\(getpid())", "--idle-exit", "900"],
                                 environment: environment, stdout: out)
    defer { stopChild(backend) }
    let line = readFirstLine(out, timeout: 20)
    guard line.hasPrefix("READY ") else { throw BenchError("the reference backend did not start: \(line)") }
    let base = String(line.dropFirst("READY ".count))
    let daemon = try Daemon(binary: setup.vaultd, name: "backend", config: """
        idle_timeout = 0
        per_app = false
        [fingerprint]
        reader = "none"
        [providers.generic]
        profile = "vipps"
        issuer = "\(vipps.issuer)"
        client_id = "\(vipps.clientID)"
        backend = "\(base)/vipps/token"
        backend_revocation = "\(base)/vipps/revoke"

        """)
    defer { daemon.stop() }
    let account = try measureLogin(daemon.socket, provider: vipps, rounds: 0).account
    let frame = forcedRefreshRequest(account, accessTTL: accessTTL)
    let figures = try measureLatency(count: rounds) { try forcedRefreshOnce(daemon.socket, frame: frame) }
    guard try vipps.tokenCalls().filter({ $0.grant == "refresh_token" }).isEmpty else {
        throw BenchError("a refresh through the backend reached the provider")
    }
    return figures
}

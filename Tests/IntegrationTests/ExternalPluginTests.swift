import Foundation
import VaultProtocol
import VaultTestSupport
import XCTest

/// An external factor written in Python, found by vaultd in its plugin
/// directory and used through vaultctl like a built-in one.
final class ExternalPluginTests: VaultdTestCase {
    func installPlugin(_ v: VaultdProcess, name: String = "vault-factor-pytest", mode: mode_t = 0o755) throws -> String {
        let dir = v.dataDir + "/plugins"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let target = dir + "/" + name
        try? FileManager.default.removeItem(atPath: target)
        try FileManager.default.copyItem(atPath: repositoryRoot + "/Tests/plugins/vault-factor-pytest", toPath: target)
        chmod(target, mode)
        return target
    }

    func testAPythonPluginIsAFactorLikeAnyOther() throws {
        let v = try makeVaultd()
        _ = try installPlugin(v)
        try v.start(env: ["VAULT_FACTOR_PYTEST_KIND": "secret"])
        try importSession(v, account: "kari", accessToken: "AT-plugin-1", refreshToken: "RT-plugin-1")
        let factors = try status(v)["factors"]?.arrayValue ?? []
        XCTAssertTrue(factors.contains { $0["factor"] == "pytest" }, "\(factors)")

        let enroll = v.vaultctl(["enroll", "pytest"], stdin: "13579\n13579\n")
        XCTAssertEqual(enroll.exit, 0, enroll.err)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let wrong = v.vaultctl(["unlock", "pytest"], stdin: "99999\n")
        XCTAssertNotEqual(wrong.exit, 0)
        let token = v.vaultctl(["token", "kari"], stdin: "13579\n")
        XCTAssertEqual(token.exit, 0, token.err)
        XCTAssertEqual(token.out.trimmingCharacters(in: .whitespacesAndNewlines), "AT-plugin-1")
    }

    /// `status` and `factors` probe every factor; polled in a loop they must not
    /// start the plugin each time (plugins.probe_cache, 5 s by default).
    func testStatusAndFactorsInALoopStartThePluginOnce() throws {
        let v = try makeVaultd(config: VaultdProcess.fastPINConfig + "[plugins]\nprobe_cache = 600\n")
        _ = try installPlugin(v)
        let state = v.root + "/pytest-state.json", runs = v.root + "/pytest-runs.log"
        try #"{"kind": "presence", "runs_log": "\#(runs)"}"#.write(toFile: state, atomically: true, encoding: .utf8)
        try v.start(env: ["VAULT_FACTOR_PYTEST_STATE": state])
        func probes() -> Int {
            ((try? String(contentsOfFile: runs, encoding: .utf8)) ?? "").split(separator: "\n").filter { $0 == "probe" }.count
        }
        XCTAssertEqual(probes(), 1, "discovery probes once")
        let c = try v.raw()
        defer { c.close() }
        for _ in 0..<20 {
            let status = try c.call("status")
            XCTAssertTrue(status.result?["factors"]?.arrayValue?.contains { $0["factor"] == "pytest" } == true, status.text)
            XCTAssertTrue(try c.call("factors").isOK)
        }
        XCTAssertEqual(probes(), 1, "40 requests within the cache time start the plugin no more")

        // probe_cache = 0: every request starts it again.
        v.stop()
        try (VaultdProcess.fastPINConfig + "[plugins]\nprobe_cache = 0\n").write(toFile: v.configPath, atomically: true, encoding: .utf8)
        try v.start(env: ["VAULT_FACTOR_PYTEST_STATE": state])
        let before = probes()
        XCTAssertTrue(try status(v)["factors"]?.arrayValue?.contains { $0["factor"] == "pytest" } == true)
        XCTAssertGreaterThan(probes(), before)
    }

    func testUnsafePluginsAreRefused() throws {
        let v = try makeVaultd()
        _ = try installPlugin(v, mode: 0o775)  // group-writable
        try v.start()
        let factors = try status(v)["factors"]?.arrayValue ?? []
        XCTAssertFalse(factors.contains { $0["factor"] == "pytest" }, "\(factors)")
        XCTAssertTrue(v.log.contains("plugin refused"), v.log)
    }

    func testACrashingPluginNeverTakesVaultdDown() throws {
        let v = try makeVaultd()
        _ = try installPlugin(v)
        let state = v.root + "/pytest-state.json"
        try #"{"mode": {"enroll": "crash", "unlock": "crash"}}"#.write(toFile: state, atomically: true, encoding: .utf8)
        try v.start(env: ["VAULT_FACTOR_PYTEST_STATE": state])
        let r = v.vaultctl(["enroll", "pytest"], stdin: "13579\n13579\n")
        XCTAssertEqual(r.exit, 4, "factor_unavailable: \(r.err)")
        XCTAssertTrue(v.isRunning)
        XCTAssertEqual(try status(v)["locked"], false)
    }
}

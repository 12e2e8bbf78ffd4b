import ExternalFactor
import Foundation
import Logging
import Locking
import VaultCore
import VaultFactor
import VaultStore
#if canImport(Glibc)
import Glibc
import VaultTestSupport
#endif

/// One answer of a script in the order the person gives them.
enum Answer: Sendable, Equatable {
    case secret(String)
    case confirm(Bool)
    /// The person cancels the prompt.
    case cancel
}

/// A scripted person (VaultTestSupport's ScriptedClient) who gives `answers`
/// to the questions as they come, then `repeating` to every later one (else
/// Cancel); `delay` is how long each answer takes. A factor asks one kind of
/// question, so the answers go to that kind's queue; Cancel goes to both.
func scripted(_ answers: [Answer] = [], repeating: Answer? = nil, interactive: Bool = true,
              language: Language = .en, delay: Duration? = nil) -> ScriptedClient {
    var secrets: [String?] = []
    var confirms: [Bool?] = []
    for answer in answers {
        switch answer {
        case .secret(let s): secrets.append(s)
        case .confirm(let yes): confirms.append(yes)
        case .cancel:
            secrets.append(nil)
            confirms.append(nil)
        }
    }
    var thenSecret: String?
    var thenConfirm: Bool?
    switch repeating {
    case .secret(let s)?: thenSecret = s
    case .confirm(let yes)?: thenConfirm = yes
    case .cancel?, nil: break
    }
    return ScriptedClient(secrets: secrets, confirms: confirms, interactive: interactive,
                          thenSecret: thenSecret, thenConfirm: thenConfirm, language: language, delay: delay)
}

func importRequest(account: String = "kari", token: String = "T1") -> ImportRequest {
    ImportRequest(issuer: "https://login.example.org", clientID: "app", account: account, name: "Kari Nordmann",
                  refreshToken: "rt-\(token)", accessToken: "at-\(token)", accessExpiresAt: 4_102_444_800)
}

enum TempDir {
    /// A fresh 0700 directory (plugin safety checks refuse anything looser).
    static func make(_ label: String) -> String {
        // A test cannot go on without its directory (tests may crash; `try!` is for them).
        try! makeTemporaryDirectory("factor-contract-\(label)")
    }

    static func remove(_ path: String) { try? FileManager.default.removeItem(atPath: path) }
}

/// A plugin directory holding a copy of Tests/plugins/vault-factor-pytest, and
/// the JSON state file that scripts it.
final class PluginSandbox: Sendable {
    static let source: String = {
        // Tests/FactorContractTests/Support.swift → Tests/plugins/vault-factor-pytest
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        return tests.appendingPathComponent("plugins/vault-factor-pytest").path
    }()

    let root: String
    let pluginDir: String
    let statePath: String
    var pluginPath: String { pluginDir + "/vault-factor-pytest" }
    private let records = Locked<[ExternalFactor.LogRecord]>([])

    /// In `parent` (which must be private: 0700) or a fresh temp dir.
    init(in parent: String? = nil, state: [String: Any] = [:]) throws {
        if let parent {
            root = parent + "/plugin-sandbox"
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: false)
            chmod(root, 0o700)
        } else {
            root = TempDir.make("plugin")
        }
        pluginDir = root + "/plugins"
        statePath = root + "/state.json"
        try FileManager.default.createDirectory(atPath: pluginDir, withIntermediateDirectories: false)
        chmod(pluginDir, 0o700)
        try FileManager.default.copyItem(atPath: Self.source, toPath: pluginPath)
        chmod(pluginPath, 0o755)
        try write(state)
    }

    /// Replaces the plugin's state (read by the plugin on every run).
    func write(_ state: [String: Any]) throws {
        var s = state
        if s["pid_dir"] == nil { s["pid_dir"] = root }
        let data = try JSONSerialization.data(withJSONObject: s)
        try data.write(to: URL(fileURLWithPath: statePath), options: .atomic)
    }

    func update(_ changes: [String: Any]) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: statePath))
        var s = (try JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
        for (k, v) in changes { s[k] = v }
        try write(s)
    }

    var log: [ExternalFactor.LogRecord] { records.withLock { $0 } }

    /// `probeCache` is off by default: the tests change the plugin's state and
    /// expect the next probe to see it.
    func options(probe: Duration = .seconds(20), operation: Duration = .seconds(30),
                 throttle: ThrottlePolicy = ThrottlePolicy(freeAttempts: 2, firstDelay: 30, maxDelay: 120),
                 probeCache: Duration = .zero) -> ExternalFactor.Options {
        // /usr/bin first: Debian's python3 starts in a tenth of the time of a pyenv shim.
        let path = "/usr/bin:/bin:" + (ProcessInfo.processInfo.environment["PATH"] ?? "")
        return ExternalFactor.Options(
            timeouts: .init(probe: probe, operation: operation),
            throttle: throttle,
            environment: ["VAULT_FACTOR_PYTEST_STATE": statePath, "PATH": path],
            probeCacheTime: probeCache,
            log: { [self] record in self.records.withLock { $0.append(record) } })
    }

    /// Discovers the directory and expects exactly the one plugin.
    func load(_ options: ExternalFactor.Options? = nil) async throws -> ExternalFactor {
        let found = await ExternalFactor.discover(directory: pluginDir, options: options ?? self.options())
        guard found.refused.isEmpty, found.factors.count == 1 else {
            throw SandboxError(description: "expected one plugin, got \(found.factors.map(\.name)), refused: \(found.refused)")
        }
        return found.factors[0]
    }

    /// Where the plugin notes each start (the state's `runs_log`).
    var runsLog: String { root + "/runs.log" }

    /// The operations the plugin was started for, in order (with `runs_log` set in its state).
    func runs() -> [String] {
        ((try? String(contentsOfFile: runsLog, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// The pids the "hang" mode wrote: the plugin and its child.
    func hangPIDs() -> [pid_t]? {
        guard let text = try? String(contentsOfFile: root + "/hang.pids", encoding: .utf8) else { return nil }
        let pids = text.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { pid_t($0) }
        return pids.count == 2 ? pids : nil
    }

    func cleanup() { TempDir.remove(root) }
}

struct SandboxError: Error, CustomStringConvertible {
    var description: String
}

/// Waits up to `seconds` for a process to stop running (SIGKILL is not instantaneous).
func stopsRunning(_ pid: pid_t, within seconds: Double = 2) -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while isRunning(pid) {
        if Date() > end { return false }
        usleep(10_000)
    }
    return true
}

/// Gone, or a zombie nobody reaps (a container's PID 1 may not): either way not running.
func isRunning(_ pid: pid_t) -> Bool {
    guard kill(pid, 0) == 0 else { return false }
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return false }
    let state = stat[stat.index(close, offsetBy: 2)]
    return state != "Z" && state != "X"
}

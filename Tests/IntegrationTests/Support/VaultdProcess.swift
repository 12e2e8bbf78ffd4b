import Foundation
import VaultClient
import VaultProtocol
import VaultTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The real binaries: `VAULTD_BIN` / `VAULTCTL_BIN`, else the ones this build made.
enum Binaries {
    static var vaultd: String { builtExecutable("vaultd", env: "VAULTD_BIN") }
    static var vaultctl: String { builtExecutable("vaultctl", env: "VAULTCTL_BIN") }
    static var fpstub: String { builtExecutable("vault-fpstub", env: "VAULT_FPSTUB_BIN") }
}

/// The outcome of a child process run to completion.
struct ProcessOutcome {
    var exit: Int32
    /// True when the process ended by a signal (then `exit` is the signal number).
    var signaled: Bool
    var out: String
    var err: String
    var timedOut: Bool
}

/// The environment children get: ours, minus everything that would point them
/// at a real vault or pick a language, plus `extra`.
func childEnvironment(_ extra: [String: String]) -> [String: String] {
    var env = ProcessInfo.processInfo.environment
    // No real session bus or display either: a test that wants a Secret Service
    // passes a private one in `extra` (see PrivateKeyring.environment).
    let strip: Set<String> = ["LANG", "LANGUAGE", "DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY"]
    for key in env.keys where key.hasPrefix("SESSIONVAULT_") || key.hasPrefix("LC_") || strip.contains(key) {
        env[key] = nil
    }
    for (k, v) in extra { env[k] = v }
    return env
}

/// Runs a program to completion (bounded; `runCommand` in VaultTestSupport).
func runProcess(_ executable: String, _ args: [String], stdin: String? = nil, env: [String: String],
                timeout: Double = 60) throws -> ProcessOutcome {
    let r = try runCommand([executable] + args, environment: env, input: stdin, timeout: timeout)
    return ProcessOutcome(exit: r.status, signaled: r.signaled, out: r.stdout, err: r.stderr, timedOut: r.timedOut)
}

/// One vaultd for one test: its own temp dir (data, runtime, config, log),
/// started with `--keyring=file` unless told otherwise.
final class VaultdProcess {
    /// Cheap but still legal PIN hashing (64 MiB is the floor vaultd enforces).
    static let fastPINConfig = "[pin]\nargon_memory_mib = 64\n"

    let root: String
    let dataDir: String
    let runDir: String
    let socketPath: String
    let configPath: String
    let logPath: String
    var keyring: String?
    var extraArgs: [String]
    var env: [String: String]
    private(set) var process: Process?
    /// Exit status of the last stopped process (nil while running or if killed by a signal).
    private(set) var lastExit: ProcessOutcome?

    var pid: Int32 { process?.processIdentifier ?? 0 }
    var isRunning: Bool { process?.isRunning ?? false }
    var storePath: String { dataDir + "/vault.sqlite" }
    /// The organization's config file (ConfigLayers), absent unless a test writes it.
    var systemConfigPath: String { root + "/system-config.toml" }
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
    /// vaultd's clock offset in seconds (DaemonClock, debug builds only); read
    /// only when the fixture was started with `movableClock`.
    var clockPath: String { root + "/clock-offset" }
    private var clockOffset: Int64 = 0

    /// The environment entry that lets the test move vaultd's clock (`advanceClock`).
    var movableClock: [String: String] { ["SESSIONVAULT_TEST_CLOCK_FILE": clockPath] }

    /// Moves vaultd's clock forward; it reads the file at each reading of the time.
    func advanceClock(seconds: Int64) throws {
        clockOffset += seconds
        try "\(clockOffset)\n".write(toFile: clockPath, atomically: true, encoding: .utf8)
    }

    /// Creates the temp dir and writes the config. Does not start vaultd.
    init(config: String? = VaultdProcess.fastPINConfig, keyring: String? = "file", extraArgs: [String] = [],
         env: [String: String] = [:]) throws {
        // In /tmp itself: the socket path inside must stay under 108 bytes.
        root = try makeTemporaryDirectory("svit", in: "/tmp")
        dataDir = root + "/data"
        runDir = root + "/run"
        socketPath = runDir + "/vault.sock"
        configPath = root + "/config.toml"
        logPath = root + "/vaultd.log"
        self.keyring = keyring
        self.extraArgs = extraArgs
        self.env = env
        for dir in ["home", "xdg-config", "xdg-data", "xdg-runtime"] {
            try FileManager.default.createDirectory(atPath: root + "/" + dir, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        if let config {
            // Most of these tests use two programs as one person's tools: the
            // test runner imports and vaultctl reads (or the other way round).
            // The per-app rule would ask about vaultctl each time, so it is off
            // here unless a test sets `per_app` itself; AppGrantTests and
            // Tests/python/test_app_grants.py test the rule with it on.
            let perApp = config.contains("per_app") ? "" : "per_app = false\n"
            // Never the machine's own TPM: a test's wrong PINs would count
            // against its real lockout. TPMTests bring swtpm and say `tpm`.
            let chip = config.contains("tpm") ? "" : "tpm = \"off\"\n"
            try (perApp + chip + config).write(toFile: configPath, atomically: true, encoding: .utf8)
        }
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
    }

    /// The config file's current text (to append tables to it).
    func configLines() -> String { (try? String(contentsOfFile: configPath, encoding: .utf8)) ?? "" }

    /// The command line vaultd is started with.
    func arguments(_ more: [String] = []) -> [String] {
        var args: [String] = []
        if let keyring { args.append("--keyring=\(keyring)") }
        args += ["--data-dir", dataDir, "--socket", socketPath, "--config", configPath]
        return args + extraArgs + more
    }

    /// The environment vaultd is started with: HOME and XDG dirs inside the temp dir.
    func environment(_ more: [String: String] = [:]) -> [String: String] {
        var e = childEnvironment([
            "HOME": root + "/home", "XDG_CONFIG_HOME": root + "/xdg-config", "XDG_DATA_HOME": root + "/xdg-data",
            "XDG_RUNTIME_DIR": root + "/xdg-runtime",
            // The organization's file: none unless a test writes one (never the machine's /etc).
            "SESSIONVAULT_SYSTEM_CONFIG": systemConfigPath,
        ])
        for (k, v) in env { e[k] = v }
        for (k, v) in more { e[k] = v }
        return e
    }

    /// Starts vaultd and waits (at most `timeout` s) until the socket accepts.
    /// `env` replaces the fixture's extra environment for this start (and later restarts).
    /// With `waitForReady` (the default) also waits for the "vaultd ready" log
    /// line and a moment more, so the daemon's signal handling is in place.
    func start(env newEnv: [String: String]? = nil, timeout: Double = 10, waitForReady: Bool = true) throws {
        if isRunning { throw IntegrationError("vaultd is already running") }
        let readyBefore = log.components(separatedBy: "vaultd ready").count
        if let newEnv { env = newEnv }
        let logFD = open(logPath, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard logFD >= 0 else { throw IntegrationError("cannot open \(logPath)") }
        let logHandle = FileHandle(fileDescriptor: logFD, closeOnDealloc: true)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Binaries.vaultd)
        p.arguments = arguments()
        p.environment = environment()
        p.standardOutput = logHandle
        p.standardError = logHandle
        p.standardInput = FileHandle.nullDevice
        try p.run()
        try? logHandle.close()
        process = p
        let deadline = monotonicNow() + timeout
        while monotonicNow() < deadline {
            if !p.isRunning {
                p.waitUntilExit()
                throw IntegrationError("vaultd exited (status \(p.terminationStatus)) before its socket accepted. Log:\n\(log)")
            }
            if let c = try? RawClient(path: socketPath) {
                c.close()
                if waitForReady {
                    let ready = waitUntil(timeout: max(0.5, deadline - monotonicNow()), interval: 0.01) {
                        log.components(separatedBy: "vaultd ready").count > readyBefore
                    }
                    if !ready { throw IntegrationError("vaultd accepted on its socket but never logged “vaultd ready”. Log:\n\(log)") }
                    usleep(100_000)
                }
                return
            }
            usleep(waitForReady ? 10_000 : 1_000)
        }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        throw IntegrationError("vaultd's socket did not accept within \(timeout) s. Log:\n\(log)")
    }

    /// Waits (bounded) for the running process to end and records how.
    @discardableResult
    private func reap(timeout: Double) -> ProcessOutcome? {
        guard let p = process else { return lastExit }
        let deadline = monotonicNow() + timeout
        while p.isRunning && monotonicNow() < deadline { usleep(10_000) }
        var timedOut = false
        if p.isRunning {
            timedOut = true
            kill(p.processIdentifier, SIGKILL)
            while p.isRunning { usleep(10_000) }
        }
        p.waitUntilExit()
        let outcome = ProcessOutcome(exit: p.terminationStatus, signaled: p.terminationReason == .uncaughtSignal,
                                     out: "", err: "", timedOut: timedOut)
        lastExit = outcome
        process = nil
        return outcome
    }

    /// SIGTERM, then waits (≤ `timeout` s; SIGKILL after that). Returns how it ended.
    @discardableResult
    func stop(timeout: Double = 10) -> ProcessOutcome? {
        guard let p = process else { return lastExit }
        if p.isRunning { kill(p.processIdentifier, SIGTERM) }
        return reap(timeout: timeout)
    }

    /// SIGKILL: no chance to clean up, as a crash or power loss.
    func kill9() {
        guard let p = process else { return }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        reap(timeout: 10)
    }

    /// The descriptors vaultd holds open now. Throws when `/proc/PID/fd`
    /// cannot be read (vaultd gone, or /proc hidden): a leak check that read
    /// nothing would otherwise pass without checking anything.
    func openDescriptors() throws -> Int {
        guard isRunning else { throw IntegrationError("vaultd is not running: its descriptors cannot be counted") }
        do {
            let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
            // The store's SQLite connections (writer and reader, each with the
            // database and its WAL open) are not connections kept.
            return fds.filter { fd in
                let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) ?? ""
                return !(target.hasSuffix("/vault.sqlite") || target.hasSuffix("/vault.sqlite-wal"))
            }.count
        } catch {
            throw IntegrationError("cannot count vaultd's descriptors in /proc/\(pid)/fd: \(error)")
        }
    }

    /// Stops (SIGTERM) if running and starts again on the same dirs.
    func restart(env newEnv: [String: String]? = nil) throws {
        stop()
        try start(env: newEnv)
    }

    /// Runs vaultd with the fixture's dirs expecting it to exit by itself
    /// (startup refusals). Bounded by `timeout`.
    func runToExit(extraArgs more: [String] = [], env more2: [String: String] = [:], timeout: Double = 20) throws -> ProcessOutcome {
        try runProcess(Binaries.vaultd, arguments(more), stdin: nil, env: environment(more2), timeout: timeout)
    }

    /// The blocking Swift client, connected to this vaultd.
    func connect() throws -> VaultConnection {
        try VaultConnection(socketPath: socketPath)
    }

    /// A raw client with bounded reads.
    func raw() throws -> RawClient {
        try RawClient(path: socketPath)
    }

    /// Runs the real vaultctl against this vaultd (`SESSIONVAULT_SOCKET`), in
    /// English unless `env` sets a locale.
    @discardableResult
    func vaultctl(_ args: [String], stdin: String? = nil, env extra: [String: String] = [:],
                  timeout: Double = 60) -> (exit: Int32, out: String, err: String) {
        SecretLedger.recordTyped(stdin)
        var e = childEnvironment(["SESSIONVAULT_SOCKET": socketPath, "HOME": root + "/home"])
        for (k, v) in extra { e[k] = v }
        do {
            let r = try runProcess(Binaries.vaultctl, args, stdin: stdin, env: e, timeout: timeout)
            if r.timedOut { return (-1, r.out, "vaultctl timed out after \(timeout) s\n" + r.err) }
            return (r.signaled ? 128 + r.exit : r.exit, r.out, r.err)
        } catch {
            return (-1, "", "could not run vaultctl: \(error)")
        }
    }

    /// Stops vaultd (SIGKILL if it will not stop) and removes the temp dir.
    func cleanup() {
        if isRunning { stop(timeout: 5) }
        // Kept for the secrets scan after the run, when scripts/test asks for it.
        if SecretLedger.keep(root) { return }
        // Tests chmod/chown things; make sure everything can be removed.
        _ = try? runProcess("/bin/rm", ["-rf", root], env: childEnvironment([:]), timeout: 20)
    }

    deinit {
        if let p = process, p.isRunning { kill(p.processIdentifier, SIGKILL) }
    }
}

/// Shared setup: every test gets fresh vaultds and all of them are cleaned up.
class VaultdTestCase: XCTestCase {
    private var fixtures: [VaultdProcess] = []

    /// A new fixture (not started).
    func makeVaultd(config: String? = VaultdProcess.fastPINConfig, keyring: String? = "file", extraArgs: [String] = [],
                    env: [String: String] = [:]) throws -> VaultdProcess {
        let v = try VaultdProcess(config: config, keyring: keyring, extraArgs: extraArgs, env: env)
        fixtures.append(v)
        return v
    }

    /// A new fixture, started.
    func startVaultd(config: String? = VaultdProcess.fastPINConfig, keyring: String? = "file", extraArgs: [String] = [],
                     env: [String: String] = [:]) throws -> VaultdProcess {
        let v = try makeVaultd(config: config, keyring: keyring, extraArgs: extraArgs, env: env)
        try v.start()
        return v
    }

    /// A new fixture's vaultd behind systemd-socket-activate, as the user
    /// unit starts it: listening on the fixture's socket path, vaultd started
    /// on the first connection with the socket as fd 3. Waits for the path;
    /// the caller stops the returned process.
    func startSocketActivated() throws -> (VaultdProcess, Process) {
        let activate = "/usr/bin/systemd-socket-activate"
        guard FileManager.default.isExecutableFile(atPath: activate) else {
            throw cannotRunHere("systemd-socket-activate is not installed (Debian's systemd package)")
        }
        let v = try makeVaultd()
        try FileManager.default.createDirectory(atPath: v.runDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let p = Process()
        p.executableURL = URL(fileURLWithPath: activate)
        p.arguments = ["-l", v.socketPath, "--", Binaries.vaultd] + v.arguments()
        p.environment = v.environment()
        let log = FileHandle(forWritingAtPath: v.logPath)
        p.standardError = log
        p.standardOutput = log
        try p.run()
        XCTAssertTrue(waitUntil(timeout: 10, interval: 0.05) { FileManager.default.fileExists(atPath: v.socketPath) })
        return (v, p)
    }

    override func tearDown() {
        for f in fixtures {
            if let run = testRun, run.totalFailureCount > 0 || run.unexpectedExceptionCount > 0 {
                // Keep the daemon's words next to the failure.
                print("---- vaultd log (\(f.root)) ----\n\(f.log)\n---- end of log ----")
            }
            f.cleanup()
        }
        fixtures = []
        super.tearDown()
    }

    // MARK: Common steps

    static let pin = "482915"

    /// Enrolls the PIN with vaultctl, as a person would (stdin, twice).
    func enrollPIN(_ v: VaultdProcess, pin: String = VaultdTestCase.pin, file: StaticString = #filePath, line: UInt = #line) {
        let r = v.vaultctl(["enroll", "pin"], stdin: "\(pin)\n\(pin)\n")
        XCTAssertEqual(r.exit, 0, "enroll failed: \(r.err)", file: file, line: line)
        XCTAssertTrue(r.out.contains("PIN enabled"), "enroll output: \(r.out)", file: file, line: line)
    }

    /// Imports a session through the socket; returns the response envelope.
    @discardableResult
    func importSession(_ v: VaultdProcess, account: String, accessToken: String, refreshToken: String?,
                       expiresAt: Int64 = Int64(Date().timeIntervalSince1970) + 3600, provider: String = "bankid",
                       name: String = "Test Person", file: StaticString = #filePath, line: UInt = #line) throws -> JSON {
        let c = try v.raw()
        defer { c.close() }
        var fields: [String: JSON] = [
            "issuer": "https://idp.example.test", "client_id": "sessionvault-tests", "account": .string(account),
            "provider": .string(provider), "name": .string(name), "access_token": .string(accessToken),
            "expires_at": .int(expiresAt),
        ]
        if let refreshToken { fields["refresh_token"] = .string(refreshToken) }
        SecretLedger.record("token", accessToken)
        if let refreshToken { SecretLedger.record("token", refreshToken) }
        let r = try c.call("import", fields)
        XCTAssertTrue(r.isOK, "import failed: \(r.text)", file: file, line: line)
        return r
    }

    /// One unlock over the socket (interactive), answering secret prompts with `pins` in turn and then cancelling.
    func unlock(_ v: VaultdProcess, pins: [String], timeout: Double = 60) throws -> (response: JSON, script: PromptScript) {
        let c = try v.raw()
        defer { c.close() }
        try c.hello(interactive: true)
        let script = PromptScript(secrets: pins)
        let r = try c.call("unlock", ["factor": "pin"], timeout: timeout, onPrompt: script.handler)
        return (r, script)
    }

    /// The PIN factor as the `factors` op shows it.
    func pinFactor(_ v: VaultdProcess) throws -> JSON {
        let c = try v.raw()
        defer { c.close() }
        let r = try c.call("factors")
        guard let list = r.result?["factors"]?.arrayValue, let pin = list.first(where: { $0["factor"]?.stringValue == "pin" }) else {
            throw IntegrationError("factors has no pin entry: \(r.text)")
        }
        return pin
    }

    /// Waits (bounded) until the PIN is no longer locked out.
    func waitForLockoutToEnd(_ v: VaultdProcess, timeout: Double = 20, file: StaticString = #filePath, line: UInt = #line) throws {
        let ended = try waitUntil(timeout: timeout, interval: 0.25) {
            try pinFactor(v)["state"]?.stringValue != "locked_out"
        }
        XCTAssertTrue(ended, "the PIN lockout did not end within \(timeout) s", file: file, line: line)
    }

    func status(_ v: VaultdProcess) throws -> JSON {
        let c = try v.raw()
        defer { c.close() }
        let r = try c.call("status")
        guard r.isOK, let result = r.result else { throw IntegrationError("status failed: \(r.text)") }
        return result
    }

    func auditEntries(_ v: VaultdProcess) throws -> [JSON] {
        let c = try v.raw()
        defer { c.close() }
        let r = try c.call("audit", ["limit": 1000])
        guard r.isOK, let entries = r.result?["entries"]?.arrayValue else { throw IntegrationError("audit failed: \(r.text)") }
        return entries
    }

    /// Signs that a process died of a Swift runtime trap or printed a backtrace.
    func assertNoCrashOutput(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
        for marker in ["Fatal error", "Stack dump", "Backtrace", "backtrace", "Thread 0", "Current stack trace", "💣", "Program crashed"] {
            XCTAssertFalse(text.contains(marker), "output looks like a crash (\(marker)):\n\(text)", file: file, line: line)
        }
    }
}

/// Runs sqlite3 on a file (the CLI is needed by a few tests: apt-get install sqlite3).
func sqlite3(_ path: String, _ sql: String) throws -> ProcessOutcome {
    let exe = ["/usr/bin/sqlite3", "/bin/sqlite3", "/usr/local/bin/sqlite3"].first { FileManager.default.isExecutableFile(atPath: $0) }
    guard let exe else { throw cannotRunHere("the sqlite3 command-line tool is not installed (apt-get install sqlite3)") }
    return try runProcess(exe, [path, sql], env: childEnvironment([:]), timeout: 30)
}

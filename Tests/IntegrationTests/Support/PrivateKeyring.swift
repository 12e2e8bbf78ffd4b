import Foundation

#if canImport(Glibc)
import Glibc
import VaultTestSupport
#endif

/// A private D-Bus session bus, and optionally a real gnome-keyring-daemon on it, for
/// tests that run processes (e.g. the vaultd under test) against a Secret Service in a
/// known state. Nothing touches the user's own bus or keyring: every path lives in a
/// fresh temp dir and the bus has no service directories, so nothing is auto-activated.
///
///     let keyring = try PrivateKeyring(.locked)
///     defer { keyring.stop() }
///     process.environment = keyring.childEnvironment()
///
/// Not thread-safe: create, use and stop it from one test.
final class PrivateKeyring {
    enum Mode: Sendable, Equatable, CustomStringConvertible {
        /// A bus with a gnome-keyring-daemon whose default collection is unlocked.
        case unlocked
        /// The default collection exists but is locked: stores fail with IS_LOCKED,
        /// lookups find nothing.
        case locked
        /// A bus on which nobody owns org.freedesktop.secrets.
        case noSecretService
        /// No bus at all: no DBUS_SESSION_BUS_ADDRESS and an empty XDG_RUNTIME_DIR
        /// (GDBus would otherwise fall back to `$XDG_RUNTIME_DIR/bus`).
        case noBus

        var description: String {
            switch self {
            case .unlocked: return "unlocked"
            case .locked: return "locked"
            case .noSecretService: return "noSecretService"
            case .noBus: return "noBus"
            }
        }
    }

    /// An item stored while the keyring is still unlocked, e.g. to test a vaultd that
    /// finds its device key in a keyring that is now locked.
    struct Seed: Sendable {
        var label: String
        var attributes: [String: String]
        var secret: String

        /// An item as `Keyring.SecretServiceKeyring` stores it: base64 of the key bytes.
        static func deviceKey(vault: String = "default", base64: String) -> Seed {
            Seed(label: "SessionVault device key",
                 attributes: ["xdg:schema": "org.sessionvault.DeviceKey", "vault": vault],
                 secret: base64)
        }
    }

    struct SetupError: Error, CustomStringConvertible {
        let description: String
    }

    let mode: Mode
    /// The temp dir holding everything this instance created.
    let directory: String
    let dataHome: String
    let configHome: String
    let runtimeDir: String
    /// nil in `.noBus` mode.
    private(set) var busAddress: String?

    /// Only the variables this instance sets: DBUS_SESSION_BUS_ADDRESS (unless `.noBus`)
    /// and the XDG dirs. Prefer `childEnvironment()`, which also removes what must not leak
    /// in from the test runner's own environment.
    var environment: [String: String] {
        var env = ["XDG_DATA_HOME": dataHome, "XDG_CONFIG_HOME": configHome, "XDG_RUNTIME_DIR": runtimeDir]
        if let busAddress { env["DBUS_SESSION_BUS_ADDRESS"] = busAddress }
        return env
    }

    private var bus: Process?
    private var keyringDaemon: Process?
    private var busStdout: Pipe?
    private var stopped = false

    /// - Parameters:
    ///   - dataHome: XDG_DATA_HOME for the keyring (where `keyrings/login.keyring` lives);
    ///     defaults to a fresh dir. Pass the same dir again to reuse a keyring.
    ///   - password: the keyring's password. In `.locked` mode the keyring is created with
    ///     it and then reopened with a different one.
    ///   - seed: items stored before the keyring is (re)locked; only for `.unlocked` and `.locked`.
    init(_ mode: Mode, dataHome: String? = nil, password: String = "sessionvault-test-password",
         seed: [Seed] = []) throws {
        self.mode = mode
        directory = try makeTemporaryDirectory()
        self.dataHome = dataHome ?? directory + "/data"
        configHome = directory + "/config"
        runtimeDir = directory + "/runtime"
        do {
            for dir in [self.dataHome, configHome, runtimeDir] {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o700])
            }
            if !seed.isEmpty, mode == .noBus || mode == .noSecretService {
                throw SetupError(description: "seed items need a keyring; mode \(mode) has none")
            }
            switch mode {
            case .noBus:
                break
            case .noSecretService:
                try startBus()
            case .unlocked:
                try startBus()
                try startKeyringDaemon(password: password)
                try store(seed)
            case .locked:
                try startBus()
                try startKeyringDaemon(password: password)
                try store(seed)
                try stopKeyringDaemon()
                try startKeyringDaemon(password: password + "-but-wrong")
                try verifyLocked()
            }
        } catch {
            stop()
            throw error
        }
    }

    deinit {
        stop()
    }

    /// The full environment for a child process: `base` without anything that could reach
    /// another bus or display, plus `environment`.
    func childEnvironment(inheriting base: [String: String] = ProcessInfo.processInfo.environment) -> [String: String] {
        var env = base
        // DISPLAY would let GDBus autolaunch a bus (and a keyring) behind our back.
        for name in ["DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY",
                     "SESSIONVAULT_TEST_KEYRING", "SESSIONVAULT_TEST_KEYRING_MODE"] {
            env.removeValue(forKey: name)
        }
        env.merge(environment) { _, ours in ours }
        return env
    }

    /// Stops every process this instance started and removes its temp dir. Idempotent.
    func stop() {
        if stopped { return }
        stopped = true
        if let keyringDaemon { terminate(keyringDaemon) }
        keyringDaemon = nil
        if let bus { terminate(bus) }
        bus = nil
        busStdout = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Whether `name` has an owner on this instance's bus.
    func nameHasOwner(_ name: String) throws -> Bool {
        let result = try runCommand(
            ["gdbus", "call", "--session", "--dest", "org.freedesktop.DBus",
             "--object-path", "/org/freedesktop/DBus",
             "--method", "org.freedesktop.DBus.NameHasOwner", name],
            environment: childEnvironment(), timeout: 5)
        guard result.status == 0 else {
            throw SetupError(description: "gdbus NameHasOwner failed: \(result.stderr)")
        }
        return result.stdout.contains("true")
    }

    // MARK: - Setup steps

    private func startBus() throws {
        let config = directory + "/bus.conf"
        // The standard session config minus <standard_session_servicedirs/>: with it the
        // bus would activate gnome-keyring-daemon from its .service file on first use.
        try sessionBusConfig(listen: "unix:path=\(directory)/bus").write(toFile: config, atomically: true, encoding: .utf8)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["dbus-daemon", "--config-file=\(config)", "--nofork", "--print-address=1"]
        process.environment = childEnvironment()
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = try logFile("dbus-daemon.log")
        process.standardInput = FileHandle.nullDevice
        try process.run()
        bus = process
        busStdout = stdout

        guard let line = Self.readLine(from: stdout.fileHandleForReading.fileDescriptor, timeout: 5),
              line.hasPrefix("unix:") else {
            throw SetupError(description: "dbus-daemon printed no address within 5 s: \(logText("dbus-daemon.log"))")
        }
        busAddress = line
    }

    private func startKeyringDaemon(password: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        // --foreground rather than --daemonize, so this object owns the process and can
        // stop it. On a new data dir --unlock creates the "login" collection with this
        // password and aliases it as "default"; on an existing one it tries to unlock it.
        process.arguments = ["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"]
        process.environment = childEnvironment()
        let stdin = Pipe()
        process.standardInput = stdin
        let log = try logFile("gnome-keyring.log")
        process.standardOutput = log
        process.standardError = log
        try process.run()
        keyringDaemon = process
        stdin.fileHandleForWriting.write(Data(password.utf8))
        try? stdin.fileHandleForWriting.close()

        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            if !process.isRunning {
                throw SetupError(description: "gnome-keyring-daemon exited (\(process.terminationStatus)): \(logText("gnome-keyring.log"))")
            }
            if try nameHasOwner("org.freedesktop.secrets") { return }
            usleep(50_000)
        }
        throw SetupError(description: "org.freedesktop.secrets had no owner within 5 s: \(logText("gnome-keyring.log"))")
    }

    private func stopKeyringDaemon() throws {
        if let keyringDaemon { terminate(keyringDaemon) }
        keyringDaemon = nil
        // The bus drops the name when the connection closes; wait so the next daemon
        // is the one that answers.
        let deadline = Date().addingTimeInterval(5)
        while try nameHasOwner("org.freedesktop.secrets") {
            if Date() > deadline { throw SetupError(description: "org.freedesktop.secrets still owned 5 s after stop") }
            usleep(20_000)
        }
    }

    private func store(_ seed: [Seed]) throws {
        for item in seed {
            let attributes = item.attributes.sorted { $0.key < $1.key }.flatMap { [$0.key, $0.value] }
            let result = try runCommand(["secret-tool", "store", "--label=\(item.label)"] + attributes,
                                      environment: childEnvironment(), input: item.secret, timeout: 5)
            guard result.status == 0 else {
                throw SetupError(description: "seeding \(item.attributes) failed: \(result.stderr)")
            }
        }
    }

    /// A wrong password must leave the collection locked. If a gnome-keyring release ever
    /// unlocked it anyway, every "locked" test would silently test nothing.
    private func verifyLocked() throws {
        let result = try runCommand(
            ["secret-tool", "store", "--label=SessionVault lock probe", "sessionvault-probe", "locked"],
            environment: childEnvironment(), input: "probe", timeout: 5)
        guard result.status != 0, result.stderr.lowercased().contains("locked") else {
            throw SetupError(description: "the keyring did not stay locked: secret-tool store exited \(result.status), stderr: \(result.stderr)")
        }
    }

    // MARK: - Helpers

    private func logFile(_ name: String) throws -> FileHandle {
        let path = directory + "/" + name
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil)
        }
        guard let handle = FileHandle(forWritingAtPath: path) else {
            throw SetupError(description: "cannot open \(path)")
        }
        handle.seekToEndOfFile()
        return handle
    }

    private func logText(_ name: String) -> String {
        (try? String(contentsOfFile: directory + "/" + name, encoding: .utf8)) ?? "(no log)"
    }

    /// Reads one line from `fd`, giving up after `timeout` (a wedged daemon must not hang the test run).
    private static func readLine(from fd: Int32, timeout: TimeInterval) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 256)
        while true {
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { return nil }
            var pollFD = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pollFD, 1, Int32(remaining * 1000) + 1)
            if ready < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if ready == 0 { continue }
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return nil }
            bytes.append(contentsOf: chunk[0..<n])
            if let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) {
                return String(decoding: bytes[..<newline], as: UTF8.self)
            }
        }
    }
}

/// A session bus's configuration: listening at `listen`, its services
/// activated from `servicedir` only (none without one), anyone allowed anything.
func sessionBusConfig(listen: String, servicedir: String? = nil) -> String {
    """
    <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
     "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
    <busconfig>
      <type>session</type>
      <listen>\(listen)</listen>
      <auth>EXTERNAL</auth>
    \(servicedir.map { "  <servicedir>\($0)</servicedir>\n" } ?? "")  <policy context="default">
        <allow send_destination="*" eavesdrop="true"/>
        <allow eavesdrop="true"/>
        <allow own="*"/>
      </policy>
    </busconfig>

    """
}

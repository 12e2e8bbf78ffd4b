import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real TPM 2.0 simulator (swtpm) run as this user on a Unix socket, in a
/// directory of its own, for the TPM layer's tests (../shared/PLATFORM.md has
/// the recipe). `tcti` is what vaultd's `tpm_device` and ESAPI take. Stopped
/// (and its state kept in `stateDirectory` until then) by `stop()`; the
/// process dies with the test run in any case (`--terminate`, and the socket
/// goes with the directory).
public final class SoftwareTPM: @unchecked Sendable {
    public let directory: String
    public var stateDirectory: String { directory + "/state" }
    public var socket: String { directory + "/tpm.sock" }
    public var tcti: String { "swtpm:path=\(socket)" }
    private var process: Process?

    /// Starts swtpm; with `tries`/`interval`, the dictionary-attack limits are
    /// set as `tpm2_dictionarylockout` does (a fresh swtpm has 3 tries / 1000 s).
    /// `state`: start from a copy of another swtpm's state (the same chip).
    public init(tries: Int? = nil, interval: Int? = nil, copyingStateOf other: SoftwareTPM? = nil) throws {
        for tool in ["swtpm", "swtpm_ioctl", "tpm2_dictionarylockout"] where findOnPath(tool) == nil {
            throw cannotRunHere("\(tool) is not installed (scripts/setup installs swtpm, swtpm-tools and tpm2-tools)")
        }
        directory = try makeTemporaryDirectory("sessionvault-swtpm")
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        if let other {
            for name in try FileManager.default.contentsOfDirectory(atPath: other.stateDirectory) {
                try FileManager.default.copyItem(atPath: other.stateDirectory + "/" + name, toPath: stateDirectory + "/" + name)
            }
        }
        try start()
        if let tries, let interval {
            let r = try runCommand(["tpm2_dictionarylockout", "-T", tcti, "-s", "-n", "\(tries)", "-t", "\(interval)", "-l", "\(interval)"])
            guard r.status == 0 else { throw CommandError(description: "tpm2_dictionarylockout: \(r.stderr)") }
        }
    }

    /// Starts swtpm on the state in `stateDirectory` (again, after `stop()`).
    public func start() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: findOnPath("swtpm") ?? "/usr/bin/swtpm")
        p.arguments = ["socket", "--tpm2", "--tpmstate", "dir=\(stateDirectory)",
                       "--server", "type=unixio,path=\(socket)", "--ctrl", "type=unixio,path=\(socket).ctrl",
                       "--flags", "not-need-init,startup-clear"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: socket) {
            guard Date() < deadline, p.isRunning else { throw CommandError(description: "swtpm did not start") }
            usleep(10_000)
        }
    }

    /// Stops swtpm; its state stays in `stateDirectory`.
    public func stop() {
        guard let p = process, p.isRunning else { return }
        _ = try? runCommand(["swtpm_ioctl", "--unix", socket + ".ctrl", "-s"], timeout: 10)
        if !waitForExit(p, timeout: 5) { terminate(p) }
        try? FileManager.default.removeItem(atPath: socket)
        try? FileManager.default.removeItem(atPath: socket + ".ctrl")
        process = nil
    }

    /// The chip's state wiped (a cleared TPM, or a new motherboard): a new owner seed.
    public func wipe() throws {
        stop()
        try FileManager.default.removeItem(atPath: stateDirectory)
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        try start()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// The full path of `tool` on PATH, or nil.
public func findOnPath(_ tool: String) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    for dir in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(dir)/\(tool)") {
        return "\(dir)/\(tool)"
    }
    return nil
}

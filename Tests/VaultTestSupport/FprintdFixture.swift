import Foundation

/// The real fprintd on a private system bus, for one test: started by
/// Tests/fprintd/fprintd-ctl (which also drives it), stopped and removed by
/// `down()`. This process's DBUS_SYSTEM_BUS_ADDRESS points at the private bus
/// meanwhile, which is how GIO (and so FprintdReader, and a vaultd started with
/// this environment) finds it.
public final class FprintdFixture: @unchecked Sendable {
    static let python = "/usr/bin/python3"
    static let script = repositoryRoot + "/Tests/fprintd/fprintd-ctl"

    /// Short, because the bus and device sockets live in it (108-byte socket paths).
    public let root: String
    public let address: String
    public var deviceSocket: String { root + "/vdev.sock" }

    public init() throws {
        let fprintd = ProcessInfo.processInfo.environment["FPRINTD_BIN"] ?? "/usr/libexec/fprintd"
        let missing = [
            FileManager.default.isExecutableFile(atPath: fprintd) ? nil : "fprintd (\(fprintd))",
            Self.onPath("dbus-daemon") ? nil : "dbus-daemon",
            Self.run(Self.python, ["-c", "import dbus, dbusmock"]).status == 0 ? nil : "python3-dbusmock",
        ].compactMap { $0 }
        guard missing.isEmpty else {
            throw cannotRunHere("the fprintd tests need \(missing.joined(separator: ", ")): run scripts/setup (apt: fprintd libfprint-2-2 python3-dbusmock)")
        }
        root = "/tmp/fpd-" + UUID().uuidString.prefix(8).lowercased()
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let out = Self.run(Self.python, [Self.script, root, "up"])
        guard out.status == 0, let line = out.stdout.split(separator: "\n").first(where: { $0.hasPrefix("DBUS_SYSTEM_BUS_ADDRESS=") }) else {
            _ = Self.run(Self.python, [Self.script, root, "down"])
            throw FixtureError("fprintd did not start: \(out.stderr)\n\(Self.logs(root))")
        }
        address = String(line.dropFirst("DBUS_SYSTEM_BUS_ADDRESS=".count))
        setenv("DBUS_SYSTEM_BUS_ADDRESS", address, 1)
    }

    /// Stops fprintd, the polkit mock and the bus, and removes their directory.
    public func down() {
        _ = Self.run(Self.python, [Self.script, root, "down"])
        unsetenv("DBUS_SYSTEM_BUS_ADDRESS")
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Runs one fprintd-ctl command; its stdout.
    @discardableResult
    public func ctl(_ args: [String]) throws -> String {
        let out = Self.run(Self.python, [Self.script, root] + args)
        guard out.status == 0 else { throw FixtureError("fprintd-ctl \(args.joined(separator: " ")): \(out.stderr)\n\(Self.logs(root))") }
        return out.stdout
    }

    /// Removes the virtual device's socket file, which stays behind after a
    /// release: a new one then means that a client has claimed the device.
    public func forgetSocket() {
        unlink(deviceSocket)
    }

    /// Waits until a client has claimed the device (after `forgetSocket()`).
    public func waitUntilClaimed(seconds: Double = 10) throws {
        let end = Date().addingTimeInterval(seconds)
        while !FileManager.default.fileExists(atPath: deviceSocket) {
            guard Date() < end else { throw FixtureError("nobody claimed the fingerprint device") }
            usleep(10_000)
        }
    }

    /// Another program holding the device (as a login screen or fprintd-verify would).
    public func hold() throws -> Holder {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.python)
        p.arguments = [Self.script, root, "hold"]
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        try p.run()
        let line = output.fileHandleForReading.availableData
        guard String(decoding: line, as: UTF8.self).hasPrefix("claimed") else {
            p.terminate()
            throw FixtureError("fprintd-ctl hold could not claim the device")
        }
        return Holder(process: p, input: input)
    }

    /// Fails unless the device is free (nobody forgot to release it).
    public func assertClaimable(file: StaticString = #filePath, line: UInt = #line) throws {
        let holder = try hold()
        holder.release()
    }

    public final class Holder {
        let process: Process
        let input: Pipe
        init(process: Process, input: Pipe) {
            self.process = process
            self.input = input
        }
        /// Closes its stdin: it releases the device and exits.
        public func release() {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
    }

    public struct FixtureError: Error, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    public static func logs(_ root: String) -> String {
        ["fprintd", "polkit", "bus"].map { name in
            let text = (try? String(contentsOfFile: "\(root)/\(name).log", encoding: .utf8)) ?? ""
            return "--- \(name).log (tail)\n" + text.split(separator: "\n").suffix(15).joined(separator: "\n")
        }.joined(separator: "\n")
    }

    public static func onPath(_ tool: String) -> Bool {
        (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
            .contains { FileManager.default.isExecutableFile(atPath: "\($0)/\(tool)") }
    }

    static func run(_ exe: String, _ args: [String]) -> (status: Int32, stdout: String, stderr: String) {
        do {
            let r = try runCommand([exe] + args, timeout: 60)
            return (r.status, r.stdout, r.stderr)
        } catch {
            return (-1, "", "\(error)")
        }
    }
}

import Foundation
import Histogram
import VaultClient
import VaultProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The fingerprint through the real fprintd (libfprint's virtual device on a
/// private system bus, started by the tests' Tests/fprintd/fprintd-ctl): from
/// the scan of an enrolled finger reaching the reader to the session in the
/// app. Nil when fprintd or its fixture is not here.
func measureFprintdMatch(binary: String, rounds: Int) throws -> Latency? {
    let ctl = "Tests/fprintd/fprintd-ctl"
    guard FileManager.default.isExecutableFile(atPath: ctl),
          FileManager.default.isExecutableFile(atPath: ProcessInfo.processInfo.environment["FPRINTD_BIN"] ?? "/usr/libexec/fprintd")
    else { return nil }
    let root = NSTemporaryDirectory() + "vault-bench-\(getpid())-fprintd-bus"
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    Children.shared.add(dir: root)
    func run(_ args: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: ctl)
        p.arguments = [root] + args
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw BenchError("fprintd-ctl \(args.joined(separator: " ")) failed") }
        return text
    }
    let up = try run(["up"])
    defer { _ = try? run(["down"]) }
    guard let address = up.split(separator: "\n").first(where: { $0.hasPrefix("DBUS_SYSTEM_BUS_ADDRESS=") })?
        .dropFirst("DBUS_SYSTEM_BUS_ADDRESS=".count) else { throw BenchError("fprintd-ctl up gave no bus address") }
    _ = try run(["enroll", "right-index-finger"])
    setenv("DBUS_SYSTEM_BUS_ADDRESS", String(address), 1)
    defer { unsetenv("DBUS_SYSTEM_BUS_ADDRESS") }
    let daemon = try Daemon(binary: binary, name: "fprintd",
                            config: "idle_timeout = 0\n[pin]\nargon_memory_mib = 64\nargon_ops = 2\n[fingerprint]\nreader = \"fprintd\"\n")
    defer { daemon.stop() }
    try daemon.importSessions(count: 1, prefix: "fp")
    let device = root + "/vdev.sock"
    /// What the reader feels: one command a connection, as the virtual device
    /// reads it. Its socket appears when fprintd opens the device, which may be
    /// a moment after vaultd asks for the finger.
    func scan() {
        for _ in 0..<500 {
            if let fd = connectUnixSocket(device) {
                defer { close(fd) }
                _ = try? sendAll(fd, Array("SCAN print-right-index-finger\n".utf8))
                return
            }
            usleep(10_000)
        }
    }
    let c = try VaultConnection(socketPath: daemon.socket)
    try c.hello(client: "vault-bench", language: .en, interactive: true)
    // Enrolling asks for one scan; the PIN first, as a member would set it up.
    _ = try c.call("enroll", ["factor": "pin"]) { p in p.kind == .secret ? .value(.string("482915")) : .none }
    _ = try c.call("enroll", ["factor": "fingerprint"]) { p in
        if p.kind == .message, p.text.lowercased().contains("reader") { scan() }
        return .none
    }
    var h = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    for _ in 0..<rounds {
        _ = try c.call("lock")
        var t0: UInt64 = 0
        let r = try c.call("session", ["account": "fp-0"]) { p in
            // vaultd says "touch the reader" once the scan is running: the finger lands now.
            if p.kind == .message, p.text.lowercased().contains("reader"), t0 == 0 {
                t0 = DispatchTime.now().uptimeNanoseconds
                scan()
            }
            return .none
        }
        guard r["access_token"] != nil, t0 > 0 else { throw BenchError("fprintd: no session after a matching scan") }
        _ = h.record(DispatchTime.now().uptimeNanoseconds - t0)
    }
    return Latency(p50: h.valueAtPercentile(50), p99: h.valueAtPercentile(99))
}

import Foundation
import Histogram
import VaultClient
import VaultProtocol
#if canImport(Glibc)
import Glibc
#endif

/// vaultd's own dialogs (`"prompter": "vault"`) with the scripted pinentry
/// (Tests/pinentry/fake-pinentry, which answers at once): the dialog's own
/// cost on a PIN entry, and a release on another connection while a dialog
/// stays open. Nil when the fake pinentry is not here (run from the repo).
struct DialogFigures {
    /// A locked `session` from an app that lets vaultd ask, to its session.
    var pinEntry: Latency
    /// The same unlock answered through the prompt relay (no dialog): the PIN's own cost.
    var relay: Latency
    var releaseAlone: Latency
    var releaseBesideDialog: Latency
}

func measureDialogs(binary: String, rounds: Int, requests: Int) throws -> DialogFigures? {
    let fake = FileManager.default.currentDirectoryPath + "/Tests/pinentry/fake-pinentry"
    guard FileManager.default.isExecutableFile(atPath: fake) else { return nil }
    let pin = "482915"
    let dir = NSTemporaryDirectory() + "vault-bench-\(getpid())-pinentry"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    Children.shared.add(dir: dir)
    defer {
        try? FileManager.default.removeItem(atPath: dir)
        Children.shared.remove(dir: dir)
    }
    let script = dir + "/script"
    func setScript(_ lines: [String]) throws {
        try lines.map { $0 + "\n" }.joined().write(toFile: script, atomically: true, encoding: .utf8)
    }
    try setScript([])
    // vaultd passes its environment on to pinentry.
    let log = dir + "/log"
    setenv("FAKE_PINENTRY_SCRIPT", script, 1)
    setenv("FAKE_PINENTRY_LOG", log, 1)
    defer {
        unsetenv("FAKE_PINENTRY_SCRIPT")
        unsetenv("FAKE_PINENTRY_LOG")
    }
    let daemon = try Daemon(binary: binary, name: "dialog", config: """
        idle_timeout = 0
        pinentry = "\(fake)"
        [pin]
        argon_memory_mib = 64
        argon_ops = 2

        """)
    defer { daemon.stop() }
    try daemon.importSessions(count: 1, prefix: "dialog")
    let relay = try measurePINUnlock(daemon.socket, rounds: rounds)

    let admin = try helloConnection(daemon.socket)
    let app = try VaultConnection(socketPath: daemon.socket)
    _ = try app.hello(client: "vault-bench", language: .en, interactive: false, vaultPrompts: true)
    var h = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    for _ in 0..<rounds {
        _ = try admin.call("lock")
        try setScript(["pin \(pin)"])
        let t0 = DispatchTime.now().uptimeNanoseconds
        let r = try app.call("session", ["account": "dialog-0"])
        guard r["access_token"] != nil else { throw BenchError("pinentry: no session after the PIN dialog") }
        _ = h.record(DispatchTime.now().uptimeNanoseconds - t0)
    }
    let pinEntry = Latency(p50: h.valueAtPercentile(50), p99: h.valueAtPercentile(99))

    // A dialog nobody answers (setting a new PIN) stays open on another connection.
    let alone = try measurePersistent(daemon.socket, account: "dialog-0", count: requests)
    try setScript(["wait"])
    try? FileManager.default.removeItem(atPath: log)
    func besideOpenDialog() throws -> Latency {
        // Leaving this function closes the connection, and vaultd then ends its dialog.
        let waiting = try VaultConnection(socketPath: daemon.socket)
        _ = try waiting.hello(client: "vault-bench-dialog", language: .en, interactive: false, vaultPrompts: true)
        try waiting.send(Request(id: 1, op: "reenroll", fields: ["factor": "pin"]).encoded())
        let deadline = monotonicNs() + 10_000_000_000
        while !((try? String(contentsOfFile: log, encoding: .utf8))?.contains("GETPIN") ?? false) {
            guard monotonicNs() < deadline else { throw BenchError("pinentry: the dialog did not open") }
            usleep(5_000)
        }
        return try measurePersistent(daemon.socket, account: "dialog-0", count: requests)
    }
    let beside = try besideOpenDialog()
    return DialogFigures(pinEntry: pinEntry, relay: relay, releaseAlone: alone, releaseBesideDialog: beside)
}

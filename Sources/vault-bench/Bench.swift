import ArgumentParser
import FingerprintFactor
import Foundation
import Histogram
import Keyring
import Locking
import VaultClient
import VaultProtocol
#if canImport(Glibc)
import Glibc
#endif

/// vault-bench: measures a real vaultd (release build) over its real socket and
/// prints one table. Figures go to docs/benchmarks.md; nothing here asserts speed.
@main
struct VaultBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vault-bench",
        abstract: "Measure SessionVault: release latency and throughput, PIN unlock, start-up, memory, OIDC login and refresh, side by side with oidc-agent.")

    @Option(help: "The vaultd binary (default: next to vault-bench).")
    var vaultd: String?

    @Option(help: "The vaultctl binary (default: next to vault-bench).")
    var vaultctl: String?

    @Option(help: "The Python that runs the test provider (default: .venv/bin/python, made by scripts/provider-venv).")
    var providerPython: String?

    @Option(help: "The strict test provider.")
    var providerScript = "Tests/providers/strict_provider.py"

    @Option(help: "Requests per latency measurement.")
    var requests = 20_000

    @Option(help: "Seconds per throughput measurement.")
    var seconds = 2.0

    @Option(help: "Sessions for the scale measurement.")
    var scaleSessions = 10_000

    @Flag(help: "A short run (for CI smoke tests): fewer requests and sessions.")
    var quick = false

    @Option(help: "Run only these lines: core (the vault on its own), oidc (login, refresh, oidc-agent) or chip (PIN guessing with and without the TPM; not in the default run).")
    var only: Part?

    enum Part: String, ExpressibleByArgument { case core, oidc, chip }

    func run() throws {
        let started = monotonicNs()
        SignalCleanup.shared.install()
        let here = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path
        let binary = vaultd ?? here + "/vaultd"
        let requests = quick ? 2_000 : self.requests
        var table = Table()
        print("vault-bench: vaultd = \(binary)")
        print("machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.physicalMemory / 1_073_741_824) GiB")
        flushOutput()

        var failure: (any Error)?
        do {
            if only == .chip { try runChipLines(&table) }
            if only == nil || only == .core { try runCoreLines(&table, binary: binary, requests: requests) }
            // The core lines leave tens of megabytes to write back (10,000
            // imports): written out first, so the refresh lines' commits (an
            // fsync each) do not queue behind them.
            if only == nil { sync() }
            if only == nil || only == .oidc { try runOIDCLines(&table, OIDCBenchSetup(
                vaultd: binary, vaultctl: vaultctl ?? here + "/vaultctl",
                python: providerPython ?? (FileManager.default.isExecutableFile(atPath: ".venv/bin/python") ? ".venv/bin/python" : nil),
                providerScript: providerScript, quick: quick, requests: requests)) }
        } catch {
            // Print what was measured before the failure, then fail.
            table.add("FAILED", "\(error)", "", false)
            failure = error
        }
        table.print()
        print(String(format: "\nvault-bench: elapsed %.1f s", Double(monotonicNs() - started) / 1e9))
        if let failure { throw failure }
    }

    /// The vault core on its own: release, throughput, peers without OIDC, factors, scale, memory.
    func runCoreLines(_ table: inout Table, binary: String, requests: Int) throws {
        let seconds = quick ? 0.5 : self.seconds
        let scale = quick ? 500 : scaleSessions
        let daemon = try Daemon(binary: binary)
        defer { daemon.stop() }
        table.add("vaultd idle RSS (fresh vault)", mib(daemon.rssKiB()), "≤ 30 MiB", daemon.rssKiB() <= 30 * 1024)

        try daemon.importSessions(count: 1, prefix: "one")
        // The machine's floor, no vault: a blocking echo server answering the
        // same requests with the same bytes, to the same client code.
        let answers = try EchoFloor.capture(daemon.socket, account: "one-0")
        let echo = try EchoFloor(helloAnswer: answers.hello, sessionAnswer: answers.session)
        defer { echo.stop() }
        // Server and client on two cores, as vaultd and its clients are (Floor.swift, `Cores`).
        let floor = try Cores.on(Cores.client(sameCore: false)) {
            try medianOfThree { try measurePersistent(echo.socket, account: "one-0", count: requests) }
        }
        table.add("floor: echo server, same bytes, persistent connection, p50 (no vault; two cores)", us(floor.p50), "", nil)
        let sameCore = try Cores.on(Cores.client(sameCore: true)) {
            try medianOfThree { try measurePersistent(echo.socket, account: "one-0", count: requests) }
        }
        table.add("… the same pair on one core (no core to wake), p50", us(sameCore.p50), "", nil)
        let floorConnect = try Cores.on(Cores.client(sameCore: false)) {
            try measureConnectPerRequest(echo.socket, account: "one-0", count: requests / 4)
        }
        table.add("floor: echo server, connect + hello + session + reply, p50 (no vault; two cores)", us(floorConnect.p50), "", nil)
        func timesFloor(_ ns: UInt64, _ floor: UInt64) -> String { String(format: "%.1f× floor", Double(ns) / Double(max(1, floor))) }
        // A frame vaultd answers on its event loop without the broker: framing and JSON only.
        let inline = try measurePersistent(daemon.socket, frame: Request(id: 1, op: "answer", fields: ["pid": "none"]).encoded(), count: requests)
        table.add("vaultd: a frame answered on the event loop (`answer`), p50", us(inline.p50), timesFloor(inline.p50, floor.p50), nil)
        let persistent1 = try medianOfThree { try measurePersistent(daemon.socket, account: "one-0", count: requests) }
        table.add("session release, persistent connection, p50 (1 session, median of 3 runs)", us(persistent1.p50),
                  "≤ 3× floor: \(timesFloor(persistent1.p50, floor.p50))", persistent1.p50 <= 3 * floor.p50)
        table.add("session release, persistent connection, p99 (1 session)", us(persistent1.p99), timesFloor(persistent1.p99, floor.p99), nil)
        let perConnect = try measureConnectPerRequest(daemon.socket, account: "one-0", count: requests / 4)
        table.add("connect + hello + session + reply, p50", us(perConnect.p50),
                  "\(timesFloor(perConnect.p50, floorConnect.p50)) (≤ oidc-agent: see its lines)", nil)
        table.add("connect + hello + session + reply, p99", us(perConnect.p99), timesFloor(perConnect.p99, floorConnect.p99), nil)
        for clients in [1, 8, 32, 128] {
            let t = try measureThroughput(daemon.socket, account: "one-0", clients: clients, seconds: seconds)
            let target = clients == 8 ? "≥ 30,000/s" : ""
            table.add("throughput, \(clients) client\(clients == 1 ? "" : "s") (p99 \(us(t.p99)))", "\(Int(t.perSecond).formatted())/s", target,
                      clients == 8 ? t.perSecond >= 30_000 : nil)
        }

        let abuse = try measureUnderAbuse(daemon.socket, account: "one-0", count: requests / 4)
        func besideLine(_ what: String, _ l: Latency) {
            let ratio = Double(l.p99) / Double(max(1, abuse.quiet.p99))
            table.add("release p99 beside \(what) (alone \(us(abuse.quiet.p99)))", us(l.p99),
                      "≤ 2× alone: \(String(format: "%.2f", ratio))×", ratio <= 2)
        }
        besideLine("100 idle + 100 dribbling connections", abuse.abused)
        let flood = try measureBesideFlood(daemon, account: "one-0", count: requests / 4)
        besideLine("a client that sends and never reads", flood.latency)
        table.add("… vaultd RSS growth while it floods", mib(flood.growthKiB), "≤ 8 MiB (stops reading at 1 MiB unsent)",
                  flood.growthKiB <= 8 * 1024)
        let overCap = try measureBesideOverCap(daemon.socket, account: "one-0", count: requests / 4)
        besideLine("connections over the cap (\(overCap.refused) refused)", overCap.latency)
        if let refused = try measureBesideRefusedApp(daemon.socket, account: "one-0", count: requests / 4) {
            besideLine("an app refused in a loop (\(refused.refusals.formatted()) refusals)", refused.latency)
            table.add("… audit entries those refusals wrote", "\(refused.entries)", "1 (the rest counted)", refused.entries == 1)
        } else {
            table.add("release beside an app refused in a loop", "skipped", "needs python3", nil)
        }
        if let otherUID = try measureBesideOtherUID(daemon.socket, account: "one-0", count: requests / 4) {
            besideLine("another uid connecting in a loop", otherUID)
        } else {
            table.add("release beside another uid", "skipped", "needs root (setpriv)", nil)
        }

        let watch = try measureBesideWatchers(binary: binary, count: requests)
        let watchRatio = Double(watch.beside.p99) / Double(max(1, watch.alone.p99))
        table.add("release p99 beside 1,000 idle watchers (none, before and after: \(us(watch.alone.p99)))", us(watch.beside.p99),
                  "as with none (≤ 1.5×): \(String(format: "%.2f", watchRatio))×", watchRatio <= 1.5)
        table.add("… lock → all 1,000 watchers told; vaultd RSS for them", "\(ms(watch.fanOutNs)); \(mib(watch.growthKiB))", "", nil)

        // Peer: a libsecret lookup of a stored secret from a running process
        // (what an app would do without a vault), when a Secret Service is here.
        if let peer = measureSecretServiceLookup(count: quick ? 200 : 2_000) {
            let ratio = Double(peer.p50) / Double(max(1, persistent1.p50))
            table.add("peer: Secret Service lookup from a running process, p50", us(peer.p50),
                      "vault release is \(String(format: "%.0f", ratio))× faster", persistent1.p50 < peer.p50)
        } else {
            table.add("peer: Secret Service lookup", "no Secret Service here", "run under scripts/with-keyring", nil)
        }

        let unlock = try measurePINUnlock(daemon.socket, rounds: quick ? 3 : 10)
        table.add("PIN unlock end to end, p50 (Argon2id 64 MiB)", ms(unlock.p50), "≤ 250 ms", unlock.p50 <= 250_000_000)
        let fp = try measureFingerprint(daemon, rounds: quick ? 5 : 30)
        table.add("fingerprint: scripted match → session in the app, p50", ms(fp.match.p50), "≤ 20 ms (req. 2 s)", fp.match.p50 <= 20_000_000)
        table.add("fingerprint: hardware error → fallback offered, p50", ms(fp.fallback.p50), "≤ 50 ms (req. 1 s)", fp.fallback.p50 <= 50_000_000)

        if let dialog = try measureDialogs(binary: binary, rounds: quick ? 3 : 10, requests: requests / 4) {
            let own = Int64(dialog.pinEntry.p50) - Int64(dialog.relay.p50)
            table.add("PIN entry → session with the scripted fake pinentry, p50 (relay \(ms(dialog.relay.p50)))",
                      "\(ms(dialog.pinEntry.p50)) (dialog's own: \(ms(UInt64(max(0, own)))))", "", nil)
            let ratio = Double(dialog.releaseBesideDialog.p99) / Double(max(1, dialog.releaseAlone.p99))
            table.add("release p99 beside an open dialog (alone \(us(dialog.releaseAlone.p99)))", us(dialog.releaseBesideDialog.p99),
                      "≤ 2× alone: \(String(format: "%.2f", ratio))×", ratio <= 2)
        } else {
            table.add("PIN entry through pinentry", "skipped", "run from the repository (Tests/pinentry/fake-pinentry)", nil)
        }

        if let fprintd = try measureFprintdMatch(binary: binary, rounds: quick ? 5 : 30) {
            table.add("fprintd: match → session released, p50 / p99 (virtual device)", "\(ms(fprintd.p50)) / \(ms(fprintd.p99))",
                      "≤ 2 s", fprintd.p99 <= 2_000_000_000)
        } else {
            table.add("fprintd: match → session released", "skipped", "fprintd is not installed (scripts/setup installs it)", nil)
        }

        // Release latency as the store grows: 1 (above), 100, then `scale` sessions.
        var stored = 1
        var importNs: UInt64 = 0
        for size in [100, scale] where size > stored {
            let importStart = DispatchTime.now().uptimeNanoseconds
            try daemon.importSessions(count: size - stored, prefix: "bulk\(size)")
            importNs += DispatchTime.now().uptimeNanoseconds - importStart
            stored = size
            let persistentN = try medianOfThree { try measurePersistent(daemon.socket, account: "one-0", count: requests) }
            let ratio = Double(persistentN.p50) / Double(max(1, persistent1.p50))
            table.add("session release p50 with \(size) sessions (median of 3 runs)", "\(us(persistentN.p50)) (\(String(format: "%+.0f", (ratio - 1) * 100)) %)",
                      "within 20 % of 1 session", ratio <= 1.2)
        }
        table.add("import \(scale - 1) sessions (durable writes)", "\(ms(importNs)) (\(us(importNs / UInt64(max(1, scale - 1)))) each)", "", nil)
        table.add("vaultd RSS with \(scale) sessions", mib(daemon.rssKiB()), "", nil)
        let startup = try daemon.restartTime()
        table.add("vaultd start-up with \(scale) sessions (to socket ready)", ms(startup), "≤ 300 ms", startup <= 300_000_000)
    }
}

// MARK: - Measurements

struct Latency {
    var p50: UInt64
    var p99: UInt64
}

func sessionRequest(_ account: String) -> [UInt8] {
    Request(id: 1, op: "session", fields: ["account": .string(account)]).encoded()
}

func measurePersistent(_ socket: String, account: String, count: Int) throws -> Latency {
    try measurePersistent(socket, frame: sessionRequest(account), count: count)
}

/// The run with the median p50 of three: the scale lines compare p50s a few
/// microseconds apart, and one burst from another job on a shared 2-core
/// machine can move a single run's p50 by half.
func medianOfThree(_ measure: () throws -> Latency) throws -> Latency {
    let runs = try (0..<3).map { _ in try measure() }.sorted { $0.p50 < $1.p50 }
    return runs[1]
}

/// A connection as the real clients open one (vaultctl, the Python and Swift
/// clients): `hello` first, then requests.
func helloConnection(_ socket: String) throws -> VaultConnection {
    let c = try VaultConnection(socketPath: socket)
    _ = try c.hello(client: "vault-bench", language: .en, interactive: false)
    return c
}

/// One whole release as an app that connects per request does it, the way
/// vaultctl and the clients do it (`VaultConnection.greet`): connect, `hello`
/// and `session` in one write, both answers read and parsed, close.
func releaseOnce(_ socket: String, account: String) throws {
    let c = try VaultConnection(socketPath: socket)
    c.greet(client: "vault-bench", language: .en, interactive: false)
    _ = try c.call("session", ["account": .string(account)])
}

func measurePersistent(_ socket: String, frame: [UInt8], count: Int) throws -> Latency {
    let c = try helloConnection(socket)
    var h = Histogram<UInt64>(highestTrackableValue: 10_000_000_000)
    for i in 0..<(count + count / 10) {
        let t0 = DispatchTime.now().uptimeNanoseconds
        try c.send(frame)
        _ = try c.readLine()
        // The first tenth warms caches and is not recorded.
        if i >= count / 10 { _ = h.record(DispatchTime.now().uptimeNanoseconds - t0) }
    }
    return Latency(p50: h.valueAtPercentile(50), p99: h.valueAtPercentile(99))
}

/// The same release with oidc-agent's plain client (OIDCAgent.request): connect,
/// one write (`hello` and `session`), read until both answers are in, close;
/// no check of who serves and no parsing. Beside oidc-agent's line, the two
/// servers are compared with the same client.
func plainRelease(_ socket: String, request: [UInt8]) throws {
    let fd = try connectUnix(socket)
    defer { close(fd) }
    try sendAll(fd, request)
    var chunk = [UInt8](repeating: 0, count: 16_384)
    var lines = 0
    while lines < 2 {
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { throw BenchError("vaultd closed the connection early") }
        lines += chunk[0..<n].reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
    }
}

/// `hello` and `session` for `account`, as `plainRelease` writes them.
func plainReleaseRequest(_ account: String) -> [UInt8] {
    Request(id: 1, op: "hello", fields: ["client": "vault-bench", "lang": "en", "interactive": false]).encoded()
        + Request(id: 2, op: "session", fields: ["account": .string(account)]).encoded()
}

func measureConnectPerRequest(_ socket: String, account: String, count: Int) throws -> Latency {
    var h = Histogram<UInt64>(highestTrackableValue: 10_000_000_000)
    for _ in 0..<count {
        let t0 = DispatchTime.now().uptimeNanoseconds
        try releaseOnce(socket, account: account)
        _ = h.record(DispatchTime.now().uptimeNanoseconds - t0)
    }
    return Latency(p50: h.valueAtPercentile(50), p99: h.valueAtPercentile(99))
}

struct Throughput {
    var perSecond: Double
    var p99: UInt64
}

func measureThroughput(_ socket: String, account: String, clients: Int, seconds: Double) throws -> Throughput {
    let results = Locked<(count: Int, histogram: Histogram<UInt64>, failed: Bool)>((0, Histogram(highestTrackableValue: 10_000_000_000), false))
    let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(seconds * 1e9)
    let frame = sessionRequest(account)
    let group = DispatchGroup()
    let start = DispatchTime.now().uptimeNanoseconds
    for _ in 0..<clients {
        group.enter()
        let thread = Thread {
            defer { group.leave() }
            var local = Histogram<UInt64>(highestTrackableValue: 10_000_000_000)
            var n = 0
            do {
                let c = try helloConnection(socket)
                while DispatchTime.now().uptimeNanoseconds < deadline {
                    let t0 = DispatchTime.now().uptimeNanoseconds
                    try c.send(frame)
                    _ = try c.readLine()
                    _ = local.record(DispatchTime.now().uptimeNanoseconds - t0)
                    n += 1
                }
            } catch {
                results.withLock { $0.failed = true }
            }
            let done = local
            results.withLock { r in
                r.count += n
                r.histogram.add(done)
            }
        }
        thread.start()
    }
    group.wait()
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    return try results.withLock { r in
        if r.failed { throw BenchError("a client failed during the throughput run") }
        return Throughput(perSecond: Double(r.count) / elapsed, p99: r.histogram.valueAtPercentile(99))
    }
}

func measurePINUnlock(_ socket: String, rounds: Int) throws -> Latency {
    let pin = "482915"
    let c = try VaultConnection(socketPath: socket)
    try c.hello(client: "vault-bench", language: .en, interactive: true)
    let answer: (Prompt) -> PromptReply = { $0.kind == .secret ? .value(.string(pin)) : .none }
    _ = try c.call("enroll", ["factor": "pin"], onPrompt: answer)
    var h = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    for _ in 0..<rounds {
        _ = try c.call("lock")
        let t0 = DispatchTime.now().uptimeNanoseconds
        _ = try c.call("unlock", ["factor": "pin"], onPrompt: answer)
        _ = h.record(DispatchTime.now().uptimeNanoseconds - t0)
    }
    return Latency(p50: h.valueAtPercentile(50), p99: h.valueAtPercentile(99))
}

/// Enrolls the fingerprint on the stub reader (after the PIN), then times a
/// locked `session` request from the request to the released session with a
/// scripted match, and from the request to the PIN prompt after a hardware error.
func measureFingerprint(_ daemon: Daemon, rounds: Int) throws -> (match: Latency, fallback: Latency) {
    let stub = StubReader(path: daemon.stubPath)
    _ = try stub.plug()
    _ = try stub.enrollFinger("right-index")
    let c = try VaultConnection(socketPath: daemon.socket)
    try c.hello(client: "vault-bench", language: .en, interactive: true)
    try stub.enqueue(ScriptedScan(.match, finger: "right-index"))
    _ = try c.call("enroll", ["factor": "fingerprint"])
    var match = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    var fallback = Histogram<UInt64>(highestTrackableValue: 100_000_000_000)
    for _ in 0..<rounds {
        _ = try c.call("lock")
        try stub.enqueue(ScriptedScan(.match, finger: "right-index"))
        let t0 = DispatchTime.now().uptimeNanoseconds
        _ = try c.call("session", ["account": "one-0"]) { _ in .none }
        _ = match.record(DispatchTime.now().uptimeNanoseconds - t0)

        _ = try c.call("lock")
        try stub.enqueue(ScriptedScan(.error))
        let t1 = DispatchTime.now().uptimeNanoseconds
        var offered: UInt64 = 0
        _ = try? c.call("session", ["account": "one-0"]) { prompt in
            if prompt.kind == .secret, offered == 0 { offered = DispatchTime.now().uptimeNanoseconds - t1 }
            return prompt.kind == .secret ? .value(.string("482915")) : .none
        }
        _ = fallback.record(offered)
    }
    return (Latency(p50: match.valueAtPercentile(50), p99: match.valueAtPercentile(99)),
            Latency(p50: fallback.valueAtPercentile(50), p99: fallback.valueAtPercentile(99)))
}

/// Stores a device-key-sized secret under a bench-only attribute and times lookups.
func measureSecretServiceLookup(count: Int) -> Latency? {
    guard ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] != nil else { return nil }
    let keyring = SecretServiceKeyring(vault: "vault-bench-\(getpid())")
    guard (try? keyring.loadOrCreate()) != nil else { return nil }
    defer { try? keyring.delete() }
    var h = Histogram<UInt64>(highestTrackableValue: 10_000_000_000)
    for _ in 0..<count {
        let t0 = DispatchTime.now().uptimeNanoseconds
        guard (try? keyring.load()) != nil else { return nil }
        _ = h.record(DispatchTime.now().uptimeNanoseconds - t0)
    }
    return Latency(p50: h.valueAtPercentile(50), p99: h.valueAtPercentile(99))
}

// MARK: - The daemon under test

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

final class Daemon {
    let binary: String
    let dir: String
    let socket: String
    var stubPath: String { dir + "/fpstub.json" }
    var process: Process?

    /// `config`: the whole config.toml (default: cheap PIN hashing and the stub fingerprint reader).
    init(binary: String, name: String = "core", config: String? = nil) throws {
        self.binary = binary
        dir = NSTemporaryDirectory() + "vault-bench-\(getpid())-\(name)"
        socket = dir + "/run/vault.sock"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        Children.shared.add(dir: dir)
        try (config ?? "idle_timeout = 0\n[pin]\nargon_memory_mib = 64\nargon_ops = 2\n[fingerprint]\nreader = \"stub\"\nallow_stub_reader = true\nstub_state = \"\(dir)/fpstub.json\"\n")
            .write(toFile: dir + "/config.toml", atomically: true, encoding: .utf8)
        try start()
    }

    func start() throws {
        // Never the machine's /etc/sessionvault/config.toml: the bench's config is all there is.
        var environment = ProcessInfo.processInfo.environment
        environment["SESSIONVAULT_SYSTEM_CONFIG"] = dir + "/no-system-config.toml"
        process = try startChild(binary, ["--keyring=file", "--data-dir", dir + "/data", "--socket", socket,
                                          "--config", dir + "/config.toml", "--log-level", "warning"],
                                 environment: environment)
        do {
            try waitReady()
        } catch {
            stop()
            throw error
        }
    }

    func waitReady() throws {
        let deadline = DispatchTime.now().uptimeNanoseconds + 20_000_000_000
        while DispatchTime.now().uptimeNanoseconds < deadline {
            if (try? VaultConnection(socketPath: socket)) != nil { return }
            usleep(500)
        }
        throw BenchError("vaultd did not start; run it by hand to see why")
    }

    func stop() {
        if let p = process { stopChild(p) }
        process = nil
        try? FileManager.default.removeItem(atPath: dir)
        Children.shared.remove(dir: dir)
    }

    /// Time from exec to an accepting socket, with the current store.
    func restartTime() throws -> UInt64 {
        if let p = process { stopChild(p) }
        let t0 = DispatchTime.now().uptimeNanoseconds
        try start()
        return DispatchTime.now().uptimeNanoseconds - t0
    }

    func rssKiB() -> Int {
        guard let pid = process?.processIdentifier,
              let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0") ?? 0
        }
        return 0
    }

    /// Imports sessions pipelined: as many in flight on one connection as
    /// vaultd takes (32; the next would be answered `rate_limited`).
    func importSessions(count: Int, prefix: String) throws {
        let c = try helloConnection(socket)
        var sent = 0, received = 0
        let window = 32
        while received < count {
            while sent < count && sent - received < window {
                let token = "bench-\(prefix)-\(sent)-" + String(repeating: "x", count: 600)
                try c.send(Request(id: .int(Int64(sent)), op: "import", fields: [
                    "issuer": "https://login.example.org", "client_id": "bench", "account": .string("\(prefix)-\(sent)"),
                    "refresh_token": .string("r" + token), "access_token": .string("a" + token), "expires_at": 4_102_444_800,
                ]).encoded())
                sent += 1
            }
            let line = try c.readLine()
            guard let v = try? JSON.parse(line), v["ok"] == .bool(true) else {
                throw BenchError("import failed: \(String(decoding: line, as: UTF8.self))")
            }
            received += 1
        }
    }
}

// MARK: - Output

func us(_ ns: UInt64) -> String { String(format: "%.1f µs", Double(ns) / 1_000) }
func ms(_ ns: UInt64) -> String { String(format: "%.1f ms", Double(ns) / 1_000_000) }
func mib(_ kib: Int) -> String { String(format: "%.1f MiB", Double(kib) / 1024) }

struct Table {
    var rows: [(String, String, String, Bool?)] = []
    mutating func add(_ what: String, _ value: String, _ target: String, _ met: Bool?) {
        rows.append((what, value, target, met))
        Swift.print("  … \(what): \(value)")
        flushOutput()
    }
    func print() {
        let w0 = max(12, rows.map(\.0.count).max() ?? 0)
        let w1 = max(8, rows.map(\.1.count).max() ?? 0)
        let w2 = max(6, rows.map(\.2.count).max() ?? 0)
        func pad(_ s: String, _ w: Int) -> String { s + String(repeating: " ", count: max(0, w - s.count)) }
        Swift.print("")
        Swift.print("| \(pad("measurement", w0)) | \(pad("result", w1)) | \(pad("target", w2)) | met |")
        Swift.print("|-\(String(repeating: "-", count: w0))-|-\(String(repeating: "-", count: w1))-|-\(String(repeating: "-", count: w2))-|-----|")
        for r in rows {
            let met = r.3.map { $0 ? "yes" : "NO" } ?? ""
            Swift.print("| \(pad(r.0, w0)) | \(pad(r.1, w1)) | \(pad(r.2, w2)) | \(pad(met, 3)) |")
        }
    }
}

/// Progress lines should appear as they happen, even when piped.
func flushOutput() { fflush(nil) }

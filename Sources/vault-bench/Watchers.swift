import Foundation
import VaultClient
import VaultProtocol

/// Release latency with 1,000 idle watchers connected (`watch`), against the
/// same vaultd with none; then how long one `locked` takes to reach all of
/// them. Its own vaultd: 1,000 connections are past the default cap of 512.
func measureBesideWatchers(binary: String, count: Int, watchers: Int = 1_000) throws
    -> (alone: Latency, beside: Latency, fanOutNs: UInt64, growthKiB: Int) {
    let daemon = try Daemon(binary: binary, name: "watch", config: "idle_timeout = 0\nmax_connections = \(watchers + 64)\n")
    defer { daemon.stop() }
    try daemon.importSessions(count: 1, prefix: "w")
    let alone = try medianOfThree { try measurePersistent(daemon.socket, account: "w-0", count: count) }
    let before = daemon.rssKiB()
    var open: [VaultConnection] = []
    for _ in 0..<watchers {
        let c = try helloConnection(daemon.socket)
        try c.watch()
        open.append(c)
    }
    let beside = try medianOfThree { try measurePersistent(daemon.socket, account: "w-0", count: count) }
    let growth = daemon.rssKiB() - before
    let locker = try helloConnection(daemon.socket)
    _ = try locker.call("lock")
    let t0 = DispatchTime.now().uptimeNanoseconds
    for c in open {
        let event = try c.nextEvent()
        guard event.kind == "locked" else { throw BenchError("a watcher got \(event.kind), not locked") }
    }
    return (alone, beside, DispatchTime.now().uptimeNanoseconds - t0, growth)
}

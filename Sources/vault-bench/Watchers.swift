import Foundation
#if canImport(Glibc)
import Glibc
#endif
import VaultClient
import VaultProtocol

/// Release latency with 1,000 idle watchers connected (`watch`), against the
/// same vaultd with none, measured before they connect and after they leave
/// (the mean of the two, so a machine that got busier or quieter meanwhile
/// does not pass for the watchers' cost); then how long one `locked` takes
/// to reach all of them. Its own vaultd: 1,000 connections are past the
/// default cap of 512.
func measureBesideWatchers(binary: String, count: Int, watchers: Int = 1_000) throws
    -> (alone: Latency, beside: Latency, fanOutNs: UInt64, growthKiB: Int) {
    // 1,000 sockets of our own: past the usual soft limit of 1,024 descriptors.
    var limit = rlimit()
    if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max
        setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    }
    let daemon = try Daemon(binary: binary, name: "watch", config: "idle_timeout = 0\nmax_connections = \(watchers + 64)\n")
    defer { daemon.stop() }
    try daemon.importSessions(count: 1, prefix: "w")
    let before = try medianOfThree { try measurePersistent(daemon.socket, account: "w-0", count: count) }
    let rssBefore = daemon.rssKiB()
    var open: [VaultConnection] = []
    for _ in 0..<watchers {
        let c = try helloConnection(daemon.socket)
        try c.watch()
        open.append(c)
    }
    let beside = try medianOfThree { try measurePersistent(daemon.socket, account: "w-0", count: count) }
    let growth = daemon.rssKiB() - rssBefore
    let locker = try helloConnection(daemon.socket)
    _ = try locker.call("lock")
    let t0 = DispatchTime.now().uptimeNanoseconds
    for c in open {
        let event = try c.nextEvent()
        guard event.kind == "locked" else { throw BenchError("a watcher got \(event.kind), not locked") }
    }
    let fanOut = DispatchTime.now().uptimeNanoseconds - t0
    open.removeAll()
    let after = try medianOfThree { try measurePersistent(daemon.socket, account: "w-0", count: count) }
    let alone = Latency(p50: (before.p50 + after.p50) / 2, p99: (before.p99 + after.p99) / 2)
    return (alone, beside, fanOut, growth)
}

import Foundation
import Synchronization
import VaultClient
#if canImport(Glibc)
import Glibc
#endif

/// Release latency for a well-behaved client, alone and then while 100 idle
/// connections sit open and 100 more dribble a request line one byte every
/// 50 ms without ever finishing it (slowloris). vaultd reads a partial line
/// once per byte and scans it once, so the others should barely notice.
func measureUnderAbuse(_ socket: String, account: String, count: Int) throws -> (quiet: Latency, abused: Latency) {
    let quiet = try measurePersistent(socket, account: account, count: count)
    var idle: [Int32] = []
    var dribblers: [Int32] = []
    defer { for fd in idle + dribblers { close(fd) } }
    for _ in 0..<200 {
        guard let fd = connectUnixSocket(socket) else { throw BenchError("connect failed: errno \(errno)") }
        if idle.count < 100 { idle.append(fd) } else { dribblers.append(fd) }
    }
    let stop = Atomic<Bool>(false)
    let stopped = DispatchSemaphore(value: 0)
    let line = Array(#"{"id":1,"op":"session","account":"never-finished","padding":""#.utf8)
    let fds = dribblers
    Thread {
        var i = 0
        while !stop.load(ordering: .relaxed) {
            var byte = line[i % line.count]
            for fd in fds { _ = send(fd, &byte, 1, Int32(MSG_NOSIGNAL)) }
            i += 1
            usleep(50_000)
        }
        stopped.signal()
    }.start()
    defer {
        stop.store(true, ordering: .relaxed)
        stopped.wait()
    }
    let abused = try measurePersistent(socket, account: account, count: count)
    return (quiet, abused)
}

import Foundation
import Synchronization
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
    for _ in 0..<100 { idle.append(try connectUnix(socket)) }
    for _ in 0..<100 { dribblers.append(try connectUnix(socket)) }
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

/// A plain connected Unix socket (no hello, nothing sent).
func connectUnix(_ path: String) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw BenchError("socket() failed: errno \(errno)") }
    var addr = sockaddr_un()
    addr.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
        close(fd)
        throw BenchError("socket path too long")
    }
    withUnsafeMutableBytes(of: &addr.sun_path) { raw in
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard rc == 0 else {
        close(fd)
        throw BenchError("connect failed: errno \(errno)")
    }
    return fd
}

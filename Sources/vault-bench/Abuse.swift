import Foundation
import Histogram
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

/// Release latency beside a client that pipelines `status` requests and never
/// reads an answer: vaultd stops reading it once 1 MiB of answers waits
/// (Connection.swift), so the others barely notice and its memory stays
/// bounded. Returns the latency and vaultd's RSS growth (KiB) while flooded.
func measureBesideFlood(_ daemon: Daemon, account: String, count: Int) throws -> (latency: Latency, growthKiB: Int) {
    guard let fd = connectUnixSocket(daemon.socket) else { throw BenchError("connect failed: errno \(errno)") }
    defer { close(fd) }
    let before = daemon.rssKiB()
    let stop = Atomic<Bool>(false)
    let stopped = DispatchSemaphore(value: 0)
    let chunk: [UInt8] = (0..<30).flatMap { _ in Array("{\"id\":1,\"op\":\"status\"}\n".utf8) }
    Thread {
        // Blocks once vaultd stops reading: that is the point.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        while !stop.load(ordering: .relaxed) {
            if chunk.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) < 0 { usleep(10_000) }
        }
        stopped.signal()
    }.start()
    defer {
        stop.store(true, ordering: .relaxed)
        stopped.wait()
    }
    usleep(1_000_000)   // let it fill every buffer first
    let latency = try measurePersistent(daemon.socket, account: account, count: count)
    return (latency, daemon.rssKiB() - before)
}

/// Release latency while another program keeps opening connections past the
/// cap (`max_connections`, 512): each refused one gets one `rate_limited` and is closed.
func measureBesideOverCap(_ socket: String, account: String, count: Int) throws -> (latency: Latency, refused: Int) {
    var held: [Int32] = []
    defer { for fd in held { close(fd) } }
    // Fill the cap (the measuring connection below is the one left free).
    for _ in 0..<511 {
        guard let fd = connectUnixSocket(socket) else { throw BenchError("connect failed: errno \(errno)") }
        held.append(fd)
    }
    usleep(200_000)
    let measuring = try helloConnection(socket)
    let stop = Atomic<Bool>(false)
    let refused = Atomic<Int>(0)
    let stopped = DispatchSemaphore(value: 0)
    Thread {
        var buffer = [UInt8](repeating: 0, count: 512)
        while !stop.load(ordering: .relaxed) {
            guard let fd = connectUnixSocket(socket) else { continue }
            if recv(fd, &buffer, buffer.count, 0) > 0 { refused.add(1, ordering: .relaxed) }
            close(fd)
        }
        stopped.signal()
    }.start()
    defer {
        stop.store(true, ordering: .relaxed)
        stopped.wait()
    }
    var h = Histogram<UInt64>(highestTrackableValue: 10_000_000_000)
    let frame = sessionRequest(account)
    for _ in 0..<count {
        let t0 = DispatchTime.now().uptimeNanoseconds
        try measuring.send(frame)
        _ = try measuring.readLine()
        _ = h.record(DispatchTime.now().uptimeNanoseconds - t0)
    }
    return (Latency(p50: h.valueAtPercentile(50), p99: h.valueAtPercentile(99)), refused.load(ordering: .relaxed))
}

/// Release latency while a process of another uid keeps connecting (each gets
/// one `forbidden`); nil when this is not root, which `setpriv` needs.
func measureBesideOtherUID(_ socket: String, account: String, count: Int) throws -> Latency? {
    guard getuid() == 0, let setpriv = which("setpriv"), let python = which("python3") else { return nil }
    // The socket's directory is 0700 and the socket 0600, which alone keep
    // another uid out. To measure vaultd's own check (`SO_PEERCRED`), both
    // are opened up while this runs, and closed again after.
    let dir = String(socket[..<(socket.lastIndex(of: "/") ?? socket.endIndex)])
    guard chmod(dir, 0o711) == 0, chmod(socket, 0o666) == 0 else { throw BenchError("cannot open the socket to another uid") }
    defer {
        chmod(socket, 0o600)
        chmod(dir, 0o700)
    }
    let script = """
    import socket, sys
    while True:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(sys.argv[1]); s.recv(512)
        except OSError:
            pass
        s.close()
    """
    let other = Process()
    other.executableURL = URL(fileURLWithPath: setpriv)
    other.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", script, socket]
    other.standardError = FileHandle.nullDevice
    try other.run()
    defer {
        other.terminate()
        other.waitUntilExit()
    }
    usleep(200_000)
    return try measurePersistent(socket, account: account, count: count)
}

/// Release latency beside another program (python3: not the importer, so
/// not granted, and with no dialog to ask through) asking for the login in a
/// loop, each answered `app_not_allowed`; and how many audit entries those
/// refusals wrote (a refusal repeated by the same process is counted, not
/// written: AuditRepeats.swift). nil without python3.
func measureBesideRefusedApp(_ socket: String, account: String, count: Int) throws -> (latency: Latency, refusals: Int, entries: Int)? {
    guard let python = which("python3") else { return nil }
    let script = """
    import json, signal, socket, sys
    n = 0
    def done(*_):
        print(n, flush=True); sys.exit(0)
    signal.signal(signal.SIGTERM, done)
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rwb")
    f.write(b'{"id":0,"op":"hello","version":1,"client":"refused","lang":"en","interactive":false}\\n'); f.flush(); f.readline()
    line = json.dumps({"id": 1, "op": "session", "account": sys.argv[2]}).encode() + b"\\n"
    print("ready", flush=True)
    while True:
        f.write(line); f.flush()
        if b"app_not_allowed" not in f.readline(): sys.exit("not refused")
        n += 1
    """
    let entriesBefore = try refusalEntries(socket)
    let other = Process()
    other.executableURL = URL(fileURLWithPath: python)
    other.arguments = ["-c", script, socket, account]
    let out = Pipe()
    other.standardOutput = out
    other.standardError = FileHandle.nullDevice
    try other.run()
    let reader = out.fileHandleForReading
    guard String(decoding: reader.availableData, as: UTF8.self).hasPrefix("ready") else {
        other.terminate()
        throw BenchError("the refused app did not start")
    }
    usleep(200_000)
    let latency = try measurePersistent(socket, account: account, count: count)
    other.terminate()
    other.waitUntilExit()
    let refusals = Int(String(decoding: reader.readDataToEndOfFile(), as: UTF8.self)
        .trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    return (latency, refusals, try refusalEntries(socket) - entriesBefore)
}

/// How many `grant`/`no_dialog` entries the audit log holds (the newest 1,000 at most).
private func refusalEntries(_ socket: String) throws -> Int {
    let c = try helloConnection(socket)
    let r = try c.call("audit", ["limit": 1000])
    return (r["entries"]?.arrayValue ?? []).filter { $0["event"] == "grant" && $0["outcome"] == "no_dialog" }.count
}

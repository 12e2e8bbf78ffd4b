import Dispatch
import Foundation
import Locking
#if canImport(Glibc)
import Glibc
#endif

/// CLOCK_MONOTONIC in nanoseconds: the clock the strict provider stamps its
/// token calls with (Python's time.monotonic_ns), so the two line up.
func monotonicNs() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Every long-lived process the bench starts (vaultd, the provider, oidc-agent)
/// and its temp dirs. A thrown error stops and removes them through `defer`;
/// this registry is for Ctrl-C and SIGTERM, which skip `defer`.
final class Children: Sendable {
    static let shared = Children()
    private let pids = Locked<Set<pid_t>>([])
    private let dirs = Locked<Set<String>>([])

    func add(_ pid: pid_t) { _ = pids.withLock { $0.insert(pid) } }
    func remove(_ pid: pid_t) { _ = pids.withLock { $0.remove(pid) } }
    func add(dir: String) { _ = dirs.withLock { $0.insert(dir) } }
    func remove(dir: String) { _ = dirs.withLock { $0.remove(dir) } }

    func terminateAll() {
        let running = pids.withLock { Array($0) }
        for pid in running { kill(pid, SIGTERM) }
        // Let them exit before their dirs go (bounded: 2 s).
        let deadline = monotonicNs() + 2_000_000_000
        while monotonicNs() < deadline, running.contains(where: { kill($0, 0) == 0 && !isZombie($0) }) { usleep(10_000) }
        for dir in dirs.withLock({ Array($0) }) { try? FileManager.default.removeItem(atPath: dir) }
    }
}

/// An exited child nobody has waited for yet.
func isZombie(_ pid: pid_t) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return true }
    return stat[stat.index(after: close)...].hasPrefix(" Z")
}

/// Stops the registered children on SIGINT/SIGTERM/SIGHUP, then exits.
final class SignalCleanup: @unchecked Sendable {
    // @unchecked: `sources` is written once in `install()` (before any signal
    // can be delivered through them) and only kept alive afterwards.
    static let shared = SignalCleanup()
    private var sources: [any DispatchSourceSignal] = []

    func install() {
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                Children.shared.terminateAll()
                exit(128 + sig)
            }
            source.resume()
            sources.append(source)
        }
    }
}

/// Starts a long-lived child with Foundation's Process, registered for cleanup.
func startChild(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                stdout: Any? = nil) throws -> Process {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: executable)
    p.arguments = arguments
    if let environment { p.environment = environment }
    p.standardOutput = stdout ?? FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    p.standardInput = FileHandle.nullDevice
    try p.run()
    Children.shared.add(p.processIdentifier)
    return p
}

/// SIGTERM, then wait (SIGKILL after 5 s).
func stopChild(_ p: Process) {
    let pid = p.processIdentifier
    if p.isRunning {
        p.terminate()
        let deadline = monotonicNs() + 5_000_000_000
        while p.isRunning && monotonicNs() < deadline { usleep(10_000) }
        if p.isRunning { kill(pid, SIGKILL) }
        p.waitUntilExit()
    }
    Children.shared.remove(pid)
}

/// Reads the first stdout line of a child, with a deadline.
func readFirstLine(_ pipe: Pipe, timeout: Double) -> String {
    var line = [UInt8]()
    let fd = pipe.fileHandleForReading.fileDescriptor
    let deadline = monotonicNs() + UInt64(timeout * 1e9)
    while monotonicNs() < deadline {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, 200) > 0 else { continue }
        var byte: UInt8 = 0
        guard read(fd, &byte, 1) == 1 else { break }
        if byte == 0x0A { break }
        line.append(byte)
    }
    return String(decoding: line, as: UTF8.self)
}

/// Runs a short command to its end with posix_spawn (no Foundation machinery
/// in the timed path), stdout and stderr to /dev/null; returns the exit status.
func spawnAndWait(_ executable: String, _ arguments: [String], environment: [String: String]) throws -> Int32 {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let argv = ([executable] + arguments).map { strdup($0) }
    let envp = environment.map { strdup("\($0.key)=\($0.value)") }
    defer {
        argv.forEach { free($0) }
        envp.forEach { free($0) }
    }
    var pid: pid_t = 0
    let rc = (argv + [nil]).withUnsafeBufferPointer { a in
        (envp + [nil]).withUnsafeBufferPointer { e -> Int32 in
            guard let av = a.baseAddress, let ev = e.baseAddress else { return EINVAL }
            return posix_spawn(&pid, executable, &actions, nil, av, ev)
        }
    }
    guard rc == 0 else { throw BenchError("could not start \(executable): error \(rc)") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    // WIFEXITED / WEXITSTATUS are macros Swift cannot see.
    return (status & 0x7F) == 0 ? (status >> 8) & 0xFF : -1
}

/// The direct children of `pid` (from /proc), e.g. the worker oidc-agent forks.
func childPIDs(of pid: pid_t) -> [pid_t] {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
    var out: [pid_t] = []
    for e in entries {
        guard let child = pid_t(e), let stat = try? String(contentsOfFile: "/proc/\(e)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { continue }
        // Fields after the command name: state, ppid, …
        let rest = stat[stat.index(after: close)...].split(separator: " ")
        if rest.count > 1, pid_t(rest[1]) == pid { out.append(child) }
    }
    return out
}

/// Looks for a command on PATH.
func which(_ name: String) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    for dir in path.split(separator: ":") {
        let candidate = "\(dir)/\(name)"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return nil
}

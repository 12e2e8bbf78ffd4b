import FoundationEssentials
import Locking
import VaultFactor
#if canImport(Glibc)
import Glibc
#endif

/// One run of a plugin executable: spawned with posix_spawn in its own process
/// group, with three pipes. A dedicated I/O thread owns every file descriptor
/// and multiplexes them with poll(2): it writes queued input to stdin, reads
/// stdout and stderr *concurrently* (so a plugin filling its stderr pipe can
/// never deadlock against us), splits stdout into lines, and enforces the time
/// budget. Lines and the final termination reach the async side as events.
///
/// The time budget only runs while the vault waits for the plugin: the owner
/// pauses it while the person is answering a prompt. When it runs out, or a
/// line is too long, or the owner asks, the whole process group gets SIGKILL.
/// The group is always killed while the leader is still an unreaped zombie, so
/// its id can't have been reused by an unrelated process.
final class PluginProcess: @unchecked Sendable {
    enum KillReason: Sendable, Equatable {
        case timeout
        case lineTooLong
        /// More than `maxOutput` bytes on stdout in one run.
        case tooMuchOutput
        case requested
    }

    struct Termination: Sendable {
        /// Exit status, or nil when killed by a signal.
        var exitStatus: Int32?
        var signal: Int32?
        /// Set when the vault killed the plugin.
        var killed: KillReason?
        /// The tail of what the plugin wrote to stderr (for the log only).
        var stderr: String
        var stderrTruncated: Bool
        var elapsed: Duration

        var summary: String {
            var s = killed.map { "killed (\($0))" } ?? (exitStatus.map { "exited with status \($0)" } ?? "killed by signal \(signal ?? 0)")
            if killed != nil, let signal { s += " by signal \(signal)" }
            return s
        }
    }

    enum Event: Sendable {
        case line([UInt8])
        case finished(Termination)
    }

    struct SpawnError: Error, CustomStringConvertible {
        var description: String
    }

    private struct Control {
        var chunks: [[UInt8]] = []
        var closeInputWhenFlushed = false
        var kill: KillReason?
        var budget: Duration
        var runningSince: ContinuousClock.Instant?
        var fdsClosed = false
    }

    let pid: pid_t
    let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let control: Locked<Control>
    private let stdinFD: Int32, stdoutFD: Int32, stderrFD: Int32
    private let wakeRead: Int32, wakeWrite: Int32
    private let started = ContinuousClock.now
    /// How long a plugin may take to exit after its stdout and stderr closed.
    static let exitGrace: Duration = .seconds(2)
    static let stderrKeep = 4096
    /// A conversation is a few short lines; this bounds what a runaway plugin can make us hold.
    static let maxOutput = 1 << 20

    private init(pid: pid_t, stdin: Int32, stdout: Int32, stderr: Int32, wake: (Int32, Int32), budget: Duration) {
        self.pid = pid
        stdinFD = stdin
        stdoutFD = stdout
        stderrFD = stderr
        wakeRead = wake.0
        wakeWrite = wake.1
        control = Locked(Control(budget: budget, runningSince: ContinuousClock.now))
        (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
    }

    // MARK: - Owner side

    /// Queues bytes for the plugin's stdin. The array is wiped after it is written.
    func send(_ bytes: [UInt8]) {
        control.withLock { c in
            guard !c.closeInputWhenFlushed else { return }
            c.chunks.append(bytes)
            wakeLocked(closed: c.fdsClosed)
        }
    }

    /// Closes stdin once everything queued is written (the plugin then reads EOF).
    func closeInput() {
        control.withLock { c in
            c.closeInputWhenFlushed = true
            wakeLocked(closed: c.fdsClosed)
        }
    }

    /// Stops the clock while the person answers a prompt.
    func pauseClock() {
        control.withLock { c in
            if let since = c.runningSince {
                c.budget -= ContinuousClock.now - since
                c.runningSince = nil
            }
            wakeLocked(closed: c.fdsClosed)
        }
    }

    func resumeClock() {
        control.withLock { c in
            if c.runningSince == nil { c.runningSince = .now }
            wakeLocked(closed: c.fdsClosed)
        }
    }

    /// Gives the plugin at most `grace` more (running) time to finish.
    func finish(within grace: Duration) {
        control.withLock { c in
            if let since = c.runningSince { c.budget -= ContinuousClock.now - since }
            c.budget = min(c.budget, grace)
            c.runningSince = .now
            wakeLocked(closed: c.fdsClosed)
        }
    }

    /// Kills the process group now.
    func terminate() {
        control.withLock { c in
            if c.kill == nil { c.kill = .requested }
            wakeLocked(closed: c.fdsClosed)
        }
    }

    private func wakeLocked(closed: Bool) {
        guard !closed else { return }
        var b: UInt8 = 1
        _ = Glibc.write(wakeWrite, &b, 1)
    }

    // MARK: - Spawning

    /// Serialises pipe creation and spawning when pipe2(O_CLOEXEC) is missing,
    /// so no other plugin's pipe end leaks into a child between pipe() and fcntl().
    /// Its value counts the spawns: a lock's value must not be zero-sized (`Locked`).
    private static let spawnLock = Locked(0)

    private typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    // glibc has both (≥ 2.34), but Swift's Glibc module hides them behind _GNU_SOURCE.
    private static let libc: (pipe2: Pipe2?, addCloseFrom: AddCloseFrom?) = {
        let h = dlopen(nil, RTLD_NOW)
        return (dlsym(h, "pipe2").map { unsafeBitCast($0, to: Pipe2.self) },
                dlsym(h, "posix_spawn_file_actions_addclosefrom_np").map { unsafeBitCast($0, to: AddCloseFrom.self) })
    }()

    /// A close-on-exec pipe whose ends are both ≥ 3 (so dup2 onto 0–2 in the
    /// child can never clobber another of our ends, even if vaultd runs with
    /// its standard descriptors closed).
    private static func makePipe() throws(SpawnError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        let rc: Int32
        if let pipe2 = libc.pipe2 {
            rc = pipe2(&fds, O_CLOEXEC)
        } else {
            rc = pipe(&fds)
            if rc == 0 {
                _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
                _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
            }
        }
        guard rc == 0 else { throw SpawnError(description: "pipe: \(String(cString: strerror(errno)))") }
        for n in 0..<2 where fds[n] < 3 {
            let moved = fcntl(fds[n], F_DUPFD_CLOEXEC, 3)
            close(fds[n])
            fds[n] = moved
        }
        guard fds[0] >= 3, fds[1] >= 3 else {
            for fd in fds where fd >= 0 { close(fd) }
            throw SpawnError(description: "could not move pipe descriptors above 2")
        }
        return (fds[0], fds[1])
    }

    static func spawn(executable: String, arguments: [String], environment: [String: String],
                      budget: Duration) throws(SpawnError) -> PluginProcess {
        try spawnLock.withLock { spawned throws(SpawnError) -> PluginProcess in
            spawned += 1
            var opened: [Int32] = []
            func closeAll() { for fd in opened { close(fd) } }
            let input: (read: Int32, write: Int32), output: (read: Int32, write: Int32)
            let errors: (read: Int32, write: Int32), wake: (read: Int32, write: Int32)
            do throws(SpawnError) {
                input = try makePipe(); opened += [input.read, input.write]
                output = try makePipe(); opened += [output.read, output.write]
                errors = try makePipe(); opened += [errors.read, errors.write]
                wake = try makePipe(); opened += [wake.read, wake.write]
            } catch {
                closeAll()
                throw error
            }

            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_adddup2(&actions, input.read, 0)
            posix_spawn_file_actions_adddup2(&actions, output.write, 1)
            posix_spawn_file_actions_adddup2(&actions, errors.write, 2)
            // Belt and braces: nothing but 0–2 reaches the plugin, even a
            // descriptor someone else opened without O_CLOEXEC.
            if let addCloseFrom = libc.addCloseFrom { _ = addCloseFrom(&actions, 3) }

            var attr = posix_spawnattr_t()
            posix_spawnattr_init(&attr)
            defer { posix_spawnattr_destroy(&attr) }
            // Own process group (so a timeout kills its children too), default
            // signal dispositions and an empty mask whatever thread spawns it.
            var none = sigset_t()
            sigemptyset(&none)
            var all = sigset_t()
            sigfillset(&all)
            sigdelset(&all, SIGKILL)
            sigdelset(&all, SIGSTOP)
            posix_spawnattr_setsigmask(&attr, &none)
            posix_spawnattr_setsigdefault(&attr, &all)
            posix_spawnattr_setpgroup(&attr, 0)
            posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

            let argv = [executable] + arguments
            let envp = environment.map { "\($0.key)=\($0.value)" }.sorted()
            var pid: pid_t = 0
            let rc = withCStrings(argv) { cArgv in
                withCStrings(envp) { cEnvp in
                    posix_spawn(&pid, executable, &actions, &attr, cArgv, cEnvp)
                }
            }
            guard rc == 0 else {
                closeAll()
                throw SpawnError(description: "posix_spawn: \(String(cString: strerror(rc)))")
            }
            // The child has its copies; ours of the child's ends must go, or EOF never comes.
            close(input.read); close(output.write); close(errors.write)
            for fd in [input.write, output.read, errors.read, wake.read, wake.write] {
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            }
            let process = PluginProcess(pid: pid, stdin: input.write, stdout: output.read, stderr: errors.read,
                                        wake: (wake.read, wake.write), budget: budget)
            runOnNewThread(named: "vault-factor io") { process.run() }
            return process
        }
    }

    private static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
        var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        pointers.append(nil)
        defer { for p in pointers { free(p) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    // MARK: - The I/O thread

    private func run() {
        // A write to a pipe whose reader is gone raises SIGPIPE on the writing
        // thread; blocked here, write just fails with EPIPE.
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)

        var stdinOpen = true
        var stdoutOpen = true
        var stderrOpen = true
        var lineBuffer: [UInt8] = []
        var scanFrom = 0
        var stderrTail: [UInt8] = []
        var stderrTruncated = false
        var readBuffer = [UInt8](repeating: 0, count: 65_536)
        var current: [UInt8] = []   // the chunk being written
        var currentOffset = 0
        var killed: KillReason?
        var stdoutClosedAt: ContinuousClock.Instant?
        var stdoutTotal = 0

        func killGroup(_ reason: KillReason) {
            if killed == nil { killed = reason }
            _ = Glibc.kill(-pid, SIGKILL)
        }
        func closeStdin() {
            if stdinOpen { close(stdinFD); stdinOpen = false }
            Sodium.wipe(&current)
            currentOffset = 0
        }

        while (stdoutOpen || stderrOpen) && killed == nil {
            // What the owner wants, and how long we may wait.
            let (kill, budgetDeadline, wantsClose) = control.withLock { c -> (KillReason?, ContinuousClock.Instant?, Bool) in
                if current.isEmpty, !c.chunks.isEmpty {
                    current = c.chunks.removeFirst()
                    currentOffset = 0
                }
                return (c.kill, c.runningSince.map { $0 + c.budget }, c.closeInputWhenFlushed)
            }
            if let kill { killGroup(kill); break }
            var deadline = budgetDeadline
            if let closedAt = stdoutClosedAt {
                // No more messages can come: don't wait long for stderr to close.
                deadline = min(deadline ?? closedAt + Self.exitGrace, closedAt + Self.exitGrace)
            }
            if let deadline, ContinuousClock.now >= deadline { killGroup(.timeout); break }
            if stdinOpen, current.isEmpty, wantsClose { closeStdin() }

            var fds: [pollfd] = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            let outIndex = stdoutOpen ? fds.count : -1
            if stdoutOpen { fds.append(pollfd(fd: stdoutFD, events: Int16(POLLIN), revents: 0)) }
            let errIndex = stderrOpen ? fds.count : -1
            if stderrOpen { fds.append(pollfd(fd: stderrFD, events: Int16(POLLIN), revents: 0)) }
            let inIndex = stdinOpen && !current.isEmpty ? fds.count : -1
            if inIndex >= 0 { fds.append(pollfd(fd: stdinFD, events: Int16(POLLOUT), revents: 0)) }

            var timeoutMS: Int32 = -1
            if let deadline {
                let left = deadline - ContinuousClock.now
                let ms = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1
                timeoutMS = Int32(clamping: max(0, ms))
            }
            let ready = poll(&fds, nfds_t(fds.count), timeoutMS)
            if ready < 0 {
                if errno == EINTR { continue }
                killGroup(.requested)
                break
            }
            if ready == 0 { continue }   // the deadline is checked at the top

            if fds[0].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 64)
                while Glibc.read(wakeRead, &drain, drain.count) > 0 {}
            }

            if inIndex >= 0, fds[inIndex].revents != 0 {
                let n = current.withUnsafeBytes { buf in
                    Glibc.write(stdinFD, buf.baseAddress! + currentOffset, buf.count - currentOffset)
                }
                if n > 0 {
                    currentOffset += n
                    if currentOffset == current.count {
                        Sodium.wipe(&current)
                        current = []
                        currentOffset = 0
                    }
                } else if n < 0 && errno != EAGAIN && errno != EINTR {
                    // The plugin closed its stdin (or died): nothing more can be said to it.
                    closeStdin()
                    control.withLock { c in
                        for i in c.chunks.indices { Sodium.wipe(&c.chunks[i]) }
                        c.chunks = []
                        c.closeInputWhenFlushed = true
                    }
                }
            }

            if outIndex >= 0, fds[outIndex].revents != 0 {
                let n = readBuffer.withUnsafeMutableBytes { Glibc.read(stdoutFD, $0.baseAddress!, $0.count) }
                if n > 0 {
                    stdoutTotal += n
                    if stdoutTotal > Self.maxOutput { killGroup(.tooMuchOutput); break }
                    lineBuffer.append(contentsOf: readBuffer[0..<n])
                    readBuffer.withUnsafeMutableBytes { _ = memset($0.baseAddress!, 0, n) }
                    // Hand over every complete line.
                    while let nl = lineBuffer[scanFrom...].firstIndex(of: 0x0A) {
                        let line = Array(lineBuffer[0..<nl])
                        if line.count > PluginCodec.maxLineLength { killGroup(.lineTooLong); break }
                        var rest = Array(lineBuffer[(nl + 1)...])
                        swap(&rest, &lineBuffer)
                        Sodium.wipe(&rest)
                        scanFrom = 0
                        continuation.yield(.line(line))
                    }
                    scanFrom = lineBuffer.count
                    if killed == nil, lineBuffer.count > PluginCodec.maxLineLength { killGroup(.lineTooLong) }
                } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                    stdoutOpen = false
                    stdoutClosedAt = .now
                }
            }

            if errIndex >= 0, fds[errIndex].revents != 0 {
                let n = readBuffer.withUnsafeMutableBytes { Glibc.read(stderrFD, $0.baseAddress!, $0.count) }
                if n > 0 {
                    stderrTail.append(contentsOf: readBuffer[0..<n])
                    if stderrTail.count > Self.stderrKeep {
                        stderrTail.removeFirst(stderrTail.count - Self.stderrKeep)
                        stderrTruncated = true
                    }
                } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                    stderrOpen = false
                }
            }
        }
        // A last line without "\n" is not a message; it is dropped (and wiped).
        Sodium.wipe(&lineBuffer)

        // Wait for the leader to exit without reaping it (WNOWAIT), killing the
        // group if it lingers after closing its output or overruns its budget.
        let exitDeadline: ContinuousClock.Instant = {
            let budgetEnd = control.withLock { c in c.runningSince.map { $0 + c.budget } }
            let graceEnd = ContinuousClock.now + Self.exitGrace
            return budgetEnd.map { min($0, graceEnd) } ?? graceEnd
        }()
        var info = siginfo_t()
        while true {
            info = siginfo_t()
            let rc = waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT | (killed == nil ? WNOHANG : 0))
            if rc == 0 && info._sifields._sigchld.si_pid == pid { break }
            if rc < 0 && errno == EINTR { continue }
            if rc < 0 { break }   // ECHILD: already reaped elsewhere; nothing to wait for
            if killed == nil {
                if control.withLock({ $0.kill }) != nil { killGroup(.requested); continue }
                if ContinuousClock.now >= exitDeadline { killGroup(.timeout); continue }
                usleep(5_000)
            }
        }
        // Leftovers in the group (a child the plugin started) go too; the leader
        // is a zombie, so the group id is still ours.
        _ = Glibc.kill(-pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}

        control.withLock { c in
            c.fdsClosed = true
            for i in c.chunks.indices { Sodium.wipe(&c.chunks[i]) }
            c.chunks = []
        }
        closeStdin()
        for fd in [stdoutFD, stderrFD, wakeRead, wakeWrite] { close(fd) }

        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros Swift can't import.
        let signalled = status & 0x7F
        let termination = Termination(
            exitStatus: signalled == 0 ? (status >> 8) & 0xFF : nil,
            signal: signalled != 0 ? signalled : nil,
            killed: killed,
            stderr: Self.printable(stderrTail),
            stderrTruncated: stderrTruncated,
            elapsed: ContinuousClock.now - started)
        continuation.yield(.finished(termination))
        continuation.finish()
    }

    /// Stderr as one loggable line: invalid UTF-8 repaired, control characters escaped.
    static func printable(_ bytes: [UInt8]) -> String {
        var out = ""
        for u in String(decoding: bytes, as: UTF8.self).unicodeScalars {
            switch u.value {
            case 0x0A: out += "\\n"
            case 0x09: out += " "
            case 0..<0x20, 0x7F...0x9F: out += "?"
            default: out.unicodeScalars.append(u)
            }
        }
        return out
    }
}

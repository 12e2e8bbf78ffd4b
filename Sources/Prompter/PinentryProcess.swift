import CVaultShims
import Locking
import SodiumKit
#if canImport(Glibc)
import Glibc
#endif

/// How a dialog ended without an answer.
enum DialogFailure: Error, Equatable {
    case cancelled
    case timeout
    /// No pinentry program was found.
    case missing
    /// pinentry could not start, crashed, hung, or said something we do not
    /// understand. The detail is for the log (never holds what was typed).
    case broken(String)
}

/// One running pinentry, spoken to over a socket pair (its stdin and stdout):
/// a socket, not pipes, so that writing to one that died is an error
/// (`MSG_NOSIGNAL`), never a SIGPIPE that would end vaultd.
///
/// Used by one thread at a time; `close` may be called from any thread.
final class PinentryProcess: @unchecked Sendable {
    // @unchecked: `buffer`/`filled` are touched only by the thread running the
    // dialog; `state` (the pid and the socket's life, for `close`) is behind a lock.
    private let fd: Int32
    private struct State {
        var pid: pid_t
        var reaped = false
        /// The socket is still open (`close` may shut it down, never a reused number).
        var open = true
        /// vaultd ended the dialog itself (`close`): no answer is expected.
        var closed = false
    }
    private let state: Locked<State>
    /// Bytes read and not yet consumed. Wiped after every line: a `D` line
    /// holds the PIN.
    private var buffer = [UInt8](repeating: 0, count: 4096)
    private var filled = 0

    private init(fd: Int32, pid: pid_t) {
        self.fd = fd
        self.state = Locked(State(pid: pid))
    }

    deinit {
        buffer.withUnsafeMutableBytes { sv_wipe($0.baseAddress, UInt($0.count)) }
    }

    /// Starts `program` with `arguments` and exactly `environment`.
    static func start(program: String, arguments: [String], environment: [String: String]) throws(DialogFailure) -> PinentryProcess {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw .broken("socketpair: errno \(errno)")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec on the copies; everything else of vaultd's stays closed.
        posix_spawn_file_actions_adddup2(&actions, pair[1], STDIN_FILENO)
        posix_spawn_file_actions_adddup2(&actions, pair[1], STDOUT_FILENO)
        posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0)
        // The child starts with default signal handling (vaultd ignores some).
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD] { sigaddset(&defaults, s) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var argv: [UnsafeMutablePointer<CChar>?] = ([program] + arguments).map { strdup($0) }
        argv.append(nil)
        var envp: [UnsafeMutablePointer<CChar>?] = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") }
        envp.append(nil)
        defer {
            for p in argv { free(p) }
            for p in envp { free(p) }
        }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, program, &actions, &attributes, argv, envp)
        Glibc.close(pair[1])
        guard rc == 0 else {
            Glibc.close(pair[0])
            throw .broken("could not start \(program): error \(rc)")
        }
        return PinentryProcess(fd: pair[0], pid: pid)
    }

    /// Sends one command line.
    func send(_ line: [UInt8]) throws(DialogFailure) {
        var offset = 0
        while offset < line.count {
            let n = line.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return Glibc.send(fd, base + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw .broken("pinentry closed its input") }
            offset += n
        }
    }

    /// One reply line (without the newline) handed to `body`, then wiped.
    /// Lines longer than the buffer, silence past `deadline` (monotonic
    /// seconds) and an early end are failures.
    func readLine<R>(deadline: Double, timeoutIsFailure: DialogFailure,
                     _ body: (UnsafeRawBufferPointer) throws(DialogFailure) -> R) throws(DialogFailure) -> R {
        while true {
            if let newline = buffer[0..<filled].firstIndex(of: 0x0A) {
                defer {
                    // Move the rest forward and wipe what was consumed.
                    let rest = filled - (newline + 1)
                    let used = filled
                    buffer.withUnsafeMutableBytes { raw in
                        guard let base = raw.baseAddress else { return }
                        if rest > 0 { base.copyMemory(from: base + newline + 1, byteCount: rest) }
                        sv_wipe(base + rest, UInt(used - rest))
                    }
                    filled = rest
                }
                var end = newline
                if end > 0 && buffer[end - 1] == 0x0D { end -= 1 }
                let result = buffer.withUnsafeBytes { raw -> Result<R, DialogFailure> in
                    Result { () throws(DialogFailure) in try body(UnsafeRawBufferPointer(rebasing: raw[0..<end])) }
                }
                return try result.get()
            }
            guard filled < buffer.count else { throw .broken("pinentry sent a line longer than \(buffer.count) bytes") }
            let wait = deadline - monotonicSeconds()
            guard wait > 0 else { throw timeoutIsFailure }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, Int32(min(wait * 1000, 60_000).rounded(.up)))
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }
            let start = filled
            let n = buffer.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return recv(fd, base + start, raw.count - start, 0)
            }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard n > 0 else { throw .broken("pinentry ended without answering (it crashed or was closed)") }
            filled += n
        }
    }

    /// Ends the dialog from outside (its scan ended, its client went away,
    /// vaultd stops, a question preempts a message). A pinentry waiting in
    /// `CONFIRM` or `GETPIN` reads no `BYE` until the person answers, so it is
    /// sent SIGTERM (what ends every flavour; gpg-agent does the same), and
    /// our end of the socket is shut down so the thread running the dialog
    /// wakes at once. That thread then reaps it in `finish` (SIGKILL if it
    /// has not left within half a second).
    func close() {
        state.withLock { s in
            guard !s.reaped else { return }
            s.closed = true
            if s.open { shutdown(fd, Int32(SHUT_RDWR)) }
            kill(s.pid, SIGTERM)
        }
    }

    /// Whether `close` ended the dialog.
    var wasClosed: Bool { state.withLock { $0.closed } }

    /// Says goodbye, closes the socket and reaps the process, killing it if
    /// it does not leave within a second (half a second once `close` has
    /// asked it to go).
    func finish(polite: Bool) {
        if polite { try? send(Array("BYE\n".utf8)) }
        let (pid, closed) = state.withLock { s -> (pid_t, Bool) in
            s.open = false
            shutdown(fd, Int32(SHUT_RDWR))
            Glibc.close(fd)
            return (s.pid, s.closed)
        }
        let deadline = monotonicSeconds() + (closed ? 0.5 : 1)
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            if monotonicSeconds() > deadline {
                kill(pid, SIGKILL)
                _ = waitpid(pid, &status, 0)
                break
            }
            usleep(10_000)
        }
        state.withLock { $0.reaped = true }
    }
}

func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

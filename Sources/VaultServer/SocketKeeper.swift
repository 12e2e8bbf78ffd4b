import Locking
import Logging
import NIOCore
import VaultCore
import VaultProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Which file a path names: its device and inode, as `lstat` reads them.
struct FileIdentity: Equatable, Sendable, CustomStringConvertible {
    var device: UInt64
    var inode: UInt64

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }

    var description: String { "\(device):\(inode)" }
}

/// What is at a path now, without following a link.
enum PathState: Equatable, Sendable {
    case missing
    case socket(FileIdentity)
    /// A link, a directory, a regular file…: vaultd never removes one of these.
    case other(FileIdentity, kind: String)
    /// lstat failed for another reason (EACCES, EIO…): nothing can be said.
    case unreadable(errno: CInt)

    static func of(_ path: String) -> PathState {
        var st = stat()
        guard lstat(path, &st) == 0 else { return errno == ENOENT ? .missing : .unreadable(errno: errno) }
        switch st.st_mode & S_IFMT {
        case S_IFSOCK: return .socket(FileIdentity(st))
        case S_IFLNK: return .other(FileIdentity(st), kind: "symbolic link")
        case S_IFDIR: return .other(FileIdentity(st), kind: "directory")
        case S_IFREG: return .other(FileIdentity(st), kind: "regular file")
        default: return .other(FileIdentity(st), kind: "special file")
        }
    }

    var identity: FileIdentity? {
        switch self {
        case .socket(let id), .other(let id, _): return id
        case .missing, .unreadable: return nil
        }
    }

    /// For the log and the audit entry: never more than a kind and an inode.
    var summary: String {
        switch self {
        case .missing: return "missing"
        case .socket(let id): return "another socket (\(id))"
        case .other(let id, let kind): return "a \(kind) (\(id))"
        case .unreadable(let code): return "unreadable (errno \(code))"
        }
    }
}

/// Keeps the socket's path pointing at vaultd.
///
/// Whoever can write the socket's directory (a Flatpak app granted it
/// read-write, any process of the user) can rename `vault.sock` away, bind a
/// socket of its own at the path and relay to the real one through the new
/// name: every client that connects afterwards talks through it. The listening
/// socket itself cannot tell (its descriptor is unchanged), so about once a
/// second this looks at the path (one `lstat`, on the server's event loop) and
/// compares it with the socket file vaultd listens on. When the path is gone or
/// names another file, vaultd says so (log, audit), binds a new listener beside
/// the path and renames it onto it (replacing a socket there in one step, so no
/// client meets a missing or refusing socket), serves it with the same
/// pipeline, and closes the old one: that one is now reachable only through the name the
/// intruder chose. Connections already accepted stay open.
///
/// Not a lock on the directory: between the swap and the next check (≤ ~1 s) a
/// client can still reach the impostor, and an intruder that swaps again after
/// every take-back keeps that window open. The directory grant (`dist/flatpak`,
/// read-only) is what keeps a sandbox from swapping at all; this repairs the
/// path for everyone else and leaves a trace.
///
/// A socket from systemd (socket activation) is watched too. Its path is
/// systemd's, but a swapped one serves an impostor just the same; vaultd then
/// binds a socket of its own there (logged: systemd's socket stays renamed,
/// so `systemctl --user restart vaultd.socket` gives the path back to systemd).
final class SocketKeeper: Sendable {
    static let checkInterval = TimeAmount.seconds(1)

    let path: String
    private let logger: Logger
    private let audit: AuditLog?
    /// Serves a freshly bound listening descriptor with the server's pipeline.
    private let serve: @Sendable (CInt) -> EventLoopFuture<any Channel>
    private let closedPromise: EventLoopPromise<Void>
    private let state: Locked<State>

    private struct State {
        /// The listener clients reach at `path` (as far as vaultd knows).
        var channel: any Channel
        /// The socket file that listener is bound to; nil when it could not be read at start.
        var identity: FileIdentity?
        /// True when vaultd bound that socket itself (false: systemd's), so it is vaultd's to remove.
        var ownsPath: Bool
        var task: RepeatedTask?
        var stopped = false
        /// A take-back whose bind has not finished: no second one meanwhile.
        var binding = false
        /// What at the path was last reported and left alone (a link, a directory…), so it is said once.
        var reported: PathState?
        /// The last take-back failed: the retries every second are not logged or audited again.
        var failing = false
    }

    /// `identity`: the socket file `channel` listens on, read right after it was bound.
    init(path: String, channel: any Channel, identity: FileIdentity?, ownsPath: Bool, logger: Logger, audit: AuditLog?,
         serve: @escaping @Sendable (CInt) -> EventLoopFuture<any Channel>) {
        self.path = path
        self.logger = logger
        self.audit = audit
        self.serve = serve
        closedPromise = channel.eventLoop.makePromise(of: Void.self)
        state = Locked(State(channel: channel, identity: identity, ownsPath: ownsPath))
        watchClose(of: channel)
    }

    /// Completes once the listener has stopped: `close`, or the current listening channel closed on its own.
    var closed: EventLoopFuture<Void> { closedPromise.futureResult }

    /// Starts watching the path.
    func start() {
        let channel = state.withLock { $0.channel }
        let task = channel.eventLoop.scheduleRepeatedAsyncTask(initialDelay: Self.checkInterval, delay: Self.checkInterval) {
            [self] _ in check()
        }
        let stoppedMeanwhile = state.withLock { s in
            s.task = task
            return s.stopped
        }
        if stoppedMeanwhile { task.cancel() }
    }

    /// Stops watching and closes the listener (shutdown). Idempotent.
    func close() {
        let (channel, task) = state.withLock { s in
            s.stopped = true
            return (s.channel, s.task)
        }
        task?.cancel()
        channel.close(promise: nil)
    }

    /// Removes the socket file at the path if it is the one vaultd bound
    /// itself: never systemd's, never one somebody else put there since.
    func removeOwnSocket() {
        let (identity, owns) = state.withLock { ($0.identity, $0.ownsPath) }
        guard owns, let identity, PathState.of(path) == .socket(identity) else { return }
        unlink(path)
    }

    /// A listening channel that closes while it is still the current one ends the listener.
    private func watchClose(of channel: any Channel) {
        let id = ObjectIdentifier(channel)
        channel.closeFuture.whenComplete { [self] _ in
            let (ended, task) = state.withLock { s -> (Bool, RepeatedTask?) in
                guard ObjectIdentifier(s.channel) == id else { return (false, nil) }
                s.stopped = true
                return (true, s.task)
            }
            guard ended else { return }
            task?.cancel()
            closedPromise.succeed(())
        }
    }

    /// One look at the path; takes it back when it no longer names our socket.
    func check() -> EventLoopFuture<Void> {
        let (loop, expected, busy) = state.withLock { s in (s.channel.eventLoop, s.identity, s.stopped || s.binding) }
        guard !busy else { return loop.makeSucceededVoidFuture() }
        let now = PathState.of(path)
        switch now {
        case .socket(let id) where id == expected:
            return loop.makeSucceededVoidFuture()
        case .unreadable:
            // Cannot tell (and cannot bind either): look again next time.
            return loop.makeSucceededVoidFuture()
        case .other:
            // A link could point anywhere and a directory may hold anything:
            // neither is removed. Clients cannot reach vaultd at the path until
            // a person removes it; said once per thing found, not every second.
            let first = state.withLock { s in
                defer { s.reported = now }
                return s.reported != now
            }
            if first {
                logger.warning("the socket path was replaced by something that is not a socket; vaultd leaves it alone and keeps listening on its old socket, which clients cannot reach at this path: remove it, then vaultd takes the path back",
                               metadata: ["socket": "\(path)", "found": "\(now.summary)"])
                record(outcome: "left", found: now)
            }
            return loop.makeSucceededVoidFuture()
        case .missing, .socket:
            return takeBack(found: now, loop: loop)
        }
    }

    private func takeBack(found: PathState, loop: any EventLoop) -> EventLoopFuture<Void> {
        let (systemds, retry) = state.withLock { s in
            s.binding = true
            return (!s.ownsPath, s.failing)
        }
        if !retry {
            logger.warning(systemds
                           ? "the socket systemd made was replaced or removed: vaultd binds a socket of its own at the path (“systemctl --user restart vaultd.socket” gives the path back to systemd and restarts vaultd)"
                           : "the socket was replaced or removed: vaultd takes its path back",
                           metadata: ["socket": "\(path)", "found": "\(found.summary)"])
        }
        // lstat said socket or nothing; the new socket is renamed onto the
        // path, replacing a socket there in one step (a directory that
        // appeared meanwhile makes it fail, and it is tried again).
        let fd: CInt
        let identity: FileIdentity?
        do {
            (fd, identity) = try VaultServer.listen(on: path)
        } catch {
            return failed(found: found, reason: "\(error)", loop: loop)
        }
        return serve(fd).flatMapErrorThrowing { error in
            Glibc.close(fd)
            throw error
        }.map { [self] channel in
            let (old, stopped) = state.withLock { s -> ((any Channel)?, Bool) in
                s.binding = false
                s.reported = nil
                s.failing = false
                guard !s.stopped else { return (nil, true) }
                let old = s.channel
                s.channel = channel
                s.identity = identity
                s.ownsPath = true
                return (old, false)
            }
            if stopped {
                // Shut down while binding: the new listener goes too, with its file.
                channel.close(promise: nil)
                if let identity, PathState.of(path) == .socket(identity) { unlink(path) }
                return
            }
            watchClose(of: channel)
            // Reachable now only under the name the intruder gave it.
            old?.close(promise: nil)
            logger.warning("vaultd listens at the socket path again; connections already open are kept",
                           metadata: ["socket": "\(path)"])
            record(outcome: "taken_back", found: found)
        }.flatMapError { [self] error in
            if let identity, PathState.of(path) == .socket(identity) { unlink(path) }
            return failed(found: found, reason: "serve: \(error)", loop: loop)
        }
    }

    /// A take-back that did not work this time; the next check tries again.
    private func failed(found: PathState, reason: String, loop: any EventLoop) -> EventLoopFuture<Void> {
        let retry = state.withLock { s in
            defer {
                s.binding = false
                s.failing = true
            }
            return s.failing
        }
        guard !retry else {
            logger.debug("the socket path is still not vaultd's", metadata: ["socket": "\(path)", "reason": "\(reason)"])
            return loop.makeSucceededVoidFuture()
        }
        logger.warning("vaultd could not take the socket path back; it tries again every second",
                       metadata: ["socket": "\(path)", "reason": "\(reason)"])
        record(outcome: "failed", found: found)
        return loop.makeSucceededVoidFuture()
    }

    /// An audit entry: only the path and what was found there. Written off the
    /// event loop, which must not wait for the store.
    private func record(outcome: String, found: PathState) {
        guard let audit else { return }
        let path = self.path
        Task.detached {
            audit.record("socket_replaced", outcome: outcome,
                         detail: ["socket": .string(path), "found": .string(found.summary)])
        }
    }
}

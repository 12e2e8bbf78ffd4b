import Logging
import NIOCore
import NIOPosix
import VaultCore
import VaultProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Why the server could not start listening. Each carries its sentence.
public enum ServerStartError: Error, Sendable {
    case inUse
    case unsafePath(String)
    /// The socket's directory exists but is a link, not ours, or open to others.
    case unsafeDirectory(String, reason: String)
    case bind(String)

    public var message: LocalizedText {
        switch self {
        case .inUse: return Messages.socketInUse
        case .unsafePath: return Messages.socketPathUnsafe
        case .unsafeDirectory(let dir, _): return Messages.socketDirectoryUnsafe(dir)
        case .bind:
            return LocalizedText(
                en: "vaultd could not open its socket. Check that the runtime directory exists and is yours, then start vaultd again.",
                nb: "vaultd fikk ikke åpnet socketen sin. Sjekk at kjøretidsmappen finnes og er din, og start vaultd igjen.")
        }
    }
}

/// What one vaultd lets its clients hold open. Together they bound what a
/// misbehaving (or hostile) program of the same user can pin: a socket, one
/// partial line of up to 64 KiB, `maxInFlight` requests and `maxUnsentBytes`
/// of answers, per connection. Connection.swift enforces each.
public struct ConnectionLimits: Sendable {
    /// Seconds a connection may sit without a complete request and with
    /// nothing in flight before vaultd closes it (0 = never). A partial line
    /// dribbled byte by byte does not count as activity.
    public var idleTimeout: Int
    /// Connections open at once; the next one gets `rate_limited` and is closed.
    public var maxConnections: Int
    /// Connections one confined app (a Flatpak or Snap app; every unidentified
    /// peer counted as one) may hold of them: a quarter of the cap, at most
    /// 32, so one sandboxed app holding `watch` connections open cannot shut
    /// every other app, and the person's settings and vaultctl, out of the vault.
    public var maxPerConfinedApp: Int { min(Self.defaultMaxPerConfinedApp, max(1, maxConnections / 4)) }
    /// Requests one connection may have waiting for answers; the next gets `rate_limited`.
    public var maxInFlight: Int
    /// Answers written but not yet read by the client: past this, vaultd stops
    /// reading the connection until the client reads (half of it resumes).
    public var maxUnsentBytes: Int

    public static let defaultIdleTimeout = 300
    public static let defaultMaxConnections = 512
    public static let defaultMaxPerConfinedApp = 32
    public static let defaultMaxInFlight = 32
    public static let defaultMaxUnsentBytes = 1 << 20

    public init(idleTimeout: Int = ConnectionLimits.defaultIdleTimeout, maxConnections: Int = ConnectionLimits.defaultMaxConnections,
                maxInFlight: Int = ConnectionLimits.defaultMaxInFlight, maxUnsentBytes: Int = ConnectionLimits.defaultMaxUnsentBytes) {
        self.idleTimeout = max(0, idleTimeout)
        self.maxConnections = max(1, maxConnections)
        self.maxInFlight = max(1, maxInFlight)
        self.maxUnsentBytes = max(2, maxUnsentBytes)
    }
}

/// A started server: `close` stops accepting; `closed` completes once it has.
/// The listening socket may change underneath (SocketKeeper takes a replaced
/// socket's path back with a new one); `closed` is about the server, not one socket.
public struct Listener: Sendable {
    let keeper: SocketKeeper
    public var closed: EventLoopFuture<Void> { keeper.closed }
    /// Stops accepting, and stops watching the socket's path.
    public func close() { keeper.close() }
    /// Removes the socket file if vaultd bound it itself and it is still the
    /// one at the path: never systemd's (socket activation), never a file
    /// someone else put there.
    public func removeSocket() { keeper.removeOwnSocket() }
}

/// The Unix-socket server: one per vaultd, in a 0700 directory, socket 0600,
/// only the owning uid admitted (`SO_PEERCRED`). Every connection is served
/// by one `ConnectionHandler` (Connection.swift) in front of one `RequestHandler`.
public final class VaultServer: Sendable {
    public let socketPath: String
    let handler: RequestHandler
    let limits: ConnectionLimits
    let connections = ConnectionSet()
    let group: MultiThreadedEventLoopGroup
    let logger: Logger
    /// Where a replaced socket is recorded (SocketKeeper).
    let audit: AuditLog

    /// `openableOrigins`: the origins of the configured providers'
    /// authorization endpoints, sent with every `open_url` prompt so that the
    /// client opens a browser only there.
    public init(vault: Vault, socketPath: String, group: MultiThreadedEventLoopGroup, logger: Logger, promptTimeout: Int = 120,
                limits: ConnectionLimits = ConnectionLimits(),
                openableOrigins: @escaping @Sendable () async -> [String] = { [] },
                prompterFactory: VaultPrompterFactory? = nil) {
        self.socketPath = socketPath
        self.group = group
        self.logger = logger
        self.limits = limits
        self.audit = vault.audit
        self.handler = RequestHandler(vault: vault, serverName: "vaultd/\(SessionVaultVersion.string)",
                                      promptTimeout: Int64(promptTimeout), maxInFlight: limits.maxInFlight,
                                      openableOrigins: openableOrigins, prompterFactory: prompterFactory)
    }

    /// Closes every client connection; their open questions count as cancelled,
    /// and the `watch` listener ends.
    public func closeConnections() {
        connections.closeAll()
        handler.watchers.stop()
    }

    /// Binds the socket (or adopts the one systemd passed, `activatedFD`) and
    /// starts serving it; from then on the path is watched and taken back if
    /// someone replaces the socket (SocketKeeper).
    public func start(activatedFD: CInt? = nil) async throws(ServerStartError) -> Listener {
        let fd: CInt
        // The socket file clients reach, as opposed to the descriptor's own
        // (sockfs) inode, which fstat would give.
        var identity: FileIdentity?
        if let activatedFD {
            // systemd made the socket (SocketMode=0600, DirectoryMode=0700).
            fd = activatedFD
            if case .socket(let id) = PathState.of(socketPath) { identity = id }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        } else {
            try Self.prepare(socketPath: socketPath)
            (fd, identity) = try Self.listen(on: socketPath)
        }
        let serve = servingFunction()
        let channel: any Channel
        do {
            channel = try await serve(fd).get()
        } catch {
            close(fd)
            throw .bind("serve: \(error)")
        }
        let keeper = SocketKeeper(path: socketPath, channel: channel,
                                  identity: identity,
                                  ownsPath: activatedFD == nil, logger: logger, audit: audit, serve: serve)
        keeper.start()
        logger.info("listening", metadata: ["socket": "\(socketPath)"])
        return Listener(keeper: keeper)
    }

    /// Serves a listening descriptor: every listener of this server (the
    /// first and any that takes a replaced socket's path back) has the same
    /// options and pipeline and shares the connection limit.
    func servingFunction() -> @Sendable (CInt) -> EventLoopFuture<any Channel> {
        let handler = self.handler
        let limits = self.limits
        let connections = self.connections
        let group = self.group
        let ownUID = getuid()
        return { fd in
            ServerBootstrap(group: group)
                // Frames are small and clients mostly wait for each answer: one read
                // per wakeup saves the extra read(2) that would only return EAGAIN.
                .childChannelOption(.maxMessagesPerRead, value: 1)
                .childChannelOption(.writeBufferWaterMark,
                                    value: .init(low: limits.maxUnsentBytes / 2, high: limits.maxUnsentBytes))
                .childChannelInitializer { channel in
                    // Over the cap already: refused without reading who it is (a
                    // loop of connections over the cap costs no /proc reads).
                    if connections.count >= limits.maxConnections {
                        return channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(
                                ConnectionHandler(handler: handler, limits: limits, connections: connections, ownUID: ownUID,
                                                  peer: nil, overCapAtAccept: true))
                        }
                    }
                    // The peer is read before the first byte is: nothing is served to an unknown process.
                    return PeerCredentials.of(channel).flatMapThrowing { peer in
                        try channel.pipeline.syncOperations.addHandlers(
                            BackPressureHandler(),
                            ConnectionHandler(handler: handler, limits: limits, connections: connections, ownUID: ownUID, peer: peer))
                    }
                }
                .withBoundSocket(fd)
        }
    }

    /// A listening Unix socket at `path`, mode 0600, non-blocking, and the
    /// socket file it made (read before it is renamed onto the path).
    ///
    /// Bound and listening under a name beside the path, then renamed onto it:
    /// whatever socket was at the path is replaced in one step, so a client
    /// connecting at any moment reaches the old socket or a new one that
    /// accepts — never no file (between unlink and bind) and never a socket
    /// that refuses (between bind and listen). A take-back (SocketKeeper)
    /// would otherwise show both for a moment. Only a path so long that the
    /// staging name does not fit is bound in place, after a stale socket there
    /// is removed.
    static func listen(on path: String) throws(ServerStartError) -> (fd: CInt, identity: FileIdentity?) {
        let staging = path + "~"
        let inPlace = withAddress(staging) { _, _ in 0 } != 0
        let bindPath = inPlace ? path : staging
        // The staging name: left by a vaultd killed here, or planted (unlink never follows a link nor
        // removes a directory). In place: only a socket is removed, as the caller found it.
        if !inPlace { unlink(staging) } else if case .socket = PathState.of(path) { unlink(path) }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw .bind("socket: errno \(errno)") }
        var step = "bind"
        if withAddress(bindPath, { bind(fd, $0, $1) }) == 0 {
            step = "chmod"
            if chmod(bindPath, 0o600) == 0 {
                step = "listen"
                if Glibc.listen(fd, 256) == 0 {
                    let identity = PathState.of(bindPath).identity
                    step = "rename"
                    if inPlace || rename(staging, path) == 0 { return (fd, identity) }
                }
            }
            let code = errno
            if !inPlace { unlink(staging) }
            errno = code
        }
        let reason = "\(step): errno \(errno)"
        close(fd)
        throw .bind(reason)
    }

    /// Calls `body` with `path` as a `sockaddr_un`; -1 when the path is too long.
    static func withAddress(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> CInt) -> CInt {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return -1 }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// Creates the socket's directory (0700) or accepts an existing one only
    /// when it is a real directory of ours with mode 0700, and clears a stale
    /// socket. Without `XDG_RUNTIME_DIR` the directory is
    /// `/tmp/sessionvault-UID`, a name anyone can create first: a directory
    /// another user made, a link, or one others can enter would let them plant
    /// or watch the socket, so it is refused, never repaired. Refuses to steal
    /// the socket of a vaultd that is still answering.
    static func prepare(socketPath: String) throws(ServerStartError) {
        let dir = socketPath.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if !dir.isEmpty {
            if mkdir(dir, 0o700) != 0 && errno != EEXIST { throw .bind("cannot create \(dir): errno \(errno)") }
            // Checked after mkdir, whoever made it: mkdir never follows a link.
            var st = stat()
            guard lstat(dir, &st) == 0 else { throw .bind("cannot inspect \(dir): errno \(errno)") }
            guard (st.st_mode & S_IFMT) == S_IFDIR else { throw .unsafeDirectory(dir, reason: "not a directory (a link?)") }
            guard st.st_uid == getuid() else { throw .unsafeDirectory(dir, reason: "owned by uid \(st.st_uid)") }
            guard st.st_mode & 0o7777 == 0o700 else {
                throw .unsafeDirectory(dir, reason: "mode \(String(st.st_mode & 0o7777, radix: 8)), not 700")
            }
        }
        var st = stat()
        guard lstat(socketPath, &st) == 0 else { return }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else { throw .unsafePath("\(socketPath) exists and is not a socket") }
        guard st.st_uid == getuid() else { throw .unsafePath("\(socketPath) is owned by another user") }
        if isAnswering(socketPath) { throw .inUse }
        unlink(socketPath)
    }

    static func isAnswering(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return withAddress(path) { connect(fd, $0, $1) } == 0
    }
}

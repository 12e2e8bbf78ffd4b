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
    case bind(String)

    public var message: LocalizedText {
        switch self {
        case .inUse: return Messages.socketInUse
        case .unsafePath: return Messages.socketPathUnsafe
        case .bind:
            return LocalizedText(
                en: "vaultd could not open its socket. Check that the runtime directory exists and is yours, then start vaultd again.",
                nb: "vaultd fikk ikke åpnet socketen sin. Sjekk at kjøretidsmappen finnes og er din, og start vaultd igjen.")
        }
    }
}

/// What one vaultd lets its clients hold open. Both bound what a misbehaving
/// (or hostile) program of the same user can pin: a socket, a buffer of up to
/// one 64 KiB line, and a slot in the event loop, per connection.
public struct ConnectionLimits: Sendable {
    /// Seconds a connection may sit without a complete request and with
    /// nothing in flight before vaultd closes it (0 = never). A partial line
    /// dribbled byte by byte does not count as activity.
    public var idleTimeout: Int
    /// Connections open at once; the next one gets `rate_limited` and is closed.
    public var maxConnections: Int

    public static let defaultIdleTimeout = 300
    public static let defaultMaxConnections = 512

    public init(idleTimeout: Int = ConnectionLimits.defaultIdleTimeout, maxConnections: Int = ConnectionLimits.defaultMaxConnections) {
        self.idleTimeout = max(0, idleTimeout)
        self.maxConnections = max(1, maxConnections)
    }
}

/// The Unix-socket server: one per vaultd, in a 0700 directory, socket 0600,
/// only the owning uid admitted (`SO_PEERCRED`).
public final class VaultServer: Sendable {
    public let socketPath: String
    let router: RequestRouter
    let group: MultiThreadedEventLoopGroup
    let logger: Logger

    public init(vault: Vault, socketPath: String, group: MultiThreadedEventLoopGroup, logger: Logger, promptTimeout: Int = 120,
                limits: ConnectionLimits = ConnectionLimits()) {
        self.socketPath = socketPath
        self.group = group
        self.logger = logger
        self.router = RequestRouter(vault: vault, serverName: "vaultd/\(SessionVaultVersion.string)",
                                    ownUID: getuid(), promptTimeout: Int64(promptTimeout), limits: limits,
                                    connections: ConnectionSet())
    }

    /// Closes every client connection; their open questions count as cancelled.
    public func closeConnections() { router.connections.closeAll() }

    /// Binds the socket (or adopts the one systemd passed, `activatedFD`); the
    /// returned channel closes when the server stops.
    public func start(activatedFD: CInt? = nil) async throws(ServerStartError) -> any Channel {
        if activatedFD == nil { try Self.prepare(socketPath: socketPath) }
        let router = self.router
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            // Likewise one accept(2) per wakeup: epoll here is level-triggered, so
            // connections still waiting wake the loop again; a burst is served
            // one accept per turn instead of ending each turn on an EAGAIN.
            .serverChannelOption(.maxMessagesPerRead, value: 1)
            // Frames are small and clients mostly wait for each answer: one read
            // per wakeup saves the extra read(2) that would only return EAGAIN.
            .childChannelOption(.maxMessagesPerRead, value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ConnectionHandler(router: router))
                }
            }
        let channel: any Channel
        do {
            if let fd = activatedFD {
                // systemd made the socket (SocketMode=0600, DirectoryMode=0700).
                channel = try await bootstrap.withBoundSocket(fd).get()
            } else {
                channel = try await bootstrap.bind(unixDomainSocketPath: socketPath, cleanupExistingSocketFile: false).get()
                chmod(socketPath, 0o600)
            }
        } catch {
            throw .bind("\(error)")
        }
        logger.info("listening", metadata: ["socket": "\(socketPath)"])
        return channel
    }

    /// Makes the socket's directory 0700 and ours, and clears a stale socket.
    /// Refuses a symlink or anything owned by another user, and refuses to
    /// steal the socket of a vaultd that is still answering.
    static func prepare(socketPath: String) throws(ServerStartError) {
        let dir = socketPath.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if !dir.isEmpty {
            var st = stat()
            if lstat(dir, &st) != 0 {
                if mkdir(dir, 0o700) != 0 && errno != EEXIST { throw .bind("cannot create \(dir)") }
            } else {
                guard (st.st_mode & S_IFMT) == S_IFDIR else { throw .unsafePath("\(dir) is not a directory") }
                guard st.st_uid == getuid() else { throw .unsafePath("\(dir) is owned by another user") }
                chmod(dir, 0o700)
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
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return false }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        return rc == 0
    }
}

public enum SessionVaultVersion {
    public static let string = "0.1.0"
}

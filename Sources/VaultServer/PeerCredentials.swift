import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// Glibc's `struct ucred` needs `_GNU_SOURCE` and is not visible from Swift;
/// this has the same layout (pid, uid, gid) for `getsockopt(SO_PEERCRED)`.
struct PeerCredentials: Sendable, Equatable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0

    /// Reads the connecting process's credentials from the kernel.
    static func of(_ channel: any Channel) -> EventLoopFuture<PeerCredentials> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeFailedFuture(ChannelError.operationUnsupported)
        }
        return provider.unsafeGetSocketOption(level: .socket, name: NIOBSDSocket.Option(rawValue: SO_PEERCRED))
    }
}

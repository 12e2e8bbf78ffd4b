import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// systemd integration without libsystemd: socket activation (`LISTEN_FDS`)
/// and readiness notification (`NOTIFY_SOCKET`), both small, stable protocols.
public enum Systemd {
    /// The listening socket systemd passed us (fd 3), if we were socket-activated.
    /// The variables are removed so that children never mistake them for theirs.
    public static func activatedSocket() -> CInt? {
        defer {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        guard let pid = ProcessInfo.processInfo.environment["LISTEN_PID"].flatMap({ Int32($0) }), pid == getpid(),
              let count = ProcessInfo.processInfo.environment["LISTEN_FDS"].flatMap({ Int($0) }), count >= 1 else { return nil }
        let fd: CInt = 3
        // It must be a Unix stream socket: anything else is a misconfigured unit.
        var type: CInt = 0
        var length = socklen_t(MemoryLayout<CInt>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0, type == CInt(SOCK_STREAM.rawValue) else { return nil }
        var addr = sockaddr_un()
        var addrLength = socklen_t(MemoryLayout<sockaddr_un>.size)
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &addrLength) }
        }
        guard ok == 0, addr.sun_family == sa_family_t(AF_UNIX) else { return nil }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return fd
    }

    /// The path of a Unix socket, for logs.
    public static func socketPath(of fd: CInt) -> String? {
        var addr = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard ok == 0 else { return nil }
        return withUnsafeBytes(of: addr.sun_path) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
        }
    }

    /// Sends a state line ("READY=1", "STOPPING=1") to the service manager, when
    /// there is one. Best effort: outside systemd this does nothing.
    public static func notify(_ state: String) {
        guard let target = ProcessInfo.processInfo.environment["NOTIFY_SOCKET"], !target.isEmpty else { return }
        let fd = socket(AF_UNIX, CInt(SOCK_DGRAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        var path = Array(target.utf8)
        if path.first == UInt8(ascii: "@") { path[0] = 0 }  // an abstract socket
        guard path.count < MemoryLayout.size(ofValue: addr.sun_path) else { return }
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: path) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count + (path.first == 0 ? 0 : 1))
        let message = Array(state.utf8)
        _ = withUnsafePointer(to: &addr) { a in
            a.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, CInt(MSG_NOSIGNAL), sa, length) }
            }
        }
    }
}

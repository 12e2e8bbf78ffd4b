import CVaultShims
import Locking
#if canImport(Glibc)
import Glibc
#endif

/// How vaultd is asked to stop: SIGTERM (systemd, `kill`) or SIGINT (Ctrl-C)
/// ends the process's serving once, in order (ListenerService.run): what runs
/// until then registers what to do with `onRequest`.
///
/// The signals are caught from the moment this is made (a C handler that
/// writes to a pipe, installed before `init` returns, and a thread that reads
/// it), which vaultd does before it binds its socket: from the moment a client
/// can connect, a stop is graceful, and none is lost — a signal source
/// registered asynchronously left a window in which SIGTERM was ignored
/// (LockTests' SIGTERM right after the socket accepts).
final class Shutdown: Sendable {
    private struct State {
        var requested: String?
        var handlers: [@Sendable (String) -> Void] = []
    }
    private let state = Locked(State())

    /// Catches `signals`; if no pipe can be made they keep their default action
    /// (the process ends at once, as without this).
    init(on signals: [(number: Int32, name: String)]) {
        let fd = signals.map(\.number).withUnsafeBufferPointer { sv_catch_signals($0.baseAddress, Int32($0.count)) }
        guard fd >= 0 else { return }
        let names = Dictionary(signals.map { ($0.number, $0.name) }, uniquingKeysWith: { first, _ in first })
        runOnNewThread(named: "vaultd-signals") { [self] in
            var byte: UInt8 = 0
            while true {
                let n = read(fd, &byte, 1)
                if n < 0 && errno == EINTR { continue }
                guard n == 1 else { return }
                self.request(by: names[Int32(byte)] ?? "signal \(byte)")
            }
        }
    }

    /// Asks for the stop (a signal's handler; tests and errors may too). The
    /// first ask calls every handler once; later ones do nothing.
    func request(by reason: String) {
        let handlers = state.withLock { s -> [@Sendable (String) -> Void] in
            guard s.requested == nil else { return [] }
            s.requested = reason
            defer { s.handlers.removeAll() }
            return s.handlers
        }
        for handler in handlers { handler(reason) }
    }

    /// Calls `handler` when the stop is asked for, or now if it was already.
    func onRequest(_ handler: @escaping @Sendable (String) -> Void) {
        let already = state.withLock { s -> String? in
            if s.requested == nil { s.handlers.append(handler) }
            return s.requested
        }
        if let already { handler(already) }
    }
}

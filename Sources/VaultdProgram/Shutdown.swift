import Dispatch
import Locking
#if canImport(Glibc)
import Glibc
#endif

/// How vaultd is asked to stop: SIGTERM (systemd, `kill`) or SIGINT (Ctrl-C)
/// ends the process's serving once, in order (ListenerService.run): what runs
/// until then registers what to do with `onRequest`.
///
/// The signals' default action (ending the process at once, the vault key in
/// memory and a refresh maybe half-committed) is turned off when this is made,
/// which vaultd does before it binds its socket: from the moment a client can
/// connect, a stop is graceful.
final class Shutdown: Sendable {
    private struct State {
        var requested: String?
        var handlers: [@Sendable (String) -> Void] = []
    }
    private let state = Locked(State())
    /// The dispatch sources that read the signals; kept for the process's life.
    private let sources: SignalSources

    init(on signals: [(number: Int32, name: String)]) {
        sources = SignalSources()
        for (number, name) in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in self?.request(by: name) }
            source.resume()
            sources.keep(source)
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

/// Dispatch's signal sources are not `Sendable`; they are only kept alive
/// here, added to by `Shutdown.init` alone, before the shutdown is shared.
private final class SignalSources: @unchecked Sendable {
    private var sources: [any DispatchSourceSignal] = []
    func keep(_ source: any DispatchSourceSignal) { sources.append(source) }
}

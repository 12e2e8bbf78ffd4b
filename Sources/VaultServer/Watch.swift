import Locking
import VaultCore
import VaultProtocol

/// The `watch` op's fan-out: the connections that asked for vault events, and
/// the one listener on the vault's event feed that writes each event to them.
///
/// Idle watchers cost their socket and one small entry here: no task, timer
/// or poll per watcher. A watcher that does not read cannot grow vaultd's
/// memory: each has at most `Watchers.maxUnwritten` event lines written but
/// not yet taken by the kernel; past that, events for it are dropped and it
/// gets one `resync` line once it reads again (docs/protocol.md).
final class Watchers: Sendable {
    /// Event lines one watcher may have waiting in vaultd before the next are dropped.
    static let maxUnwritten = 64

    private struct State {
        var clients: [ObjectIdentifier: Connection] = [:]
        var listening = false
        /// The one listener; cancelled by `stop()` so that at shutdown it ends
        /// with its stream instead of staying suspended on a feed nobody will
        /// finish (LeakSanitizer saw that task and its stream leaked at exit).
        var listener: Task<Void, Never>?
        var stopped = false
    }
    private let state = Locked(State())

    var count: Int { state.withLock { $0.clients.count } }

    /// Adds `client`; the first watcher starts the one listener on `events`.
    func add(_ client: Connection, events: VaultEvents) {
        let start = state.withLock { s -> Bool in
            if s.stopped { return false }
            s.clients[ObjectIdentifier(client)] = client
            defer { s.listening = true }
            return !s.listening
        }
        guard start else { return }
        let stream = events.stream()
        let listener = Task { [weak self] in
            for await notice in stream {
                guard let self else { return }
                self.deliver(notice)
            }
        }
        state.withLock { s in
            if s.stopped { listener.cancel() } else { s.listener = listener }
        }
    }

    /// Forgets every watcher and ends the listener (at shutdown); later `add`s are ignored.
    func stop() {
        let listener = state.withLock { s -> Task<Void, Never>? in
            s.stopped = true
            s.clients.removeAll()
            defer { s.listener = nil }
            return s.listener
        }
        listener?.cancel()
    }

    func remove(_ client: Connection) {
        _ = state.withLock { $0.clients.removeValue(forKey: ObjectIdentifier(client)) }
    }

    func deliver(_ notice: VaultNotice) {
        let line = Watchers.line(notice.event)
        for client in state.withLock({ Array($0.clients.values) }) where Watchers.hears(notice, client) {
            client.deliverEvent(line)
        }
    }

    /// Whether `client` hears an event: the one place an app's view of the
    /// accounts filters events. `locked` and `unlocked` concern every app; an
    /// account's events go only to the apps allowed that account when it
    /// happened (all apps with `per_app = false`), a revoked grant only to its app.
    static func hears(_ notice: VaultNotice, _ client: Connection) -> Bool {
        guard let apps = notice.apps else { return true }
        guard let app = client.requester.app else { return false }
        return apps.contains(app.key)
    }

    /// The event line (docs/protocol.md, "Events").
    static func line(_ event: VaultEvent) -> [UInt8] {
        var o: [String: JSON] = ["event": "vault"]
        switch event {
        case .locked(let reason):
            o["kind"] = "locked"
            o["reason"] = .string(reason)
        case .unlocked:
            o["kind"] = "unlocked"
        case .sessionExpired(let account):
            o["kind"] = "session_expired"
            o["account"] = .string(account)
        case .loggedOut(let account):
            o["kind"] = "logged_out"
            o["account"] = .string(account)
        case .grantRevoked(let account, let app):
            o["kind"] = "grant_revoked"
            o["account"] = .string(account)
            o["app"] = .string(app)
        }
        return encode(o)
    }

    /// Said to a watcher whose events were dropped: read `status` again.
    static let resyncLine = encode(["event": "vault", "kind": "resync"])

    static func encode(_ o: [String: JSON]) -> [UInt8] {
        var out = JSON.object(o).serialized()
        out.append(0x0A)
        return out
    }
}

extension Connection {
    /// One connection's side of `watch`: its events wait until the answer to
    /// `watch` is out (so the answer comes first), then go straight to the link,
    /// counted until the transport has written them.
    struct Watch {
        var watching = false
        /// The answer to `watch` has been written: events go straight out.
        var answered = false
        var held: [[UInt8]] = []
        /// Event lines handed to the link and not yet written to the socket.
        var unwritten = 0
        /// Events were dropped since the last line got out: a `resync` is owed.
        var missed = false
    }

    /// Marks the connection as watching; events are held until `watchAnswered`.
    /// False if it already was.
    func startWatching() -> Bool {
        watch.withLock { w in
            if w.watching { return false }
            w.watching = true
            return true
        }
    }

    var isWatching: Bool { watch.withLock { $0.watching } }

    /// The answer to `watch` is out: the held events follow it, in order.
    /// Lines are written outside the lock (a write may complete at once and
    /// call back into it); `deliverEvent` holds its lines until this is done.
    func watchAnswered() {
        while true {
            let batch = watch.withLock { w -> [[UInt8]] in
                if w.held.isEmpty { w.answered = true }
                w.unwritten += w.held.count
                defer { w.held.removeAll() }
                return w.held
            }
            if batch.isEmpty { return }
            for line in batch { sendCounted(line) }
        }
    }

    func deliverEvent(_ line: [UInt8]) {
        let now = watch.withLock { w -> Bool in
            guard w.unwritten + w.held.count < Watchers.maxUnwritten else {
                w.missed = true
                return false
            }
            guard w.answered else {
                w.held.append(line)
                return false
            }
            w.unwritten += 1
            return true
        }
        if now { sendCounted(line) }
    }

    private func sendCounted(_ line: [UInt8]) {
        link.send(line) { [weak self] in self?.eventWritten() }
    }

    /// An event line left vaultd (or the connection closed). Once the backlog
    /// is half gone, a watcher that missed events is told to resync.
    private func eventWritten() {
        let owed = watch.withLock { w -> Bool in
            w.unwritten -= 1
            guard w.missed, w.unwritten <= Watchers.maxUnwritten / 2 else { return false }
            w.missed = false
            w.unwritten += 1
            return true
        }
        if owed { sendCounted(Watchers.resyncLine) }
    }
}

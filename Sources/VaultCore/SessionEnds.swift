import FoundationEssentials
import Locking

/// Says `session_expired` when a session's end comes, not when an app next asks
/// for it: a watching app hears it at that moment. It keeps each session's end
/// (the table tells it of every change) and one timer, set for the earliest
/// end; nothing runs while no session has a known end.
///
/// It only announces. The session stays until a release finds it ended and
/// removes it (`Sessions.forget`), which then says nothing more, so the app
/// that asks still gets `session_expired` and every watcher hears it once.
final class SessionEnds: Sendable {
    private struct State {
        /// Record id → its account and end, for every session with a known end.
        var ends: [String: (account: String, end: Int64)] = [:]
        /// Sessions whose end was announced: record id → that end. A session
        /// renewed under the same id (a new login) has a new end to announce.
        var announced: [String: Int64] = [:]
        /// When the timer fires (Unix seconds), or nil with no timer.
        var due: Int64?
        var timer: Task<Void, Never>?
    }

    /// A timer wakes at least this often, so a changed wall clock (or a
    /// suspend the monotonic clock did not count) delays an announcement by
    /// at most this much.
    static let longestSleep: Int64 = 3600

    private let state = Locked(State())
    private let events: VaultEvents
    /// The vault's clock (Unix seconds): an end is due by the same reading
    /// that the release decision uses.
    private let clock: @Sendable () -> Double

    init(events: VaultEvents, clock: @escaping @Sendable () -> Double) {
        self.events = events
        self.clock = clock
    }

    /// When a session can no longer be used without a new login: its access
    /// token's expiry when it has no refresh token; with one, the later of the
    /// two expiries once the provider said when the refresh token ends (a
    /// refresh token that ends first leaves the access token usable, and
    /// the release decision serves it until then); nil when nothing says.
    static func end(of meta: SessionMeta) -> Int64? {
        guard meta.hasRefreshToken else { return meta.accessExpiresAt }
        guard let refreshEnd = meta.refreshExpiresAt else { return nil }
        return max(refreshEnd, meta.accessExpiresAt ?? refreshEnd)
    }

    /// Session `id` was stored, renewed (`entry`) or removed (nil).
    func changed(_ id: String, _ entry: SessionTable.Entry?) {
        let end = entry.flatMap { SessionEnds.end(of: $0.meta) }
        state.withLock { s in
            s.ends[id] = entry.flatMap { e in end.map { (e.meta.account, $0) } }
            if s.announced[id] != end { s.announced[id] = nil }
        }
        announce(now: clock())
    }

    /// Every session at once: at start, and when the table is emptied.
    func replaceAll(_ entries: [String: SessionTable.Entry]) {
        state.withLock { s in
            s.ends = entries.compactMapValues { e in SessionEnds.end(of: e.meta).map { (e.meta.account, $0) } }
            s.announced = s.announced.filter { s.ends[$0.key]?.end == $0.value }
        }
        announce(now: clock())
    }

    /// Whether the end of session `id` was announced already.
    func wasAnnounced(_ id: String) -> Bool { state.withLock { $0.announced[id] != nil } }

    /// Stops the timer (its table is gone).
    func stop() {
        state.withLock { s in
            s.timer?.cancel()
            s.timer = nil
            s.due = nil
        }
    }

    /// Announces every end that has come and sets the timer for the next one.
    private func announce(now: Double) {
        let ended = state.withLock { s -> [String] in
            var ended: [String] = []
            var next: Int64?
            for (id, session) in s.ends where s.announced[id] == nil {
                if Double(session.end) <= now {
                    s.announced[id] = session.end
                    ended.append(session.account)
                } else {
                    next = min(next ?? session.end, session.end)
                }
            }
            let due = next.map { min($0, Int64(now) + SessionEnds.longestSleep) }
            guard due != s.due else { return ended }
            s.timer?.cancel()
            s.due = due
            // The timer holds this object until it fires or is cancelled (`stop`).
            s.timer = due.map { due in
                Task {
                    try? await Task.sleep(for: .seconds(Double(due) - now))
                    guard !Task.isCancelled else { return }
                    self.state.withLock { $0.due = nil }
                    self.announce(now: self.clock())
                }
            }
            return ended
        }
        for account in ended.sorted() { events.emit(.sessionExpired(account: account)) }
    }
}

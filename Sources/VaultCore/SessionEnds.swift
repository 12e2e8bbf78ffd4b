import Foundation
import Locking

/// Says `session_expired` when a session's end comes, not when an app next asks
/// for it: a watching app hears it at that moment. One timer, set for the
/// earliest end in the table and set again whenever the table changes; nothing
/// runs while no session has a known end.
///
/// It only announces. The session stays until a release finds it ended and
/// removes it (`Sessions.forget`), which then says nothing more, so the app
/// that asks still gets `session_expired` and every watcher hears it once.
final class SessionEnds: Sendable {
    private struct State {
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

    init(events: VaultEvents) {
        self.events = events
    }

    /// When a session can no longer be used without a new login: its access
    /// token's expiry when it has no refresh token, else its refresh token's
    /// expiry when the provider said; nil when nothing says.
    static func end(of meta: SessionMeta) -> Int64? {
        meta.hasRefreshToken ? meta.refreshExpiresAt : meta.accessExpiresAt
    }

    /// Announces every session in `entries` that has ended and sets the timer
    /// for the next end: at start, and when the timer fires (one pass over the
    /// table then). `again` is how the timer gets the table as it is then.
    func update(_ entries: [String: SessionTable.Entry], now: Double = Date().timeIntervalSince1970,
                again: @escaping @Sendable () -> Void) {
        let ended = state.withLock { s -> [String] in
            s.announced = s.announced.filter { entries[$0.key].flatMap { SessionEnds.end(of: $0.meta) } == $0.value }
            s.timer?.cancel()
            s.timer = nil
            s.due = nil
            var ended: [String] = []
            for (id, entry) in entries {
                if let account = SessionEnds.check(id, entry, now: now, &s, again: again) { ended.append(account) }
            }
            return ended
        }
        for account in ended.sorted() { events.emit(.sessionExpired(account: account)) }
    }

    /// One session was stored or renewed: announced at once when it has
    /// ended, else the timer is brought forward when it ends first. A removal
    /// needs nothing: a timer set for it fires, finds nothing, and is set again.
    func changed(_ id: String, _ entry: SessionTable.Entry, now: Double = Date().timeIntervalSince1970,
                 again: @escaping @Sendable () -> Void) {
        let ended = state.withLock { s -> String? in
            if let was = s.announced[id], was != SessionEnds.end(of: entry.meta) { s.announced[id] = nil }
            return SessionEnds.check(id, entry, now: now, &s, again: again)
        }
        if let ended { events.emit(.sessionExpired(account: ended)) }
    }

    /// The account of `entry` if its end has come and was not announced;
    /// otherwise the timer is set for its end when that comes first.
    private static func check(_ id: String, _ entry: SessionTable.Entry, now: Double, _ s: inout State,
                              again: @escaping @Sendable () -> Void) -> String? {
        guard s.announced[id] == nil, let end = SessionEnds.end(of: entry.meta) else { return nil }
        if Double(end) <= now {
            s.announced[id] = end
            return entry.meta.account
        }
        let due = min(end, Int64(now) + SessionEnds.longestSleep)
        guard s.due.map({ due < $0 }) ?? true else { return nil }
        s.timer?.cancel()
        s.due = due
        s.timer = Task {
            try? await Task.sleep(for: .seconds(Double(due) - now))
            guard !Task.isCancelled else { return }
            again()
        }
        return nil
    }

    /// Whether the end of session `id` was announced already.
    func wasAnnounced(_ id: String) -> Bool { state.withLock { $0.announced[id] != nil } }

}

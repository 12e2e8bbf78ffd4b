import Locking

/// Something an app may want to hear without asking: the `watch` op's events
/// (docs/protocol.md). The vault says what happened; who hears it is the
/// server's business.
public enum VaultEvent: Sendable, Equatable {
    /// The vault key was wiped. `reason` is the audit log's word for why
    /// (`request`, `idle`, `max_unlocked`, `screen_locked`, `sleep`, `session_ended`, `shutdown`).
    case locked(reason: String)
    /// The vault key is in memory again.
    case unlocked
    /// A session ended by itself: its tokens ran out or the provider refused them.
    case sessionExpired(account: String)
    /// A session was removed by a logout (or a reset).
    case loggedOut(account: String)
    /// An app's grant for an account was taken back; only that app's
    /// connections hear it. `app` is the app's identity, `AppIdentity.key`.
    case grantRevoked(account: String, app: String)

    /// The account an event is about; nil for the vault-wide `locked` and `unlocked`.
    public var account: String? {
        switch self {
        case .locked, .unlocked: return nil
        case .sessionExpired(let a), .loggedOut(let a), .grantRevoked(let a, _): return a
        }
    }
}

/// An event and the apps that may hear it: the grant keys (`AppIdentity.key`)
/// of the apps allowed its account when it happened; nil when any app may
/// (a vault-wide event, or `per_app = false`). Stamped when the event is
/// emitted, so a logout's event still reaches the apps its grants named
/// after the logout has dropped them.
public struct VaultNotice: Sendable, Equatable {
    public let event: VaultEvent
    public let apps: Set<String>?
}

/// Where the vault publishes its events. Any number of listeners, each an
/// `AsyncStream` with a bounded buffer (the newest kept), so a listener that
/// stops reading costs at most that buffer. Emitting never blocks and never
/// waits for a listener. Nothing runs while nobody emits: no timers, no polling.
public final class VaultEvents: Sendable {
    /// How many events one listener may have unread before the oldest are dropped.
    public static let listenerBuffer = 1024

    private struct State {
        var next = 0
        var listeners: [Int: AsyncStream<VaultNotice>.Continuation] = [:]
        /// Account → the apps allowed it; nil while grants are not checked.
        var audience: [String: Set<String>]?
    }
    private let state = Locked(State())

    public init() {}

    /// A new listener: every event emitted from now on, until the stream is dropped.
    public func stream() -> AsyncStream<VaultNotice> {
        let (stream, continuation) = AsyncStream<VaultNotice>.makeStream(bufferingPolicy: .bufferingNewest(VaultEvents.listenerBuffer))
        let id = state.withLock { s in
            s.next += 1
            s.listeners[s.next] = continuation
            return s.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.listeners.removeValue(forKey: id) }
        }
        return stream
    }

    /// Who may hear events about each account from now on (the vault calls
    /// this whenever its grants change); nil: every app.
    public func setAudience(_ audience: [String: Set<String>]?) {
        state.withLock { $0.audience = audience }
    }

    public func emit(_ event: VaultEvent) {
        let (listeners, apps) = state.withLock { s -> ([AsyncStream<VaultNotice>.Continuation], Set<String>?) in
            let apps: Set<String>? = switch event {
            case .locked, .unlocked: nil
            case .grantRevoked(_, let app): [app]
            case .sessionExpired(let account), .loggedOut(let account): s.audience.map { $0[account] ?? [] }
            }
            return (Array(s.listeners.values), apps)
        }
        // Yielded outside the lock: a termination handler takes the same lock.
        let notice = VaultNotice(event: event, apps: apps)
        for c in listeners { c.yield(notice) }
    }
}

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
    /// An app's grant for an account was taken back; only that app's connections hear it.
    case grantRevoked(account: String, app: String)

    /// The account an event is about; nil for the vault-wide `locked` and `unlocked`.
    public var account: String? {
        switch self {
        case .locked, .unlocked: return nil
        case .sessionExpired(let a), .loggedOut(let a), .grantRevoked(let a, _): return a
        }
    }
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
        var listeners: [Int: AsyncStream<VaultEvent>.Continuation] = [:]
    }
    private let state = Locked(State())

    public init() {}

    /// A new listener: every event emitted from now on, until the stream is dropped.
    public func stream() -> AsyncStream<VaultEvent> {
        let (stream, continuation) = AsyncStream<VaultEvent>.makeStream(bufferingPolicy: .bufferingNewest(VaultEvents.listenerBuffer))
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

    public func emit(_ event: VaultEvent) {
        // Yielded outside the lock: a termination handler takes the same lock.
        for c in state.withLock({ Array($0.listeners.values) }) { c.yield(event) }
    }
}

import Locking

/// How often a confined app (sandboxed or unidentified: `Requester.confinedKey`)
/// may do what costs the person or the machine something, in one table; the
/// person's own tools (the settings app, vaultctl) are never counted. Each
/// kind keeps its own count per app; past it the app hears `rate_limited` with
/// the wait (`Vault.pace`). Taken from any thread: the audit's reads are
/// answered off the actor.
final class ConfinedPace: Sendable {
    enum Kind {
        /// A durable change (`import`, `context`): each is a commit, so an app in
        /// a loop is slowed down; replacing its own account on every token
        /// refresh fits easily.
        case write
        /// Locking the open vault: every such lock costs the person an unlock.
        case lockOpenVault
        /// A check of the whole audit chain (seconds of CPU for a long log).
        case auditCheck
        /// A page of the audit log, read under the store's one lock.
        case auditRead

        /// How many in how many seconds.
        var limit: (count: Int, window: Double) {
            switch self {
            case .write: (ImportCheck.confinedWritesPerMinute, 60)
            case .lockOpenVault: (1, 600)
            case .auditCheck: (1, 60)
            case .auditRead: (60, 60)
            }
        }
    }

    private let writes = ConfinedPace.limiter(.write)
    private let locks = ConfinedPace.limiter(.lockOpenVault)
    private let auditChecks = ConfinedPace.limiter(.auditCheck)
    private let auditReads = ConfinedPace.limiter(.auditRead)

    private static func limiter(_ kind: Kind) -> Locked<LoginRateLimiter> {
        Locked(LoginRateLimiter(limit: kind.limit.count, window: kind.limit.window))
    }

    /// Counts one `kind` for the app `key`, or returns the seconds it must wait.
    func admit(_ kind: Kind, _ key: String, now: Double) -> Int? {
        let limiter = switch kind {
        case .write: writes
        case .lockOpenVault: locks
        case .auditCheck: auditChecks
        case .auditRead: auditReads
        }
        return limiter.withLock { $0.admit(key, now: now) }
    }
}

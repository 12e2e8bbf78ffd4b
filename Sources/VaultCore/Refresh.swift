import FoundationEssentials
import Locking
import VaultFactor
import VaultProtocol
import VaultStore

/// A refresh whose rotated refresh token the store would not take (disk full,
/// database busy). The provider may already refuse the old refresh token, so
/// the new one must not be lost: the row is sealed (under the vault key, or a
/// record key in secure memory, so it waits as ciphertext and can be saved
/// while the vault is locked), the
/// session table serves it (the new access token is released, the next
/// refresh sends the new refresh token), and it is saved again until the
/// store takes it.
struct UnsavedRotation {
    let sealed: Sessions.Sealed
    /// The refresh's audit entry, written in the same commit as the row.
    let audit: AuditLog.Entry
}

/// What a refresh's answer makes of a session, decided from the session as
/// the table holds it now and the provider's answer: a plain value, settled
/// by `Vault.settleRefresh` (which stores, forgets or serves as it says).
enum RefreshVerdict {
    /// Renewed: store this.
    case renewed(Renewal)
    /// The provider said the grant is dead (`invalid_grant`, a revocation):
    /// the session ends. Only this ends one.
    case ended(VaultFailure)
    /// The provider is down or slow, and the access token still works for more
    /// than a few seconds: it is served.
    case served(ReleasedSession)
    /// Failed, with no access token worth serving.
    case failed(VaultFailure)

    /// `meta`: the session's metadata as the table holds it now; `secret`
    /// and `refreshToken`: what the refresh was decided from and sent.
    init(_ answer: Result<TokenGrant, VaultFailure>, meta: SessionMeta, secret: SessionSecret, refreshToken: String, now: Int64) {
        switch answer {
        case .failure(let error):
            if error.code == .sessionExpired {
                self = .ended(error)
            } else if let token = secret.accessToken, let exp = meta.accessExpiresAt, exp > now + 5 {
                self = .served(ReleasedSession(accessToken: token, expiresAt: exp, meta: meta))
            } else {
                self = .failed(error)
            }
        case .success(let grant):
            var meta = meta
            meta.accessExpiresAt = grant.accessExpiresAt
            if let r = grant.refreshExpiresAt { meta.refreshExpiresAt = r }
            self = .renewed(Renewal(meta: meta, accessToken: grant.accessToken, refreshToken: grant.refreshToken ?? refreshToken,
                                    idToken: grant.idToken ?? secret.idToken,
                                    rotated: grant.refreshToken != nil && grant.refreshToken != refreshToken))
        }
    }

    /// A session renewed by a refresh: the rotated refresh token, or the one
    /// sent kept; the ID token likewise.
    struct Renewal {
        var meta: SessionMeta
        var accessToken: String
        var refreshToken: String
        var idToken: String?
        /// The provider gave a new refresh token.
        var rotated: Bool
        var secret: SessionSecret { SessionSecret(accessToken: accessToken, refreshToken: refreshToken, idToken: idToken) }
    }
}

struct RefreshHold {
    var unsaved: [String: UnsavedRotation] = [:]
    /// Saves them again with a growing pause while any are held.
    var retry: Task<Void, Never>?
}

/// The refreshes running, one per session, behind a lock of their own rather
/// than the actor: a request that finds its session due joins the running
/// refresh, or starts it, from the thread it runs on.
final class RefreshRegistry: Sendable {
    typealias Running = Task<Result<ReleasedSession, VaultFailure>, Never>
    private struct State {
        var running: [String: (serial: UInt64, task: Running)] = [:]
        var serial: UInt64 = 0
        /// When each session's last refresh started (`refreshedWithin`).
        var started: [String: Double] = [:]
        /// Shutdown has begun: no new refresh starts (one started now could be
        /// cut off after the provider rotated the token).
        var stopping = false
    }
    private let state = Locked(State())

    enum Joined {
        case running(Running)
        /// The session's record is not the one decided from: decide again.
        case changed
        case stopping
    }

    /// The refresh of `id` running now, or one `start` makes (given the serial
    /// it ends with) — if `current()` says the record decided from is still
    /// the table's. Checked under this lock, and a refresh leaves the registry
    /// only after its outcome is in the table, so a request decided before a
    /// refresh ended either joins it or sees the new record: the old refresh
    /// token is never sent twice.
    func join(_ id: String, at now: Double, current: () -> Bool, start: (UInt64) -> Running) -> Joined {
        state.withLock { s in
            if let running = s.running[id] { return .running(running.task) }
            if s.stopping { return .stopping }
            guard current() else { return .changed }
            s.serial += 1
            let task = start(s.serial)
            s.running[id] = (s.serial, task)
            // Sessions come and go with logins: past a few hundred, those not refreshed lately go.
            if s.started.count > Self.startsKept { s.started = s.started.filter { now - $0.value < 3_600 } }
            s.started[id] = now
            return .running(task)
        }
    }

    static let startsKept = 256

    /// Whether a refresh of `id` started less than `seconds` ago and has
    /// ended (one running now is joined, so its token is what the asker gets).
    func refreshedWithin(_ seconds: Double, id: String, now: Double) -> Bool {
        state.withLock { s in s.running[id] == nil && s.started[id].map { now - $0 < seconds } ?? false }
    }

    /// Called by the refresh itself once its outcome is in the table.
    func ended(_ id: String, serial: UInt64) {
        state.withLock { s in
            if s.running[id]?.serial == serial { s.running[id] = nil }
        }
    }

    /// Starts no more refreshes.
    func stop() { state.withLock { $0.stopping = true } }

    var runningNow: [Running] { state.withLock { $0.running.values.map(\.task) } }
}

/// Keeping sessions fresh: silent refresh before the access token expires,
/// single-flight per session, and the rotated refresh token stored durably
/// before anyone sees the new access token (or, if the store refuses it, held
/// in memory and saved again: `UnsavedRotation`).
extension Vault {
    /// Refreshes a session the release decision found too close to its end.
    /// A refresh already running for it answers this request too: 100 apps
    /// waking at once wait for one token call, which starts at the first of
    /// them (`releaseIfReady` starts it on the thread that read the request).
    /// Nil: the session's record changed since the decision (a refresh ended
    /// meanwhile): decide again.
    nonisolated func refresh(_ r: ReleaseStep.Refreshing) async throws(VaultFailure) -> ReleasedSession? {
        switch joinRefresh(r) {
        case .changed:
            return nil
        case .stopping:
            if r.stillValid, let token = r.secret.accessToken {
                return ReleasedSession(accessToken: token, expiresAt: r.meta.accessExpiresAt, meta: r.meta)
            }
            throw VaultFailure(.cancelled, message: Messages.refreshInterrupted(provider: r.provider.displayName))
        case .running(let task):
            return try await task.value.get()
        }
    }

    /// Joins the refresh of `r`'s session, or starts it: detached, so it
    /// runs now and not behind the requests queued for the executor.
    nonisolated func joinRefresh(_ r: ReleaseStep.Refreshing) -> RefreshRegistry.Joined {
        refreshes.join(r.id, at: now(), current: { table.entry(r.id)?.row == r.row }) { serial in
            Task.detached(priority: .high) {
                let result = await self.performRefresh(r)
                self.refreshes.ended(r.id, serial: serial)
                return result
            }
        }
    }

    /// The token call off the actor, then its outcome settled on it.
    nonisolated func performRefresh(_ r: ReleaseStep.Refreshing) async -> Result<ReleasedSession, VaultFailure> {
        let outcome: Result<TokenGrant, VaultFailure>
        do {
            outcome = .success(try await r.provider.refresh(refreshToken: r.refreshToken))
        } catch {
            outcome = .failure(error)
        }
        return await settleRefresh(id: r.id, provider: r.provider, refreshToken: r.refreshToken, secret: r.secret,
                                   outcome: outcome)
    }

    /// A refresh's answer settled as `RefreshVerdict` says; the failure audited first.
    func settleRefresh(id: String, provider: any IdentityProvider, refreshToken: String, secret: SessionSecret,
                       outcome: Result<TokenGrant, VaultFailure>) -> Result<ReleasedSession, VaultFailure> {
        if case .failure(let error) = outcome { audit.record("refresh", factor: provider.id, outcome: error.code.rawValue) }
        guard let entry = table.entry(id) else { return .failure(VaultFailure(.noSession)) }
        let renewal: RefreshVerdict.Renewal
        switch RefreshVerdict(outcome, meta: entry.meta, secret: secret, refreshToken: refreshToken, now: Int64(now())) {
        case .ended(let error):
            sessions.forget(id: id, reason: "refresh_rejected")
            return .failure(error)
        case .served(let released):
            return .success(released)
        case .failed(let error):
            return .failure(error)
        case .renewed(let r):
            renewal = r
        }
        let sealed: Sessions.Sealed
        do {
            sealed = try sessions.seal(id: id, meta: renewal.meta, secret: renewal.secret, tokenForHash: renewal.refreshToken,
                                       locked: policy.lockedFailure())
        } catch {
            return .failure(error)
        }
        // The audit entry rides in the same commit: every waiting app is held
        // until it returns, and a second fsync doubled that wait.
        let audited = audit.entry("refresh", factor: provider.id, outcome: "ok",
                                  detail: ["rotated": .bool(renewal.rotated)])
        do {
            // Durable first: if vaultd dies after this line the new refresh token
            // is what the store holds, which is what a rotating provider accepts.
            try sessions.save(id: id, sealed: sealed, auditing: audited)
            sessions.hold.unsaved[id] = nil   // an older held row is superseded
        } catch {
            hold(UnsavedRotation(sealed: sealed, audit: audited), id: id)
        }
        return .success(ReleasedSession(accessToken: renewal.accessToken, expiresAt: renewal.meta.accessExpiresAt, meta: sealed.meta))
    }

    /// Keeps a rotation the store refused: the table serves it from now on,
    /// and a retry task saves it as soon as the store takes it.
    private func hold(_ rotation: UnsavedRotation, id: String) {
        guard sessions.keep(rotation, id: id) else { return }
        sessions.hold.retry = Task {
            var pause = Duration.milliseconds(250)
            repeat {
                try? await Task.sleep(for: pause)
                pause = min(pause * 2, .seconds(10))
            } while self.sessions.saveHeld() > 0
        }
    }

    /// For SIGTERM: starts no more refreshes, waits until none is in flight
    /// (a provider may have rotated the refresh token already, and only this
    /// process has the new one), then saves held rotations, all within
    /// `bound`. Returns whether everything was saved; after the bound vaultd
    /// stops anyway.
    public func settleRefreshes(within bound: Duration) async -> Bool {
        let deadline = ContinuousClock.now + bound
        refreshes.stop()
        var settled: Set<RefreshRegistry.Running> = []
        while let task = refreshes.runningNow.first(where: { !settled.contains($0) }) {
            guard await task.ends(before: deadline) else {
                logger.warning("a refresh was still running when the shutdown bound ran out; vaultd stops without it")
                return false
            }
            settled.insert(task)
        }
        while sessions.saveHeld() > 0 {
            guard ContinuousClock.now + .milliseconds(100) < deadline else {
                logger.error("the store did not take a rotated refresh token before shutdown; that session may need a new login")
                return false
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return true
    }
}

extension Task where Failure == Never {
    /// Whether the task ended before `deadline` (it is not cancelled either way).
    func ends(before deadline: ContinuousClock.Instant) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let pending = Locked<CheckedContinuation<Bool, Never>?>(continuation)
            let finish: @Sendable (Bool) -> Void = { ended in
                pending.withLock { c in
                    defer { c = nil }
                    return c
                }?.resume(returning: ended)
            }
            Task<Void, Never>.detached {
                _ = await self.value
                finish(true)
            }
            Task<Void, Never>.detached {
                try? await Task<Never, Never>.sleep(until: deadline, clock: .continuous)
                finish(false)
            }
        }
    }
}

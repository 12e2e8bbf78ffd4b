import FoundationEssentials
import Locking
import VaultFactor
import VaultProtocol
import VaultStore

/// What a release needs before its token can go, as decided by
/// `Vault.decideRelease`: the one function that decides every release.
enum ReleaseStep {
    /// Hand it over. `noteUse`: the app's grant whose last use the actor must
    /// note (more than `AppGrants.lastUseResolution` ago, or never).
    case release(ReleasedSession, noteUse: AppIdentity?)
    /// The app holds no grant for the account: ask the person (or refuse).
    case checkGrant(SessionMeta)
    /// The vault key is out of memory.
    case unlock
    /// The vault key is in, but this session was stored while it was away and
    /// its record key was wiped by a lock since: seal it under the vault key.
    case reseal
    /// The access token is too close to its end: refresh it at the provider.
    case refresh(Refreshing)
    /// Expired, with no refresh token that works: the session has ended.
    case ended(id: String)

    struct Refreshing {
        let id: String
        let secret: SessionSecret
        let refreshToken: String
        let provider: any IdentityProvider
        /// The access token still works for a few seconds: served if the refresh cannot run.
        let stillValid: Bool
        let meta: SessionMeta
        /// The record it was decided from: a refresh starts only while the table still holds it.
        let row: SessionRow
    }
}

/// Releasing a session to an app (docs/architecture.md, "One `session`
/// request"). `decideRelease` reads the session table under its one lock and
/// says what is needed; a session in memory, fresh, and granted to the asking
/// app is handed over at once (`releaseIfReady`, on the thread that read the
/// request: no hop to the actor). Anything else is a step the actor takes in
/// `release`, deciding again after each, so one function decides every release.
extension Vault {
    /// Refresh this long before the access token expires, so an app never gets
    /// a token that dies in its hands.
    static let refreshWindow: Int64 = 60
    /// A confined app's `minValid` starts at most one refresh of a session
    /// this often (`decideRelease`).
    static let confinedForcedRefreshEvery: Double = 60

    /// The one release decision. `grantSettled`: the actor asked about (or
    /// refused) the grant already in this request. Throws `no_session` (and
    /// "say which account") as the table's `pick` does.
    nonisolated func decideRelease(account: String?, minValid: Int64, requester: Requester,
                                   grantSettled: Bool) throws(VaultFailure) -> ReleaseStep {
        let view = try table.releaseView(account: account, requester: requester)
        let meta = view.entry.meta
        let nowS = Int64(now())
        // Whose session it may be is settled first: a denied app never causes a PIN dialog.
        var noteUse: AppIdentity?
        switch view.grant {
        case .unchecked: break
        case .missing:
            if !grantSettled { return .checkGrant(meta) }
        case .granted(let app, let lastUse):
            if nowS - lastUse >= AppGrants.lastUseResolution { noteUse = app }
        }
        // A session whose end has come (SessionEnds, read from its metadata)
        // is ended before any unlock: nobody scans a finger to hear that.
        if let end = SessionEnds.end(of: meta), end <= nowS { return .ended(id: view.id) }
        guard let key = view.key else { return view.vaultKeyIn ? .reseal : .unlock }
        let secret = try Sessions.openSecret(id: view.id, entry: view.entry, key: key, logger: logger)
        let expiresIn = meta.accessExpiresAt.map { $0 - nowS }
        // `minValid` widens the refresh window for this call. A token whose
        // expiry is unknown counts as fresh (there is nothing to compare).
        // A sandboxed app's widens it only if the session was not refreshed
        // in the last minute: one asking in a loop for more than the provider
        // gives would have vaultd call the provider in a loop (and a provider
        // that throttles the organization's client throttles every member);
        // a refresh so soon after the last could not make the token last much
        // longer. The person's own tools keep oidc-agent's rule.
        let forcing = !requester.isConfined
            || !refreshes.refreshedWithin(Vault.confinedForcedRefreshEvery, id: view.id, now: now())
        let window = max(Vault.refreshWindow, forcing ? minValid : 0)
        let release = secret.accessToken.map {
            ReleaseStep.release(ReleasedSession(accessToken: $0, expiresAt: meta.accessExpiresAt, meta: meta), noteUse: noteUse)
        }
        if let release, expiresIn.map({ $0 > window }) ?? true { return release }
        let stillValid = secret.accessToken != nil && (expiresIn ?? 0) > 5
        // A refresh token past the end the provider gave it is not tried (the
        // answer would be invalid_grant): the session lasts as long as its
        // access token, as SessionEnds announces.
        let refreshUsable = meta.refreshExpiresAt.map { $0 > nowS } ?? true
        guard let refreshToken = secret.refreshToken, refreshUsable, let provider = providers.provider(for: meta) else {
            // No way to renew (Vipps issues no refresh tokens): served while it works, then ended.
            if stillValid, let release { return release }
            return .ended(id: view.id)
        }
        return .refresh(ReleaseStep.Refreshing(id: view.id, secret: secret, refreshToken: refreshToken,
                                               provider: provider, stillValid: stillValid, meta: meta, row: view.entry.row))
    }

    /// The release a request gets without waiting for anything: nil when the
    /// decision needs a step (`release` takes it) or fails (`release` says
    /// why, in the same words). Called by the server on the thread that read
    /// the request. A session due for a refresh has its token call started
    /// here and now, before the request's task is even made: a hundred apps
    /// waking at once start it at the first one's read.
    public nonisolated func releaseIfReady(account: String?, minValid: Int64, requester: Requester,
                                           interactive: Bool) -> ReleasedSession? {
        // The offer to set a factor up after a login is the actor's to make.
        if interactive, offerPending.withLock({ $0 }) { return nil }
        switch try? decideRelease(account: account, minValid: minValid, requester: requester, grantSettled: false) {
        case .release(let released, noteUse: nil)?:
            served(released, requester: requester)
            return released
        case .refresh(let due)?:
            _ = joinRefresh(due)
            return nil
        default:
            return nil
        }
    }

    /// Releases a session to an app, taking each step the decision asks for
    /// (asking about the grant, unlocking, refreshing) and deciding again after
    /// it: the state may have changed while the person was asked. Never returns
    /// the refresh token. `minValid` (seconds): an access token that expires
    /// sooner is refreshed first (like oidc-agent's `min_valid_period`), so a
    /// caller can ask for a token that outlives its job.
    ///
    /// Not on the actor: only the steps that change its state go there (a
    /// grant asked about, an unlock, a reseal, an ended session). A refresh is
    /// joined or started through the registry from whatever thread runs this,
    /// so a hundred apps waking on an expired token wait for one token call
    /// without a hop to the actor each, and the call starts at the first one.
    public nonisolated func release(account: String?, minValid: Int64 = 0,
                                    conversation: any ClientConversation) async throws(VaultFailure) -> ReleasedSession {
        let requester = conversation.requester
        // No account named: the only one the app may see (a sandboxed app is
        // never told the names of accounts it is not granted). Pinned once, so
        // a session appearing meanwhile cannot change which one is meant.
        var account = account
        if account == nil { account = try table.releaseView(account: nil, requester: requester).entry.meta.account }
        var grantSettled = false
        var unlockTried = false
        var unlockFailure: VaultFailure?
        var resealed = false
        while true {
            switch try decideRelease(account: account, minValid: minValid, requester: requester, grantSettled: grantSettled) {
            case .release(let released, let noteUse):
                if let noteUse { await noteGrantUse(noteUse, account: released.meta.account) }
                return await handOver(released, conversation)
            case .checkGrant(let meta):
                try await checkGrant(account: meta.account, meta: meta, conversation: conversation)
                grantSettled = true
            case .unlock:
                if unlockTried {
                    if let unlockFailure { throw unlockFailure }
                    throw await lockedFailure()
                }
                unlockTried = true
                do {
                    try await ensureUnlocked(conversation, preferred: nil)
                } catch {
                    // A login during the unlock may have brought this account a
                    // new session of its own, while the vault key waits for the
                    // PIN: the next decision sees it, or fails with this.
                    unlockFailure = error
                }
            case .reseal:
                guard !resealed, await resealWaiting() else { throw await lockedFailure() }
                resealed = true
            case .ended(let id):
                await forget(id, reason: "expired")
                throw VaultFailure(.sessionExpired)
            case .refresh(let refreshing):
                // The token a refresh brings is returned even if the provider
                // gave it a shorter life than `minValid`: refreshing again
                // could not make it longer. Nil: the session changed since
                // the decision (a refresh ended meanwhile): decide again.
                if let refreshed = try await refresh(refreshing) { return await handOver(refreshed, conversation) }
            }
        }
    }

    /// The end of every release: noted as served, then the offer to set a
    /// factor up again, if one is pending (the actor's to make).
    private nonisolated func handOver(_ released: ReleasedSession, _ conversation: any ClientConversation) async -> ReleasedSession {
        served(released, requester: conversation.requester)
        if offerPending.withLock({ $0 }) { await offerPendingReenrollment(conversation) }
        return released
    }

    /// The release's steps that change the actor's state.
    private func noteGrantUse(_ app: AppIdentity, account: String) {
        grants.used(app, account: account, now: Int64(now()))
    }

    /// What a client is told when the vault stays locked.
    func lockedFailure() -> VaultFailure { policy.lockedFailure() }

    /// Seals the sessions stored while the vault key was away under it; false while it is out.
    private func resealWaiting() -> Bool {
        guard let vk = vaultKey else { return false }
        sessions.resealWaiting(vk)
        return true
    }

    private func forget(_ id: String, reason: String) { sessions.forget(id: id, reason: reason) }

    /// A release went out: the idle timer starts again (only a request that
    /// was served restarts it: an app asking for what it is refused must not
    /// keep the vault open), and it is audited.
    nonisolated func served(_ released: ReleasedSession, requester: Requester) {
        table.touch(now())
        auditRelease(released, requester: requester)
    }

    /// Records a release (with the peer's pid, executable and app identity),
    /// at most once a minute per process and account, its write on a task:
    /// the audit write must never slow the release, and an app asking a
    /// thousand times a second must not flood the log. A new process (each
    /// `vaultctl token`) is recorded, up to the log's cap a minute
    /// (`AuditRepeats.maxPerWindow`, shared with refusals); past it, releases
    /// are counted and the count written when the minute ends, so a granted
    /// app that asks from a new process each time cannot fill the disk. Every
    /// release is audited here, and only here: the `session` op's, fast or
    /// slow, and the `login` op's.
    nonisolated func auditRelease(_ released: ReleasedSession, requester peer: Requester) {
        guard peer.trust != .vaultd,
              releaseAudit.shouldRecord(pid: peer.pid, account: released.meta.account, now: now()) else { return }
        audit.recordSoon(AuditLog.releaseEvent, detail: AppIdentity.auditDetail(peer.app, account: released.meta.account),
                         requester: peer)
    }
}

/// At most one `release` audit entry a minute per process and account.
final class ReleaseAuditLimiter: Sendable {
    private struct Key: Hashable {
        var pid: Int32
        var account: String
    }
    private let last = Locked<[Key: Double]>([:])
    static let keysKept = 10_000
    func shouldRecord(pid: Int32, account: String, now: Double) -> Bool {
        last.withLock { seen in
            let key = Key(pid: pid, account: account)
            if let t = seen[key], now - t < 60 { return false }
            // A process per request fills this fast: swept once past 10,000,
            // and emptied if the sweep leaves it as full (a few entries more
            // then, which the log's cap a minute counts), so no request pays
            // for a sweep of its own.
            if seen.count > Self.keysKept {
                seen = seen.filter { now - $0.value < 60 }
                if seen.count > Self.keysKept / 2 { seen.removeAll(keepingCapacity: true) }
            }
            seen[key] = now
            return true
        }
    }
}

import FoundationEssentials
import Locking
import Logging
import SecurityChip
import VaultFactor
import VaultProtocol
import VaultStore

/// The broker. Owns the lock state (the vault key, only in secure memory while
/// unlocked), the keyslots, the unlock policy and the release of sessions.
/// Everything a client can ask goes through here; the socket server only
/// translates frames.
public actor Vault {
    let store: VaultStore
    let deviceKey: SecureBytes
    public nonisolated let audit: AuditLog
    let factors: [FactorID: any UnlockFactor]
    /// Registered factors in unlock-policy order.
    let order: [FactorID]
    let config: VaultConfig
    let logger: Logger
    /// Identity providers for login, refresh and revocation.
    let providers: any IdentityProviderDirectory
    /// The member registry: reviews logins, adds organization and role claims.
    let members: any MemberDirectory
    var rateLimiter = LoginRateLimiter()
    /// What a confined app may do how often: durable writes, locking the open
    /// vault, the audit's checks and pages (ConfinedPace.swift, `pace`).
    nonisolated let confinedPace = ConfinedPace()
    /// One refresh per session at a time; everyone else awaits the same task (Refresh.swift).
    nonisolated let refreshes = RefreshRegistry()
    /// The session records, sealed and opened, and the rotations the store
    /// refused (Sessions.swift).
    var sessions: Sessions
    /// Set by a login; the next interactive hand-over offers factor enrollment
    /// once. Behind a lock: the release decided off the actor reads it.
    nonisolated let offerPending = Locked(false)
    var enrollmentOfferPending: Bool {
        get { offerPending.withLock { $0 } }
        set { offerPending.withLock { $0 = newValue } }
    }
    /// Release audit entries: at most one a minute per process and account (Release.swift).
    nonisolated let releaseAudit = ReleaseAuditLimiter()
    /// The offers to set a factor up after a login: what was declined, what
    /// failed before a fallback login, this run's strong login (EnrollmentOffers.swift).
    var offers: EnrollmentOffers
    /// When the person last said no to an app using an account: that app is
    /// not asked again about it for `GrantCheck.askAgainAfter` (Vault+Apps.swift).
    var denials = GrantCheck.Denials()
    /// The unlock dialogs the person closed, per sandboxed app that raised
    /// them: one that raises it again and again is held back (ClosedDialogs.swift).
    var closedDialogs = ClosedDialogs()

    /// The keyslot rows, in the store and in memory (Keyslots.swift).
    var keyslots: Keyslots
    /// The chip said no to the vault's wrap (cleared, replaced, unreachable):
    /// logins still give working sessions and offer to start over.
    var chipRefusal: ChipError?
    /// Whether the chip's lockout binds anyone, asked once a minute (ChipBinding.swift).
    var chipLockoutWatch = ChipLockoutWatch()
    /// The vault key and the session index; see `SessionTable` for why it has its own lock.
    nonisolated let table: SessionTable
    /// What watching apps hear (`watch`, VaultEvents.swift); the server listens here.
    public nonisolated let events = VaultEvents()
    var pendingUnlock: Task<Result<Void, VaultFailure>, Never>?
    /// Presence factors' soft boxes: how the fingerprint reopens the vault while
    /// vaultd runs (SoftUnlock.swift). Never on disk.
    var softBoxes = SoftBoxes()
    /// Counts the times the vault key was opened for good (`openHard`): a PIN
    /// typed for this very request needs not be asked again (CurrentSecret.swift).
    var hardOpenings = 0
    /// Factors whose proof is a secret (the PIN): their slots wrap the vault key.
    nonisolated let secretFactors: Set<String>
    /// Which app may use which account (AppGrants.swift, Vault+Apps.swift).
    /// A change of who is granted what also tells the event feed who may hear
    /// about which account (a release's last-use note does not).
    var grants: AppGrants {
        didSet {
            table.setGrants(grants.access(perApp: config.perApp))
            if grants.generation != audienceGeneration { publishAudience() }
        }
    }
    /// The grants' generation the event feed was last told.
    var audienceGeneration = 0

    /// Opens (or creates) the vault on a store with the device key.
    /// `clock` is the broker's one reading of the time (Unix seconds) for its
    /// timers: idle and `max_unlocked` locks, the fingerprint's age limit, token
    /// freshness, rate limits. Tests pass one they advance instead of sleeping.
    public init(store: VaultStore, deviceKey: SecureBytes, factors: [any UnlockFactor], config: VaultConfig, logger: Logger,
                providers: any IdentityProviderDirectory = NoIdentityProviders(),
                members: any MemberDirectory = NoMemberDirectory(),
                chip: ChipBinding = .none,
                clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) throws(VaultStartupError) {
        self.clock = clock
        self.store = store
        self.providers = providers
        self.members = members
        self.deviceKey = deviceKey
        self.config = config
        self.logger = logger
        var byID: [FactorID: any UnlockFactor] = [:]
        for f in factors { byID[f.descriptor.id] = f }
        self.factors = byID
        self.order = factors.sorted { $0.descriptor.rank < $1.descriptor.rank }.map { $0.descriptor.id }
        self.secretFactors = Set(factors.filter { $0.descriptor.contribution == .lowEntropySecret }.map { $0.descriptor.id.rawValue })
        let metaKey: SecureBytes
        do {
            metaKey = try KeyDerivation.derive(key: deviceKey, parts: [.label("sessionvault/session-meta-key/v1")])
            self.audit = try AuditLog(store: store, deviceKey: deviceKey, logger: logger, clock: clock)
            let grants = try AppGrants(store: store, deviceKey: deviceKey, logger: logger)
            self.grants = grants
            events.setAudience(grants.audience(perApp: config.perApp))
        } catch let e as StoreError {
            throw .store(Messages.storeUnreadable, detail: "\(e)")
        } catch {
            throw .crypto("\(error)")
        }
        offers = EnrollmentOffers(saved: try? store.meta(EnrollmentOffers.storeKey))
        let started = clock()
        let opened = try OpenedVault.open(store: store, deviceKey: deviceKey, chip: chip, metaKey: metaKey, secretFactors: secretFactors,
                                          now: Int64(started), logger: logger)
        self.keyslots = opened.keyslots
        self.chipRefusal = opened.chipRefusal
        self.table = SessionTable(vaultKey: nil, entries: opened.entries, now: started, events: events, clock: clock)
        table.setGrants(grants.access(perApp: config.perApp))
        self.sessions = Sessions(store: store, metaKey: metaKey, audit: audit, logger: logger, table: table, publicKey: opened.publicKey)
        // The device slot (no PIN) opened at start. With a presence factor set up,
        // the vault key goes only into its soft box: the vault starts locked and a
        // scan opens it. With none, the vault is simply open.
        if let vk = opened.vaultKey {
            softBoxes = SoftBoxes(for: byID, keyslots: opened.keyslots, vaultKey: vk, since: started)
            if softBoxes.isEmpty { table.setVaultKey(vk, now: started) }
        }
    }

    // MARK: - State

    public nonisolated var isLocked: Bool { table.vaultKey == nil }

    /// The unlocked vault key, or nil while locked.
    var vaultKey: SecureBytes? { table.vaultKey }

    /// Unix seconds, from the clock the vault was made with.
    nonisolated let clock: @Sendable () -> Double
    nonisolated func now() -> Double { clock() }

    func touch() { table.touch(now()) }

    /// Zeroes the vault key (sodium_free wipes it) and forgets nothing else:
    /// session metadata stays listable, secrets need an unlock again.
    public func lock(reason: String, requester: Requester? = nil) {
        if table.lock() {
            audit.record("lock", outcome: "ok", detail: ["reason": .string(reason)], requester: requester)
            events.emit(.locked(reason: reason))
        }
    }

    /// `lock` asked by a client. Every lock of an open vault costs the person
    /// an unlock, so a confined app (sandboxed, unidentified) that locks it
    /// again and again would have them unlock all day, each dialog raised by
    /// the apps they use (prompt fatigue by another door, out of reach of
    /// `ClosedDialogs`): such an app locks an open vault once in ten minutes,
    /// and hears `rate_limited` with the wait until then. Locking a locked
    /// vault costs nothing and is not counted; the person's own tools (the
    /// settings app, vaultctl) always lock.
    public func lock(askedBy requester: Requester) throws(VaultFailure) {
        if table.anythingOpen {
            try pace("lock", .lockOpenVault, requester, message: Messages.lockedRecently(requester.app?.shortName))
        }
        lock(reason: "request", requester: requester)
    }

    /// `audit` with `verify`: the whole chain walked, every entry's MAC and
    /// then the truncation notes (about 1.6 s of CPU for 100,000 entries in a
    /// debug build), off the actor. Any app may ask, but a confined one
    /// (sandboxed, unidentified) once a minute: asking in a loop from its
    /// connections would keep both cores walking the log for nothing.
    public nonisolated func checkAudit(askedBy requester: Requester) throws(VaultFailure) -> AuditLog.Verification {
        try pace("audit_verify", .auditCheck, requester)
        do {
            return try audit.check()
        } catch {
            logger.error("could not read the audit log to check it", metadata: ["error": "\(error)"])
            throw .internal()
        }
    }

    /// A page of the audit log (`audit` without `verify`), for the server to
    /// show what the caller may read of it. Each page is up to 1,000 rows read
    /// from the store under its one lock, which the unlock's counts and the
    /// grants' writes wait for, so a confined app reads 60 pages a minute; an
    /// unidentified peer, which may read no entry, costs no read at all.
    public nonisolated func auditEntries(_ page: AuditLog.Page, askedBy requester: Requester) throws(VaultFailure) -> [AuditRow] {
        if requester.trust == .unidentified { return [] }
        try pace("audit_read", .auditRead, requester)
        do {
            return try audit.entries(page)
        } catch {
            logger.error("could not read the audit log", metadata: ["error": "\(error)"])
            throw .internal()
        }
    }

    /// The desktop's lock (screen lock, sleep, logout). Like the idle lock,
    /// skipped while the device key alone guards the vault: nothing but a
    /// login would open it again, for no gain.
    public func lockWithDesktop(reason: String) {
        guard !guardedByDeviceKeyOnly else { return }
        lock(reason: reason)
    }

    /// Called periodically by the daemon: the idle timeout (restarted by every
    /// request), `max_unlocked` (counted from the unlock, however busy the vault
    /// is, as gpg-agent's max-cache-ttl), and the soft boxes' own limit.
    public func lockIfIdle() {
        for id in softBoxes.factors { _ = liveSoftBox(id) }
        guard table.anythingOpen, !guardedByDeviceKeyOnly else { return }
        let t = now()
        if config.idleTimeout > 0, t - table.lastActivity >= Double(config.idleTimeout) {
            lock(reason: "idle")
        } else if config.maxUnlocked > 0, t - table.unlockedAt >= Double(config.maxUnlocked) {
            lock(reason: "max_unlocked")
        }
    }

    /// A vault with no local factor (fingerprint, PIN, …) enrolled is guarded by
    /// the device key alone and re-opens by itself at start: the seeds'
    /// "standard session token resumption". Locking it would only hide
    /// sessions for no gain. Login records don't count: they are the fallback.
    var guardedByDeviceKeyOnly: Bool {
        keyslots[Keyslot.deviceSlotID] != nil && !order.contains { keyslots[$0.rawValue] != nil }
    }

    /// The unlock policy over the state as it is now.
    var policy: UnlockPolicy {
        UnlockPolicy(factors: order.compactMap { factors[$0]?.descriptor }, slots: keyslots.rows, secretFactors: secretFactors,
                     liveSoftUnlocks: softBoxes.factors, loginProviders: providers.loginProviders.map(\.id))
    }

    // MARK: - Status

    public func factorStatuses() async -> [FactorStatus] {
        var out: [FactorStatus] = []
        for id in order {
            guard let factor = factors[id] else { continue }
            out.append(await status(of: factor))
        }
        return out
    }

    /// A factor's state and its label for `status`; the sentences are the
    /// message catalog's (`Messages.factorLabel…`).
    func status(of factor: any UnlockFactor) async -> FactorStatus {
        let d = factor.descriptor
        return FactorStatus(d, presence: await factor.probe(), slot: keyslots[d.id.rawValue], stale: isStale(d.id),
                            lockedFor: (try? lockout(of: d)) ?? nil, deviceKey: deviceKey, hasPIN: policy.hasSecretFactor,
                            softBoxLive: { liveSoftBox(d.id) != nil })
    }

    /// The seconds a throttled factor's lockout has left (nil: none).
    func lockout(of d: FactorDescriptor) throws(VaultFailure) -> Int? {
        guard d.throttle != nil else { return nil }
        let counter = try storeCall(logger) { () throws(StoreError) in try store.failureCounter(factor: d.id.rawValue) }
        let wait = Int(counter.lockedUntil) - Int(now())
        return wait > 0 ? wait : nil
    }

    /// Seconds the chip still refuses a secret factor's wrap bound to it (its
    /// dictionary-attack lockout); nil when it takes a guess now or none is bound.
    func chipLockout(of d: FactorDescriptor, slot: KeyslotRow) -> Int? {
        guard d.contribution == .lowEntropySecret, Keyslot.isBoundToChip(slot),
              let status = try? keyslots.chip.chip?.status(), status.inLockout else { return nil }
        return status.retryAfter
    }

    /// What this computer's security chip does for the vault, for `status`:
    /// in use (and whether its guess limit binds anyone), why it is not, or
    /// what it refused.
    public func chipProtection() -> LocalizedText? {
        let unbound = keyslots.rows.values.contains { Keyslot.isWrap($0, secretFactors: secretFactors) && !Keyslot.isBoundToChip($0) }
        return keyslots.chip.protection(refusal: chipRefusal, anyWrapUnbound: unbound, hasPIN: policy.hasSecretFactor,
                                        lockoutArmed: { chipLockoutWatch.armed($0, now: now()) })
    }

    /// One sentence on what guards the sessions at rest, when it is only the device key.
    public func atRestWarning() -> LocalizedText? { policy.atRestWarning }

    /// The accounts `requester` may see (all of them for vaultd's own callers).
    public func accounts(visibleTo requester: Requester = .inProcess) -> [AccountInfo] {
        table.accounts(visibleTo: requester, waiting: policy.sessionWaits)
    }

    // MARK: - Sessions

    public func importSession(_ request: ImportRequest, conversation: any ClientConversation) async throws(VaultFailure) -> SessionMeta {
        let account = try request.validatedAccount()
        try await checkImportOver(account, conversation)
        try await ensureUnlocked(conversation, preferred: nil)
        let (meta, secret) = request.session(account: account, createdAt: Int64(now()))
        _ = try sessions.store(meta, secret: secret, tokenForHash: request.refreshToken ?? request.accessToken ?? "",
                               auditing: audit.entry("import", outcome: "ok", detail: ["account": .string(account)], requester: conversation.requester),
                               locked: policy.lockedFailure())
        grantOnCreate(account, requester: conversation.requester, reason: "import")
        touch()
        return meta
    }

    /// An import never silently replaces another app's session: a confined
    /// app (sandboxed, unidentified) may replace only an account it is granted,
    /// an unconfined one is asked first unless the account is already its own
    /// (vaultctl's terminal or vaultd's own dialog asks the person). With
    /// `per_app = false` no account is any one app's (every app may use every
    /// session), so an unconfined app replaces it without a question; a
    /// confined one still may not, having no grant to show.
    func checkImportOver(_ account: String, _ conversation: any ClientConversation) async throws(VaultFailure) {
        let requester = conversation.requester
        let existing = table.id(forAccount: account).flatMap { table.entry($0) }
        try admitConfinedWrite("import", account: account, requester)
        switch ImportCheck(requester: requester, replacing: existing != nil, perApp: config.perApp,
                           isGranted: { grants.allows($0, account: account) },
                           accountsHeld: { grants.accountCount(of: $0) }) {
        case .allowed:
            return
        case .refused(let outcome, let message, let app):
            audit.record("import", outcome: outcome, detail: AppIdentity.auditDetail(app, account: account), requester: requester)
            throw VaultFailure(.appNotAllowed, message: message)
        case .ask:
            break
        }
        guard let entry = existing else { return }
        let provider = entry.meta.providerName(providers.provider(for: entry.meta))
        try await conversation.confirmOrStop(Messages.replaceSession(entry.meta.name, provider: provider),
                                             unasked: VaultFailure(.appNotAllowed, message: Messages.importNotYours),
                                             locked: policy.lockedFailure())
    }

    /// A confined app's durable changes are limited in rate, new or not
    /// (ImportCheck.confinedWritesPerMinute); others are not.
    func admitConfinedWrite(_ event: String, account: String, _ requester: Requester) throws(VaultFailure) {
        try pace(event, .write, requester, detail: AppIdentity.auditDetail(requester.app, account: account))
    }

    /// The one way a confined app (`Requester.confinedKey`; the person's tools
    /// are never counted) is held to a pace: past `kind`'s count it hears
    /// `rate_limited` with `retry_after` (and `message`, when there is one),
    /// and the refusal is audited as `event` (repeats counted, not written).
    nonisolated func pace(_ event: String, _ kind: ConfinedPace.Kind, _ requester: Requester,
                          detail: [String: JSON] = [:], message: LocalizedText? = nil) throws(VaultFailure) {
        guard let key = requester.confinedKey, let wait = confinedPace.admit(kind, key, now: now()) else { return }
        audit.record(event, outcome: "rate_limited", detail: detail, requester: requester)
        throw VaultFailure(.rateLimited, message: message, extra: ["retry_after": .int(Int64(wait))])
    }

    /// Deletes sessions locally first (unusable at once), then revokes their
    /// tokens at the provider (RFC 7009) where it offers that. Works while
    /// locked: logging out must never need an unlock (the tokens can then not
    /// be read for revocation, and the result says so).
    public func logout(account: String?, all: Bool, requester: Requester) async throws(VaultFailure) -> LogoutResult {
        let (targets, everything) = try table.logoutTargets(account: account, all: all, requester: requester)
        // Nothing the caller may see: nothing to write (an app that logs out
        // in a loop, or from a vault with none, must not cost a durable write each time).
        guard !targets.isEmpty else { return LogoutResult(removed: 0, revokedAtProvider: 0) }
        // Read what must be revoked before the records are gone.
        let revocations = vaultKey.map { sessions.revocations(of: targets, key: $0, providers: providers) } ?? []
        let removed = try sessions.remove(targets, everything: everything)
        dropGrants(accounts: everything ? nil : Set(targets.map { $0.1.meta.account }))
        var confirmed = 0
        for (provider, token, isRefresh) in revocations where await provider.revoke(token: token, isRefreshToken: isRefresh) {
            confirmed += 1
        }
        audit.record("logout", outcome: "ok", detail: ["count": .int(Int64(removed)), "all": .bool(all),
                                                       "revoked_at_provider": .int(Int64(confirmed))], requester: requester)
        return LogoutResult(removed: removed, revokedAtProvider: confirmed)
    }
}

import FoundationEssentials
import VaultFactor
import VaultProtocol
import VaultStore

/// Logging in with an identity provider (BankID, Vipps, …), and what a
/// verified login opens: a login keyslot bound to (issuer, stable subject).
/// The first login with a provider creates that slot; a later login of the
/// same identity unlocks the vault; another identity is refused.
extension Vault {
    /// The login providers for `status`, each with whether its login can unlock this vault.
    public func providerStatuses() -> [ProviderStatus] {
        providers.loginProviders.map { ProviderStatus($0, unlocks: canUnlock($0)) }
    }

    func canUnlock(_ provider: any IdentityProvider) -> Bool {
        keyslots[LoginIdentity.slotID(provider: provider.id)] != nil || (provider.provesNationalID && keyslots[LoginIdentity.personSlotID] != nil)
    }

    /// Logs in with provider `id`, or, with none named, the one the person
    /// chooses (vaultd asks: an app that lets vaultd show its own dialogs
    /// needs to draw nothing for a first login).
    public func login(provider id: String?, conversation: any ClientConversation) async throws(VaultFailure) -> ReleasedSession {
        // A sandboxed app whose login dialogs the person just closed twice opens no third (ClosedDialogs).
        guard conversation.isInteractive else { return try await loginAsked(provider: id, conversation: conversation) }
        return try await admitted(conversation, event: "login", Messages.loginClosedRecently) { () async throws(VaultFailure) in
            try await loginAsked(provider: id, conversation: conversation)
        }
    }

    /// `login`'s dialogs: the choice (when no provider is named), the login,
    /// the choice again after a login cancelled on the way.
    func loginAsked(provider id: String?, conversation: any ClientConversation) async throws(VaultFailure) -> ReleasedSession {
        guard let id else {
            guard conversation.isInteractive else { throw .badRequest(Messages.loginNeedsProvider) }
            guard !providers.loginProviders.isEmpty else { throw .badRequest(Messages.noLoginProvider) }
            // A login cancelled on the way (the browser's wait, or in the
            // browser) says so — “BankID login was cancelled” — and offers the
            // choice again; Cancel there ends it.
            var saying: LocalizedText?
            while true {
                let choice: ProviderChoice
                do {
                    choice = try await conversation.chooseProvider(providers.loginProviders, toContinue: false, saying: saying)
                } catch {
                    throw failure(from: error)
                }
                guard case .provider(let chosen) = choice else { throw VaultFailure(.cancelled) }
                do {
                    return try await loginAsked(provider: chosen.id, conversation: conversation)
                } catch where error.code == .cancelled {
                    saying = error.message
                }
            }
        }
        guard let provider = providers.loginProviders.first(where: { $0.id == id }) else {
            throw .badRequest(Messages.unknownProvider(id, known: providers.loginProviders.map(\.id)))
        }
        guard conversation.isInteractive else {
            throw .badRequest(Messages.loginNeedsPerson(id))
        }
        let login = try await runLogin(provider, conversation)
        let adopted = try await adopt(login, from: provider, conversation: conversation)
        let released = await chooseOrganizationIfNeeded(adopted, conversation: conversation)
        // Served: only now does the idle timer start again. The app is handed
        // a session: audited as every release is.
        served(released, requester: conversation.requester)
        await offerPendingReenrollment(conversation)
        return released
    }

    /// Rate limit, run the provider's flow, audit the outcome. Nothing is
    /// stored here: a failed login leaves the vault as it was.
    func runLogin(_ provider: any IdentityProvider, _ conversation: any ClientConversation) async throws(VaultFailure) -> VerifiedLogin {
        if let wait = rateLimiter.admit(conversation.rateLimitKey, now: now()) {
            audit.record("login", factor: provider.id, outcome: "rate_limited", requester: conversation.requester)
            throw VaultFailure(.rateLimited, extra: ["retry_after": .int(Int64(wait))])
        }
        do {
            return try await provider.login(conversation, options: loginOptions(for: provider))
        } catch {
            audit.record("login", factor: provider.id, outcome: error.code.rawValue, requester: conversation.requester)
            throw error
        }
    }

    /// Takes a verified login into the vault and stores its session
    /// (docs/key-hierarchy.md, "A fresh login"). The identity record of the
    /// provider (or the person) is checked: another identity is refused. Without
    /// a PIN the owner's login reopens the vault through the device slot; with
    /// one it opens nothing old: the new session is sealed for the PIN and
    /// released at once, and the sessions saved before wait for the PIN. An
    /// identity not seen before is recorded only while the vault is open, so a
    /// stranger's login at a locked vault never becomes its owner's.
    func adopt(_ verified: VerifiedLogin, from provider: any IdentityProvider, conversation: any ClientConversation) async throws(VaultFailure) -> ReleasedSession {
        var login = verified
        // The member registry first: it may refuse (minimum age) before anything is stored.
        let memberClaims: [String: JSON]
        do {
            memberClaims = try await members.review(login)
        } catch {
            audit.record("login", factor: login.provider, outcome: error.code.rawValue, requester: conversation.requester)
            throw error
        }
        // A subject that *is* the national ID (ID-porten's `pid`) is kept only as a keyed hash.
        login.subject = LoginIdentity.storedSubject(of: login, deviceKey: deviceKey)
        let identity = try LoginIdentity(login, deviceKey: deviceKey)
        let (recordID, proof) = (identity.slotID, identity.proof)
        var verdict = LoginRecordVerdict(check: keyslots.check(recordID), binding: proof.binding,
                                         hasSecretFactor: policy.hasSecretFactor)
        if let (outcome, refusal) = verdict.audited(providerName: login.providerName) {
            audit.record("login", factor: login.provider, outcome: outcome, requester: conversation.requester)
            if let refusal { throw refusal }
        }
        if try await offerStartOverAfterChipLoss(conversation) {
            // A new vault: this login is its first.
            verdict = LoginRecordVerdict(check: keyslots.check(recordID), binding: proof.binding, hasSecretFactor: policy.hasSecretFactor)
        }
        var owner = verdict == .owner
        try openAfterLogin(verdict, record: recordID, requester: conversation.requester)
        if verdict.recordsIdentity(vaultOpen: vaultKey != nil) {
            try keyslots.recordIdentity(recordID, binding: proof.binding, now: Int64(now()), logger: logger)
            owner = true
            audit.record("enroll", factor: recordID, outcome: "ok", requester: conversation.requester)
        }
        if owner, login.reauthenticated, provider.meetsReenrollLevel(login) { offers.strongLoginAt = now() }
        let meta = SessionMeta(login, memberClaims: memberClaims, createdAt: Int64(now()))
        let id = try sessions.store(meta, secret: SessionSecret(login.tokens),
                                    tokenForHash: login.tokens.refreshToken ?? login.tokens.accessToken,
                                    auditing: audit.entry("login", factor: login.provider, outcome: "ok",
                                                          detail: ["sealed_for": .string(vaultKey == nil ? "pin" : "vault_key")],
                                                          requester: conversation.requester),
                                    locked: policy.lockedFailure())
        grantOnCreate(meta.account, requester: conversation.requester, reason: "login")
        if vaultKey == nil {
            // The vault stayed locked (with a PIN always; without one, another
            // login than the owner's): a factor to set up again (its enrollment
            // changed) is offered after the next PIN, and this says what waits.
            let offer = offerableAfterPIN()
            if offer != nil { enrollmentOfferPending = true }
            if let said = policy.loggedInLocked(sessionsWaiting: table.anyWaiting, thenSetUp: offer?.displayName) {
                await conversation.show(said)
            }
        } else {
            enrollmentOfferPending = true
        }
        return ReleasedSession(accessToken: login.tokens.accessToken, expiresAt: login.tokens.accessExpiresAt, meta: table.entry(id)?.meta ?? meta)
    }

    /// What a login of the identity `verdict` names opens: without a PIN the
    /// owner's login (or the first of a vault with no owner) reopens a locked
    /// vault through the device slot; at an open vault the owner's (or a
    /// first) login renews the soft boxes.
    func openAfterLogin(_ verdict: LoginRecordVerdict, record recordID: String, requester: Requester) throws(VaultFailure) {
        if verdict.reopensVault(vaultOpen: vaultKey != nil, hasSecretFactor: policy.hasSecretFactor, hasOwner: keyslots.hasOwner),
           let opened = keyslots.openDeviceWrap() {
            switch opened {
            case .success(let vk):
                openHard(vk)
                audit.record("unlock", factor: recordID, outcome: "ok", requester: requester)
            case .failure(.chip(let refusal)):
                // The chip said no (and starting over was declined): this login's
                // session is still stored and handed over, sealed to the vault's
                // public key as with a PIN; it works until the vault locks.
                chipRefusal = refusal
                audit.record("unlock", factor: recordID, outcome: refusal.auditOutcome, requester: requester)
            case .failure(let error):
                logger.error("the device keyslot failed to open at a login", metadata: ["error": "\(error)"])
                throw VaultFailure(.locked, message: Messages.vaultUnopenable)
            }
        } else if let vk = vaultKey, verdict.renewsSoftUnlocks(vaultOpen: true) {
            softBoxes = SoftBoxes(for: factors, keyslots: keyslots, vaultKey: vk, since: now())
        }
    }

    /// After a login, when the chip the vault was sealed for was cleared or
    /// replaced (the old sessions are lost for good): asks whether to start
    /// over, before this login's session is stored, so starting over keeps it.
    /// An unreachable chip may answer again, so it is not asked then.
    /// Returns whether it started over.
    func offerStartOverAfterChipLoss(_ conversation: any ClientConversation) async throws(VaultFailure) -> Bool {
        guard chipRefusal == .notThisChip, conversation.isInteractive else { return false }
        let question = Messages.startOverAfterChipQuestion(sessions: table.count)
        let yes: Bool
        do {
            yes = try await conversation.confirmLoss(question)
        } catch {
            yes = false
        }
        guard yes else {
            audit.record("reset", outcome: "declined_after_chip_loss", requester: conversation.requester)
            return false
        }
        _ = try await reset(confirmed: true, conversation: conversation)
        return true
    }

    /// A login in this run met its provider's re-enrollment level (and was
    /// sent with `prompt=login`): a changed fingerprint may be set up again.
    var strongLoginMet: Bool { offers.strongLoginAt != nil }

    /// How the next login is asked for: after an enrollment change, with
    /// `prompt=login` and the provider's re-enrollment level, so a remembered
    /// browser cannot finish it silently.
    func loginOptions(for provider: any IdentityProvider) -> LoginOptions {
        let staleFactor = order.contains { id in factors[id]?.descriptor.offerAfterLogin == true && isStale(id) }
        return staleFactor ? LoginOptions(reauthenticate: true, acr: provider.reenrollMinimumACR) : LoginOptions()
    }

    /// `vaultctl context ORG`: the active organization for the person behind a
    /// session; every session of that login carries it from now on.
    public func setActiveOrganization(_ org: String, account: String?, requester: Requester = .inProcess) async throws(VaultFailure) -> [String: JSON] {
        let picked = try table.releaseView(account: account, requester: requester)
        let (id, entry) = (picked.id, picked.entry)
        guard mayView(entry.meta.account, requester) else { throw .noSession(account) }
        // The one in use already: nothing to write (an app that sets it on every start writes nothing).
        if entry.meta.organizations.active == org { return entry.meta.claims }
        try admitConfinedWrite("context", account: entry.meta.account, requester)
        let added = try await members.setActiveOrganization(org, provider: entry.meta.provider, subject: entry.meta.subject)
        var meta = entry.meta
        for (k, v) in added { meta.claims[k] = v }
        try sessions.persistMeta(id: id, meta: meta, row: entry.row)
        audit.record("context", outcome: "ok", detail: ["account": .string(meta.account)])
        return meta.claims
    }

    public nonisolated func memberConflicts() async -> [JSON] { await members.conflicts() }

    /// A member of several organizations who has not chosen one is asked which,
    /// once, right after the login (seed 001's home for a role): the choice is
    /// remembered (`setActiveOrganization`) and every session of that login
    /// carries it. Cancel, or a client that cannot be asked, leaves none active
    /// — the session still goes to the app, with `orgs` to offer the choice
    /// itself — and the question comes again at the next login.
    func chooseOrganizationIfNeeded(_ released: ReleasedSession, conversation: any ClientConversation) async -> ReleasedSession {
        let orgs = released.meta.organizations
        guard conversation.isInteractive, orgs.all.count > 1, orgs.active == nil,
              let chosen = await conversation.chooseOrganization(orgs.all) else { return released }
        do {
            var out = released
            out.meta.claims = try await setActiveOrganization(chosen, account: released.meta.account,
                                                              requester: conversation.requester)
            return out
        } catch {
            logger.warning("the organization chosen could not be kept", metadata: ["error": "\(error.code.rawValue)"])
            return released
        }
    }

    /// How a login step of an unlock ended.
    enum LoginStep {
        case finished(Result<Void, VaultFailure>)
        /// The person chose a factor offered beside the providers.
        case choseFactor(FactorID)
    }

    /// The login step of the unlock policy: offer the providers whose login
    /// can open this vault (after `saying` why, and with the factors `beside`
    /// them as other buttons), and run the chosen one.
    func unlockByLogin(_ conversation: any ClientConversation, after failure: VaultFailure?,
                       saying: LocalizedText? = nil, beside: [ChoiceOption] = []) async -> LoginStep {
        let candidates = providers.loginProviders
        guard !candidates.isEmpty else { return .finished(.failure(failure ?? policy.lockedFailure())) }
        let provider: any IdentityProvider
        do {
            switch try await conversation.chooseProvider(candidates, toContinue: true, saying: saying, beside: beside) {
            case .provider(let chosen): provider = chosen
            case .other(let value): return .choseFactor(FactorID(rawValue: value))
            case .cancelled: return .finished(.failure(VaultFailure(.cancelled)))
            }
        } catch {
            // A dialog that timed out or a pinentry that broke says so; not interactive: what the policy said.
            return .finished(.failure(error == .notInteractive ? (failure ?? policy.lockedFailure()) : self.failure(from: error)))
        }
        do {
            try await unlockWithLogin(provider, conversation)
            return .finished(.success(()))
        } catch {
            return .finished(.failure(error))
        }
    }

    /// A fresh login that is to unlock: run and taken in. With a PIN the login
    /// gives its own session, not the vault key: that is said as a failure.
    func unlockWithLogin(_ provider: any IdentityProvider, _ conversation: any ClientConversation) async throws(VaultFailure) {
        let login = try await runLogin(provider, conversation)
        _ = try await adopt(login, from: provider, conversation: conversation)
        if vaultKey == nil { throw policy.loggedInButLocked() }
    }

    /// Records that the offer of factor `id` was declined (or is welcome
    /// again), in memory and in the store.
    func noteOffer(_ id: FactorID, declined: Bool) {
        if offers.note(id, declined: declined) { saveOffers() }
    }

    /// A store that will not take the declined offers costs only an offer
    /// asked once more after a restart, so it is logged, not thrown.
    func saveOffers() {
        do {
            try store.setMeta(EnrollmentOffers.storeKey, offers.saved)
        } catch {
            logger.warning("could not keep a declined offer across restarts", metadata: ["error": "\(error)"])
        }
    }

    /// The registered factors, in the policy's order, as the offers see them.
    func offerCandidates() -> [EnrollmentOffers.Candidate] {
        order.compactMap { id in
            factors[id].map { EnrollmentOffers.Candidate(descriptor: $0.descriptor, enrolled: keyslots[id.rawValue] != nil, stale: isStale(id)) }
        }
    }

    /// The factor the offer after the next PIN will ask about (`EnrollmentOffers.afterPIN`).
    func offerableAfterPIN() -> FactorDescriptor? { offers.afterPIN(offerCandidates()) }

    /// After a first login, or a fallback login caused by a fingerprint that
    /// failed or changed: offer (once per vaultd run) to set up the factors
    /// that want offering, before the session is handed over.
    func offerPendingReenrollment(_ conversation: any ClientConversation) async {
        guard enrollmentOfferPending, conversation.isInteractive, vaultKey != nil else { return }
        enrollmentOfferPending = false
        for step in offers.afterLogin(offerCandidates()) {
            let id = step.factor
            guard let factor = factors[id], case .available = await factor.probe() else { continue }
            guard case .ask = step else {
                await conversation.show(Messages.reenrollNeedsStrongLogin)
                continue
            }
            switch await conversation.offerToTurnOn(factor.descriptor) {
            case .turnOn: _ = try? await enroll(id, conversation: conversation)
            case .notNow: noteOffer(id, declined: true)
            case .unanswered: break  // not a "Not now": asked again after the next login
            }
        }
    }
}

import FoundationEssentials
import SecurityChip
import VaultFactor
import VaultProtocol
import VaultStore

/// Unlocking: asking the factors the policy names (`UnlockPolicy`), in its
/// order, and what each outcome means. A factor that fails, is cancelled, is
/// locked out or has gone stale hands over to the next one, and a login with
/// BankID or Vipps comes last. Enrolling and disabling factors live here too.
extension Vault {
    public func unlock(factor: FactorID?, conversation: any ClientConversation) async throws(VaultFailure) {
        // The idle timer restarts when the vault opens (runPolicy), or here for
        // an `unlock` of a vault already open; a refused one restarts nothing.
        // (A confined app's no-op unlock does not keep the vault open either.)
        if vaultKey != nil, !conversation.requester.isConfined { touch() }
        if let factor, factors[factor] == nil, let provider = providers.loginProviders.first(where: { $0.id == factor.rawValue }) {
            // `unlock bankid`: a fresh login with that provider.
            guard vaultKey == nil else { return }
            guard conversation.isInteractive else { throw policy.lockedFailure() }
            try await admitted(conversation, event: "login", Messages.loginClosedRecently) { () async throws(VaultFailure) in
                try await unlockWithLogin(provider, conversation)
            }
            return
        }
        if let factor {
            // `unlock bankid` is a login (above): the providers are ways in too.
            guard factors[factor] != nil else { throw unknownFactor(factor, orLogin: true) }
            guard keyslots[factor.rawValue] != nil else { throw VaultFailure(.notEnrolled) }
            guard policy.usableFactors.contains(factor) || vaultKey != nil else { throw softUnlockNeedsPIN(factor) }
        }
        try await ensureUnlocked(conversation, preferred: factor)
    }

    /// Single-flight: while one unlock runs, other requests wait for its outcome
    /// instead of prompting the person a second time.
    func ensureUnlocked(_ conversation: any ClientConversation, preferred: FactorID?) async throws(VaultFailure) {
        if vaultKey != nil { return }
        if let running = pendingUnlock {
            try await running.value.get()
            return
        }
        guard conversation.isInteractive else { throw policy.lockedFailure() }
        // Joining an unlock already on screen (above) shows nothing new, so
        // only a new one is held back.
        let closesKey = try admitDialog(conversation, event: "unlock", Messages.unlockClosedRecently)
        let task = Task { await self.runPolicy(conversation, preferred: preferred) }
        pendingUnlock = task
        let result = await task.value
        pendingUnlock = nil
        if case .failure(let failure) = result { noteClosed(closesKey, failure) }
        try result.get()
    }

    /// Refuses, without a dialog, a sandboxed app whose unlock or login
    /// dialogs the person closed twice just now (prompt fatigue,
    /// ClosedDialogs.swift); returns the key its closes count under (nil:
    /// never held back).
    func admitDialog(_ conversation: any ClientConversation, event: String,
                     _ sentence: (String?) -> LocalizedText) throws(VaultFailure) -> String? {
        guard let key = conversation.requester.confinedKey else { return nil }
        if let wait = closedDialogs.wait(key, now: now()) {
            audit.record(event, outcome: "closed_recently", requester: conversation.requester)
            throw VaultFailure(.rateLimited, message: sentence(conversation.requester.app?.shortName),
                               extra: ["retry_after": .int(Int64(wait))])
        }
        return key
    }

    /// Runs `body` (which shows dialogs) if `admitDialog` lets it, counting a Cancel as a close.
    func admitted<T>(_ conversation: any ClientConversation, event: String, _ sentence: (String?) -> LocalizedText,
                     _ body: () async throws(VaultFailure) -> T) async throws(VaultFailure) -> T {
        let closesKey = try admitDialog(conversation, event: event, sentence)
        do {
            return try await body()
        } catch {
            noteClosed(closesKey, error)
            throw error
        }
    }

    /// A dialog `admitDialog` let through ended: a Cancel counts as a close.
    func noteClosed(_ key: String?, _ failure: VaultFailure) {
        if let key, failure.code == .cancelled { closedDialogs.closed(key, now: now()) }
    }

    /// Runs one unlock: `UnlockRun` says which way in comes next; this asks
    /// it and applies what it gives (the vault key, a stop, an audit entry).
    func runPolicy(_ conversation: any ClientConversation, preferred: FactorID?) async -> Result<Void, VaultFailure> {
        if vaultKey != nil { return .success(()) }
        offers.failedBeforeFallback = []
        var run = UnlockRun(candidates: policy.candidates(preferred: preferred),
                            loginFallback: preferred == nil && !providers.loginProviders.isEmpty)
        while true {
            switch run.next() {
            case .login(let last, let saying, let beside):
                // A fresh login with a provider whose slot opens the vault: the
                // last resort, or at once after an enrollment change.
                switch await unlockByLogin(conversation, after: last, saying: saying,
                                           beside: beside.compactMap(useInsteadOption)) {
                case .finished(let result): return result
                case .choseFactor(let id): run.choseBesideLogin(id)
                }
            case .fail(let last):
                return .failure(last ?? policy.lockedFailure())
            case .ask(let id, let index):
                guard let factor = factors[id], let slot = keyslots[id.rawValue] else {
                    _ = run.record(.notSetUp)
                    continue
                }
                if case .unavailable(let reason) = await factor.probe() {
                    _ = run.record(.unavailable(VaultFailure(.factorUnavailable, message: reason)))
                    continue
                }
                let options = fallbackOptions(after: index, in: run.candidates, login: run.loginFallback)
                switch await attempt(factor, slot: slot, conversation, offering: options) {
                case .opened(let vk):
                    offers.failedBeforeFallback = []
                    open(vk, by: factor.descriptor, requester: conversation.requester)
                    return .success(())
                case .stop(let failure):
                    return .failure(failure)
                case .chose(let choice):
                    _ = run.record(.chose(choice))
                case .next(let failure):
                    if factor.descriptor.offerAfterLogin { offers.failedBeforeFallback.insert(id) }
                    // A fingerprint that failed leads to BankID/Vipps (the PIN
                    // beside it); one that only needs the PIN first does not.
                    let presence = factor.descriptor.contribution == .presenceOnly && failure.code != .locked
                    // Say why before offering the next way in (the login's dialog says it itself).
                    if run.record(presence ? .presenceFailed(failure) : .failed(failure)) { await conversation.show(failure.message) }
                }
            }
        }
    }

    /// The buttons a presence factor's dialog offers: the next factor of the
    /// policy that is set up (“Use PIN instead”) and the login (“Use BankID or Vipps”).
    func fallbackOptions(after index: Int, in candidates: [FactorID], login: Bool) -> [ChoiceOption] {
        var options: [ChoiceOption] = []
        if let next = candidates.dropFirst(index + 1).lazy.compactMap(useInsteadOption).first {
            options.append(next)
        }
        if login {
            options.append(ChoiceOption(value: UnlockAttempt.loginChoice,
                                        label: Messages.dialogUseLogin(providers.loginProviders.map(\.displayName))))
        }
        return options
    }

    /// “Use PIN instead”: a button for factor `id`, when it is set up here (nil otherwise).
    func useInsteadOption(_ id: FactorID) -> ChoiceOption? {
        guard let factor = factors[id], keyslots[id.rawValue] != nil else { return nil }
        return ChoiceOption(value: id.rawValue, label: Messages.dialogUseInstead(factor.descriptor.displayName))
    }

    func attempt(_ factor: any UnlockFactor, slot: KeyslotRow, _ conversation: any ClientConversation,
                 offering options: [ChoiceOption] = []) async -> UnlockAttempt {
        let d = factor.descriptor
        // A presence factor's wait is shown with buttons for the other ways in.
        let offering = OfferingConversation(base: conversation, options: options)
        let asked: any FactorConversation = d.contribution == .presenceOnly ? offering : conversation
        var round = 0
        while true {
            do {
                if let wait = try lockout(of: d) { return .next(.lockedOut(retryAfter: wait, factors: policy.lockedFactorList)) }
            } catch {
                return .next(error)
            }
            // The chip's own lockout: not asked for a PIN it would refuse unread.
            if let wait = chipLockout(of: d, slot: slot) {
                audit.record("unlock", factor: d.id.rawValue, outcome: "chip_locked_out", requester: conversation.requester)
                return .next(ChipError.lockedOut(retryAfter: wait).failure)
            }
            let proof: FactorProof
            // A presence factor's failed scans count across unlocks: the count lives
            // with its soft box, the factor adds each miss to the tally as it happens.
            let box = d.contribution == .presenceOnly ? softBoxes[d.id] : nil
            let tally = FailureTally(box?.failedScans ?? 0)
            do {
                proof = try await factor.verify(asked, slot: EnrolledSlot(
                    factor: d.id, binding: Keyslot.binding(fromJSON: slot.binding), attempt: round, failures: tally))
            } catch {
                // Kept however the scan ended (Cancel, a timeout, a button): no fresh tries.
                softBoxes.keep(tally.failures, countedAgainst: box, of: d.id)
                if UnlockAttempt.dropsSoftBox(after: error, presence: d.contribution == .presenceOnly) { softBoxes[d.id] = nil }
                if UnlockAttempt.audits(error) {
                    audit.record("unlock", factor: d.id.rawValue, outcome: error.auditOutcome, requester: conversation.requester)
                }
                return UnlockAttempt(refused: error, offering: options, locked: policy.lockedFailure())
            }
            softBoxes.keep(tally.failures, countedAgainst: box, of: d.id)
            round += 1
            switch d.contribution {
            case .lowEntropySecret:
                // Wrong, but free tries remain (nil): said so, asked again.
                if let outcome = await secretOutcome(d, record: slot, proof: proof, conversation) { return outcome }
            case .presenceOnly:
                return presenceOutcome(factor, record: slot, proof: proof, conversation)
            }
        }
    }

    /// A secret factor (the PIN) was answered: `SecretCheck` checks it against
    /// its wrap (counted durably first), and this applies what it says (the
    /// wrap rebound to the chip setting, the audit, the lockout). Nil: wrong,
    /// but free tries remain; the person has been told, and is asked again.
    func secretOutcome(_ d: FactorDescriptor, record slot: KeyslotRow, proof: FactorProof,
                       _ conversation: any ClientConversation) async -> UnlockAttempt? {
        guard let throttle = d.throttle else { return .next(.internal()) }
        let check = SecretCheck(factor: d.id, throttle: throttle, store: store, keyslots: keyslots)
        switch check.check(proof.contribution, against: slot, now: Int64(now())) {
        case .opened(let vk):
            // The PIN is in hand: its wrap follows the chip setting now.
            keyslots.rebindIfNeeded(slot, vaultKey: vk, secret: proof.contribution, now: Int64(now()), logger: logger)
            return .opened(vk)
        case .chipRefused(let refusal):
            chipRefusal = refusal
            audit.record("unlock", factor: d.id.rawValue, outcome: refusal.auditOutcome, requester: conversation.requester)
            return .next(refusal.failure)
        case .notCounted(let error):
            logger.error("could not record a PIN attempt; refusing to check it", metadata: ["error": "\(error)"])
            return .next(.internal())
        case .wrong(let failures, let lockout, let attemptsLeft):
            audit.record("unlock", factor: d.id.rawValue, outcome: "failed",
                         detail: ["failures": .int(Int64(failures))], requester: conversation.requester)
            if lockout > 0 {
                audit.record("lockout", factor: d.id.rawValue, outcome: "locked",
                             detail: ["seconds": .int(Int64(lockout)), "failures": .int(Int64(failures))],
                             requester: conversation.requester)
                return .next(.lockedOut(retryAfter: lockout, factors: policy.lockedFactorList))
            }
            await conversation.show(Messages.noMatch(attemptsLeft: attemptsLeft))
            return nil
        }
    }

    /// A presence factor said the person is there: `PresenceCheck` says what
    /// its proof opens, and this applies it (audit, the record dropped after
    /// an enrollment change, a v1 slot migrated).
    func presenceOutcome(_ factor: any UnlockFactor, record: KeyslotRow, proof: FactorProof,
                         _ conversation: any ClientConversation) -> UnlockAttempt {
        let d = factor.descriptor
        let requester = conversation.requester
        switch PresenceCheck(d.id, record: record, proof: proof, deviceKey: deviceKey, now: Int64(now()), softBox: { liveSoftBox(d.id) }) {
        case .opened(let vk):
            // A match is the person: the failed scans before it are forgiven (model/unlock.pml, scan: fp_fails = 0).
            softBoxes.matched(d.id)
            return .opened(vk)
        case .recordUnusable(let newer):
            audit.record("unlock", factor: d.id.rawValue, outcome: newer ? "record_newer" : "record_damaged", requester: requester)
            return .next(VaultFailure(.factorUnavailable, message: newer ? Messages.factorRecordNewer(d.displayName)
                                                                         : Messages.factorRecordDamaged(d.displayName)))
        case .enrollmentChanged:
            enrollmentChanged(d, conversation)
            return .next(.enrollmentChanged(d))
        case .needsHardUnlock:
            return .next(softUnlockNeedsPIN(d.id))
        case .legacyOpened(let vk, let migration):
            do {
                guard let migration else { throw SodiumError.malformed("could not build the v2 keyslots") }
                try keyslots.replace(put: migration, delete: [])
            } catch {
                logger.error("could not migrate a v1 keyslot; it is kept", metadata: ["error": "\(error)"])
            }
            return .opened(vk)
        case .legacyUnopened:
            // Kept, unused: see PresenceCheck.legacyUnopened.
            softBoxes[d.id] = nil
            audit.record("enrollment_changed", factor: d.id.rawValue, outcome: "legacy_slot_kept", requester: requester)
            return .next(.enrollmentChanged(d))
        }
    }

    func enrollmentChanged(_ d: FactorDescriptor, _ conversation: any ClientConversation) {
        do {
            try keyslots.dropChanged(d.id.rawValue)
        } catch {
            logger.error("could not clear a stale enrollment record", metadata: ["error": "\(error)"])
        }
        softBoxes[d.id] = nil
        audit.record("enrollment_changed", factor: d.id.rawValue, outcome: "record_removed", requester: conversation.requester)
    }

    func softUnlockNeedsPIN(_ id: FactorID) -> VaultFailure {
        policy.softUnlockNeedsPIN(factors[id]?.descriptor.displayName ?? LocalizedText(en: id.rawValue, nb: id.rawValue))
    }

    /// A change of unlock methods the person called off (Cancel or a closed
    /// dialog at the unlock before it, the PIN in use, the new PIN or
    /// fingerprint, No at its question) changed nothing, and says so
    /// (`Messages.nothingChanged`): the unlock's "choose another way to log
    /// in" is for an app that waits for a session.
    func calledOff<T>(_ change: () async throws(VaultFailure) -> T) async throws(VaultFailure) -> T {
        do {
            return try await change()
        } catch where error.code == .cancelled {
            throw VaultFailure(.cancelled, message: Messages.nothingChanged)
        }
    }

    /// What a factor's error means to the request (a client that cannot be asked: what the policy says).
    func failure(from error: FactorError) -> VaultFailure { error.failure(whenNotInteractive: policy.lockedFailure()) }

    /// No factor `id` here; `orLogin`: the login providers are named as choices too.
    func unknownFactor(_ id: FactorID, orLogin: Bool = false) -> VaultFailure {
        let known = (order.map(\.rawValue) + (orLogin ? providers.loginProviders.map(\.id) : [])).joined(separator: ", ")
        return .badRequest(Messages.unknownFactor(id.rawValue, known: known))
    }

    // MARK: - Enroll, disable

    /// Sets a factor up (or again, replacing its slot). Needs the vault unlocked.
    /// A PIN gets a wrap of the vault key and replaces the device slot in the same
    /// transaction (`Keyslots.setUp`); a presence factor gets a record of its
    /// enrollment and a soft box. Setting up a presence factor again after its enrollment changed needs
    /// a strong login in this run (`reenrollNeedsStrongLogin`).
    public func enroll(_ id: FactorID, conversation: any ClientConversation) async throws(VaultFailure) -> FactorStatus {
        try await calledOff { () async throws(VaultFailure) -> FactorStatus in
            guard let factor = factors[id] else { throw unknownFactor(id) }
            if case .unavailable(let reason) = await factor.probe() { throw VaultFailure(.factorUnavailable, message: reason) }
            let openings = hardOpenings
            try await ensureUnlocked(conversation, preferred: nil)
            try await checkCurrentSecret(factor, openingsBefore: openings, conversation)
            let d = factor.descriptor
            if d.contribution == .presenceOnly, isStale(id), !strongLoginMet {
                audit.record("enroll", factor: id.rawValue, outcome: "strong_login_needed", requester: conversation.requester)
                throw VaultFailure(.notEnrolled, message: Messages.reenrollNeedsStrongLogin)
            }
            let proof: FactorProof
            do throws(FactorError) {
                proof = try await factor.enroll(conversation)
            } catch {
                audit.record("enroll", factor: id.rawValue, outcome: error.auditOutcome, requester: conversation.requester)
                throw failure(from: error)
            }
            guard let vk = vaultKey else { throw policy.lockedFailure() }
            try keyslots.setUp(d, proof: proof, vaultKey: vk, cost: config.pinCost, now: Int64(now()), logger: logger)
            if d.contribution == .presenceOnly {
                softBoxes[id] = try? SoftUnlock(vaultKey: vk, factor: id, digest: proof.enrollmentState, since: now())
            }
            audit.record("enroll", factor: id.rawValue, outcome: "ok", requester: conversation.requester)
            noteOffer(id, declined: false)
            touch()
            await conversation.show(Messages.factorSetUp(d.displayName))
            return await status(of: factor)
        }
    }

    func isStale(_ id: FactorID) -> Bool { keyslots.isStale(id.rawValue) }

    /// Destroys a factor's slot. Needs presence (an unlocked vault) and a
    /// confirmation. Removing the last secret factor puts the device slot back
    /// in the same transaction (`Keyslots.turnOff`).
    public func disable(_ id: FactorID, confirmed: Bool, conversation: any ClientConversation) async throws(VaultFailure) -> FactorStatus {
        try await calledOff { () async throws(VaultFailure) -> FactorStatus in
            guard let factor = factors[id] else { throw unknownFactor(id) }
            guard keyslots[id.rawValue] != nil else { throw VaultFailure(.notEnrolled) }
            let openings = hardOpenings
            try await ensureUnlocked(conversation, preferred: nil)
            try await checkCurrentSecret(factor, openingsBefore: openings, conversation)
            if !confirmed {
                try await conversation.confirmOrStop(Messages.turnOffQuestion(factor.descriptor.displayName),
                                                     unasked: .badRequest(Messages.turnOffNeedsConfirmation), locked: policy.lockedFailure())
            }
            guard let vk = vaultKey else { throw policy.lockedFailure() }
            try keyslots.turnOff(id.rawValue, vaultKey: vk, now: Int64(now()), logger: logger)
            softBoxes[id] = nil
            // Turned off on purpose: not offered again after the next login.
            if factor.descriptor.offerAfterLogin { noteOffer(id, declined: true) }
            audit.record("disable", factor: id.rawValue, outcome: "ok", requester: conversation.requester)
            touch()
            return await status(of: factor)
        }
    }
}

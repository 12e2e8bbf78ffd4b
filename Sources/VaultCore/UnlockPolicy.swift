import Foundation
import VaultFactor
import VaultProtocol
import VaultStore

/// The unlock policy: which factor is asked, in which order, and what each
/// outcome means. Locked → try the enrolled, available factors by rank
/// (fingerprint, PIN, OIDC); a factor that fails, is cancelled, is locked out or
/// has gone stale hands over to the next one.
extension Vault {
    enum Attempt {
        case opened(SecureBytes)
        /// This factor can't open the vault now; try the next one.
        case next(VaultFailure)
        /// Stop the whole unlock (the client can't answer questions).
        case stop(VaultFailure)
    }

    /// The factors a locked client may try, for the `locked` error.
    func lockedFactorList() -> [String] { enrolledFactors.map(\.rawValue) + loginProvidersWithSlots.map(\.id) }

    public func unlock(factor: FactorID?, conversation: any ClientConversation) async throws(VaultFailure) {
        touch()
        if let factor, factors[factor] == nil, let provider = providers.loginProviders.first(where: { $0.id == factor.rawValue }) {
            // `unlock bankid`: a fresh login with that provider.
            guard vaultKey == nil else { return }
            guard conversation.isInteractive else { throw .locked(factors: lockedFactorList()) }
            let login = try await runLogin(provider, conversation)
            _ = try await adopt(login, conversation: conversation)
            return
        }
        if let factor {
            guard factors[factor] != nil else { throw unknownFactor(factor) }
            guard slots[factor.rawValue] != nil else { throw VaultFailure(.notEnrolled) }
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
        guard conversation.isInteractive else { throw .locked(factors: lockedFactorList()) }
        let task = Task { await self.runPolicy(conversation, preferred: preferred) }
        pendingUnlock = task
        let result = await task.value
        pendingUnlock = nil
        try result.get()
    }

    func runPolicy(_ conversation: any ClientConversation, preferred: FactorID?) async -> Result<Void, VaultFailure> {
        if vaultKey != nil { return .success(()) }
        failedBeforeFallback = []
        let candidates = preferred.map { [$0] } ?? enrolledFactors
        let loginFallback = preferred == nil && !loginProvidersWithSlots.isEmpty
        var last: VaultFailure?
        for (index, id) in candidates.enumerated() {
            guard let factor = factors[id], let slot = slots[id.rawValue] else { continue }
            if case .unavailable(let reason) = await factor.probe() {
                last = VaultFailure(.factorUnavailable, message: reason)
                continue
            }
            switch await attempt(factor, slot: slot, conversation) {
            case .opened(let vk):
                failedBeforeFallback = []
                table.setVaultKey(vk)
                touch()
                audit.record("unlock", factor: id.rawValue, outcome: "ok", requester: conversation.requester)
                return .success(())
            case .stop(let failure):
                return .failure(failure)
            case .next(let failure):
                last = failure
                if factor.descriptor.offerAfterLogin { failedBeforeFallback.insert(id) }
                // Say why before offering the next way in.
                if index < candidates.count - 1 || loginFallback { await conversation.show(failure.message) }
            }
        }
        // Last resort: a fresh login with a provider whose slot opens the vault.
        if loginFallback {
            return await unlockByLogin(conversation, after: last)
        }
        return .failure(last ?? .locked(factors: lockedFactorList()))
    }

    func attempt(_ factor: any UnlockFactor, slot: KeyslotRow, _ conversation: any ClientConversation) async -> Attempt {
        let d = factor.descriptor
        var round = 0
        while true {
            if let throttle = d.throttle {
                guard let counter = try? store.failureCounter(factor: d.id.rawValue) else {
                    return .next(.internal())
                }
                let wait = Int(counter.lockedUntil) - Int(now())
                if wait > 0 { return .next(.lockedOut(retryAfter: wait, factors: lockedFactorList())) }
                _ = throttle
            }
            let proof: FactorProof
            do {
                proof = try await factor.verify(conversation, slot: EnrolledSlot(
                    factor: d.id, binding: Keyslot.binding(fromJSON: slot.binding), attempt: round))
            } catch {
                if error == .notInteractive { return .stop(.locked(factors: lockedFactorList())) }
                audit.record("unlock", factor: d.id.rawValue, outcome: outcomeName(error), requester: conversation.requester)
                return .next(failure(from: error))
            }
            round += 1
            switch d.contribution {
            case .lowEntropySecret:
                guard let throttle = d.throttle else { return .next(.internal()) }
                // Count the attempt durably *before* checking it: killing vaultd
                // between here and the answer must not give a free guess.
                let counter: FailureCounter
                do {
                    counter = try store.incrementFailures(factor: d.id.rawValue)
                } catch {
                    logger.error("could not record a PIN attempt; refusing to check it", metadata: ["error": "\(error)"])
                    return .next(.internal())
                }
                testPauseAfterCounterWrite()
                if let vk = try? Keyslot.open(slot, deviceKey: deviceKey, proof: proof) {
                    try? store.resetFailures(factor: d.id.rawValue)
                    return .opened(vk)
                }
                audit.record("unlock", factor: d.id.rawValue, outcome: "failed",
                             detail: ["failures": .int(Int64(counter.failures))], requester: conversation.requester)
                let delay = throttle.delay(afterFailures: counter.failures)
                if delay > 0 {
                    var locked = counter
                    locked.lockedUntil = Int64(now()) + Int64(delay)
                    try? store.setFailureCounter(locked)
                    audit.record("lockout", factor: d.id.rawValue, outcome: "locked",
                                 detail: ["seconds": .int(Int64(delay)), "failures": .int(Int64(counter.failures))],
                                 requester: conversation.requester)
                    return .next(.lockedOut(retryAfter: delay, factors: lockedFactorList()))
                }
                // Wrong, but free tries remain: say so and ask again.
                await conversation.show(Messages.noMatch(attemptsLeft: throttle.attemptsLeft(afterFailures: counter.failures)))
            case .presenceOnly:
                if let vk = try? Keyslot.open(slot, deviceKey: deviceKey, proof: proof) { return .opened(vk) }
                // The factor says the person is present, yet the slot won't open:
                // the enrollment changed (or the slot was tampered with). Either way
                // the slot is dead; remove it and move on.
                try? store.updateKeyslots(put: [], delete: [slot.id])
                slots[slot.id] = nil
                try? store.setMeta("stale:\(slot.id)", [1])
                audit.record("enrollment_changed", factor: d.id.rawValue, outcome: "slot_removed", requester: conversation.requester)
                if d.id == .fingerprint { return .next(VaultFailure(.enrollmentChanged)) }
                let name = d.displayName
                return .next(VaultFailure(.enrollmentChanged, message: LocalizedText(
                    en: "\(name.en) on this computer has changed, so it was turned off. Use another way in, then set \(name.en) up again.",
                    nb: "\(name.nb) på denne datamaskinen er endret og ble derfor slått av. Bruk en annen måte inn, og sett opp \(name.nb) igjen.")))
            }
        }
    }

    func failure(from error: FactorError) -> VaultFailure {
        switch error {
        case .cancelled: return VaultFailure(.cancelled)
        case .noMatch: return .noMatch(attemptsLeft: 0)
        case .tooManyAttempts:
            return VaultFailure(.noMatch, message: LocalizedText(
                en: "That did not match several times. Use your PIN, or log in with BankID or Vipps.",
                nb: "Det stemte ikke flere ganger. Bruk PIN-koden, eller logg inn med BankID eller Vipps."),
                extra: ["attempts_left": 0])
        case .unavailable(let reason): return VaultFailure(.factorUnavailable, message: reason)
        case .rejected(let reason): return VaultFailure(.badRequest, message: reason)
        case .notInteractive: return .locked(factors: lockedFactorList())
        case .timeout:
            return VaultFailure(.timeout, message: LocalizedText(
                en: "No answer came in time. Please try again.", nb: "Det kom ikke noe svar i tide. Prøv igjen."))
        }
    }

    func outcomeName(_ error: FactorError) -> String {
        switch error {
        case .cancelled: return "cancelled"
        case .noMatch: return "no_match"
        case .tooManyAttempts: return "too_many_attempts"
        case .unavailable: return "unavailable"
        case .rejected: return "rejected"
        case .notInteractive: return "not_interactive"
        case .timeout: return "timeout"
        }
    }

    func unknownFactor(_ id: FactorID) -> VaultFailure {
        let known = order.map(\.rawValue).joined(separator: ", ")
        return .badRequest(LocalizedText(en: "There is no unlock method called “\(id.rawValue)”. Choose one of: \(known).",
                                         nb: "Det finnes ingen opplåsingsmåte som heter «\(id.rawValue)». Velg en av: \(known)."))
    }

    // MARK: - Enroll, disable

    /// Sets a factor up (or again, replacing its slot). Needs the vault unlocked:
    /// the new slot wraps the same vault key.
    public func enroll(_ id: FactorID, conversation: any ClientConversation) async throws(VaultFailure) -> FactorStatus {
        touch()
        guard let factor = factors[id] else { throw unknownFactor(id) }
        if case .unavailable(let reason) = await factor.probe() { throw VaultFailure(.factorUnavailable, message: reason) }
        try await ensureUnlocked(conversation, preferred: nil)
        let proof: FactorProof
        do {
            proof = try await factor.enroll(conversation)
        } catch {
            audit.record("enroll", factor: id.rawValue, outcome: outcomeName(error), requester: conversation.requester)
            throw failure(from: error)
        }
        guard let vk = vaultKey else { throw .locked(factors: lockedFactorList()) }
        let cost: PasswordHash.Cost? = factor.descriptor.contribution == .lowEntropySecret ? config.pinCost : nil
        let row: KeyslotRow
        do {
            row = try Keyslot.make(id: id.rawValue, factor: id.rawValue, vaultKey: vk, deviceKey: deviceKey,
                                   proof: proof, cost: cost, now: Int64(now()))
        } catch {
            logger.error("could not build a keyslot", metadata: ["error": "\(error)"])
            throw .internal()
        }
        // The first real factor replaces the device-only slot, in one transaction.
        try storeCall { () throws(StoreError) in
            try store.updateKeyslots(put: [row], delete: [Keyslot.deviceSlotID])
            try store.resetFailures(factor: id.rawValue)
            if try store.meta("stale:\(id.rawValue)") != nil { try store.setMeta("stale:\(id.rawValue)", []) }
        }
        slots[Keyslot.deviceSlotID] = nil
        slots[id.rawValue] = row
        audit.record("enroll", factor: id.rawValue, outcome: "ok", requester: conversation.requester)
        await conversation.show(LocalizedText(en: "\(factor.descriptor.displayName.en) is set up.",
                                              nb: "\(factor.descriptor.displayName.nb) er satt opp."))
        return await status(of: factor)
    }

    /// Destroys a factor's slot. Needs presence (an unlocked vault) and a
    /// confirmation. Removing the last factor puts the device-only slot back, so
    /// the sessions stay reachable.
    public func disable(_ id: FactorID, confirmed: Bool, conversation: any ClientConversation) async throws(VaultFailure) -> FactorStatus {
        touch()
        guard let factor = factors[id] else { throw unknownFactor(id) }
        guard slots[id.rawValue] != nil else { throw VaultFailure(.notEnrolled) }
        try await ensureUnlocked(conversation, preferred: nil)
        if !confirmed {
            let name = factor.descriptor.displayName
            let yes: Bool
            do {
                yes = try await conversation.confirm(LocalizedText(
                    en: "Turn off \(name.en) unlock? You can set it up again later.",
                    nb: "Slå av opplåsing med \(name.nb)? Du kan sette den opp igjen senere."))
            } catch {
                if error == .notInteractive {
                    throw .badRequest(LocalizedText(
                        en: "Turning off an unlock method needs a confirmation. Send “confirm”: true, or use an interactive client.",
                        nb: "Å slå av en opplåsingsmåte krever en bekreftelse. Send «confirm»: true, eller bruk en interaktiv klient."))
                }
                throw failure(from: error)
            }
            guard yes else { throw VaultFailure(.cancelled) }
        }
        guard let vk = vaultKey else { throw .locked(factors: lockedFactorList()) }
        var put: [KeyslotRow] = []
        let remainingLocal = slots.keys.filter { $0 != id.rawValue && $0 != Keyslot.deviceSlotID && !$0.hasPrefix(Vault.loginSlotPrefix) }
        if remainingLocal.isEmpty {
            do {
                put.append(try Keyslot.make(id: Keyslot.deviceSlotID, factor: Keyslot.deviceSlotID, vaultKey: vk,
                                            deviceKey: deviceKey, proof: nil, cost: nil, now: Int64(now())))
            } catch {
                throw .internal()
            }
        }
        let newSlots = put
        try storeCall { () throws(StoreError) in
            try store.updateKeyslots(put: newSlots, delete: [id.rawValue])
            try store.resetFailures(factor: id.rawValue)
        }
        slots[id.rawValue] = nil
        for row in put { slots[row.id] = row }
        audit.record("disable", factor: id.rawValue, outcome: "ok", requester: conversation.requester)
        return await status(of: factor)
    }

    /// A debug-build hook for the crash test: pause right after the failure
    /// counter is durable and before the PIN is checked, so a test can kill -9 here.
    func testPauseAfterCounterWrite() {
        #if DEBUG
        if let marker = ProcessInfo.processInfo.environment["SESSIONVAULT_TEST_PAUSE_AFTER_COUNTER"] {
            _ = FileManager.default.createFile(atPath: marker, contents: Data("paused\n".utf8))
            Thread.sleep(forTimeInterval: 30)
        }
        #endif
    }
}

import FoundationEssentials
import Logging
import VaultFactor
import VaultProtocol
import VaultStore

/// Where the vault key comes from and what it seals (docs/key-hierarchy.md):
/// the one wrap that opens it (device or PIN), the presence factors' soft boxes,
/// and the record keys of sessions stored while it was out of reach.
extension Vault {
    // MARK: Opening

    /// The vault key came from the PIN, a login or the device slot: put it in,
    /// remake the presence factors' soft boxes from now, and re-seal under it the
    /// sessions that waited for it.
    func openHard(_ vk: SecureBytes) {
        hardOpenings += 1
        let t = now()
        // The device wrap follows the chip setting (a PIN's needs the PIN: `SecretCheck`).
        if let device = keyslots[Keyslot.deviceSlotID] {
            keyslots.rebindIfNeeded(device, vaultKey: vk, secret: nil, now: Int64(t), logger: logger)
        }
        chipRefusal = nil
        table.setVaultKey(vk, now: t)
        softBoxes = SoftBoxes(for: factors, keyslots: keyslots, vaultKey: vk, since: t)
        if sessions.publicKey == nil { sessions.publicKey = try? VaultKeyPair.ensureStored(vk, store: store, deviceKey: deviceKey) }
        sessions.resealWaiting(vk)
    }

    /// An unlock's factor gave the vault key: the PIN opens it for good
    /// (`openHard`); a presence factor only reopens it, its soft boxes left as
    /// they are. The idle timer starts again; audited.
    func open(_ vk: SecureBytes, by d: FactorDescriptor, requester: Requester) {
        if d.contribution == .presenceOnly {
            table.setVaultKey(vk, now: now())
            sessions.resealWaiting(vk)
        } else {
            openHard(vk)
        }
        touch()
        audit.record("unlock", factor: d.id.rawValue, outcome: "ok", requester: requester)
    }

    /// The soft box of `id`, unless `fingerprint_max_hours` has run out (it is then dropped).
    func liveSoftBox(_ id: FactorID) -> SoftUnlock? {
        let (box, expired) = softBoxes.live(id, now: now(), maxSeconds: Double(config.fingerprintMaxAge))
        if expired { audit.record("soft_unlock_expired", factor: id.rawValue, outcome: "pin_or_login_needed") }
        return box
    }

    /// The public key sessions stored while locked are sealed to (nil: none that checks).
    var sealingPublicKey: [UInt8]? { sessions.publicKey }

}

extension Vault {
    public struct ResetResult: Sendable {
        public var sessionsRemoved: Int
        public var factorsRemoved: Int
    }

    /// `vaultctl reset`: the one explicit way to a new vault key while sealed
    /// sessions exist (never done silently). Works while locked, since that is
    /// when a person needs it; asks first and says what is lost. The sessions,
    /// every unlock method and the login records go in one transaction; a new
    /// vault key guarded by the device slot comes in.
    public func reset(confirmed: Bool, conversation: any ClientConversation) async throws(VaultFailure) -> ResetResult {
        let sessions = table.count
        let factorCount = order.filter { keyslots[$0.rawValue] != nil }.count
        if !confirmed {
            try await conversation.confirmOrStop(Messages.startOverQuestion(sessions: sessions, factors: factorCount),
                                                 unasked: .badRequest(Messages.startOverNeedsConfirmation), locked: policy.lockedFailure())
        }
        let (vk, publicKey, removed) = try keyslots.startOver(now: Int64(now()), logger: logger)
        softBoxes = SoftBoxes()
        chipRefusal = nil
        self.sessions.publicKey = publicKey
        let accounts = table.allEntries().values.map(\.meta.account)
        table.removeAll()
        for account in accounts { events.emit(.loggedOut(account: account)) }
        grants.forgetAll()
        // Starting over is a new vault: its offers come again after the next login.
        if offers.startOver() { saveOffers() }
        table.setVaultKey(vk, now: now())
        audit.record("reset", outcome: "ok", detail: ["sessions": .int(Int64(removed)), "factors": .int(Int64(factorCount))],
                     requester: conversation.requester)
        return ResetResult(sessionsRemoved: removed, factorsRemoved: factorCount)
    }
}

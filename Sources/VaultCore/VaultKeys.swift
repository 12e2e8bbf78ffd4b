import Foundation
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
        table.setVaultKey(vk, now: t)
        softBoxes = Vault.softBoxes(for: factors, keyslots: keyslots, vaultKey: vk, since: t)
        if sessions.publicKey == nil { sessions.publicKey = try? Vault.ensureVaultKeyPair(vk, store: store, deviceKey: deviceKey) }
        sessions.resealWaiting(vk)
    }

    /// A soft box for every presence factor whose record is intact.
    static func softBoxes(for factors: [FactorID: any UnlockFactor], keyslots: Keyslots, vaultKey: SecureBytes,
                          since: Double) -> [FactorID: SoftUnlock] {
        var boxes: [FactorID: SoftUnlock] = [:]
        for (id, factor) in factors where factor.descriptor.contribution == .presenceOnly {
            guard case .intact(let binding) = keyslots.check(id.rawValue),
                  let digest = Keyslot.digest(in: binding) else { continue }
            boxes[id] = try? SoftUnlock(vaultKey: vaultKey, factor: id, digest: digest, since: since)
        }
        return boxes
    }

    /// The soft box of `id`, unless `fingerprint_max_hours` has run out (it is then dropped).
    func liveSoftBox(_ id: FactorID) -> SoftUnlock? {
        guard let box = softBoxes[id] else { return nil }
        if box.expired(now: now(), maxSeconds: Double(config.fingerprintMaxAge)) {
            softBoxes[id] = nil
            audit.record("soft_unlock_expired", factor: id.rawValue, outcome: "pin_or_login_needed")
            return nil
        }
        return box
    }

    /// The vault's X25519 key pair is derived from VK; the public half is stored
    /// so that sessions can be sealed for the PIN while the PIN is not at hand.
    static func keyPair(_ vk: SecureBytes) throws(SodiumError) -> (publicKey: [UInt8], secretKey: SecureBytes) {
        try PublicKeyBox.keyPair(seed: try KeyDerivation.derive(key: vk, parts: [.label(SessionSealing.vaultKeyPairLabel)]))
    }

    /// The public key sessions stored while locked are sealed to (nil: none that checks).
    var sealingPublicKey: [UInt8]? { sessions.publicKey }

    static func ensureVaultKeyPair(_ vk: SecureBytes, store: VaultStore, deviceKey: SecureBytes) throws -> [UInt8] {
        let publicKey = try keyPair(vk).publicKey
        if try store.meta(SessionSealing.publicKeyMeta) != publicKey {
            try store.setMeta(SessionSealing.publicKeyMeta, publicKey)
        }
        // Written also for stores made before the MAC existed: the key comes
        // from VK here, so it is the right one to vouch for.
        let mac = try SessionSealing.publicKeyMAC(publicKey, deviceKey: deviceKey)
        if try store.meta(SessionSealing.publicKeyMACMeta) != mac {
            try store.setMeta(SessionSealing.publicKeyMACMeta, mac)
        }
        return publicKey
    }

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
            let question = LocalizedText(
                en: "Start over? This deletes \(sessions) saved session\(sessions == 1 ? "" : "s") and \(factorCount) unlock method\(factorCount == 1 ? "" : "s") (PIN, fingerprint). You will log in with BankID or Vipps again. This cannot be undone.",
                nb: "Begynne på nytt? Dette sletter \(sessions) lagrede økt\(sessions == 1 ? "" : "er") og \(factorCount) opplåsingsmåte\(factorCount == 1 ? "" : "r") (PIN-kode, fingeravtrykk). Du logger inn med BankID eller Vipps igjen. Dette kan ikke angres.")
            let yes: Bool
            do {
                yes = try await conversation.confirm(question)
            } catch {
                if error == .notInteractive {
                    throw .badRequest(LocalizedText(
                        en: "Starting over deletes every saved session and needs a confirmation. Send “confirm”: true, or run “vaultctl reset” at a terminal.",
                        nb: "Å begynne på nytt sletter alle lagrede økter og krever en bekreftelse. Send «confirm»: true, eller kjør «vaultctl reset» i en terminal."))
                }
                throw failure(from: error)
            }
            guard yes else { throw VaultFailure(.cancelled) }
        }
        let vk: SecureBytes
        let device: KeyslotRow
        let publicKey: [UInt8]
        let publicKeyMAC: [UInt8]
        do {
            vk = try SecureBytes.random(count: KeyDerivation.keySize)
            device = try Keyslot.makeDeviceWrap(vaultKey: vk, deviceKey: deviceKey, now: Int64(now()))
            publicKey = try Vault.keyPair(vk).publicKey
            publicKeyMAC = try SessionSealing.publicKeyMAC(publicKey, deviceKey: deviceKey)
        } catch {
            throw .internal()
        }
        let removed = try storeCall(logger) { () throws(StoreError) in
            try keyslots.reset(to: device, meta: [SessionSealing.publicKeyMeta: publicKey, SessionSealing.publicKeyMACMeta: publicKeyMAC])
        }
        softBoxes = [:]
        self.sessions.publicKey = publicKey
        strongLoginAt = nil
        let accounts = table.allEntries().values.map(\.meta.account)
        table.removeAll()
        for account in accounts { events.emit(.loggedOut(account: account)) }
        grants.forgetAll()
        table.setVaultKey(vk, now: now())
        audit.record("reset", outcome: "ok", detail: ["sessions": .int(Int64(removed)), "factors": .int(Int64(factorCount))],
                     requester: conversation.requester)
        return ResetResult(sessionsRemoved: removed, factorsRemoved: factorCount)
    }
}

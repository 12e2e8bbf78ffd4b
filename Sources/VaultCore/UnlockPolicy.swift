import VaultFactor
import VaultProtocol
import VaultStore

/// The unlock policy as a plain value: which factors may open the vault now
/// and in what order, what a locked client is told to try, and what guards
/// the sessions at rest. The `Vault` actor builds one from its state for each
/// decision (`Vault.policy`); nothing here reads the store, the keyring or
/// the clock, so every rule can be tested on its own (UnlockPolicyTests).
///
/// The order: the enrolled factors by rank (fingerprint, PIN), then a fresh
/// login with any configured provider. A presence factor (fingerprint) counts
/// only while its soft unlock lives in memory (docs/key-hierarchy.md).
struct UnlockPolicy {
    /// The registered factors, in policy (rank) order.
    var factors: [FactorDescriptor]
    /// Keyslot rows by id: the wraps that open the vault key, and factor records.
    var slots: [String: KeyslotRow]
    /// The factors whose slot is a secret wrap (the PIN).
    var secretFactors: Set<String>
    /// Presence factors whose soft unlock is in memory.
    var liveSoftUnlocks: Set<FactorID>
    /// The providers a fresh login can use, by id.
    var loginProviders: [String]

    /// A PIN (any secret factor) is enrolled: then it alone opens the vault key at rest.
    var hasSecretFactor: Bool { slots.values.contains { secretFactors.contains($0.factor) } }

    /// Factors with a slot, in policy order.
    var enrolledFactors: [FactorID] { factors.map(\.id).filter { slots[$0.rawValue] != nil } }

    /// Enrolled factors that can open the vault now, in policy order. A v1
    /// fingerprint slot still wraps the vault key itself, until its next match migrates it.
    var usableFactors: [FactorID] {
        factors.filter { d in
            guard slots[d.id.rawValue] != nil else { return false }
            guard d.contribution == .presenceOnly else { return true }
            return liveSoftUnlocks.contains(d.id) || slots[d.id.rawValue]?.version == Keyslot.legacyVersion
        }.map(\.id)
    }

    /// What a locked client may try, for the `locked` error: the usable
    /// factors, then every login.
    var lockedFactorList: [String] { usableFactors.map(\.rawValue) + loginProviders }

    /// Some slot still opens the vault key (the device slot or the PIN's).
    var canOpenVaultKey: Bool { slots.values.contains { Keyslot.isWrap($0, secretFactors: secretFactors) } }

    /// The `locked` answer, with the factors to try and a next step that works:
    /// when no slot can open the vault key any more, the login (a new session)
    /// and `vaultctl reset`, never a way that cannot work.
    func lockedFailure() -> VaultFailure {
        guard canOpenVaultKey else {
            return VaultFailure(.locked, message: Messages.vaultUnopenable,
                                extra: ["factors": .array(loginProviders.map { .string($0) })])
        }
        return .locked(factors: lockedFactorList)
    }

    /// After a login that left the vault locked (with a PIN, always; without
    /// one, another login than the owner's): its session works, the older ones
    /// wait for the PIN, or for an unlock.
    func loggedInButLocked() -> VaultFailure {
        VaultFailure(.locked, message: hasSecretFactor ? Messages.loggedInOthersWaitForPIN : Messages.loggedInOthersWaitForUnlock,
                     extra: ["factors": .array(lockedFactorList.map { .string($0) })])
    }

    /// What a login that left the vault locked tells the person (nil:
    /// nothing): what waits for the PIN (the sessions saved before, the offer
    /// to set `name` up again), or without a PIN what waits for an unlock.
    func loggedInLocked(sessionsWaiting: Bool, thenSetUp name: LocalizedText?) -> LocalizedText? {
        guard hasSecretFactor else { return sessionsWaiting ? Messages.loggedInOthersWaitForUnlock : nil }
        guard sessionsWaiting || name != nil else { return nil }
        return Messages.loggedInWaitingForPIN(sessionsWaiting: sessionsWaiting, thenSetUp: name)
    }

    /// A presence factor asked for by name while its soft unlock is gone.
    func softUnlockNeedsPIN(_ name: LocalizedText) -> VaultFailure {
        VaultFailure(.locked, message: Messages.softUnlockGone(name, hasPIN: hasSecretFactor),
                     extra: ["factors": .array(lockedFactorList.map { .string($0) })])
    }

    /// The factors an unlock tries, in order: the one asked for, or every usable one.
    func candidates(preferred: FactorID?) -> [FactorID] { preferred.map { [$0] } ?? usableFactors }

    /// One sentence on what guards the sessions at rest, when it is only the
    /// device key (no PIN) and an unlock method is set up: the threat model's
    /// "fingerprint without a PIN".
    var atRestWarning: LocalizedText? {
        guard !hasSecretFactor, !enrolledFactors.isEmpty else { return nil }
        return Messages.fingerprintWithoutPIN
    }

    /// What a session sealed under the vault key waits for while it is locked.
    var sessionWaits: LocalizedText { hasSecretFactor ? Messages.sessionWaitsForPIN : Messages.sessionWaitsForUnlock }
}

import VaultFactor

/// The offer to set a factor up (fingerprint login) after a login, S6: which
/// factors are offered, when, and what the person said. A plain value the
/// `Vault` actor keeps: it decides, the actor asks (`offerPendingReenrollment`,
/// Login.swift) and saves a change of mind (`noteOffer`).
struct EnrollmentOffers {
    /// The store's meta key for the declined offers.
    static let storeKey = "declined-offers"

    /// Offers the person declined ("Not now", or turning the factor off):
    /// kept in the store, so a restart does not ask again; setting the factor
    /// up (`vaultctl enroll`, the settings) clears its entry.
    private(set) var declined: Set<FactorID>
    /// Factors that failed in the unlock that ended in a fallback login:
    /// setting them up again is offered before the session is handed over.
    var failedBeforeFallback: Set<FactorID> = []
    /// When a login that met its provider's re-enrollment level last finished
    /// in this run: setting a changed fingerprint up again needs one.
    var strongLoginAt: Double?

    /// From what the store kept (`saved`: the declined ids, one a line).
    init(saved: [UInt8]?) {
        declined = Set((saved.map { String(decoding: $0, as: UTF8.self) } ?? "").split(separator: "\n").map { FactorID(String($0)) })
    }

    /// What the store keeps: the declined ids, sorted, one a line.
    var saved: [UInt8] { Array(declined.map(\.rawValue).sorted().joined(separator: "\n").utf8) }

    /// Records that the offer of `id` was declined (or is welcome again);
    /// returns whether that changed anything (and so is to be saved).
    mutating func note(_ id: FactorID, declined isDeclined: Bool) -> Bool {
        guard declined.contains(id) != isDeclined else { return false }
        if isDeclined { declined.insert(id) } else { declined.remove(id) }
        return true
    }

    /// Starting over: a new vault, so every offer comes again after its first
    /// login, and no login of this run has been strong for it yet.
    mutating func startOver() -> Bool {
        strongLoginAt = nil
        guard !declined.isEmpty else { return false }
        declined = []
        return true
    }

    /// A factor as the offers see it.
    struct Candidate {
        let descriptor: FactorDescriptor
        /// Its slot is in the vault.
        let enrolled: Bool
        /// Its enrollment changed (the fingerprints on the reader), so its slot went stale.
        let stale: Bool
    }

    /// What to do about one factor after a login, if the factor can be used now.
    enum Step: Equatable {
        /// Ask whether to turn it on.
        case ask(FactorID)
        /// Say that only a login with BankID or Vipps at the provider's
        /// re-enrollment level may turn it back on (it changed), instead of asking.
        case needsStrongLogin(FactorID)

        /// The factor it is about.
        var factor: FactorID {
            switch self {
            case .ask(let id), .needsStrongLogin(let id): id
            }
        }
    }

    /// The offers to make after a login, in the policy's order (`candidates`):
    /// factors that want offering and are not set up (a first login, or a slot
    /// gone stale) or just failed before this fallback login, and that the
    /// person has not declined. Takes the failures: they are offered once.
    mutating func afterLogin(_ candidates: [Candidate]) -> [Step] {
        let failed = failedBeforeFallback
        failedBeforeFallback = []
        return candidates.compactMap { c in
            let id = c.descriptor.id
            guard c.descriptor.offerAfterLogin, !c.enrolled || failed.contains(id), !declined.contains(id) else { return nil }
            return c.stale && strongLoginAt == nil ? .needsStrongLogin(id) : .ask(id)
        }
    }

    /// The factor the offer after the next PIN will ask about, when a login
    /// left the vault locked (a PIN is set): one that wants offering, whose
    /// enrollment changed (its slot is gone), not declined, now that a strong
    /// login of this run may set it up again.
    func afterPIN(_ candidates: [Candidate]) -> FactorDescriptor? {
        guard strongLoginAt != nil else { return nil }
        return candidates.first { c in
            c.descriptor.offerAfterLogin && !c.enrolled && c.stale && !declined.contains(c.descriptor.id)
        }?.descriptor
    }
}

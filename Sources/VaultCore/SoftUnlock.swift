import FoundationEssentials
import VaultFactor

/// The soft box: how a presence factor (the fingerprint) reopens a locked vault
/// without ever guarding anything at rest, as on phones (iOS and Android ask for
/// the passcode after a restart).
///
/// VK is sealed under BLAKE2b(E, enrollment digest), where E is random and lives
/// only in this process's secure memory. So the box opens only here, only while
/// vaultd runs, and only with the enrollment the factor was set up with; a
/// changed enrollment gives another key. Nothing of it is ever written to disk.
struct SoftUnlock {
    private let ephemeralKey: SecureBytes
    private let box: SealedBox
    /// When the PIN or a login last opened the vault: the box lives
    /// `fingerprint_max_hours` from then.
    let since: Double
    /// Failed scans against this box, across unlocks (requests, connections,
    /// Cancel, timeouts). It lives here because what resets it is exactly what
    /// makes a new box: the PIN, a login that reaches the vault key, setting the
    /// factor up (`Vault.openHard`, `Vault.adopt`, `Vault.enroll`); a match sets it
    /// back to 0; the factor's limit drops the box and the count with it, and so
    /// do an enrollment change, `fingerprint_max_hours` and a restart. A login at
    /// a locked vault with a PIN makes no box and so resets nothing: it is also
    /// how a stranger with their own BankID logs in, and must buy no fresh tries.
    /// model/unlock.pml: `fp_fails`.
    var failedScans = 0

    private static let label = "sessionvault/soft-unlock/v1"

    init(vaultKey: SecureBytes, factor: FactorID, digest: [UInt8], since: Double) throws(SodiumError) {
        let e = try SecureBytes.random(count: KeyDerivation.keySize)
        ephemeralKey = e
        box = try SecretBox.seal(vaultKey, key: Self.key(e, digest), associatedData: Array("\(Self.label)|\(factor.rawValue)".utf8))
        self.since = since
    }

    private static func key(_ e: SecureBytes, _ digest: [UInt8]) throws(SodiumError) -> SecureBytes {
        try KeyDerivation.derive(key: e, parts: [.label(label), .bytes(digest)])
    }

    /// VK, when `digest` is the enrollment the box was made with.
    func open(factor: FactorID, digest: [UInt8]) -> SecureBytes? {
        guard let k = try? Self.key(ephemeralKey, digest) else { return nil }
        return try? SecretBox.open(box, key: k, associatedData: Array("\(Self.label)|\(factor.rawValue)".utf8))
    }

    /// The same box (not one made since by a PIN or a login): a count read
    /// before a scan is written back only into the box it was read from.
    func isSameBox(as other: SoftUnlock) -> Bool { ephemeralKey === other.ephemeralKey }

    func expired(now: Double, maxSeconds: Double) -> Bool {
        maxSeconds > 0 && now - since >= maxSeconds
    }
}

/// The presence factors' soft boxes, and the rules of their life: made for
/// every presence factor whose record is intact when the vault key comes in
/// for good (the PIN, a login, the start), each living `fingerprint_max_hours`
/// from then; a box's failed scans written back only into the box they were
/// counted against, and forgiven by a match (model/unlock.pml: `fp_fails`).
/// A value the actor owns; it audits what `live` says expired.
struct SoftBoxes {
    private var boxes: [FactorID: SoftUnlock] = [:]

    /// A soft box for every presence factor whose record is intact.
    init(for factors: [FactorID: any UnlockFactor], keyslots: Keyslots, vaultKey: SecureBytes, since: Double) {
        for (id, factor) in factors where factor.descriptor.contribution == .presenceOnly {
            guard case .intact(let binding) = keyslots.check(id.rawValue),
                  let digest = Keyslot.digest(in: binding) else { continue }
            boxes[id] = try? SoftUnlock(vaultKey: vaultKey, factor: id, digest: digest, since: since)
        }
    }

    init() {}

    /// The box of `id` as it is (expired or not): a scan's count is read from it.
    subscript(id: FactorID) -> SoftUnlock? {
        get { boxes[id] }
        set { boxes[id] = newValue }
    }

    /// The factors with a box, expired or not (`live` drops the expired).
    var factors: Set<FactorID> { Set(boxes.keys) }

    var isEmpty: Bool { boxes.isEmpty }

    /// The box of `id`, unless its time is up (`maxSeconds`; 0: no limit): then
    /// it is dropped, and `expired` says so for the audit.
    mutating func live(_ id: FactorID, now: Double, maxSeconds: Double) -> (box: SoftUnlock?, expired: Bool) {
        guard let box = boxes[id] else { return (nil, false) }
        guard box.expired(now: now, maxSeconds: maxSeconds) else { return (box, false) }
        boxes[id] = nil
        return (nil, true)
    }

    /// A match is the person: the failed scans before it are forgiven.
    mutating func matched(_ id: FactorID) { boxes[id]?.failedScans = 0 }

    /// Writes `failures` (a scan's count, read from `box` before it) back into
    /// that box; a box made since (by the PIN or a login) starts at zero.
    mutating func keep(_ failures: Int, countedAgainst box: SoftUnlock?, of id: FactorID) {
        guard let box, let current = boxes[id], current.isSameBox(as: box) else { return }
        boxes[id]?.failedScans = max(current.failedScans, failures)
    }
}

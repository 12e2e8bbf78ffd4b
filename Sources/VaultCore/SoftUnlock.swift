import Foundation
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

    func expired(now: Double, maxSeconds: Double) -> Bool {
        maxSeconds > 0 && now - since >= maxSeconds
    }
}

import VaultFactor
import VaultStore

/// The vault's X25519 key pair (docs/key-hierarchy.md): derived from the vault
/// key, its public half stored with a MAC under the device key, so sessions can
/// be sealed for the PIN while the PIN is not at hand.
enum VaultKeyPair {
    static func derive(_ vk: SecureBytes) throws(SodiumError) -> (publicKey: [UInt8], secretKey: SecureBytes) {
        try PublicKeyBox.keyPair(seed: try KeyDerivation.derive(key: vk, parts: [.label(SessionSealing.vaultKeyPairLabel)]))
    }

    static func ensureStored(_ vk: SecureBytes, store: VaultStore, deviceKey: SecureBytes) throws -> [UInt8] {
        let publicKey = try derive(vk).publicKey
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

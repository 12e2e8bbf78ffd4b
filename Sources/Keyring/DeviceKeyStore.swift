import SodiumKit
import VaultProtocol

/// Where the device key (DK) lives. The DK protects everything at rest against someone
/// holding only the disk, so it must never be stored next to the vault file unless the
/// user explicitly chose the weaker file store.
public protocol DeviceKeyStore: Sendable {
    /// "secret-service" or "file", for logs and `status`.
    var kind: String { get }
    /// Returns the 32-byte device key, creating and storing a new random one if none exists.
    func loadOrCreate() throws(KeyringError) -> (key: SecureBytes, created: Bool)
    /// Returns the device key, or nil if none is stored.
    func load() throws(KeyringError) -> SecureBytes?
    /// Removes the stored device key (used by tests and `vaultctl wipe`).
    func delete() throws(KeyringError)
}

/// Every key store hands out keys of exactly this size; anything else is corruption.
let deviceKeyLength = 32

public enum KeyringError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The Secret Service collection is locked.
    case locked
    /// No bus, or no Secret Service on the bus (detail for logs, never secrets).
    case unavailable(String)
    /// Anything else (detail for logs).
    case failed(String)
    /// File store: a symlink, a file owned by another user, or one others may read or write.
    case unsafeFile(String)

    /// The sentence for a person, with a next step.
    public var message: LocalizedText {
        switch self {
        case .locked: return Messages.keyringLocked
        case .unavailable: return Messages.keyringMissing
        case .failed: return Messages.keyringFailed
        case .unsafeFile: return KeyringError.unsafeFileMessage
        }
    }

    // Kept here rather than in VaultProtocol.Messages because only the file store
    // can produce it and nothing on the wire carries it.
    static let unsafeFileMessage = LocalizedText(
        en: "The device key file is not safe: it is a link, belongs to another user, or others can read or change it. Make it a plain file that only you can read and write (chmod 600), then start vaultd again.",
        nb: "Enhetsnøkkelfilen er ikke trygg: den er en lenke, tilhører en annen bruker, eller andre kan lese eller endre den. Gjør den til en vanlig fil som bare du kan lese og skrive (chmod 600), og start vaultd igjen.")

    public var description: String {
        switch self {
        case .locked: return "keyring locked: the Secret Service collection is locked"
        case .unavailable(let detail): return "keyring unavailable: \(detail)"
        case .failed(let detail): return "keyring failed: \(detail)"
        case .unsafeFile(let detail): return "unsafe key file: \(detail)"
        }
    }
}

/// A fresh random device key, with allocation failures reported as keyring failures
/// so callers see one error type.
func makeDeviceKey() throws(KeyringError) -> SecureBytes {
    do {
        return try SecureBytes.random(count: deviceKeyLength)
    } catch {
        throw .failed("could not create a device key: \(error)")
    }
}

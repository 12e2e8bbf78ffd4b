/// Where the audit log's chain head (the last entry's seq and MAC, as text) is
/// kept: beside the device key, outside the vault file, so deleting the newest
/// entries or putting back an older copy of the store shows as a head the log
/// no longer reaches (VaultCore's AuditLog). It needs no secrecy, only to live
/// where a rollback of the store does not reach.
public protocol AuditHeadStore: Sendable {
    /// The stored head, or nil if none was ever saved.
    func loadAuditHead() throws(KeyringError) -> String?
    /// Replaces the stored head.
    func saveAuditHead(_ text: String) throws(KeyringError)
}

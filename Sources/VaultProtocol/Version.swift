/// SessionVault's version: what `vaultd --version`, `vaultctl --version` and
/// hello's `server` field say. The VERSION file at the repository root is the
/// one place it is written down; this copy must equal it (VersionTests checks,
/// and scripts/package refuses to build a package whose binaries say otherwise).
/// Kept in VaultProtocol because both the daemon and the clients depend on it.
public enum SessionVaultVersion {
    public static let string = "0.1.0"
}

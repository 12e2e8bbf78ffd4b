import VaultFactor

/// The broker's settings (vaultd fills them from the TOML config and flags).
public struct VaultConfig: Sendable {
    /// Lock after this many seconds without a request; 0 = never.
    public var idleTimeout: Int
    /// Argon2id cost for new PIN slots; never below 64 MiB.
    public var pinCost: PasswordHash.Cost
    /// Seconds a client gets to answer one prompt.
    public var promptTimeout: Int
    /// Lock this long after the vault was opened, however busy it is (gpg-agent's
    /// max-cache-ttl); 0 = never.
    public var maxUnlocked: Int
    /// A presence factor (the fingerprint) reopens the vault for this long after
    /// the last PIN or login; then the PIN or a login is needed once. 0 = no limit.
    public var fingerprintMaxAge: Int
    /// Each session only to the apps allowed it (`per_app`, on by default);
    /// off, every app of the user gets every session (weaker: docs/threat-model.md).
    public var perApp: Bool

    public init(idleTimeout: Int = 900, pinCost: PasswordHash.Cost = .interactive, promptTimeout: Int = 120,
                maxUnlocked: Int = 12 * 3600, fingerprintMaxAge: Int = 48 * 3600, perApp: Bool = true) {
        self.perApp = perApp
        self.idleTimeout = idleTimeout
        self.maxUnlocked = maxUnlocked
        self.fingerprintMaxAge = fingerprintMaxAge
        var cost = pinCost
        cost.memLimit = max(cost.memLimit, PasswordHash.Cost.minimumMemory)
        self.pinCost = cost
        self.promptTimeout = promptTimeout
    }
}

/// Why vaultd could not open the vault at start. Each carries its sentence.
public enum VaultStartupError: Error, Sendable {
    case deviceKeyMismatch
    case store(LocalizedText, detail: String)
    case crypto(String)

    public var message: LocalizedText {
        switch self {
        case .deviceKeyMismatch: return Messages.deviceKeyMismatch
        case .store(let m, _): return m
        case .crypto:
            return LocalizedText(
                en: "The vault could not set up its encryption. Check that libsodium is installed and that memory can be locked (ulimit -l), then start vaultd again.",
                nb: "Hvelvet fikk ikke satt opp krypteringen. Sjekk at libsodium er installert og at minne kan låses (ulimit -l), og start vaultd igjen.")
        }
    }
}

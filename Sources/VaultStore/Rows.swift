/// The store's records. Every byte array here is opaque to the store: the vault
/// core seals before writing and opens after reading.

/// One wrapped copy of the vault key, per enrolled factor (LUKS-like).
public struct KeyslotRow: Sendable, Equatable {
    /// e.g. "pin", "fingerprint", "oidc", "device"
    public var id: String
    public var factor: String
    /// Keyslot format version.
    public var version: Int
    public var salt: [UInt8]
    /// JSON text of KDF parameters (opaque to the store).
    public var kdf: String
    /// JSON text of public binding facts (opaque to the store).
    public var binding: String
    /// The wrapped vault key.
    public var sealedKey: [UInt8]
    /// Unix seconds.
    public var createdAt: Int64

    public init(
        id: String, factor: String, version: Int, salt: [UInt8], kdf: String, binding: String,
        sealedKey: [UInt8], createdAt: Int64
    ) {
        self.id = id
        self.factor = factor
        self.version = version
        self.salt = salt
        self.kdf = kdf
        self.binding = binding
        self.sealedKey = sealedKey
        self.createdAt = createdAt
    }
}

/// One sealed session record.
public struct SessionRow: Sendable, Equatable {
    /// Random record id.
    public var id: String
    /// Hex SHA-256 of the refresh token (or access token), for listing/revocation.
    public var tokenHash: String
    /// Sealed under a device-key-derived key (readable while locked).
    public var sealedMeta: [UInt8]
    /// Sealed under the vault key.
    public var sealedSecret: [UInt8]
    public var recordVersion: Int
    public var createdAt: Int64
    public var updatedAt: Int64

    public init(
        id: String, tokenHash: String, sealedMeta: [UInt8], sealedSecret: [UInt8], recordVersion: Int,
        createdAt: Int64, updatedAt: Int64
    ) {
        self.id = id
        self.tokenHash = tokenHash
        self.sealedMeta = sealedMeta
        self.sealedSecret = sealedSecret
        self.recordVersion = recordVersion
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// Persisted PIN (or other factor) throttling state.
public struct FailureCounter: Sendable, Equatable {
    public var factor: String
    public var failures: Int
    /// Unix seconds; 0 = not locked.
    public var lockedUntil: Int64

    public init(factor: String, failures: Int, lockedUntil: Int64) {
        self.factor = factor
        self.failures = failures
        self.lockedUntil = lockedUntil
    }
}

/// One append-only audit record. The chain MAC is the caller's: the store only
/// keeps the order (`seq`) and hands the previous row to whoever appends.
public struct AuditRow: Sendable, Equatable {
    /// Assigned by the store, strictly increasing.
    public var seq: Int64
    /// Unix time.
    public var at: Double
    /// "enroll", "unlock", ...
    public var event: String
    public var factor: String?
    /// "ok", "failed", ...
    public var outcome: String
    /// JSON text, never secrets.
    public var detail: String
    public var pid: Int32?
    public var exe: String?
    /// Chain MAC computed by the caller.
    public var mac: [UInt8]

    public init(
        seq: Int64 = 0, at: Double, event: String, factor: String? = nil, outcome: String,
        detail: String, pid: Int32? = nil, exe: String? = nil, mac: [UInt8]
    ) {
        self.seq = seq
        self.at = at
        self.event = event
        self.factor = factor
        self.outcome = outcome
        self.detail = detail
        self.pid = pid
        self.exe = exe
        self.mac = mac
    }
}

/// Where the audit chain starts once older rows were pruned: the last pruned
/// row's seq and MAC (the next row chains from it), and a tag over both keyed
/// from the device key, so only vaultd can move it.
public struct AuditAnchor: Sendable, Equatable {
    public var seq: Int64
    public var mac: [UInt8]
    public var tag: [UInt8]

    public init(seq: Int64, mac: [UInt8], tag: [UInt8]) {
        self.seq = seq
        self.mac = mac
        self.tag = tag
    }
}

/// A durable job for later features (member-record sync). The payload is opaque.
public struct JobRow: Sendable, Equatable {
    /// Assigned by the store.
    public var id: Int64
    /// What to do, e.g. "member-sync".
    public var kind: String
    public var payload: [UInt8]
    /// How many times the job was handed out and put back.
    public var attempts: Int
    /// Unix seconds before which the job is not due.
    public var notBefore: Int64
    public var createdAt: Int64

    public init(id: Int64 = 0, kind: String, payload: [UInt8], attempts: Int = 0, notBefore: Int64 = 0, createdAt: Int64) {
        self.id = id
        self.kind = kind
        self.payload = payload
        self.attempts = attempts
        self.notBefore = notBefore
        self.createdAt = createdAt
    }
}

/// What the writer connection reports about itself; for tests and `status` output.
public struct StoreDiagnostics: Sendable, Equatable {
    /// `PRAGMA journal_mode`, expected "wal".
    public var journalMode: String
    /// `PRAGMA synchronous` on the writer, expected 2 (FULL).
    public var synchronous: Int
    /// `PRAGMA user_version`.
    public var schemaVersion: Int
    /// The SQLite library in use.
    public var sqliteVersion: String
}

/// One app's grant for one account; `sealed` is opaque to the store.
public struct GrantRow: Sendable, Equatable {
    public var id: String
    public var sealed: [UInt8]
    public var updatedAt: Int64

    public init(id: String, sealed: [UInt8], updatedAt: Int64) {
        self.id = id
        self.sealed = sealed
        self.updatedAt = updatedAt
    }
}

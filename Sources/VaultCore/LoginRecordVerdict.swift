import VaultProtocol
import VaultStore

/// One job: what a verified login's identity record (`login:PROVIDER`, or
/// `login:person` for logins that prove a national ID) says about that login,
/// and so what the login may do (docs/key-hierarchy.md, "A fresh login"). A
/// plain value: no store, no keys, no clock; the `Vault` actor audits, refuses
/// and stores as it says (`Vault.adopt`, Login.swift).
enum LoginRecordVerdict: Equatable {
    /// No record for this provider (or person) yet.
    case firstSeen
    /// The record names this identity: the vault's owner.
    case owner
    /// The record names someone else: the login is refused.
    case otherIdentity
    /// The record fails its MAC (edited, or another device key's). Without a
    /// PIN it is what lets a login reopen the vault, so the login is refused;
    /// with a PIN it opens nothing and is written again.
    case damaged(refused: Bool)
    /// A newer SessionVault's record: not understood here, never overwritten.
    case newer

    /// `check` is the record's MAC check (nil: no record), `binding` what this login proves.
    init(check: Keyslot.RecordCheck?, binding: [String: String], hasSecretFactor: Bool) {
        switch check {
        case nil: self = .firstSeen
        case .intact(let recorded): self = recorded == binding ? .owner : .otherIdentity
        case .damaged: self = .damaged(refused: !hasSecretFactor)
        case .newerVersion: self = .newer
        }
    }

    /// What the audit log says of a login this verdict does not simply let
    /// through, and the failure when it refuses the login (nil: it goes on).
    func audited(providerName: String) -> (outcome: String, refusal: VaultFailure?)? {
        switch self {
        case .firstSeen, .owner:
            return nil
        case .otherIdentity:
            return ("other_identity", VaultFailure(.loginFailed, message: Messages.loginOfAnotherPerson(providerName)))
        case .damaged(let refused):
            return ("record_damaged", refused ? VaultFailure(.loginFailed, message: Messages.identityRecordDamaged) : nil)
        case .newer:
            return ("record_newer", nil)
        }
    }

    /// Without a PIN the owner's login reopens a locked vault through the
    /// device slot. So does the first login of a vault that has no owner yet
    /// (no identity recorded at all: its sessions were imported, or it was
    /// locked before any login), which it then records as its owner, as at an
    /// open vault: without a PIN only the device key guards such a vault, and
    /// anything that can restart vaultd opens it anyway, so refusing would
    /// only leave the person locked out of their own sessions until a restart.
    /// A vault with an owner is never reopened by another identity.
    func reopensVault(vaultOpen: Bool, hasSecretFactor: Bool, hasOwner: Bool) -> Bool {
        !vaultOpen && !hasSecretFactor && (self == .owner || (self == .firstSeen && !hasOwner))
    }

    /// At an open vault the owner's (or a first) login renews the soft boxes' time limit, as the PIN does.
    func renewsSoftUnlocks(vaultOpen: Bool) -> Bool {
        vaultOpen && (self == .owner || self == .firstSeen)
    }

    /// The identity is recorded only while the vault is open, so a stranger's
    /// login at a locked vault never becomes its owner's; a newer record is kept.
    func recordsIdentity(vaultOpen: Bool) -> Bool {
        vaultOpen && (self == .firstSeen || self == .damaged(refused: false))
    }
}

import DaemonConfig
import DemoProviders
import FoundationEssentials
import Logging
import MemberSync
import Locking
import VaultCore
import VaultFactor
import VaultProtocol
import VaultStore

/// The broker's `MemberDirectory`, made of member sync (the national identity
/// number on the member record) and the minimum-age
/// policies of `[providers.NAME] min_age`.
final class RegistryMembers: MemberDirectory {
    let sync: MemberSync?
    let minimumAge: [String: Int]

    init(sync: MemberSync?, minimumAge: [String: Int]) {
        self.sync = sync
        self.minimumAge = minimumAge
    }

    func review(_ login: VerifiedLogin) async throws(VaultFailure) -> [String: JSON] {
        if let age = minimumAge[login.provider],
           let refused = MinimumAgePolicy(minAge: age).check(nationalID: login.nationalID, birthdateClaim: login.claims["birthdate"]?.stringValue) {
            throw refused
        }
        guard let sync else { return [:] }
        if let nin = login.nationalID {
            return await sync.sync(provider: login.provider, subject: login.subject, nationalID: nin).context?.claims ?? [:]
        }
        return await sync.refreshContext(provider: login.provider, subject: login.subject)?.claims ?? [:]
    }

    func setActiveOrganization(_ org: String, provider: String, subject: String) async throws(VaultFailure) -> [String: JSON] {
        guard let sync else { return try await NoMemberDirectory().setActiveOrganization(org, provider: provider, subject: subject) }
        do {
            return try await sync.setActiveOrganization(org, provider: provider, subject: subject).claims
        } catch {
            throw VaultFailure(.badRequest, message: error.message)
        }
    }

    func conflicts() async -> [JSON] {
        guard let sync else { return [] }
        return ((try? await sync.conflicts()) ?? []).map(\.publicJSON)
    }

    /// The registry from `[members]` (or a seeded SQLite one in demo mode).
    static func registry(_ config: FileConfig.MembersSection?, dataDir: String, demo: Bool) throws -> (any MemberRegistry)? {
        // The registry may be the first file in the data dir (the store comes later).
        if !FileManager.default.fileExists(atPath: dataDir) {
            try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        if demo {
            // In memory: the demo registry plays the organization's member
            // server, and the numbers it learns must not lie in clear in the
            // person's data dir. It is seeded afresh at every start.
            let registry = try SQLiteMemberRegistry(path: ":memory:")
            // The demo's synthetic people, with no national ID on record yet:
            // the first login fills it in ("member record updated").
            try registry.seed(DemoIdentity.all.map { person in
                SQLiteMemberRegistry.SeedMember(
                    id: "demo-" + person.id, name: person.name,
                    logins: ["bankid", "vipps"].map { MemberKey(provider: $0, subject: person.stableSubject(provider: $0)) },
                    organizations: ([(person.organization, person.roles)] + person.otherMemberships.map { ($0.organization, $0.roles) })
                        .map { name, roles in Organization(id: name.lowercased().replacing(" ", with: "-"), name: name, roles: roles) })
            })
            return registry
        }
        switch config?.registry ?? "none" {
        case "none": return nil
        case "sqlite": return try SQLiteMemberRegistry(path: config?.path ?? dataDir + "/members.sqlite")
        case "http":
            guard let url = config?.url else { throw ConfigError(detail: "members.url is needed for registry = \"http\"") }
            let header = config?.auth_header.map { value -> HTTPMemberRegistry.AuthHeader in
                let parts = value.split(separator: ":", maxSplits: 1)
                return parts.count == 2
                    ? HTTPMemberRegistry.AuthHeader(name: String(parts[0]), value: parts[1].trimmingSpaces)
                    : .bearer(value)
            }
            return HTTPMemberRegistry(baseURL: url, authHeader: header, timeout: .seconds(config?.timeout ?? 10))
        default:
            throw ConfigError(detail: "members.registry must be “none”, “sqlite” or “http”")
        }
    }
}

/// Audit events from member sync go to the vault's audit log, which exists
/// only once the vault is open: this forwards them when it does.
final class AuditForwarder: Sendable {
    private let target = Locked<AuditLog?>(nil)
    func attach(_ log: AuditLog) { target.withLock { $0 = log } }
    func record(_ e: SyncAuditEvent) {
        target.withLock { $0 }?.record(e.event, outcome: e.outcome, detail: e.detail)
    }
}

extension VaultDaemon {
    /// Retries queued member-sync work with backoff (the queue is in the store,
    /// so it survives restarts), until cancelled.
    static func retryMemberSync(_ sync: MemberSync) async {
        while !Task.isCancelled {
            _ = await sync.runDue()
            do { try await Task.sleep(for: .seconds(30)) } catch { return }
        }
    }
}

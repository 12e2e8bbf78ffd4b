import FoundationEssentials
import VaultCore
import VaultFactor
import VaultProtocol
import VaultWire

/// The ops: each turns a decoded request into a call on the broker and its
/// result into a result object. Field checking lives here; policy lives in
/// the broker.
extension RequestHandler {
    func route(_ request: Request, _ conversation: any ClientConversation) async throws(VaultFailure) -> JSON {
        let language = conversation.language
        try checkCaller(request.op, conversation.requester)
        switch request.op {
        case "status":
            let factors = await vault.factorStatuses()
            let accounts = await vault.accounts(visibleTo: conversation.requester)
            var result: [String: JSON] = [
                "locked": .bool(vault.isLocked),
                "accounts": .array(accounts.map { a in
                    var o: [String: JSON] = ["account": .string(a.account), "provider": .string(a.provider), "name": .string(a.name)]
                    if let waiting = a.waiting { o["waiting"] = .string(waiting.text(language)) }
                    if !a.organizations.isEmpty {
                        o["orgs"] = .array(a.organizations.map { ["id": .string($0.id), "name": .string($0.name)] })
                        if let active = a.activeOrganization { o["org"] = .string(active) }
                    }
                    return .object(o)
                }),
                "factors": .array(factors.map { $0.json(language) }),
                "providers": .array(await vault.providerStatuses().map { p in
                    var o: [String: JSON] = ["provider": .string(p.id), "name": .string(p.name), "unlocks": .bool(p.unlocks)]
                    if let backend = p.backend { o["backend"] = .string(backend) }
                    if let note = p.sessionNote { o["session"] = .string(note.text(language)) }
                    return .object(o)
                }),
            ]
            if let warning = await vault.atRestWarning() { result["at_rest"] = .string(warning.text(language)) }
            if let chip = await vault.chipProtection() { result["protection"] = .string(chip.text(language)) }
            return .object(result)
        case "factors":
            return ["factors": .array(await vault.factorStatuses().map { $0.json(language) })]
        case "session":
            guard let minValid = RequestHandler.minValid(request) else {
                throw .badRequest(LocalizedText(en: "“min_valid” must be a whole number of seconds, 0 or more.",
                                                nb: "«min_valid» må være et helt antall sekunder, 0 eller mer."))
            }
            return try await vault.release(account: try optionalString(request, "account"), minValid: minValid,
                                           conversation: conversation).json
        case "unlock":
            let factor = try optionalString(request, "factor").map(FactorID.init(rawValue:))
            try await vault.unlock(factor: factor, conversation: conversation)
            return ["locked": false]
        case "lock":
            try await vault.lock(askedBy: conversation.requester)
            return ["locked": true]
        case "logout":
            let all = request["all"]?.boolValue ?? false
            let r = try await vault.logout(account: try optionalString(request, "account"), all: all, requester: conversation.requester)
            return ["revoked": .int(Int64(r.removed)), "revoked_at_provider": .int(Int64(r.revokedAtProvider))]
        case "login":
            // No provider named: vaultd asks the person which (docs/protocol.md).
            return try await vault.login(provider: try optionalString(request, "provider"), conversation: conversation).json
        case "enroll", "reenroll":
            let status = try await vault.enroll(try factorField(request), conversation: conversation)
            return status.json(language)
        case "disable":
            let confirmed = request["confirm"]?.boolValue ?? false
            let status = try await vault.disable(try factorField(request), confirmed: confirmed, conversation: conversation)
            return status.json(language)
        case "reset":
            let r = try await vault.reset(confirmed: request["confirm"]?.boolValue ?? false, conversation: conversation)
            return ["sessions_removed": .int(Int64(r.sessionsRemoved)), "factors_removed": .int(Int64(r.factorsRemoved)), "locked": false]
        case "import":
            let meta = try await vault.importSession(try importRequest(request), conversation: conversation)
            return ["account": .string(meta.account), "provider": .string(meta.provider)]
        case "context":
            guard let org = try optionalString(request, "org") else {
                throw .badRequest(LocalizedText(en: "Say which organization, for example “Mentorhuset Oslo”.",
                                                nb: "Si hvilken organisasjon, for eksempel «Mentorhuset Oslo»."))
            }
            let claims = try await vault.setActiveOrganization(org, account: try optionalString(request, "account"),
                                                               requester: conversation.requester)
            return ["claims": .object(claims)]
        case "apps", "revoke_app", "allow_app":
            return try await appsOp(request, conversation)
        case "sync_conflicts":
            return ["conflicts": .array(await vault.memberConflicts())]
        case "sessions":
            return ["sessions": .array(await vault.accounts(visibleTo: conversation.requester).map { a in
                var o: [String: JSON] = [
                    "account": .string(a.account), "provider": .string(a.provider), "name": .string(a.name),
                    "token_hash": .string(a.tokenHash), "refreshable": .bool(a.hasRefreshToken),
                ]
                o["expires_at"] = a.accessExpiresAt.map { .int($0) } ?? .null
                if let waiting = a.waiting { o["waiting"] = .string(waiting.text(language)) }
                return .object(o)
            })]
        case "audit":
            if request["verify"]?.boolValue == true {
                let v = try vault.checkAudit(askedBy: conversation.requester)
                return [
                    "ok": .bool(v.intact), "first_bad": v.firstBad.map { .int($0) } ?? .null, "missing": .int(v.missing),
                    "truncated": .array(v.truncations.map { ["seq": .int($0.seq), "at": .double($0.at), "missing": .int($0.missing)] }),
                ]
            }
            let limit = Int(max(1, min(request["limit"]?.intValue ?? 200, 1000)))
            let page: AuditLog.Page = request["newest"]?.boolValue == true
                ? .newest(limit) : .after(request["after"]?.intValue ?? 0, limit: limit)
            let rows = try vault.auditEntries(page, askedBy: conversation.requester)
                .filter { RequestHandler.mayRead(detail: $0.detail, conversation.requester) }
            return ["entries": .array(rows.map { r in
                [
                    "seq": .int(r.seq), "at": .double(r.at), "event": .string(r.event),
                    "factor": r.factor.map { .string($0) } ?? .null, "outcome": .string(r.outcome),
                    "detail": (try? JSON.parse(r.detail)) ?? .null,
                    "pid": r.pid.map { .int(Int64($0)) } ?? .null, "exe": r.exe.map { .string($0) } ?? .null,
                ]
            })]
        default:
            throw .badRequest(LocalizedText(
                en: "Unknown operation “\(String(request.op.prefix(64)))”. See docs/protocol.md for the operations.",
                nb: "Ukjent operasjon «\(String(request.op.prefix(64)))». Se docs/protocol.md for operasjonene."))
        }
    }

    /// Who may call what (docs/protocol.md, "Who may call what"). These ops
    /// change how the vault opens, delete what it holds or read every app's
    /// records: only the person may, at vaultctl's terminal or in vaultd's own
    /// dialogs. A sandboxed or unidentified app gets `app_not_allowed`, whatever
    /// it sends (`confirm: true` included); an unconfined process could run
    /// vaultctl itself, so it may. The ops not named here are open to every
    /// caller, each limited to what the caller may see (the broker's grants).
    static let personOnly: Set<String> = ["reset", "disable", "enroll", "reenroll", "allow_app", "sync_conflicts"]

    func checkCaller(_ op: String, _ requester: Requester) throws(VaultFailure) {
        guard requester.isConfined, RequestHandler.personOnly.contains(op) else { return }
        let audit = vault.audit
        var detail: [String: JSON] = ["op": .string(op)]
        if let app = requester.app {
            detail["app_kind"] = .string(app.kind.rawValue)
            detail["app"] = .string(app.name)
        }
        Task.detached(priority: .utility) { audit.record("admin_refused", outcome: "app_not_allowed", detail: detail, requester: requester) }
        throw VaultFailure(.appNotAllowed, message: op == "allow_app" ? Messages.sandboxCannotGrant : Messages.notForApps)
    }

    /// An audit entry a confined app may read: only those naming its own app.
    static func mayRead(detail text: String, _ requester: Requester) -> Bool {
        guard requester.isConfined else { return true }
        guard requester.trust == .sandboxed, let app = requester.app,
              case .object(let detail)? = try? JSON.parse(text) else { return false }
        return detail["app"]?.stringValue == app.name && detail["app_kind"]?.stringValue == app.kind.rawValue
    }

    /// The `session` op's optional `min_valid` (seconds): 0 when absent, nil
    /// when it is not a whole number ≥ 0.
    static func minValid(_ request: Request) -> Int64? {
        guard let v = request["min_valid"], v != .null else { return 0 }
        guard let n = v.intValue, n >= 0 else { return nil }
        return n
    }

    func optionalString(_ request: Request, _ key: String) throws(VaultFailure) -> String? {
        switch request[key] {
        case .none, .some(.null): return nil
        case .some(.string(let s)): return s
        default:
            throw .badRequest(LocalizedText(en: "The field “\(key)” must be text.", nb: "Feltet «\(key)» må være tekst."))
        }
    }

    func factorField(_ request: Request) throws(VaultFailure) -> FactorID {
        guard let name = try optionalString(request, "factor"), !name.isEmpty else {
            throw .badRequest(LocalizedText(en: "Say which unlock method, for example “pin”.",
                                            nb: "Si hvilken opplåsingsmåte, for eksempel «pin»."))
        }
        return FactorID(rawValue: name)
    }

    func importRequest(_ request: Request) throws(VaultFailure) -> ImportRequest {
        guard let issuer = try optionalString(request, "issuer"), let clientID = try optionalString(request, "client_id") else {
            throw .badRequest(LocalizedText(en: "An import needs “issuer” and “client_id”.",
                                            nb: "En import trenger «issuer» og «client_id»."))
        }
        var expires: Int64?
        if let e = request["expires_at"], e != .null {
            guard let v = e.intValue else {
                throw .badRequest(LocalizedText(en: "“expires_at” must be a Unix time in seconds.",
                                                nb: "«expires_at» må være et Unix-tidspunkt i sekunder."))
            }
            expires = v
        }
        return ImportRequest(
            issuer: issuer, clientID: clientID, account: try optionalString(request, "account"),
            provider: try optionalString(request, "provider"), name: try optionalString(request, "name"),
            subject: try optionalString(request, "subject"), refreshToken: try optionalString(request, "refresh_token"),
            accessToken: try optionalString(request, "access_token"), accessExpiresAt: expires)
    }
}

// `apps` and `revoke_app` (docs/protocol.md): the grants, one entry per app.
extension RequestHandler {
    func appsOp(_ request: Request, _ conversation: any ClientConversation) async throws(VaultFailure) -> JSON {
        if request.op == "allow_app" {
            guard let app = try optionalString(request, "app"), !app.isEmpty, let account = try optionalString(request, "account") else {
                throw .badRequest(LocalizedText(en: "Say which app (KIND:NAME or its program's path) and which account.",
                                                nb: "Si hvilken app (TYPE:NAVN eller stien til programmet) og hvilken konto."))
            }
            let allowed = try await vault.allowApp(app, account: account, requester: conversation.requester)
            return ["app": .string(allowed.name), "kind": .string(allowed.kind.rawValue), "account": .string(account)]
        }
        if request.op == "revoke_app" {
            guard let app = try optionalString(request, "app"), !app.isEmpty else {
                throw .badRequest(LocalizedText(en: "Say which app, as “vaultctl apps” names it.",
                                                nb: "Si hvilken app, slik «vaultctl apps» navngir den."))
            }
            let removed = try await vault.revokeApp(app, requester: conversation.requester)
            return ["revoked": .array(removed.map { .string($0.account) })]
        }
        var byApp: [AppIdentity: [AppGrant]] = [:]
        for g in await vault.appGrants(visibleTo: conversation.requester) { byApp[g.app, default: []].append(g) }
        let apps = byApp.keys.sorted { $0.key < $1.key }.map { app -> JSON in
            let grants = byApp[app] ?? []
            let lastUse = grants.compactMap(\.lastUse).max()
            return [
                "app": .string(app.name), "kind": .string(app.kind.rawValue), "verified": .bool(app.verified),
                "name": .string(Messages.shown(DesktopEntryName.ofThisProcess.name(of: app, language: conversation.language)
                                               ?? app.shortName)),
                "accounts": .array(grants.map { .string($0.account) }), "last_use": lastUse.map { .int($0) } ?? .null,
            ]
        }
        return ["apps": .array(apps), "per_app": .bool(await vault.perApp)]
    }
}

import FoundationEssentials
import VaultFactor
import VaultProtocol

/// Each session goes only to the apps the person allowed (docs/threat-model.md,
/// "Apps and their grants"): the app that logs in or imports an account is
/// granted it; another app is asked about in vaultd's own dialog, never in a
/// prompt relayed to the asking app (which could answer it itself).
extension Vault {
    /// Grants the app behind `requester` the account it just logged in to or imported.
    func grantOnCreate(_ account: String, requester: Requester, reason: String) {
        // An unidentified peer is granted nothing: it could be anyone.
        guard config.perApp, requester.trust != .unidentified, let app = requester.app else { return }
        guard !grants.allows(app, account: account) else {
            grants.used(app, account: account, now: Int64(now()))
            return
        }
        do {
            try writeGrant(app, account: account, requester: requester, reason: reason)
        } catch {
            // The session is stored; the app is asked next time instead.
            logger.error("granting the app its own account failed", metadata: ["error": "\(error)"])
        }
    }

    /// Throws `app_not_allowed` unless the asking app may use `account`,
    /// asking the person when a trusted dialog can.
    func checkGrant(account: String, meta: SessionMeta, conversation: any ClientConversation) async throws(VaultFailure) {
        let requester = conversation.requester
        let app: AppIdentity
        let seen = denials
        switch GrantCheck(perApp: config.perApp, requester: requester, isGranted: { grants.allows($0, account: account) },
                          deniedAt: { seen.deniedAt($0, account: account) }, now: now()) {
        case .unchecked:
            return
        case .granted(let granted):
            grants.used(granted, account: account, now: Int64(now()))
            return
        case .refused(let outcome, let message, let named):
            audit.record("grant", outcome: outcome, detail: AppIdentity.auditDetail(named, account: account), requester: requester)
            throw VaultFailure(.appNotAllowed, message: message)
        case .ask(let asking):
            app = asking
        }
        let question = GrantQuestion(app: app, account: account,
                                     provider: meta.providerName(providers.provider(for: meta)),
                                     allowed: grants.apps(for: account), othersAllowed: grants.apps(besides: app))
        let detail = AppIdentity.auditDetail(app, account: account)
        let answer: GrantAnswer
        do {
            answer = try await conversation.askGrant(question)
        } catch {
            if let (outcome, failure) = GrantCheck.unanswered(error, app: app) {
                audit.record("grant", outcome: outcome, detail: detail, requester: requester)
                throw failure
            }
            answer = .deny
        }
        switch answer {
        case .allow:
            // Granted by another request while this dialog was open: nothing to write.
            guard !grants.allows(app, account: account) else { return }
            try writeGrant(app, account: account, requester: requester)
        case .once:
            audit.record("grant", outcome: "once", detail: detail, requester: requester)
        case .deny:
            denials.denied(app, account: account, now: now())
            audit.record("grant", outcome: "deny", detail: detail, requester: requester)
            throw VaultFailure(.appNotAllowed, message: Messages.appNotAllowed(app.shortName))
        }
    }

    /// Whether grants are checked (`per_app`).
    public var perApp: Bool { config.perApp }

    /// The grants `requester` may see, for `vaultctl apps`: every grant, but
    /// a sandboxed app (Flatpak, Snap) sees only its own, and can take back only its own.
    public func appGrants(visibleTo requester: Requester? = nil) -> [AppGrant] {
        grants.all.filter { $0.isManageable(by: requester) }
    }

    /// Whether `requester` may see `account` (`SessionTable.GrantAccess`, the
    /// rule a release reads too).
    func mayView(_ account: String, _ requester: Requester) -> Bool {
        table.grantAccess.mayView(account, requester)
    }

    /// Takes back every grant of the app named `name` (its name, or KIND:NAME);
    /// returns the grants removed.
    public func revokeApp(_ name: String, requester: Requester) throws(VaultFailure) -> [AppGrant] {
        let matches: (AppGrant) -> Bool = {
            ($0.app.name == name || $0.app.key == name || $0.app.shortName == name) && $0.isManageable(by: requester)
        }
        let doomed = grants.all.filter(matches)
        guard let first = doomed.first else { throw .badRequest(Messages.noSuchApp(String(name.prefix(256)))) }
        let entry = audit.entry("grant", outcome: "revoked", detail: [
            "app_kind": .string(first.app.kind.rawValue), "app": .string(first.app.name),
            "accounts": .array(doomed.map { .string($0.account) }),
        ], requester: requester)
        let removed = try grants.remove(where: matches, auditing: entry)
        audit.written(entry)
        for grant in removed { events.emit(.grantRevoked(account: grant.account, app: grant.app.key)) }
        return removed
    }

    /// Tells the event feed which apps may hear about which account (nil: any
    /// app, when grants are not checked).
    func publishAudience() {
        audienceGeneration = grants.generation
        events.setAudience(grants.audience(perApp: config.perApp))
    }

    /// The person allows `app` to use `account` from outside the apps
    /// (`vaultctl apps allow`): the terminal's answer to the dialog's Allow.
    /// A sandboxed caller may not; it could otherwise grant itself.
    public func allowApp(_ named: String, account: String, requester: Requester) throws(VaultFailure) -> AppIdentity {
        guard !requester.isConfined else { throw VaultFailure(.appNotAllowed, message: Messages.sandboxCannotGrant) }
        guard let app = AppIdentity(named: named) else { throw .badRequest(Messages.appNeedsKind(String(named.prefix(256)))) }
        guard table.id(forAccount: account) != nil else { throw .noSession(account) }
        guard !grants.allows(app, account: account) else { return app }
        try writeGrant(app, account: account, requester: requester, reason: "vaultctl")
        return app
    }

    /// Grants `app` the use of `account`, its audit entry in the same commit.
    /// `reason`: why without a dialog's Allow (a login, an import, vaultctl).
    private func writeGrant(_ app: AppIdentity, account: String, requester: Requester, reason: String? = nil) throws(VaultFailure) {
        var detail = AppIdentity.auditDetail(app, account: account)
        if let reason { detail["reason"] = .string(reason) }
        let entry = audit.entry("grant", outcome: "allow", detail: detail, requester: requester)
        try grants.grant(app, account: account, now: Int64(now()), auditing: entry)
        audit.written(entry)
    }

    /// Forgets the grants of accounts that are gone (logout): a new login grants anew.
    func dropGrants(accounts: Set<String>?) {
        do {
            _ = try grants.remove(where: { accounts?.contains($0.account) ?? true }, auditing: nil)
        } catch {
            logger.warning("the grants of a logged-out account could not be removed", metadata: ["error": "\(error)"])
        }
    }
}

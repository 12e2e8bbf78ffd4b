import VaultFactor
import VaultProtocol

/// Whether the asking app may use an account before any dialog is shown: a
/// plain value the `Vault` actor applies (`checkGrant`, Vault+Apps.swift), and
/// the small rules about apps it and the session table share.
/// docs/threat-model.md, "Apps and their grants".
enum GrantCheck: Equatable {
    /// Grants are not checked: `per_app = false`, or vaultd's own call (tests,
    /// the broker itself), which has no peer.
    case unchecked
    /// The app holds a grant for the account: its use is noted.
    case granted(AppIdentity)
    /// Refused without asking, audited with this outcome (and the app, when it is named).
    case refused(outcome: String, message: LocalizedText, app: AppIdentity?)
    /// The person is asked in vaultd's own dialog.
    case ask(AppIdentity)

    /// `isGranted`: whether the app holds a grant for the account in question.
    /// `deniedAt`: when the person last said no to the app using it (`deniedKey`), at `now`.
    init(perApp: Bool, requester: Requester, isGranted: (AppIdentity) -> Bool,
         deniedAt: (AppIdentity) -> Double? = { _ in nil }, now: Double = 0) {
        guard perApp, requester.trust != .vaultd else {
            self = .unchecked
            return
        }
        // An unidentified peer could be anyone: it is never asked about.
        if requester.trust == .unidentified {
            self = .refused(outcome: "unidentified_app", message: Messages.unidentifiedApp, app: nil)
        } else if let app = requester.app {
            if isGranted(app) {
                self = .granted(app)
            } else if let at = deniedAt(app), now - at < Self.askAgainAfter {
                // An app the person just said no to is not put in front of them
                // again at once: an app that asks in a loop until the person,
                // worn down, chooses Allow would otherwise win by persistence.
                self = .refused(outcome: "asked_recently", message: Messages.appDeniedRecently(app.shortName), app: app)
            } else {
                self = .ask(app)
            }
        } else {
            self = .refused(outcome: "unknown_app", message: Messages.appNotAllowed(nil), app: nil)
        }
    }

    /// How long after the person said no an app is refused without being
    /// asked again about the same account: long enough that an app asking in
    /// a loop cannot wear the person down, short enough that a Deny by mistake
    /// is undone by opening the app again a little later.
    static let askAgainAfter: Double = 120

    /// When the person last said no to an app using an account (Deny, or the
    /// grant dialog closed), for `askAgainAfter`; older ones are swept at each new one.
    struct Denials {
        private var at: [String: Double] = [:]

        private static func key(_ app: AppIdentity, _ account: String) -> String { app.key + "\n" + account }

        func deniedAt(_ app: AppIdentity, account: String) -> Double? { at[Self.key(app, account)] }

        mutating func denied(_ app: AppIdentity, account: String, now: Double) {
            at = at.filter { now - $0.value < GrantCheck.askAgainAfter }
            at[Self.key(app, account)] = now
        }
    }

    /// What a grant dialog that gave no answer (`error`) means: closed
    /// (Cancel, or the client went away) is a Deny (nil); otherwise the
    /// request fails, audited with this outcome.
    static func unanswered(_ error: FactorError, app: AppIdentity) -> (outcome: String, failure: VaultFailure)? {
        switch error {
        case .cancelled: nil
        case .timeout: ("timeout", VaultFailure(.timeout))
        default: ("no_dialog", VaultFailure(.appNotAllowed, message: Messages.appNotAllowed(app.shortName)))
        }
    }
}

/// Whether an import may replace the session already stored under its
/// account, before anything is asked: an import never silently replaces
/// another app's session. A value the actor applies (`checkImportOver`).
enum ImportCheck: Equatable {
    case allowed
    /// Refused, audited with this outcome (and the app, when it is named).
    case refused(outcome: String, message: LocalizedText, app: AppIdentity?)
    /// An unconfined app replacing an account that is not its own: the person is asked.
    case ask

    /// How many accounts one sandboxed app may keep (those it is granted).
    /// An app inside a sandbox must not be able to grow the person's store,
    /// and the audit log with it, without end through vaultd; one app with
    /// more logins than this is not a thing a person has.
    static let maxAccountsPerSandboxedApp = 20
    /// Durable changes (`import`, `context`) by one confined app a minute
    /// (`ConfinedPace.Kind.write`): replacing its own account on every token
    /// refresh fits easily.
    static let confinedWritesPerMinute = 10

    /// `replacing`: a session is stored under the account already.
    /// `accountsHeld`: how many accounts an app is granted now.
    init(requester: Requester, replacing: Bool, perApp: Bool, isGranted: (AppIdentity) -> Bool,
         accountsHeld: (AppIdentity) -> Int = { _ in 0 }) {
        // An unidentified peer could be anyone: not even a new account.
        if requester.trust == .unidentified {
            self = .refused(outcome: "unidentified_app", message: Messages.unidentifiedApp, app: nil)
            return
        }
        guard replacing else {
            if let app = requester.sandboxedApp, accountsHeld(app) >= Self.maxAccountsPerSandboxedApp {
                self = .refused(outcome: "too_many_accounts",
                                message: Messages.tooManyAccounts(app.shortName, limit: Self.maxAccountsPerSandboxedApp), app: app)
                return
            }
            self = .allowed
            return
        }
        if let app = requester.app, isGranted(app) {
            self = .allowed
        } else if requester.trust == .vaultd || (!perApp && requester.trust == .unconfined) {
            // With `per_app = false` no account is any one app's.
            self = .allowed
        } else if requester.trust == .unconfined {
            self = .ask
        } else {
            // A confined app (sandboxed) has no grant to show: it may not.
            self = .refused(outcome: "not_granted", message: Messages.importNotYours, app: requester.app)
        }
    }
}

extension Requester {
    /// The app behind the request when a sandbox vouches for it (Flatpak,
    /// Snap): such an app sees, logs out and manages only what it is granted.
    /// Unsandboxed callers see everything, since they could run vaultctl anyway.
    var sandboxedApp: AppIdentity? {
        guard let app, app.kind == .flatpak || app.kind == .snap else { return nil }
        return app
    }
}

extension AppGrant {
    /// Whether `requester` may see and take back this grant (`vaultctl apps`):
    /// a sandboxed app only its own, an unidentified peer none.
    func isManageable(by requester: Requester?) -> Bool {
        if requester?.trust == .unidentified { return false }
        guard let app = requester?.sandboxedApp else { return true }
        return app == self.app
    }
}

extension AppGrants {
    /// Which apps may hear about which account on the event feed (nil: any
    /// app, when grants are not checked).
    func audience(perApp: Bool) -> [String: Set<String>]? { perApp ? audience : nil }
}

extension AppIdentity {
    /// The audit detail naming an app (nil: none known) and the account.
    public static func auditDetail(_ app: AppIdentity?, account: String) -> [String: JSON] {
        var d: [String: JSON] = ["account": .string(account)]
        if let app {
            d["app_kind"] = .string(app.kind.rawValue)
            d["app"] = .string(app.name)
        }
        return d
    }
}

extension SessionMeta {
    /// The name a person knows the session's provider by: the well-known ones'
    /// (an imported session's provider is named after its issuer), else the
    /// configured provider's, else its id.
    func providerName(_ provider: (any IdentityProvider)?) -> String {
        if let known = ["bankid": "BankID", "vipps": "Vipps", "idporten": "ID-porten"][self.provider] { return known }
        return provider?.displayName ?? self.provider
    }
}

#if canImport(Glibc)
import Glibc
#endif
import VaultClient
import VaultProtocol

/// `vaultctl apps`: which app may use which account (docs/threat-model.md, "Apps and their grants").
let apps = CLICommand(
    name: "apps", abstract: "List the apps allowed to use each login, allow one, or take one's permission back.",
    discussion: "Each line: the app, how it was identified (flatpak, snap, desktop, or executable — unverified), its accounts and its last use.",
    subcommands: [appsList, appsAllow, appsRevoke], defaultSubcommand: "list")

let appsList = CLICommand(name: "list", abstract: "List the apps and the accounts they may use.",
                          options: commonOptions + readOptions) { options in
    try reading("apps", options) { s, r in
        if r["per_app"]?.boolValue == false {
            s.say(LocalizedText(en: "per_app = false: every app of yours may use every login.",
                                nb: "per_app = false: alle programmene dine kan bruke alle innlogginger."))
        }
        let apps = r["apps"]?.arrayValue ?? []
        if apps.isEmpty {
            s.say(LocalizedText(en: "No app is allowed any login yet.", nb: "Ingen app har lov til noen innlogging ennå."))
            return
        }
        for a in apps {
            let kind = a["kind"]?.stringValue ?? "?"
            let label = a["verified"]?.boolValue == false
                ? LocalizedText(en: "\(kind), unverified", nb: "\(kind), ikke bekreftet").text(s.language) : kind
            let accounts = (a["accounts"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", ")
            let lastUse = a["last_use"]?.intValue.map { isoTime(Double($0)) } ?? "-"
            Stdio.out("\(a["app"]?.stringValue ?? "?")\t(\(label))\t\(accounts)\t\(lastUse)")
        }
    }
}

let appsAllow = CLICommand(
    name: "allow", abstract: "Allow an app to use a login, as Allow in SessionVault's dialog does.",
    discussion: "The app as KIND:NAME (flatpak:org.example.App, snap:NAME, desktop:NAME) or as its program's path (an unverified identity).",
    options: commonOptions,
    arguments: [CLIArgument(name: "app", help: "The app: KIND:NAME, or the path of its program."),
                CLIArgument(name: "account", help: "The account, as “vaultctl status” names it.")]) { options in
        let app = options.argument("app") ?? ""
        let account = options.argument("account") ?? ""
        try guarded {
            let s = try CtlSession.open(options)
            // A program is named by the path its process runs (a symlink such as /usr/bin/python3 is resolved).
            let named = app.hasPrefix("/") ? realPath(app) : app
            let r = try s.call("allow_app", ["app": .string(named), "account": .string(account)])
            let name = r["app"]?.stringValue ?? named
            s.say(LocalizedText(en: "‘\(name)’ may now use \(account).", nb: "«\(name)» kan nå bruke \(account)."))
        }
    }

let appsRevoke = CLICommand(
    name: "revoke", abstract: "Take back an app's permission to use its logins; it is asked again next time.",
    options: commonOptions,
    arguments: [CLIArgument(name: "app", help: "The app, as “vaultctl apps” shows it (or KIND:NAME).")]) { options in
        let app = options.argument("app") ?? ""
        try guarded {
            let s = try CtlSession.open(options)
            let r = try s.call("revoke_app", ["app": .string(app)])
            let accounts = (r["revoked"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", ")
            s.say(LocalizedText(en: "‘\(app)’ may no longer use: \(accounts).", nb: "«\(app)» kan ikke lenger bruke: \(accounts)."))
        }
    }

private func realPath(_ path: String) -> String {
    guard let resolved = realpath(path, nil) else { return path }
    defer { free(resolved) }
    return String(cString: resolved)
}

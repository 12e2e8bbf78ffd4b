import ArgumentParser
import VaultClient
import VaultProtocol

/// `vaultctl apps`: which app may use which account (docs/threat-model.md, "Apps and their grants").
struct Apps: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apps", abstract: "List the apps allowed to use each login, or take one's permission back.",
        discussion: "Each line: the app, how it was identified (flatpak, snap, desktop, or executable — unverified), its accounts and its last use.",
        subcommands: [List.self, Revoke.self], defaultSubcommand: List.self)

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the apps and the accounts they may use.")
        @OptionGroup var common: CommonOptions
        @OptionGroup var read: ReadOptions

        func run() throws {
            try guarded(json: read.json) {
                let s = try CtlSession.open(common)
                let r = try s.call("apps")
                if read.json { print(r.text); return }
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
                    print("\(a["app"]?.stringValue ?? "?")\t(\(label))\t\(accounts)\t\(lastUse)")
                }
            }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Take back an app's permission to use its logins; it is asked again next time.")
        @OptionGroup var common: CommonOptions
        @Argument(help: "The app, as “vaultctl apps” shows it (or KIND:NAME).")
        var app: String

        func run() throws {
            try guarded {
                let s = try CtlSession.open(common)
                let r = try s.call("revoke_app", ["app": .string(app)])
                let accounts = (r["revoked"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", ")
                s.say(LocalizedText(en: "‘\(app)’ may no longer use: \(accounts).", nb: "«\(app)» kan ikke lenger bruke: \(accounts)."))
            }
        }
    }
}

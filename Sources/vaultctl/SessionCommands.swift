import ArgumentParser
import FoundationEssentials
import VaultClient
import VaultProtocol

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Store an existing session (like oidc-agent's --rt).",
        discussion: """
            Secrets are never taken from the command line (other users can read it in ps). \
            Give them on stdin or in a file: either a JSON object with "refresh_token" and/or \
            "access_token" (and optionally "expires_at"), or a single line holding a refresh token.
            """)
    @OptionGroup var common: CommonOptions
    @Option(help: "The provider's issuer URL.") var issuer: String
    @Option(help: "The OAuth client id.") var clientId: String
    @Option(help: "A name for the account (default: the issuer's host).") var account: String?
    @Option(help: "Provider profile (bankid, vipps, idporten, generic).") var provider: String?
    @Option(help: "Display name of the person.") var name: String?
    @Option(help: "Access token expiry, Unix seconds.") var expiresAt: Int64?
    @Option(help: "Read the secrets from this file instead of stdin.") var secretsFile: String?

    func run() throws {
        try guarded {
            let language = CtlSession.language
            let data: Data
            if let secretsFile {
                guard let d = FileManager.default.contents(atPath: secretsFile) else {
                    Stdio.error("vaultctl: \(LocalizedText(en: "The secrets file could not be read. Check the path and try again.", nb: "Filen med hemmeligheter kunne ikke leses. Sjekk stien og prøv igjen.").text(language))\n")
                    throw ExitCode(1)
                }
                data = d
            } else {
                data = Stdio.readAllInput()
            }
            var fields: [String: JSON] = ["issuer": .string(issuer), "client_id": .string(clientId)]
            let text = String(decoding: data, as: UTF8.self).trimmed
            if text.hasPrefix("{") {
                guard let o = (try? JSON.parse(text))?.objectValue else {
                    Stdio.error("vaultctl: \(LocalizedText(en: "The secrets are not valid JSON. Give a JSON object or a single refresh token line.", nb: "Hemmelighetene er ikke gyldig JSON. Gi et JSON-objekt eller én linje med et oppfriskingstoken.").text(language))\n")
                    throw ExitCode(1)
                }
                for key in ["refresh_token", "access_token", "expires_at"] { if let v = o[key] { fields[key] = v } }
            } else if !text.isEmpty {
                fields["refresh_token"] = .string(text)
            }
            if let account { fields["account"] = .string(account) }
            if let provider { fields["provider"] = .string(provider) }
            if let name { fields["name"] = .string(name) }
            if let expiresAt { fields["expires_at"] = .int(expiresAt) }
            let s = try CtlSession.open(common)
            let r = try s.call("import", fields)
            let acct = r["account"]?.stringValue ?? "?"
            s.say(LocalizedText(en: "Stored the session as “\(acct)”.", nb: "Lagret økten som «\(acct)»."))
        }
    }
}

struct Login: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Log in with BankID, Vipps, ID-porten or another configured provider.",
        discussion: "Opens the provider's login page in your browser; when you are done there, the session is stored.")
    @OptionGroup var common: CommonOptions
    @Argument(help: "bankid, vipps, idporten, or a configured provider's name.") var provider: String
    @Flag(help: "Print the login address instead of opening a browser.") var noBrowser = false
    @Option(help: "A command to open the login address with (default: $BROWSER or xdg-open).") var browser: String?
    @OptionGroup var read: ReadOptions

    func run() throws {
        try guarded(json: read.json) {
            var s = try CtlSession.open(common)
            if noBrowser {
                s.terminal.browser = nil
            } else if let browser {
                s.terminal.browser = browser.split(separator: " ").map(String.init)
            }
            let r = try s.call("login", ["provider": .string(provider)])
            if read.json { print(r.text); return }
            let name = r["claims"]?["name"]?.stringValue ?? r["account"]?.stringValue ?? ""
            let via = r["provider"]?.stringValue ?? provider
            s.say(LocalizedText(en: "Logged in as \(name) (\(via)).", nb: "Logget inn som \(name) (\(via))."))
        }
    }
}

struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print an access token for scripts (unlocking first if needed).",
        discussion: "Like oidc-token or `gh auth token`. With --json, prints the whole released session (never the refresh token).")
    @OptionGroup var common: CommonOptions
    @OptionGroup var read: ReadOptions
    @Argument(help: "The account (needed when there are several).") var account: String?
    @Option(help: ArgumentHelp("Refresh first if the token expires within this many seconds (like oidc-token --time).",
                               valueName: "seconds"))
    var minValid: Int64?

    func validate() throws {
        if let minValid, minValid < 0 { throw ValidationError("--min-valid must be 0 or more seconds.") }
    }

    func run() throws {
        try guarded(json: read.json) {
            let s = try CtlSession.open(common)
            var fields: [String: JSON] = [:]
            if let account { fields["account"] = .string(account) }
            if let minValid { fields["min_valid"] = .int(minValid) }
            let r = try s.call("session", fields)
            if read.json { print(r.text) } else { print(r["access_token"]?.stringValue ?? "") }
        }
    }
}

struct Sessions: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "sessions", abstract: "List stored sessions (by token hash; no secrets).")
    @OptionGroup var common: CommonOptions
    @OptionGroup var read: ReadOptions

    func run() throws {
        try guarded(json: read.json) {
            let s = try CtlSession.open(common)
            let r = try s.call("sessions")
            if read.json { print(r.text); return }
            let list = r["sessions"]?.arrayValue ?? []
            if list.isEmpty { s.say(LocalizedText(en: "No sessions.", nb: "Ingen økter.")) }
            for e in list {
                let hash = String((e["token_hash"]?.stringValue ?? "").prefix(12))
                let exp = e["expires_at"]?.intValue.map { isoTime(Double($0)) } ?? "-"
                let waiting = e["waiting"]?.stringValue.map { "\t" + $0 } ?? ""
                print("\(e["account"]?.stringValue ?? "?")\t\(e["provider"]?.stringValue ?? "?")\t\(hash)\t\(exp)\(waiting)")
            }
        }
    }
}

struct Logout: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "logout", abstract: "Log an account out, or every account with --all.")
    @OptionGroup var common: CommonOptions
    @Argument(help: "The account to log out.") var account: String?
    @Flag(help: "Log out everywhere.") var all = false

    func validate() throws {
        if account == nil && !all { throw ValidationError("Name an account, or use --all.") }
    }

    func run() throws {
        try guarded {
            let s = try CtlSession.open(common)
            var fields: [String: JSON] = ["all": .bool(all)]
            if let account { fields["account"] = .string(account) }
            let r = try s.call("logout", fields)
            let n = r["revoked"]?.intValue ?? 0
            s.say(LocalizedText(en: "Logged out (\(n) session\(n == 1 ? "" : "s") removed).", nb: "Logget ut (\(n) økt\(n == 1 ? "" : "er") fjernet)."))
        }
    }
}

struct Context: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "context",
        abstract: "Choose the active organization (for members of several); remembered across restarts.")
    @OptionGroup var common: CommonOptions
    @OptionGroup var read: ReadOptions
    @Argument(help: "The organization's name or id.") var org: String
    @Option(help: "The account (needed when there are several).") var account: String?

    func run() throws {
        try guarded(json: read.json) {
            let s = try CtlSession.open(common)
            var fields: [String: JSON] = ["org": .string(org)]
            if let account { fields["account"] = .string(account) }
            let r = try s.call("context", fields)
            if read.json { print(r.text); return }
            let name = r["claims"]?["org_name"]?.stringValue ?? r["claims"]?["org"]?.stringValue ?? org
            let roles = (r["claims"]?["roles"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", ")
            s.say(LocalizedText(en: "Active organization: \(name)\(roles.isEmpty ? "" : " (\(roles))").",
                                nb: "Aktiv organisasjon: \(name)\(roles.isEmpty ? "" : " (\(roles))")."))
        }
    }
}

struct Sync: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Member-record sync: list conflicts a person must resolve.",
        subcommands: [Conflicts.self])

    struct Conflicts: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "conflicts",
            abstract: "National ID numbers that differ from the member record (shown masked; nothing was overwritten).")
        @OptionGroup var common: CommonOptions
        @OptionGroup var read: ReadOptions

        func run() throws {
            try guarded(json: read.json) {
                let s = try CtlSession.open(common)
                let r = try s.call("sync_conflicts")
                if read.json { print(r.text); return }
                let list = r["conflicts"]?.arrayValue ?? []
                if list.isEmpty { s.say(LocalizedText(en: "No conflicts.", nb: "Ingen konflikter.")) }
                for c in list {
                    let when = c["last_seen"].flatMap { v -> Double? in if case .double(let d) = v { return d }; return v.intValue.map(Double.init) }
                    // Numbers arrive masked (DDMMYY*****) from vaultd; never in clear.
                    let record = c["record_nin"]?.stringValue ?? "—"
                    print("\(c["member"]?.stringValue ?? "?")\t\(c["source"]?.stringValue ?? "")\tlogin \(c["login_nin"]?.stringValue ?? "?")\trecord \(record)\t\(when.map(isoTime) ?? "")\t×\(c["count"]?.intValue ?? 1)")
                }
            }
        }
    }
}

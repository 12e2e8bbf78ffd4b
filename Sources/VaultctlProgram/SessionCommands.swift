import VaultClient
import VaultProtocol

let importSession = CLICommand(
    name: "import", abstract: "Store an existing session (like oidc-agent's --rt).",
    discussion: "Secrets are never taken from the command line (other users can read it in ps). "
        + "Give them on stdin or in a file: either a JSON object with \"refresh_token\" and/or "
        + "\"access_token\" (and optionally \"expires_at\"), or a single line holding a refresh token.",
    options: commonOptions + [
        .value("issuer", "issuer", "The provider's issuer URL."),
        .value("client-id", "client-id", "The OAuth client id."),
        .value("account", "account", "A name for the account (default: the issuer's host)."),
        .value("provider", "provider", "Provider profile (bankid, vipps, idporten, generic)."),
        .value("name", "name", "Display name of the person."),
        .value("expires-at", "expires-at", "Access token expiry, Unix seconds."),
        .value("secrets-file", "path", "Read the secrets from this file instead of stdin."),
    ]) { options in
        guard let issuer = options.value("issuer"), let clientID = options.value("client-id") else {
            throw CLIUsageError(LocalizedText(
                en: "An import needs --issuer and --client-id. See “vaultctl import --help”.",
                nb: "En import trenger --issuer og --client-id. Se «vaultctl import --help»."))
        }
        let expiresAt = try options.number("expires-at", atLeast: 0)
        try guarded {
            let language = CtlSession.language
            let data: [UInt8]
            if let secretsFile = options.value("secrets-file") {
                guard let d = Stdio.contents(atPath: secretsFile) else {
                    Stdio.error("vaultctl: \(LocalizedText(en: "The secrets file could not be read. Check the path and try again.", nb: "Filen med hemmeligheter kunne ikke leses. Sjekk stien og prøv igjen.").text(language))\n")
                    throw Exit(1)
                }
                data = d
            } else {
                data = Stdio.readAllInput()
            }
            var fields: [String: JSON] = ["issuer": .string(issuer), "client_id": .string(clientID)]
            let text = String(decoding: data, as: UTF8.self).trimmed
            if text.hasPrefix("{") {
                guard let o = (try? JSON.parse(text))?.objectValue else {
                    Stdio.error("vaultctl: \(LocalizedText(en: "The secrets are not valid JSON. Give a JSON object or a single refresh token line.", nb: "Hemmelighetene er ikke gyldig JSON. Gi et JSON-objekt eller én linje med et oppfriskingstoken.").text(language))\n")
                    throw Exit(1)
                }
                for key in ["refresh_token", "access_token", "expires_at"] { if let v = o[key] { fields[key] = v } }
            } else if !text.isEmpty {
                fields["refresh_token"] = .string(text)
            }
            for (option, field) in [("account", "account"), ("provider", "provider"), ("name", "name")] {
                if let value = options.value(option) { fields[field] = .string(value) }
            }
            if let expiresAt { fields["expires_at"] = .int(expiresAt) }
            let s = try CtlSession.open(options)
            let r = try s.call("import", fields)
            let acct = r["account"]?.stringValue ?? "?"
            s.say(LocalizedText(en: "Stored the session as “\(acct)”.", nb: "Lagret økten som «\(acct)»."))
        }
    }

let login = CLICommand(
    name: "login", abstract: "Log in with BankID, Vipps, ID-porten or another configured provider.",
    discussion: "Opens the provider's login page in your browser; when you are done there, the session is stored.",
    options: commonOptions + [
        .flag("no-browser", "Print the login address instead of opening a browser."),
        .value("browser", "browser", "A command to open the login address with (default: $BROWSER or xdg-open)."),
    ] + readOptions,
    arguments: [CLIArgument(name: "provider", help: "bankid, vipps, idporten, or a configured provider's name (without it, vaultd asks which).",
                            optional: true)]) { options in
        let json = options.flag("json")
        let provider = options.argument("provider")
        try guarded(json: json) {
            var s = try CtlSession.open(options)
            if options.flag("no-browser") {
                s.terminal.browser = .none
            } else if let browser = options.value("browser") {
                s.terminal.browser = .command(browser.split(separator: " ").map(String.init))
            }
            let r = try s.call("login", provider.map { ["provider": .string($0)] } ?? [:])
            if json { Stdio.out(r.text); return }
            let name = r["claims"]?["name"]?.stringValue ?? r["account"]?.stringValue ?? ""
            let via = r["provider"]?.stringValue ?? provider ?? ""
            s.say(LocalizedText(en: "Logged in as \(name) (\(via)).", nb: "Logget inn som \(name) (\(via))."))
        }
    }

let token = CLICommand(
    name: "token", abstract: "Print an access token for scripts (unlocking first if needed).",
    discussion: "Like oidc-token or `gh auth token`. With --json, prints the whole released session (never the refresh token).",
    options: commonOptions + readOptions + [
        .value("min-valid", "seconds", "Refresh first if the token expires within this many seconds (like oidc-token --time)."),
    ],
    arguments: [CLIArgument(name: "account", help: "The account (needed when there are several).", optional: true)]) { options in
        let json = options.flag("json")
        let minValid = try options.number("min-valid", atLeast: 0)
        try guarded(json: json) {
            let s = try CtlSession.open(options)
            var fields: [String: JSON] = [:]
            if let account = options.argument("account") { fields["account"] = .string(account) }
            if let minValid { fields["min_valid"] = .int(minValid) }
            let r = try s.call("session", fields)
            if json { Stdio.out(r.text) } else { Stdio.out(r["access_token"]?.stringValue ?? "") }
        }
    }

let sessions = CLICommand(name: "sessions", abstract: "List stored sessions (by token hash; no secrets).",
                          options: commonOptions + readOptions) { options in
    try reading("sessions", options) { s, r in
        let list = r["sessions"]?.arrayValue ?? []
        if list.isEmpty { s.say(LocalizedText(en: "No sessions.", nb: "Ingen økter.")) }
        for e in list {
            let hash = String((e["token_hash"]?.stringValue ?? "").prefix(12))
            let exp = e["expires_at"]?.intValue.map { isoTime(Double($0)) } ?? "-"
            let waiting = e["waiting"]?.stringValue.map { "\t" + $0 } ?? ""
            Stdio.out("\(e["account"]?.stringValue ?? "?")\t\(e["provider"]?.stringValue ?? "?")\t\(hash)\t\(exp)\(waiting)")
        }
    }
}

let logout = CLICommand(
    name: "logout", abstract: "Log an account out, or every account with --all.",
    options: commonOptions + [.flag("all", "Log out everywhere.")],
    arguments: [CLIArgument(name: "account", help: "The account to log out.", optional: true)]) { options in
        let account = options.argument("account")
        let all = options.flag("all")
        guard account != nil || all else {
            throw CLIUsageError(LocalizedText(en: "Name an account, or use --all. See “vaultctl logout --help”.",
                                              nb: "Oppgi en konto, eller bruk --all. Se «vaultctl logout --help»."))
        }
        try guarded {
            let s = try CtlSession.open(options)
            var fields: [String: JSON] = ["all": .bool(all)]
            if let account { fields["account"] = .string(account) }
            let r = try s.call("logout", fields)
            let n = r["revoked"]?.intValue ?? 0
            s.say(LocalizedText(en: "Logged out (\(n) session\(n == 1 ? "" : "s") removed).", nb: "Logget ut (\(n) økt\(n == 1 ? "" : "er") fjernet)."))
        }
    }

let context = CLICommand(
    name: "context", abstract: "Choose the active organization (for members of several); remembered across restarts.",
    options: commonOptions + readOptions + [.value("account", "account", "The account (needed when there are several).")],
    arguments: [CLIArgument(name: "org", help: "The organization's name or id.")]) { options in
        let org = options.argument("org") ?? ""
        var fields: [String: JSON] = ["org": .string(org)]
        if let account = options.value("account") { fields["account"] = .string(account) }
        try reading("context", options, fields) { s, r in
            let name = r["claims"]?["org_name"]?.stringValue ?? r["claims"]?["org"]?.stringValue ?? org
            let roles = (r["claims"]?["roles"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", ")
            s.say(LocalizedText(en: "Active organization: \(name)\(roles.isEmpty ? "" : " (\(roles))").",
                                nb: "Aktiv organisasjon: \(name)\(roles.isEmpty ? "" : " (\(roles))")."))
        }
    }

let sync = CLICommand(name: "sync", abstract: "Member-record sync: list conflicts a person must resolve.",
                      subcommands: [syncConflicts])

let syncConflicts = CLICommand(
    name: "conflicts",
    abstract: "National ID numbers that differ from the member record (shown masked; nothing was overwritten).",
    options: commonOptions + readOptions) { options in
        try reading("sync_conflicts", options) { s, r in
            let list = r["conflicts"]?.arrayValue ?? []
            if list.isEmpty { s.say(LocalizedText(en: "No conflicts.", nb: "Ingen konflikter.")) }
            for c in list {
                let when = c["last_seen"].flatMap { v -> Double? in if case .double(let d) = v { return d }; return v.intValue.map(Double.init) }
                // Numbers arrive masked (DDMMYY*****) from vaultd; never in clear.
                let record = c["record_nin"]?.stringValue ?? "—"
                Stdio.out("\(c["member"]?.stringValue ?? "?")\t\(c["source"]?.stringValue ?? "")\tlogin \(c["login_nin"]?.stringValue ?? "?")\trecord \(record)\t\(when.map(isoTime) ?? "")\t×\(c["count"]?.intValue ?? 1)")
            }
        }
    }

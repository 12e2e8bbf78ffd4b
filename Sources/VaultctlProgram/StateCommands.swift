#if canImport(Glibc)
import Glibc
#endif
import VaultClient
import VaultProtocol

let status = CLICommand(
    name: "status", abstract: "Show whether the vault is locked, the accounts, and the unlock methods.",
    options: commonOptions + readOptions) { options in
        try reading("status", options) { s, r in
            let locked = r["locked"]?.boolValue ?? true
            s.say(locked ? LocalizedText(en: "Vault: locked", nb: "Hvelv: låst") : LocalizedText(en: "Vault: unlocked", nb: "Hvelv: åpent"))
            let accounts = r["accounts"]?.arrayValue ?? []
            if accounts.isEmpty {
                s.say(LocalizedText(en: "Accounts: none (not logged in)", nb: "Kontoer: ingen (ikke logget inn)"))
            } else {
                s.say(LocalizedText(en: "Accounts:", nb: "Kontoer:"))
                for a in accounts {
                    Stdio.out("  \(a["account"]?.stringValue ?? "?") (\(a["provider"]?.stringValue ?? "?")): \(a["name"]?.stringValue ?? "")")
                    if let waiting = a["waiting"]?.stringValue { Stdio.out("    \(waiting)") }
                }
            }
            s.say(LocalizedText(en: "Unlock methods:", nb: "Opplåsingsmåter:"))
            for f in r["factors"]?.arrayValue ?? [] {
                Stdio.out("  \(f["label"]?.stringValue ?? f["factor"]?.stringValue ?? "?")")
            }
            let providers = r["providers"]?.arrayValue ?? []
            if !providers.isEmpty {
                s.say(LocalizedText(en: "Login providers:", nb: "Innloggingstjenester:"))
                for p in providers {
                    Stdio.out("  \(p["name"]?.stringValue ?? p["provider"]?.stringValue ?? "?")")
                    if let note = p["session"]?.stringValue { Stdio.out("    \(note)") }
                }
            }
            if let warning = r["at_rest"]?.stringValue { Stdio.out(warning) }
            if let protection = r["protection"]?.stringValue { Stdio.out(protection) }
        }
    }

let factors = CLICommand(name: "factors", abstract: "List the unlock methods and their state.",
                         options: commonOptions + readOptions) { options in
    try reading("factors", options) { _, r in
        for f in r["factors"]?.arrayValue ?? [] {
            Stdio.out("\(f["factor"]?.stringValue ?? "?")\t\(f["state"]?.stringValue ?? "?")\t\(f["label"]?.stringValue ?? "")")
        }
    }
}

let lock = CLICommand(name: "lock", abstract: "Lock the vault now (the vault key is wiped from memory).",
                      options: commonOptions) { options in
    try guarded {
        let s = try CtlSession.open(options)
        _ = try s.call("lock")
        s.say(LocalizedText(en: "The vault is locked.", nb: "Hvelvet er låst."))
    }
}

let unlock = CLICommand(
    name: "unlock", abstract: "Unlock the vault with your fingerprint, PIN, or another method.", options: commonOptions,
    arguments: [CLIArgument(name: "factor", help: "The method to use (fingerprint, pin, …). Default: the unlock policy's order.",
                            optional: true)]) { options in
        try guarded {
            let s = try CtlSession.open(options)
            var fields: [String: JSON] = [:]
            if let factor = options.argument("factor") { fields["factor"] = .string(factor) }
            _ = try s.call("unlock", fields)
            s.say(LocalizedText(en: "The vault is unlocked.", nb: "Hvelvet er låst opp."))
        }
    }

let audit = CLICommand(
    name: "audit", abstract: "Show the security event log, or check that nobody changed it.",
    options: commonOptions + readOptions + [
        .flag("verify", "Check the log's MAC chain instead of printing it."),
        .value("limit", "limit", "How many of the newest entries to show, oldest first (default 200, at most 1000)."),
    ]) { options in
        let json = options.flag("json")
        let limit = try options.number("limit", atLeast: 1) ?? 200
        try guarded(json: json) {
            let s = try CtlSession.open(options)
            if options.flag("verify") {
                let r = try s.call("audit", ["verify": true])
                if json { Stdio.out(r.text) }
                if r["ok"]?.boolValue == true {
                    if !json { s.say(LocalizedText(en: "The audit log is intact.", nb: "Hendelsesloggen er intakt.")) }
                } else {
                    for text in Audit.problems(r) { Stdio.error("vaultctl: \(text.text(s.language))\n") }
                    throw Exit(1)
                }
                return
            }
            let r = try s.call("audit", ["limit": .int(limit), "newest": true])
            if json { Stdio.out(r.text); return }
            for e in r["entries"]?.arrayValue ?? [] {
                let at = e["at"].flatMap { v -> Double? in if case .double(let d) = v { return d }; return v.intValue.map(Double.init) } ?? 0
                let factor = e["factor"]?.stringValue.map { " \($0)" } ?? ""
                let exe = e["exe"]?.stringValue.map { " by \($0)" } ?? ""
                // Releases and grant decisions name the app (docs/threat-model.md, "Apps and their grants").
                let app = e["detail"]?["app"]?.stringValue.map { " app \(e["detail"]?["app_kind"]?.stringValue ?? "?"):\($0)" } ?? ""
                // A client's repeated refusals are written once a minute with their count (AuditRepeats).
                let repeated = e["detail"]?["repeated"]?.intValue.map { " (+\($0) more like it)" } ?? ""
                Stdio.out("\(e["seq"]?.intValue ?? 0)\t\(isoTime(at))\t\(e["event"]?.stringValue ?? "?")\(factor)\t\(e["outcome"]?.stringValue ?? "")\(exe)\(app)\(repeated)")
            }
        }
    }

enum Audit {
    /// One sentence per problem `audit verify` reported.
    static func problems(_ r: JSON) -> [LocalizedText] {
        var out: [LocalizedText] = []
        if let seq = r["first_bad"]?.intValue {
            out.append(LocalizedText(
                en: "The audit log was changed at entry \(seq) or later. Keep the vault file for inspection and report it.",
                nb: "Hendelsesloggen er endret ved oppføring \(seq) eller senere. Ta vare på hvelvfilen for undersøkelse og meld fra."))
        }
        if let n = r["missing"]?.intValue, n > 0 {
            out.append(LocalizedText(
                en: "The newest \(n) entries of the audit log are missing: it was cut short, or an older vault file was put back. Keep the vault file for inspection and report it.",
                nb: "De nyeste \(n) oppføringene i hendelsesloggen mangler: den er kortet ned, eller en eldre hvelvfil er lagt tilbake. Ta vare på hvelvfilen for undersøkelse og meld fra."))
        }
        for t in r["truncated"]?.arrayValue ?? [] {
            let n = t["missing"]?.intValue ?? 1
            let seq = t["seq"]?.intValue ?? 0
            let at = t["at"].flatMap { v -> Double? in if case .double(let d) = v { return d }; return v.intValue.map(Double.init) } ?? 0
            out.append(LocalizedText(
                en: "The newest \(n) entries of the audit log were missing when vaultd checked it at \(isoTime(at)) (entry \(seq) records it): it was cut short, or an older vault file was put back. Keep the vault file for inspection and report it.",
                nb: "De nyeste \(n) oppføringene i hendelsesloggen manglet da vaultd sjekket den \(isoTime(at)) (oppføring \(seq) viser det): den er kortet ned, eller en eldre hvelvfil er lagt tilbake. Ta vare på hvelvfilen for undersøkelse og meld fra."))
        }
        if out.isEmpty { out.append(LocalizedText(en: "The audit log could not be checked. Try again.", nb: "Hendelsesloggen kunne ikke sjekkes. Prøv igjen.")) }
        return out
    }
}

/// `t` (Unix seconds) as ISO 8601 in UTC, e.g. 2026-11-27T08:20:00Z.
func isoTime(_ t: Double) -> String {
    var seconds = time_t(t.rounded(.down))
    var parts = tm()
    guard gmtime_r(&seconds, &parts) != nil else { return String(Int64(t)) }
    func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
    return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
        + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
}

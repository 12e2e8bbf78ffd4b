import ArgumentParser
import VaultClient
import VaultProtocol

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "Show whether the vault is locked, the accounts, and the unlock methods.")
    @OptionGroup var common: CommonOptions
    @OptionGroup var read: ReadOptions

    func run() throws {
        try guarded(json: read.json) {
            let s = try CtlSession.open(common)
            let r = try s.call("status")
            if read.json { print(r.text); return }
            let locked = r["locked"]?.boolValue ?? true
            s.say(locked ? LocalizedText(en: "Vault: locked", nb: "Hvelv: låst") : LocalizedText(en: "Vault: unlocked", nb: "Hvelv: åpent"))
            let accounts = r["accounts"]?.arrayValue ?? []
            if accounts.isEmpty {
                s.say(LocalizedText(en: "Accounts: none (not logged in)", nb: "Kontoer: ingen (ikke logget inn)"))
            } else {
                s.say(LocalizedText(en: "Accounts:", nb: "Kontoer:"))
                for a in accounts {
                    print("  \(a["account"]?.stringValue ?? "?") (\(a["provider"]?.stringValue ?? "?")): \(a["name"]?.stringValue ?? "")")
                    if let waiting = a["waiting"]?.stringValue { print("    \(waiting)") }
                }
            }
            s.say(LocalizedText(en: "Unlock methods:", nb: "Opplåsingsmåter:"))
            for f in r["factors"]?.arrayValue ?? [] {
                print("  \(f["label"]?.stringValue ?? f["factor"]?.stringValue ?? "?")")
            }
            if let warning = r["at_rest"]?.stringValue { print(warning) }
        }
    }
}

struct Factors: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "factors", abstract: "List the unlock methods and their state.")
    @OptionGroup var common: CommonOptions
    @OptionGroup var read: ReadOptions

    func run() throws {
        try guarded(json: read.json) {
            let s = try CtlSession.open(common)
            let r = try s.call("factors")
            if read.json { print(r.text); return }
            for f in r["factors"]?.arrayValue ?? [] {
                print("\(f["factor"]?.stringValue ?? "?")\t\(f["state"]?.stringValue ?? "?")\t\(f["label"]?.stringValue ?? "")")
            }
        }
    }
}

struct Lock: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "lock", abstract: "Lock the vault now (the vault key is wiped from memory).")
    @OptionGroup var common: CommonOptions

    func run() throws {
        try guarded {
            let s = try CtlSession.open(common)
            _ = try s.call("lock")
            s.say(LocalizedText(en: "The vault is locked.", nb: "Hvelvet er låst."))
        }
    }
}

struct Unlock: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "unlock", abstract: "Unlock the vault with your fingerprint, PIN, or another method.")
    @OptionGroup var common: CommonOptions
    @Argument(help: "The method to use (fingerprint, pin, …). Default: the unlock policy's order.")
    var factor: String?

    func run() throws {
        try guarded {
            let s = try CtlSession.open(common)
            var fields: [String: JSON] = [:]
            if let factor { fields["factor"] = .string(factor) }
            _ = try s.call("unlock", fields)
            s.say(LocalizedText(en: "The vault is unlocked.", nb: "Hvelvet er låst opp."))
        }
    }
}

struct Audit: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "audit", abstract: "Show the security event log, or check that nobody changed it.")
    @OptionGroup var common: CommonOptions
    @OptionGroup var read: ReadOptions
    @Flag(help: "Check the log's MAC chain instead of printing it.")
    var verify = false
    @Option(help: "How many entries to show (newest last).")
    var limit: Int = 200

    func run() throws {
        try guarded(json: read.json) {
            let s = try CtlSession.open(common)
            if verify {
                let r = try s.call("audit", ["verify": true])
                if read.json { print(r.text) }
                if r["ok"]?.boolValue == true {
                    if !read.json { s.say(LocalizedText(en: "The audit log is intact.", nb: "Hendelsesloggen er intakt.")) }
                } else {
                    for text in Audit.problems(r) { Stdio.error("vaultctl: \(text.text(s.language))\n") }
                    throw ExitCode(1)
                }
                return
            }
            let r = try s.call("audit", ["limit": .int(Int64(limit))])
            if read.json { print(r.text); return }
            for e in r["entries"]?.arrayValue ?? [] {
                let at = e["at"].flatMap { v -> Double? in if case .double(let d) = v { return d }; return v.intValue.map(Double.init) } ?? 0
                let factor = e["factor"]?.stringValue.map { " \($0)" } ?? ""
                let exe = e["exe"]?.stringValue.map { " by \($0)" } ?? ""
                // Releases and grant decisions name the app (docs/threat-model.md, "Apps and their grants").
                let app = e["detail"]?["app"]?.stringValue.map { " app \(e["detail"]?["app_kind"]?.stringValue ?? "?"):\($0)" } ?? ""
                print("\(e["seq"]?.intValue ?? 0)\t\(isoTime(at))\t\(e["event"]?.stringValue ?? "?")\(factor)\t\(e["outcome"]?.stringValue ?? "")\(exe)\(app)")
            }
        }
    }

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

import FoundationEssentials

func isoTime(_ t: Double) -> String {
    Date(timeIntervalSince1970: t).formatted(.iso8601)
}

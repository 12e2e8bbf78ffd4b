import ArgumentParser
import FoundationEssentials
import VaultClient
import VaultProtocol

struct Enroll: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "enroll", abstract: "Set up an unlock method (fingerprint or pin).")
    @OptionGroup var common: CommonOptions
    @Argument(help: "fingerprint, pin, or an external factor's name.")
    var factor: String

    func run() throws { try runEnrollment("enroll", factor: factor, common: common) }
}

struct Reenroll: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "reenroll", abstract: "Set an unlock method up again (a new PIN, fingerprints again).")
    @OptionGroup var common: CommonOptions
    @Argument(help: "fingerprint, pin, or an external factor's name.")
    var factor: String

    func run() throws { try runEnrollment("reenroll", factor: factor, common: common) }
}

struct Disable: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "disable", abstract: "Turn an unlock method off (its keyslot is destroyed).")
    @OptionGroup var common: CommonOptions
    @Argument(help: "fingerprint, pin, or an external factor's name.")
    var factor: String
    @Flag(name: .shortAndLong, help: "Do not ask for confirmation.")
    var yes = false

    func run() throws {
        try guarded {
            let s = try CtlSession.open(common)
            if !yes {
                let question = LocalizedText(
                    en: "Turn off “\(factor)”? Its keyslot is destroyed; you can set it up again later.",
                    nb: "Slå av «\(factor)»? Nøkkelsporet slettes; du kan sette det opp igjen senere.")
                guard case .value(.bool(true)) = s.terminal.answer(Prompt(pid: "local", kind: .confirm, text: question.text(s.language))) else {
                    s.say(LocalizedText(en: "Nothing was changed.", nb: "Ingenting ble endret."))
                    throw ExitCode(6)
                }
            }
            let r = try s.call("disable", ["factor": .string(factor), "confirm": true])
            print(r["label"]?.stringValue ?? "")
        }
    }
}

/// The one explicit way out of a vault nobody can open (docs/key-hierarchy.md):
/// vaultd asks, saying how many sessions and unlock methods are lost.
struct Reset: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset", abstract: "Start over: delete every saved session and unlock method (asks first).")
    @OptionGroup var common: CommonOptions
    @Flag(name: .shortAndLong, help: "Do not ask for confirmation.")
    var yes = false

    func run() throws {
        try guarded {
            let s = try CtlSession.open(common)
            let r = try s.call("reset", yes ? ["confirm": true] : [:])
            let n = r["sessions_removed"]?.intValue ?? 0
            s.say(LocalizedText(
                en: "Started over: \(n) session\(n == 1 ? "" : "s") deleted. Log in with BankID or Vipps (vaultctl login bankid).",
                nb: "Begynt på nytt: \(n) økt\(n == 1 ? "" : "er") slettet. Logg inn med BankID eller Vipps (vaultctl login bankid)."))
        }
    }
}

extension ParsableCommand {
    /// `enroll` and `reenroll`: the same conversation, a different op.
    func runEnrollment(_ op: String, factor: String, common: CommonOptions) throws {
        try guarded {
            let s = try CtlSession.open(common)
            let r = try s.call(op, ["factor": .string(factor)])
            print(r["label"]?.stringValue ?? "")
        }
    }
}

import VaultClient
import VaultProtocol

private let factorArgument = CLIArgument(name: "factor", help: "fingerprint, pin, or an external factor's name.")

let enroll = CLICommand(name: "enroll", abstract: "Set up an unlock method (fingerprint or pin).",
                        options: commonOptions, arguments: [factorArgument]) { options in
    try runEnrollment("enroll", options)
}

let reenroll = CLICommand(name: "reenroll", abstract: "Set an unlock method up again (a new PIN, fingerprints again).",
                          options: commonOptions, arguments: [factorArgument]) { options in
    try runEnrollment("reenroll", options)
}

/// `enroll` and `reenroll`: the same conversation, a different op.
private func runEnrollment(_ op: String, _ options: CLIInvocation) throws {
    try guarded {
        let s = try CtlSession.open(options)
        let r = try s.call(op, ["factor": .string(options.argument("factor") ?? "")])
        Stdio.out(r["label"]?.stringValue ?? "")
    }
}

let disable = CLICommand(
    name: "disable", abstract: "Turn an unlock method off (its keyslot is destroyed).",
    options: commonOptions + [.flag("yes", short: "y", "Do not ask for confirmation.")],
    arguments: [factorArgument]) { options in
        // vaultd asks (“Turn off PIN unlock?”), after it has checked that the
        // method is set up and the person is there; --yes answers for them.
        var fields: [String: JSON] = ["factor": .string(options.argument("factor") ?? "")]
        if options.flag("yes") { fields["confirm"] = true }
        try guarded {
            let s = try CtlSession.open(options)
            let r = try s.call("disable", fields)
            Stdio.out(r["label"]?.stringValue ?? "")
        }
    }

/// The one explicit way out of a vault nobody can open (docs/key-hierarchy.md):
/// vaultd asks, saying how many sessions and unlock methods are lost.
let reset = CLICommand(
    name: "reset", abstract: "Start over: delete every saved session and unlock method (asks first).",
    options: commonOptions + [.flag("yes", short: "y", "Do not ask for confirmation.")]) { options in
        try guarded {
            let s = try CtlSession.open(options)
            let r = try s.call("reset", options.flag("yes") ? ["confirm": true] : [:])
            let n = r["sessions_removed"]?.intValue ?? 0
            s.say(LocalizedText(
                en: "Started over: \(n) session\(n == 1 ? "" : "s") deleted. Log in with BankID or Vipps (vaultctl login bankid).",
                nb: "Begynt på nytt: \(n) økt\(n == 1 ? "" : "er") slettet. Logg inn med BankID eller Vipps (vaultctl login bankid)."))
        }
    }

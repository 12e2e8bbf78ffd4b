import VaultClient
import VaultProtocol

/// One conversation with vaultd on behalf of a person at a terminal: says
/// hello in their language, answers prompts from the terminal, and turns every
/// failure into its sentence and an exit code.
struct CtlSession {
    let connection: VaultConnection
    let language: Language
    var terminal = Terminal()

    static var language: Language {
        func set(_ name: String) -> String? { Stdio.environment(name).flatMap { $0.isEmpty ? nil : $0 } }
        return Language(locale: set("LC_ALL") ?? set("LC_MESSAGES") ?? Stdio.environment("LANG"))
    }

    /// Connects as `--socket` and `--non-interactive` say; the hello goes
    /// with the first request, in one write.
    static func open(_ options: CLIInvocation) throws -> CtlSession {
        let language = CtlSession.language
        do {
            let c = try VaultConnection(socketPath: options.value("socket"))
            c.greet(client: "vaultctl", language: language, interactive: !options.flag("non-interactive"))
            return CtlSession(connection: c, language: language)
        } catch {
            throw Failure(error: error, language: language)
        }
    }

    func call(_ op: String, _ fields: [String: JSON] = [:]) throws -> JSON {
        do {
            return try connection.call(op, fields) { prompt in terminal.answer(prompt) }
        } catch {
            throw Failure(error: error, language: language)
        }
    }

    func say(_ text: LocalizedText) { Stdio.out(text.text(language)) }
}

/// A failure already explained to the person; carries the exit code.
struct Failure: Error, CustomStringConvertible {
    let error: ClientError
    let language: Language

    var description: String { error.message(language) }

    var exitCode: Int32 {
        switch error.code {
        case "not_running": return 3
        case "locked", "locked_out", "no_match", "enrollment_changed", "factor_unavailable", "not_enrolled": return 4
        case "no_session", "session_expired": return 5
        case "cancelled": return 6
        default: return 1
        }
    }
}

/// Runs `body`, printing a failure as its sentence on stderr (and as JSON
/// on stdout with `--json`), and ends with the failure's exit code.
func guarded(json: Bool = false, _ body: () throws -> Void) throws {
    do {
        try body()
    } catch let f as Failure {
        Stdio.error("vaultctl: \(f.description)\n")
        if json {
            var o: [String: JSON] = ["code": .string(f.error.code), "message": .string(f.description)]
            if case .vault(_, _, let extra) = f.error { o.merge(extra) { a, _ in a } }
            Stdio.out(JSON.object(["error": .object(o)]).text)
        }
        throw Exit(f.exitCode)
    }
}

/// A command that reads one op's result: `--json` prints it as it came,
/// otherwise `show` says it for a person.
func reading(_ op: String, _ options: CLIInvocation, _ fields: [String: JSON] = [:],
             show: (CtlSession, JSON) throws -> Void) throws {
    let json = options.flag("json")
    try guarded(json: json) {
        let s = try CtlSession.open(options)
        let r = try s.call(op, fields)
        if json { Stdio.out(r.text); return }
        try show(s, r)
    }
}

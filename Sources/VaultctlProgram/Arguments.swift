import VaultProtocol

// vaultctl's command line: each command is a value (its words, options and
// arguments, and what it runs), one parser reads argv against them, and the
// help, the man page and the shell completions are made from the same values.
// No reflection and no generic types made at run time: swift-argument-parser
// spent 1.9 ms of vaultctl's 5.1 ms start there (docs/benchmarks.md, session 14).

/// An option: `--name VALUE` (or `--name=VALUE`), or a flag when `value` is nil.
struct CLIOption: Sendable {
    let name: String
    var short: Character?
    /// The value's name in help ("seconds"); nil: a flag.
    var value: String?
    let help: String

    static func flag(_ name: String, short: Character? = nil, _ help: String) -> CLIOption {
        CLIOption(name: name, short: short, value: nil, help: help)
    }

    static func value(_ name: String, _ valueName: String? = nil, _ help: String) -> CLIOption {
        CLIOption(name: name, short: nil, value: valueName ?? name, help: help)
    }
}

/// A positional argument.
struct CLIArgument: Sendable {
    let name: String
    let help: String
    var optional = false
}

/// A command: a leaf runs, a group has subcommands (and maybe a default one).
struct CLICommand: Sendable {
    let name: String
    let abstract: String
    var discussion = ""
    var options: [CLIOption] = []
    var arguments: [CLIArgument] = []
    var subcommands: [CLICommand] = []
    var defaultSubcommand: String?
    var run: (@Sendable (CLIInvocation) throws -> Void)?
}

/// What the person typed, read against a command.
struct CLIInvocation: Sendable {
    var flags: Set<String> = []
    var values: [String: String] = [:]
    var arguments: [String: String] = [:]

    func flag(_ name: String) -> Bool { flags.contains(name) }
    func value(_ name: String) -> String? { values[name] }
    func argument(_ name: String) -> String? { arguments[name] }

    /// A whole number option; wrong input is a usage error in the person's words.
    func number(_ name: String, atLeast minimum: Int64 = .min) throws(CLIUsageError) -> Int64? {
        guard let text = values[name] else { return nil }
        guard let n = Int64(text), n >= minimum else {
            throw CLIUsageError(minimum == 0 ? Words.notCount(name, text) : Words.notNumber(name, text))
        }
        return n
    }
}

/// Wrong usage: said in the person's language with where to look; exit 2.
struct CLIUsageError: Error {
    let text: LocalizedText
    init(_ text: LocalizedText) { self.text = text }
}

/// What argv asks for.
enum CLIRequest {
    case run(CLICommand, CLIInvocation)
    /// `--help`, `-h` or `help COMMAND…`: the chain of commands to the one asked about.
    case help([CLICommand])
    case version
    /// `--generate-completion-script SHELL` (scripts/gen-docs).
    case completion(String)
    /// `--generate-manual DATE` (scripts/gen-docs).
    case manual(String)
}

extension CLICommand {
    /// Reads `argv` (without the program name) against this root command.
    func parse(_ argv: [String]) throws(CLIUsageError) -> CLIRequest {
        var args = argv[...]
        switch args.first {
        case "--version"?: return args.count == 1 ? .version : .help([self])
        case "--generate-completion-script"?:
            guard args.count == 2, let shell = args.last, ["bash", "zsh", "fish"].contains(shell) else {
                throw CLIUsageError(Words.badShell)
            }
            return .completion(shell)
        case "--generate-manual"?:
            guard args.count == 2, let date = args.last else { throw CLIUsageError(Words.manualNeedsDate) }
            return .manual(date)
        case "help"?:
            args = args.dropFirst()
            var chain = [self]
            for word in args {
                guard let sub = chain.last?.subcommands.first(where: { $0.name == word }) else {
                    throw CLIUsageError(Words.unknownCommand(word, in: chain))
                }
                chain.append(sub)
            }
            return .help(chain)
        default:
            break
        }
        var chain = [self]
        // Walk down the subcommands named first (options may come only after them).
        while let group = chain.last, !group.subcommands.isEmpty {
            if let word = args.first, let sub = group.subcommands.first(where: { $0.name == word }) {
                chain.append(sub)
                args = args.dropFirst()
            } else if let word = args.first, !word.hasPrefix("-") {
                throw CLIUsageError(Words.unknownCommand(word, in: chain))
            } else if args.contains(where: { $0 == "--help" || $0 == "-h" }) {
                return .help(chain)
            } else if let name = group.defaultSubcommand, let sub = group.subcommands.first(where: { $0.name == name }) {
                chain.append(sub)
            } else {
                return .help(chain)
            }
        }
        guard let command = chain.last else { return .help([self]) }
        var invocation = CLIInvocation()
        var positionals: [String] = []
        var onlyArguments = false
        while let word = args.popFirst() {
            if onlyArguments || !word.hasPrefix("-") || word == "-" {
                positionals.append(word)
                continue
            }
            if word == "--" {
                onlyArguments = true
                continue
            }
            if word == "--help" || word == "-h" { return .help(chain) }
            let option: CLIOption?
            var inline: String?
            if word.hasPrefix("--") {
                let body = word.dropFirst(2)
                let name = body.split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
                if body.contains("=") { inline = String(body.drop(while: { $0 != "=" }).dropFirst()) }
                option = command.options.first { $0.name == name }
            } else if word.count == 2, let c = word.last {
                option = command.options.first { $0.short == c }
            } else {
                option = nil
            }
            guard let option else { throw CLIUsageError(Words.unknownOption(word, chain)) }
            if option.value == nil {
                guard inline == nil else { throw CLIUsageError(Words.flagTakesNoValue(option.name, chain)) }
                invocation.flags.insert(option.name)
                continue
            }
            guard let value = inline ?? args.popFirst() else { throw CLIUsageError(Words.missingValue(option, chain)) }
            invocation.values[option.name] = value
        }
        for (i, argument) in command.arguments.enumerated() {
            if i < positionals.count {
                invocation.arguments[argument.name] = positionals[i]
            } else if !argument.optional {
                throw CLIUsageError(Words.missingArgument(argument.name, chain))
            }
        }
        if positionals.count > command.arguments.count {
            throw CLIUsageError(Words.unexpectedArgument(positionals[command.arguments.count], chain))
        }
        return .run(command, invocation)
    }
}

// MARK: - What is made from the commands

extension CLICommand {
    /// `vaultctl token [--socket <socket>] … [<account>]`.
    func usage(_ chain: [CLICommand]) -> String {
        let words = chain.map(\.name).joined(separator: " ")
        if !subcommands.isEmpty { return "\(words) <subcommand>" }
        var parts = [words]
        for o in options {
            let spelled = o.value.map { "--\(o.name) <\($0)>" } ?? "--\(o.name)"
            parts.append("[\(spelled)]")
        }
        for a in arguments { parts.append(a.optional ? "[<\(a.name)>]" : "<\(a.name)>") }
        return parts.joined(separator: " ")
    }

    /// The help text of the last command of `chain`.
    static func help(_ chain: [CLICommand]) -> String {
        guard let c = chain.last else { return "" }
        var out = wrap("OVERVIEW: \(c.abstract)", indent: 0) + "\n"
        if !c.discussion.isEmpty { out += "\n" + wrap(c.discussion, indent: 0) + "\n" }
        out += "\nUSAGE: \(c.usage(chain))\n"
        if !c.arguments.isEmpty {
            out += "\nARGUMENTS:\n"
            for a in c.arguments { out += column("<\(a.name)>", a.help) }
        }
        out += "\nOPTIONS:\n"
        for o in c.options {
            let short = o.short.map { "-\($0), " } ?? ""
            out += column(short + "--\(o.name)" + (o.value.map { " <\($0)>" } ?? ""), o.help)
        }
        if chain.count == 1 { out += column("--version", "Show the version.") }
        out += column("-h, --help", "Show help information.")
        if !c.subcommands.isEmpty {
            out += "\nSUBCOMMANDS:\n"
            for s in c.subcommands {
                out += column(s.name + (s.name == c.defaultSubcommand ? " (default)" : ""), s.abstract)
            }
            out += "\n  See '\(chain.map(\.name).joined(separator: " ")) help <subcommand>' for detailed help.\n"
        }
        return out
    }

    private static func column(_ left: String, _ right: String) -> String {
        let pad = 24
        let head = "  " + left
        let text = wrap(right, indent: pad + 2)
        if head.count < pad + 1 {
            return head + String(repeating: " ", count: pad + 2 - head.count) + text.drop(while: { $0 == " " }) + "\n"
        }
        return head + "\n" + text + "\n"
    }

    /// `text` in lines of at most 80 columns, each indented by `indent`.
    private static func wrap(_ text: String, indent: Int) -> String {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty, indent + line.count + 1 + word.count > 80 {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(line) }
        let pad = String(repeating: " ", count: indent)
        return lines.map { pad + $0 }.joined(separator: "\n")
    }

    /// Every command below this one, with the words that reach it.
    func walk(_ path: [String] = []) -> [(path: [String], command: CLICommand)] {
        let here = path + [name]
        return [(here, self)] + subcommands.flatMap { $0.walk(here) }
    }
}

// MARK: - The person's words for wrong usage

/// Usage errors, in English and bokmål, each saying where the right usage is.
enum Words {
    static func see(_ chain: [CLICommand]) -> (en: String, nb: String) {
        let words = chain.map(\.name).joined(separator: " ")
        return ("See “\(words) --help”.", "Se «\(words) --help».")
    }

    static func unknownCommand(_ word: String, in chain: [CLICommand]) -> LocalizedText {
        let s = see(chain)
        return LocalizedText(en: "There is no command “\(word)”. \(s.en)", nb: "Det finnes ingen kommando «\(word)». \(s.nb)")
    }

    static func unknownOption(_ word: String, _ chain: [CLICommand]) -> LocalizedText {
        let s = see(chain)
        return LocalizedText(en: "“\(word)” is not an option here. \(s.en)", nb: "«\(word)» er ikke et valg her. \(s.nb)")
    }

    static func flagTakesNoValue(_ name: String, _ chain: [CLICommand]) -> LocalizedText {
        let s = see(chain)
        return LocalizedText(en: "--\(name) takes no value. \(s.en)", nb: "--\(name) tar ingen verdi. \(s.nb)")
    }

    static func missingValue(_ option: CLIOption, _ chain: [CLICommand]) -> LocalizedText {
        let s = see(chain)
        let value = option.value ?? option.name
        return LocalizedText(en: "--\(option.name) needs a value (<\(value)>). \(s.en)",
                             nb: "--\(option.name) trenger en verdi (<\(value)>). \(s.nb)")
    }

    static func missingArgument(_ name: String, _ chain: [CLICommand]) -> LocalizedText {
        let s = see(chain)
        return LocalizedText(en: "Missing <\(name)>. \(s.en)", nb: "<\(name)> mangler. \(s.nb)")
    }

    static func unexpectedArgument(_ word: String, _ chain: [CLICommand]) -> LocalizedText {
        let s = see(chain)
        return LocalizedText(en: "“\(word)” was not expected here. \(s.en)", nb: "«\(word)» var ikke ventet her. \(s.nb)")
    }

    static func notNumber(_ name: String, _ text: String) -> LocalizedText {
        LocalizedText(en: "--\(name) must be a whole number, not “\(text)”.", nb: "--\(name) må være et heltall, ikke «\(text)».")
    }

    static func notCount(_ name: String, _ text: String) -> LocalizedText {
        LocalizedText(en: "--\(name) must be 0 or more, not “\(text)”.", nb: "--\(name) må være 0 eller mer, ikke «\(text)».")
    }

    static let badShell = LocalizedText(en: "Give one shell: bash, zsh or fish.", nb: "Oppgi ett skall: bash, zsh eller fish.")
    static let manualNeedsDate = LocalizedText(en: "Give the man page's date (YYYY-MM-DD).",
                                               nb: "Oppgi datoen for man-siden (ÅÅÅÅ-MM-DD).")
}

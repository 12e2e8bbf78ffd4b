// The man page and the shell completions, made from the same command values
// the parser reads (scripts/gen-docs writes them into dist/; GeneratedDocsTests
// says when they are stale).

extension CLICommand {
    /// mdoc(7), for `man vaultctl`.
    func manual(date: String) -> String {
        var out = [
            ".\\\" Made by `vaultctl --generate-manual` (scripts/gen-docs). Do not edit.",
            ".Dd \(date)", ".Dt \(name.uppercased()) 1", ".Os",
            ".Sh NAME", ".Nm \(name)", ".Nd \(Self.roff(abstract))",
            ".Sh SYNOPSIS", ".Nm", ".Ar subcommand",
            ".Sh DESCRIPTION",
        ]
        if !discussion.isEmpty { out.append(Self.roff(discussion)) }
        out += [".Bl -tag -width 6n", ".It Fl h , -help", "Show help information.", ".It Fl -version", "Show the version."]
        for sub in subcommands { out += sub.manualEntry() }
        out += [".El", ".Sh EXIT STATUS", "See DESCRIPTION.", ".Sh AUTHORS", "SessionVault"]
        return out.joined(separator: "\n") + "\n"
    }

    private func manualEntry() -> [String] {
        var out = [".It Em \(name)", Self.roff(abstract)]
        if !discussion.isEmpty { out.append(".Pp"); out.append(Self.roff(discussion)) }
        let hasItems = !options.isEmpty || !arguments.isEmpty || !subcommands.isEmpty
        guard hasItems else { return out }
        out.append(".Bl -tag -width 6n")
        for a in arguments { out += [".It Ar \(a.name)", Self.roff(a.help)] }
        for o in options {
            let short = o.short.map { "Fl \($0) , " } ?? ""
            out += [".It \(short)Fl -\(o.name)" + (o.value.map { " Ar \($0)" } ?? ""), Self.roff(o.help)]
        }
        for sub in subcommands { out += sub.manualEntry() }
        out.append(".El")
        return out
    }

    /// Text safe in a roff line: backslashes escaped, no line starting as a request.
    private static func roff(_ text: String) -> String {
        let escaped = text.escaping(["\\": "\\e"])
        return escaped.hasPrefix(".") || escaped.hasPrefix("'") ? "\\&" + escaped : escaped
    }

    /// A completion script for `shell` (bash, zsh or fish).
    func completionScript(_ shell: String) -> String {
        switch shell {
        case "bash": return bashCompletion()
        case "zsh": return zshCompletion()
        default: return fishCompletion()
        }
    }

    /// The words offered after each command path: its subcommands, then its options.
    private var offers: [(path: String, words: [String])] {
        walk().map { entry in
            let c = entry.command
            var words = c.subcommands.map(\.name)
            for o in c.options {
                if let s = o.short { words.append("-\(s)") }
                words.append("--\(o.name)")
            }
            if entry.path.count == 1 { words.append("--version") }
            words += ["-h", "--help"]
            return (entry.path.joined(separator: " "), words)
        }
    }

    /// Options whose value is a file path, and those with another value.
    private var valueOptions: (files: [String], others: [String]) {
        let all = walk().flatMap { $0.command.options }.filter { $0.value != nil }
        let files = Set(all.filter { ["socket", "path", "file"].contains($0.value ?? "") }.map { "--\($0.name)" })
        let others = Set(all.map { "--\($0.name)" }).subtracting(files)
        return (files.sorted(), others.sorted())
    }

    private var groupPaths: [String] {
        walk().dropFirst().map { $0.path.joined(separator: " ") }
    }

    private func bashCompletion() -> String {
        let values = valueOptions
        var out = """
            #!/bin/bash
            # Made by `\(name) --generate-completion-script bash` (scripts/gen-docs). Do not edit.
            _\(name)() {
                local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
                local words_path="\(name)" i
                case "$prev" in
                    \(values.files.isEmpty ? "--no-file-options" : values.files.joined(separator: "|"))) COMPREPLY=($(compgen -f -- "$cur")); return ;;
                    \(values.others.isEmpty ? "--no-value-options" : values.others.joined(separator: "|"))) COMPREPLY=(); return ;;
                esac
                for ((i = 1; i < COMP_CWORD; i++)); do
                    case "$words_path ${COMP_WORDS[i]}" in
                        \(groupPaths.map { "\"\($0)\"" }.joined(separator: "|"))) words_path="$words_path ${COMP_WORDS[i]}" ;;
                    esac
                done
                case "$words_path" in

            """
        for offer in offers {
            out += "        \"\(offer.path)\") COMPREPLY=($(compgen -W \"\(offer.words.joined(separator: " "))\" -- \"$cur\")) ;;\n"
        }
        out += """
                esac
            }
            complete -F _\(name) \(name)

            """
        return out
    }

    private func zshCompletion() -> String {
        let values = valueOptions
        var out = """
            #compdef \(name)
            # Made by `\(name) --generate-completion-script zsh` (scripts/gen-docs). Do not edit.
            _\(name)() {
                local words_path="\(name)" i
                case "${words[CURRENT-1]}" in
                    (\(values.files.isEmpty ? "--no-file-options" : values.files.joined(separator: "|"))) _files; return ;;
                    (\(values.others.isEmpty ? "--no-value-options" : values.others.joined(separator: "|"))) return ;;
                esac
                for ((i = 2; i < CURRENT; i++)); do
                    case "$words_path ${words[i]}" in
                        (\(groupPaths.map { "\"\($0)\"" }.joined(separator: "|"))) words_path="$words_path ${words[i]}" ;;
                    esac
                done
                case "$words_path" in

            """
        for offer in offers {
            out += "        (\"\(offer.path)\") compadd -- \(offer.words.joined(separator: " ")) ;;\n"
        }
        out += """
                esac
            }
            _\(name) "$@"

            """
        return out
    }

    private func fishCompletion() -> String {
        func quoted(_ s: String) -> String { "'" + s.escaping(["\\": "\\\\", "'": "\\'"]) + "'" }
        var out = ["# Made by `\(name) --generate-completion-script fish` (scripts/gen-docs). Do not edit.",
                   "complete -c \(name) -f"]
        for entry in walk() {
            let c = entry.command
            let below = entry.path.dropFirst()
            // Where this command's words are offered: after its own path, before any of its subcommands.
            var condition = below.isEmpty ? "__fish_use_subcommand" : "__fish_seen_subcommand_from \(below.last ?? "")"
            if !c.subcommands.isEmpty, !below.isEmpty {
                condition += "; and not __fish_seen_subcommand_from \(c.subcommands.map(\.name).joined(separator: " "))"
            }
            for sub in c.subcommands {
                out.append("complete -c \(name) -n \(quoted(condition)) -a \(sub.name) -d \(quoted(sub.abstract))")
            }
            guard !below.isEmpty else { continue }
            for o in c.options {
                var line = "complete -c \(name) -n \(quoted(condition)) -l \(o.name)"
                if let s = o.short { line += " -s \(s)" }
                if o.value != nil { line += o.value == "path" || o.value == "socket" ? " -r -F" : " -r" }
                out.append(line + " -d \(quoted(o.help))")
            }
        }
        return out.joined(separator: "\n") + "\n"
    }
}

extension String {
    /// Each character that is a key of `replacements` replaced by its value.
    /// (Not the standard library's `replacing(_:with:)`: that one is generic
    /// over regular expressions and links their whole engine into vaultctl.)
    func escaping(_ replacements: [Character: String]) -> String {
        var out = ""
        out.reserveCapacity(utf8.count)
        for c in self {
            if let r = replacements[c] { out += r } else { out.append(c) }
        }
        return out
    }
}

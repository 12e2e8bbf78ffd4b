import Foundation
import VaultClient
import VaultProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Answers prompts at a terminal. Secrets are read without echo when stdin is
/// a terminal, and from stdin lines otherwise (scripts, tests). Prompts and
/// messages go to stderr so stdout stays clean for `--json` and tokens.
struct Terminal {
    var isTTY: Bool { isatty(STDIN_FILENO) == 1 }

    func answer(_ prompt: Prompt) -> PromptReply {
        switch prompt.kind {
        case .message:
            FileHandle.standardError.write(Data("\(prompt.text)\n".utf8))
            return .none
        case .secret:
            guard let s = readSecret(prompt.text) else { return .cancel }
            return .value(.string(s))
        case .confirm:
            FileHandle.standardError.write(Data("\(prompt.text) [y/N] ".utf8))
            guard let line = readLine(strippingNewline: true) else { return .cancel }
            return .value(.bool(["y", "yes", "j", "ja"].contains(line.lowercased().trimmingCharacters(in: .whitespaces))))
        case .openURL:
            FileHandle.standardError.write(Data("\(prompt.text)\n\(prompt.extra["url"]?.stringValue ?? "")\n".utf8))
            return .none
        case .choice:
            FileHandle.standardError.write(Data("\(prompt.text)\n".utf8))
            let options = prompt.extra["options"]?.arrayValue ?? []
            for (n, o) in options.enumerated() {
                FileHandle.standardError.write(Data("  \(n + 1). \(o["label"]?.stringValue ?? o.stringValue ?? "")\n".utf8))
            }
            guard let line = readLine(strippingNewline: true), let n = Int(line.trimmingCharacters(in: .whitespaces)),
                  n >= 1, n <= options.count else { return .cancel }
            let picked = options[n - 1]
            return .value(picked["value"] ?? picked)
        }
    }

    /// Reads one line with echo off (when a terminal). Nil on end of input.
    func readSecret(_ text: String) -> String? {
        FileHandle.standardError.write(Data("\(text) ".utf8))
        guard isTTY else { return readLine(strippingNewline: true) }
        var old = termios()
        tcgetattr(STDIN_FILENO, &old)
        var silent = old
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &old)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        return readLine(strippingNewline: true)
    }
}

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
    /// The command that opens a URL (nil: only print it).
    var browser: [String]? = Terminal.defaultBrowser()

    var isTTY: Bool { isatty(STDIN_FILENO) == 1 }

    /// `$BROWSER`, else `xdg-open` when installed, else none (print only).
    static func defaultBrowser() -> [String]? {
        if let b = ProcessInfo.processInfo.environment["BROWSER"], !b.isEmpty {
            return b.split(separator: " ").map(String.init)
        }
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            if FileManager.default.isExecutableFile(atPath: "\(dir)/xdg-open") { return ["\(dir)/xdg-open"] }
        }
        return nil
    }

    /// Starts the browser on `url` without waiting for it; false if it could not start.
    func open(_ url: String) -> Bool {
        guard let browser, let command = browser.first else { return false }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: command.hasPrefix("/") ? command : "/usr/bin/env")
        p.arguments = (command.hasPrefix("/") ? [] : [command]) + browser.dropFirst() + [url]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        p.standardInput = FileHandle.nullDevice
        do { try p.run() } catch { return false }
        return true
    }

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
            let url = prompt.extra["url"]?.stringValue ?? ""
            FileHandle.standardError.write(Data("\(prompt.text)\n".utf8))
            if !open(url) {
                // No browser here (or --no-browser): the person opens it by hand.
                FileHandle.standardError.write(Data("\(url)\n".utf8))
            }
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

import VaultClient
import VaultProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Answers prompts at a terminal. Secrets are read without echo when stdin is
/// a terminal, and from stdin lines otherwise (scripts, tests). Prompts and
/// messages go to stderr so stdout stays clean for `--json` and tokens.
struct Terminal {
    /// How a login page is opened.
    enum Browser {
        /// `$BROWSER`, else `xdg-open` when installed (looked up when a page is opened).
        case systemDefault
        /// Only printed (`--no-browser`).
        case none
        /// This command (`--browser`).
        case command([String])
    }
    var browser = Browser.systemDefault
    var language: Language = CtlSession.language

    var isTTY: Bool { isatty(STDIN_FILENO) == 1 }

    /// `$BROWSER`, else `xdg-open` when installed, else none (print only).
    static func defaultBrowser() -> [String]? {
        if let b = Stdio.environment("BROWSER"), !b.isEmpty {
            return b.split(separator: " ").map(String.init)
        }
        for dir in (Stdio.environment("PATH") ?? "/usr/bin:/bin").split(separator: ":") {
            if Stdio.isExecutable("\(dir)/xdg-open") { return ["\(dir)/xdg-open"] }
        }
        return nil
    }

    /// Whether an `open_url` prompt's URL is a login's page: http(s), on one of
    /// the origins vaultd (whose uid the connection checked) sent with the
    /// prompt, the launch pages of its logins waiting now. Anything else, say a
    /// plugin's page or a file: URL, is only printed.
    static func mayOpen(_ url: String, _ prompt: Prompt) -> Bool {
        guard let origin = WebOrigin.of(url) else { return false }
        return (prompt.extra["origins"]?.arrayValue ?? []).contains { $0.stringValue == origin }
    }

    static let notAProviderPage = LocalizedText(
        en: "This address is not the login page of a provider set up in SessionVault, so it was not opened. Open it yourself only if you trust it:",
        nb: "Denne adressen er ikke innloggingssiden til en tjeneste som er satt opp i SessionVault, så den ble ikke åpnet. Åpne den selv bare hvis du stoler på den:")

    /// Starts the browser on `url` without waiting for it; false if it could not start.
    func open(_ url: String) -> Bool {
        let command: [String]?
        switch browser {
        case .systemDefault: command = Terminal.defaultBrowser()
        case .none: command = nil
        case .command(let c): command = c
        }
        guard let browser = command, !browser.isEmpty else { return false }
        return Stdio.spawnDetached(browser + [url])
    }

    func answer(_ prompt: Prompt) -> PromptReply {
        switch prompt.kind {
        case .message:
            Stdio.error("\(prompt.text)\n")
            return .none
        case .secret:
            guard let s = readSecret(prompt.text) else { return .cancel }
            return .value(.string(s))
        case .confirm:
            Stdio.error("\(prompt.text) [y/N] ")
            guard let line = readLine(strippingNewline: true) else { return .cancel }
            return .value(.bool(["y", "yes", "j", "ja"].contains(line.lowercased().trimmed)))
        case .openURL:
            let url = prompt.extra["url"]?.stringValue ?? ""
            Stdio.error("\(prompt.text)\n")
            guard Terminal.mayOpen(url, prompt) else {
                Stdio.error("\(Terminal.notAProviderPage.text(language))\n\(url)\n")
                return .none
            }
            if !open(url) {
                // No browser here (or --no-browser): the person opens it by hand.
                Stdio.error("\(url)\n")
            }
            return .none
        case .choice:
            Stdio.error("\(prompt.text)\n")
            let options = prompt.extra["options"]?.arrayValue ?? []
            for (n, o) in options.enumerated() {
                Stdio.error("  \(n + 1). \(o["label"]?.stringValue ?? o.stringValue ?? "")\n")
            }
            guard let line = readLine(strippingNewline: true), let n = Int(line.trimmed),
                  n >= 1, n <= options.count else { return .cancel }
            let picked = options[n - 1]
            return .value(picked["value"] ?? picked)
        }
    }

    /// Reads one line with echo off (when a terminal). Nil on end of input.
    func readSecret(_ text: String) -> String? {
        Stdio.error("\(text) ")
        guard isTTY else { return readLine(strippingNewline: true) }
        var old = termios()
        tcgetattr(STDIN_FILENO, &old)
        var silent = old
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &old)
            Stdio.error("\n")
        }
        return readLine(strippingNewline: true)
    }
}

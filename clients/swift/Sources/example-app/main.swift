// A tiny "desktop app": asks SessionVault for its session and greets the user,
// as clients/python/example_app.py does.
//
// Prints "Hello, NAME (org/role)" and exits 0, or prints the vault's message
// (in the language of $LANG: English or Norwegian bokmål) and exits 1.
//
//     example-app [--account ACCOUNT] [--interactive] [--socket PATH]
//
// With --interactive the vault may ask for the PIN on this terminal.
import Foundation
import VaultClient

var account: String?
var interactive = false
var socket: String?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--account": account = arguments.popFirst()
    case "--interactive": interactive = true
    case "--socket": socket = arguments.popFirst()
    default:
        FileHandle.standardError.write(Data("usage: example-app [--account ACCOUNT] [--interactive] [--socket PATH]\n".utf8))
        exit(2)
    }
}

let environment = ProcessInfo.processInfo.environment
let language = Language(locale: environment["LC_ALL"] ?? environment["LC_MESSAGES"] ?? environment["LANG"])

/// Answers the vault's prompts on this terminal (only with --interactive).
func askOnTerminal(_ prompt: Prompt) -> PromptReply {
    switch prompt.kind {
    case .message:
        FileHandle.standardError.write(Data((prompt.text + "\n").utf8))
        return .none
    case .secret:
        guard let typed = getpass(prompt.text + " ") else { return .cancel }
        return .value(.string(String(cString: typed)))
    case .confirm:
        print(prompt.text + " [y/N] ", terminator: "")
        let answer = (readLine() ?? "").lowercased()
        return .value(.bool(["y", "yes", "j", "ja"].contains(answer)))
    case .openURL:
        FileHandle.standardError.write(Data("\(prompt.text) \(prompt.extra["url"]?.stringValue ?? "")\n".utf8))
        return .value(.bool(true))
    case .choice:
        print(prompt.text + " ", terminator: "")
        return readLine().map { .value(.string($0)) } ?? .cancel
    }
}

/// "Hello, NAME (org/role)" from the session's claims.
func greeting(_ session: JSON) -> String {
    let claims = session["claims"]
    let name = claims?["name"]?.stringValue ?? session["account"]?.stringValue ?? "?"
    let org = claims?["org_name"]?.stringValue ?? claims?["org"]?.stringValue
    let roles = claims?["roles"]?.arrayValue?.compactMap(\.stringValue).joined(separator: ",")
        ?? claims?["role"]?.stringValue
    guard org != nil || roles != nil else { return "Hello, \(name)" }
    return "Hello, \(name) (\(org ?? "-")/\(roles ?? "-"))"
}

do {
    let vault = try VaultConnection(socketPath: socket)
    try vault.hello(client: "example-app", language: language, interactive: interactive)
    var fields: [String: JSON] = [:]
    if let account { fields["account"] = .string(account) }
    let onPrompt: ((Prompt) -> PromptReply)? = interactive ? { askOnTerminal($0) } : nil
    let session = try vault.call("session", fields, onPrompt: onPrompt)
    // session["access_token"] is what the app sends to its API; never print or log it.
    print(greeting(session))
} catch {
    print(error.message(language))
    exit(1)
}

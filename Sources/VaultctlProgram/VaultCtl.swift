#if canImport(Glibc)
import Glibc
#endif
import VaultClient
import VaultProtocol

/// vaultctl's commands, as values (Arguments.swift reads argv against them).
let vaultctl = CLICommand(
    name: "vaultctl",
    abstract: "Talk to SessionVault: unlock, set up fingerprint or PIN, manage sessions.",
    discussion: "Exit codes: 0 done; 1 failed; 2 wrong usage; 3 vaultd is not running; 4 the vault stayed locked "
        + "(locked, wrong PIN, locked out, fingerprint changed or unavailable, not set up); 5 no session "
        + "(not logged in, or the session expired); 6 cancelled.",
    subcommands: [status, login, token, factors, lock, unlock, enroll, disable, reenroll, reset, importSession, sessions,
                  logout, context, sync, audit, apps])

/// Options every command that talks to vaultd has.
let commonOptions: [CLIOption] = [
    .value("socket", "socket", "vaultd's socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock)."),
    .flag("non-interactive", "Never ask questions; fail with the reason instead."),
]

/// Options of commands that read state: `--json` prints the raw result.
let readOptions: [CLIOption] = [.flag("json", "Print the result as JSON.")]

/// A command's end with this exit code (its reason already said).
struct Exit: Error {
    let code: Int32
    init(_ code: Int32) { self.code = code }
}

/// vaultctl's main (Sources/vaultctl, and the one binary in Sources/vaultd).
public func vaultctlMain() {
    VaultCtl.main()
}

enum VaultCtl {
    static func main() {
        let language = CtlSession.language
        do {
            switch try vaultctl.parse(Array(CommandLine.arguments.dropFirst())) {
            case .run(let command, let invocation):
                try command.run?(invocation)
            case .help(let chain):
                Stdio.out(CLICommand.help(chain), terminator: "")
            case .version:
                Stdio.out(SessionVaultVersion.string)
            case .completion(let shell):
                Stdio.out(vaultctl.completionScript(shell), terminator: "")
            case .manual(let date):
                Stdio.out(vaultctl.manual(date: date), terminator: "")
            }
        } catch let usage as CLIUsageError {
            Stdio.error("vaultctl: \(usage.text.text(language))\n")
            exit(2)
        } catch let end as Exit {
            exit(end.code)
        } catch {
            Stdio.error("vaultctl: \(error)\n")
            exit(1)
        }
    }
}

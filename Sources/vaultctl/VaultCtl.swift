import ArgumentParser
import VaultClient
import VaultProtocol

@main
struct VaultCtl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vaultctl",
        abstract: "Talk to SessionVault: unlock, set up fingerprint or PIN, manage sessions.",
        discussion: """
            Exit codes: 0 done; 1 failed; 2 wrong usage; 3 vaultd is not running; 4 the vault stayed locked \
            (locked, wrong PIN, locked out, fingerprint changed or unavailable, not set up); 5 no session \
            (not logged in, or the session expired); 6 cancelled.
            """,
        version: SessionVaultVersion.string,
        subcommands: [Status.self, Login.self, Token.self, Factors.self, Lock.self, Unlock.self, Enroll.self, Disable.self,
                      Reenroll.self, Reset.self, Import.self, Sessions.self, Logout.self, Context.self, Sync.self, Audit.self,
                      Apps.self])
}

/// Options every command shares.
struct CommonOptions: ParsableArguments {
    @Option(help: "vaultd's socket (default: $SESSIONVAULT_SOCKET or $XDG_RUNTIME_DIR/sessionvault/vault.sock).")
    var socket: String?

    @Flag(help: "Never ask questions; fail with the reason instead.")
    var nonInteractive = false
}

/// Options of commands that read state: `--json` prints the raw result.
struct ReadOptions: ParsableArguments {
    @Flag(help: "Print the result as JSON.")
    var json = false
}

import Foundation
import VaultTestSupport
import XCTest

/// vaultctl's own command-line parser (Sources/VaultctlProgram/Arguments.swift):
/// wrong usage is said in the person's language with where to look, and exits
/// 2 (as `vaultctl --help` promises); right usage reaches vaultd (here none is
/// running, so it ends with 3, "not running").
final class CommandLineTests: XCTestCase {
    let noVault = "/nonexistent/sessionvault-test.sock"

    func vaultctl(_ args: [String], lang: String = "C.UTF-8") throws -> (exit: Int32, out: String, err: String) {
        let env = childEnvironment(["LANG": lang, "LC_ALL": "", "LC_MESSAGES": "", "SESSIONVAULT_SOCKET": noVault])
        let r = try runProcess(Binaries.vaultctl, args, env: env, timeout: 30)
        return (r.exit, r.out, r.err)
    }

    func testWrongUsageSaysWhereToLookAndExits2() throws {
        let cases: [([String], String)] = [
            (["frobnicate"], "There is no command “frobnicate”. See “vaultctl --help”."),
            (["token", "--bogus"], "“--bogus” is not an option here. See “vaultctl token --help”."),
            (["enroll"], "Missing <factor>. See “vaultctl enroll --help”."),
            (["token", "a", "b"], "“b” was not expected here. See “vaultctl token --help”."),
            (["token", "--min-valid"], "--min-valid needs a value (<seconds>). See “vaultctl token --help”."),
            (["token", "--min-valid", "-3"], "--min-valid must be 0 or more, not “-3”."),
            (["token", "--min-valid", "soon"], "--min-valid must be 0 or more, not “soon”."),
            (["status", "--json=yes"], "--json takes no value. See “vaultctl status --help”."),
            (["apps", "forbid"], "There is no command “forbid”. See “vaultctl apps --help”."),
            (["logout"], "Name an account, or use --all. See “vaultctl logout --help”."),
            (["import", "--issuer", "https://idp.example"], "An import needs --issuer and --client-id. See “vaultctl import --help”."),
        ]
        for (args, sentence) in cases {
            let r = try vaultctl(args)
            XCTAssertEqual(r.exit, 2, "\(args): \(r.err)")
            XCTAssertEqual(r.err, "vaultctl: \(sentence)\n", "\(args)")
            XCTAssertEqual(r.out, "", "\(args): wrong usage prints nothing on stdout")
        }
    }

    func testWrongUsageInBokmal() throws {
        let r = try vaultctl(["token", "--bogus"], lang: "nb_NO.UTF-8")
        XCTAssertEqual(r.exit, 2)
        XCTAssertEqual(r.err, "vaultctl: «--bogus» er ikke et valg her. Se «vaultctl token --help».\n")
    }

    func testEverySpellingOfRightUsageReachesVaultd() throws {
        for args in [["token", "--min-valid=30"], ["token", "acct", "--min-valid", "30", "--json"], ["reset", "-y"],
                     ["disable", "--yes", "pin"], ["apps"], ["apps", "--json"], ["apps", "revoke", "flatpak:org.example.A"],
                     ["unlock"], ["logout", "--all"], ["token", "--", "--odd-account-name"], ["status", "--socket", noVault]] {
            let r = try vaultctl(args)
            XCTAssertEqual(r.exit, 3, "\(args) should parse and find no vaultd: \(r.err)")
            XCTAssertTrue(r.err.contains("SessionVault is not running"), "\(args): \(r.err)")
        }
    }

    func testHelpForEveryCommand() throws {
        let root = try vaultctl(["--help"])
        XCTAssertEqual(root.exit, 0)
        let commands = ["status", "login", "token", "factors", "lock", "unlock", "enroll", "disable", "reenroll", "reset",
                        "import", "sessions", "logout", "context", "sync", "audit", "apps"]
        for c in commands {
            XCTAssertTrue(root.out.contains("\n  \(c) "), "the root help lists \(c)")
            for spelling in [[c, "--help"], [c, "-h"], ["help", c]] {
                let r = try vaultctl(spelling)
                XCTAssertEqual(r.exit, 0, "\(spelling): \(r.err)")
                XCTAssertTrue(r.out.hasPrefix("OVERVIEW: "), "\(spelling)")
                XCTAssertTrue(r.out.contains("USAGE: vaultctl \(c)"), "\(spelling): \(r.out)")
            }
        }
        let nested = try vaultctl(["help", "apps", "allow"])
        XCTAssertTrue(nested.out.contains("USAGE: vaultctl apps allow [--socket <socket>] [--non-interactive] <app> <account>"),
                      nested.out)
        XCTAssertEqual(try vaultctl([]).exit, 0, "no command: the help")
    }
}

import Foundation
import VaultTestSupport
import XCTest

/// The shipped man pages and completions come from the parsers (scripts/gen-docs);
/// this catches a command added without regenerating them.
final class GeneratedDocsTests: XCTestCase {
    func testCompletionsMatchTheParsers() throws {
        let dist = repositoryRoot + "/dist/completions/"
        for tool in ["vaultctl", "vaultd", "vault-fpstub"] {
            for (shell, file) in [("bash", "\(tool).bash"), ("zsh", "_\(tool)"), ("fish", "\(tool).fish")] {
                let exe = builtExecutable(tool, env: "NONE")
                let now = try runProcess(exe, ["--generate-completion-script", shell], env: childEnvironment([:]), timeout: 30)
                let committed = try String(contentsOfFile: dist + file, encoding: .utf8)
                XCTAssertEqual(now.out, committed, "dist/completions/\(file) is stale: run scripts/gen-docs")
            }
        }
    }

    func testManPagesExistForEveryCommand() throws {
        let man = try String(contentsOfFile: repositoryRoot + "/dist/man/vaultctl.1", encoding: .utf8)
        for command in ["status", "login", "token", "unlock", "enroll", "disable", "reenroll", "import", "sessions", "logout", "context", "audit"] {
            XCTAssertTrue(man.contains("Em \(command)"), "vaultctl.1 lacks \(command): run scripts/gen-docs")
        }
    }
}

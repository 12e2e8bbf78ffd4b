import Foundation
import VaultProtocol
import VaultTestSupport
import XCTest

/// One version string: the VERSION file at the repository root. vaultd,
/// vaultctl, hello's `server`, the Python wheel and the Debian package
/// (scripts/package) all say it.
final class VersionTests: VaultdTestCase {
    private var fileVersion: String {
        get throws {
            try String(contentsOfFile: repositoryRoot + "/VERSION", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    func testTheCompiledVersionIsTheVersionFile() throws {
        XCTAssertEqual(SessionVaultVersion.string, try fileVersion,
                       "Sources/VaultProtocol/Version.swift must say what VERSION says")
        // The wheel reads VERSION through this link (clients/python/pyproject.toml).
        let linked = try String(contentsOfFile: repositoryRoot + "/clients/python/VERSION", encoding: .utf8)
        XCTAssertEqual(linked.trimmingCharacters(in: .whitespacesAndNewlines), try fileVersion)
    }

    func testBinariesAndHelloSayIt() throws {
        let version = try fileVersion
        for tool in [Binaries.vaultd, Binaries.vaultctl] {
            let r = try runProcess(tool, ["--version"], env: childEnvironment([:]), timeout: 30)
            XCTAssertEqual(r.exit, 0, r.err)
            XCTAssertEqual(r.out.trimmingCharacters(in: .whitespacesAndNewlines), version, tool)
        }
        let v = try startVaultd()
        let hello = try v.raw().hello(interactive: false)
        XCTAssertEqual(hello.result?["server"]?.stringValue, "vaultd/\(version)", hello.text)
    }
}

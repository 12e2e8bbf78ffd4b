import Foundation
import VaultProtocol
import XCTest

/// Demo mode's member registry, `vaultctl context` / `sync conflicts`, and the
/// audit entry for a session release with the requesting process.
final class MemberAndAuditTests: VaultdTestCase {
    func startDemo() throws -> VaultdProcess {
        let v = try makeVaultd(config: VaultdProcess.fastPINConfig + "[fingerprint]\nreader = \"none\"\n", extraArgs: ["--demo"])
        try v.start()
        return v
    }

    func loginDemo(_ v: VaultdProcess, _ provider: String, user: String = "kari") -> (exit: Int32, out: String, err: String) {
        v.vaultctl(["login", provider, "--browser", TestProvider.browser], env: ["TEST_USER": user])
    }

    func testAReleaseIsAuditedWithTheRequestingProcess() throws {
        let v = try startDemo()
        XCTAssertEqual(loginDemo(v, "vipps").exit, 0)
        // The login hands its client a session: that release is audited like any other.
        let afterLogin = try waitForAudit(v) { $0.contains { $0["event"] == "release" } }
        XCTAssertEqual(afterLogin.filter { $0["event"] == "release" }.count, 1, "the login's release: \(afterLogin)")
        for _ in 0..<3 { XCTAssertEqual(v.vaultctl(["token"]).exit, 0) }
        let releases = try waitForAudit(v) { $0.filter { $0["event"] == "release" }.count >= 4 }
        XCTAssertEqual(releases.filter { $0["event"] == "release" }.count, 4, "\(releases)")
        for r in releases where r["event"] == "release" {
            XCTAssertNotEqual(r["pid"], .null)
            XCTAssertTrue(r["exe"]?.stringValue?.hasSuffix("vaultctl") ?? false, "\(r.text)")
        }
        XCTAssertEqual(v.vaultctl(["audit", "--verify"]).exit, 0)
    }

    func testDemoMemberRegistryGivesOrganizationAndRolesAndContextSwitches() throws {
        let v = try startDemo()
        // Per Hansen is in one organization with two roles; Kari in one.
        XCTAssertEqual(loginDemo(v, "bankid", user: "per").exit, 0)
        let r = v.vaultctl(["token", "--json"])
        let claims = try JSON.parse(Array(r.out.utf8))["claims"]
        XCTAssertEqual(claims?["org_name"], "Mentorhuset Tromsø", r.out)
        XCTAssertEqual(claims?["roles"], ["peer_mentor", "coordinator"])
        let audit = try auditEntries(v)
        let sync = audit.first { $0["event"] == "member_sync" }
        XCTAssertEqual(sync?["outcome"], "updated", "the record had no number: it was written")
        XCTAssertFalse(audit.map(\.text).joined().contains("24876834525"), "never the number in clear")

        let unknown = v.vaultctl(["context", "Nowhere"])
        XCTAssertNotEqual(unknown.exit, 0)
        XCTAssertTrue(unknown.err.contains("not a member of “Nowhere”. Choose one of yours: Mentorhuset Tromsø."), unknown.err)
        let ok = v.vaultctl(["context", "Mentorhuset Tromsø"])
        XCTAssertEqual(ok.exit, 0, ok.err)

        let conflicts = v.vaultctl(["sync", "conflicts", "--json"])
        XCTAssertEqual(conflicts.exit, 0, conflicts.err)
        XCTAssertEqual(try JSON.parse(Array(conflicts.out.utf8))["conflicts"], [])
    }

    /// Ola is in two organizations in the demo registry: after his first login
    /// he is asked which one to use (vaultctl lists them; "2" is Mentorhuset
    /// Oslo), the session carries it with its roles, the next login (no
    /// provider named: vaultd asks which) asks nothing more, and `context`
    /// still switches.
    func testAMemberOfSeveralOrganizationsIsAskedOnceWhichOne() throws {
        let v = try startDemo()
        let first = v.vaultctl(["login", "bankid", "--browser", TestProvider.browser], stdin: "2\n", env: ["TEST_USER": "ola"])
        XCTAssertEqual(first.exit, 0, first.err)
        XCTAssertTrue(first.err.contains("more than one organization"), first.err)
        XCTAssertTrue(first.err.contains("1. Likepersonsnettverket Bergen") && first.err.contains("2. Mentorhuset Oslo"), first.err)
        var claims = try JSON.parse(Array(v.vaultctl(["token", "--json"]).out.utf8))["claims"]
        XCTAssertEqual(claims?["org_name"], "Mentorhuset Oslo")
        XCTAssertEqual(claims?["roles"], ["peer_mentor"])
        XCTAssertEqual(claims?["orgs"]?.arrayValue?.count, 2)

        // Without a provider named, vaultd asks which (1: Demo BankID).
        let again = v.vaultctl(["login", "--browser", TestProvider.browser], stdin: "1\n", env: ["TEST_USER": "ola"])
        XCTAssertEqual(again.exit, 0, again.err)
        XCTAssertTrue(again.err.contains("1. Use Demo BankID") && again.err.contains("2. Use Demo Vipps"), again.err)
        XCTAssertTrue(again.err.contains("Logged in as Ola Nordmann (bankid).") || again.out.contains("Logged in as Ola Nordmann (bankid)."),
                      again.out + again.err)
        XCTAssertFalse(again.err.contains("more than one organization"), "asked once: \(again.err)")
        claims = try JSON.parse(Array(v.vaultctl(["token", "--json"]).out.utf8))["claims"]
        XCTAssertEqual(claims?["org_name"], "Mentorhuset Oslo")

        XCTAssertEqual(v.vaultctl(["context", "Likepersonsnettverket Bergen"]).exit, 0)
        claims = try JSON.parse(Array(v.vaultctl(["token", "--json"]).out.utf8))["claims"]
        XCTAssertEqual(claims?["org_name"], "Likepersonsnettverket Bergen")
        XCTAssertEqual(claims?["roles"], ["coordinator"])
    }

    func waitForAudit(_ v: VaultdProcess, _ done: ([JSON]) -> Bool) throws -> [JSON] {
        var entries: [JSON] = []
        _ = try waitUntil(timeout: 10, interval: 0.1) {
            entries = try auditEntries(v)
            return done(entries)
        }
        return entries
    }
}

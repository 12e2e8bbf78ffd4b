import Foundation
import VaultProtocol
import XCTest

/// Per-app grants with the real vaultd and vaultctl, two different programs:
/// the test runner imports (and is granted), vaultctl is another app. The
/// sandboxed apps and the grant dialog are tested in Tests/python/test_app_grants.py.
final class AppGrantTests: VaultdTestCase {
    func testAnotherProgramIsRefusedWithoutADialogAndTheImporterKeepsItsSession() throws {
        let v = try startVaultd(config: "per_app = true\n" + VaultdProcess.fastPINConfig)
        try importSession(v, account: "kari", accessToken: "at-grants", refreshToken: nil)
        let runner = try XCTUnwrap(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))

        // The importer reads its own session.
        let c = try v.raw()
        try c.hello()
        XCTAssertEqual(try c.call("session", ["account": "kari"]).result?["access_token"], "at-grants")

        // vaultctl is an ordinary app: not granted, and a terminal prompt would be the asking app's own.
        for (lang, sentence) in [("C.UTF-8", Messages.appNotAllowed("vaultctl").en), ("nb_NO.UTF-8", Messages.appNotAllowed("vaultctl").nb)] {
            let r = v.vaultctl(["token", "kari"], env: ["LANG": lang])
            XCTAssertEqual(r.exit, 1, r.out + r.err)
            XCTAssertTrue(r.err.contains(sentence), r.err)
            XCTAssertFalse(r.out.contains("at-grants"))
        }

        // vaultctl apps: the runner, labelled unverified, with its account.
        let listed = v.vaultctl(["apps"])
        XCTAssertEqual(listed.exit, 0, listed.err)
        let line = listed.out.split(separator: "\n").first { $0.hasPrefix(runner + "\t") }
        XCTAssertNotNil(line, listed.out)
        XCTAssertTrue(line?.contains("(executable, unverified)\tkari\t") == true, listed.out)
        let json = try JSON.parse(Array(v.vaultctl(["apps", "--json"]).out.utf8))
        XCTAssertEqual(json["apps"]?.arrayValue?.first?["verified"], false)

        // The audit log names the app of each decision and release.
        let entries = try auditEntries(v)
        let grants = entries.filter { $0["event"]?.stringValue == "grant" }
        XCTAssertEqual(grants.map { $0["outcome"]?.stringValue }, ["allow", "no_dialog", "no_dialog"], "\(grants)")
        XCTAssertEqual(grants.first?["detail"]?["app"]?.stringValue, runner)
        XCTAssertTrue(grants.last?["detail"]?["app"]?.stringValue?.hasSuffix("/vaultctl") == true, "\(grants)")
        XCTAssertTrue(grants.allSatisfy { $0["detail"]?["app_kind"] == "executable" })
        XCTAssertTrue(waitUntil(timeout: 5) {
            ((try? self.auditEntries(v)) ?? []).contains { $0["event"] == "release" && $0["detail"]?["app"]?.stringValue == runner }
        })

        let text = v.vaultctl(["audit"]).out
        XCTAssertTrue(text.contains("grant\tno_dialog by ") && text.contains(" app executable:") && text.contains("/vaultctl\n"), text)

        // Revoked: the runner is asked about too now (and, with no dialog, refused).
        let revoked = v.vaultctl(["apps", "revoke", runner])
        XCTAssertEqual(revoked.exit, 0, revoked.err)
        let again = try v.raw()
        try again.hello()
        XCTAssertEqual(try again.call("session", ["account": "kari"]).errorCode, "app_not_allowed")
        XCTAssertEqual(v.vaultctl(["apps", "revoke", runner]).exit, 1, "nothing left to revoke")

        // A logout drops the grants with the session; a new import grants anew.
        XCTAssertEqual(v.vaultctl(["logout", "kari"]).exit, 0)
        try importSession(v, account: "kari", accessToken: "at-grants-2", refreshToken: nil)
        XCTAssertEqual(try again.call("session", ["account": "kari"]).result?["access_token"], "at-grants-2")
    }

    /// An app refused in a loop (no dialog to ask through) costs one audit
    /// entry and a count, not a durable write per request: the count is
    /// written when its minute is over, or when vaultd stops.
    func testAnAppRefusedInALoopIsWrittenOnceThenCounted() throws {
        let v = try startVaultd(config: "per_app = true\n" + VaultdProcess.fastPINConfig)
        try importSession(v, account: "kari", accessToken: "at-loop", refreshToken: nil)
        let runner = try XCTUnwrap(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        // The runner gives its grant up: from now on it is an app like any other.
        XCTAssertEqual(v.vaultctl(["apps", "revoke", runner]).exit, 0)
        let c = try v.raw()
        try c.hello()
        for _ in 0..<300 {
            XCTAssertEqual(try c.call("session", ["account": "kari"]).errorCode, "app_not_allowed")
        }
        func refusals() throws -> [JSON] {
            try auditEntries(v).filter { $0["event"] == "grant" && $0["outcome"] == "no_dialog" }
        }
        XCTAssertEqual(try refusals().count, 1, "300 refusals in a minute, one entry")

        try v.restart()
        let rows = try refusals()
        XCTAssertEqual(rows.count, 2, "\(rows.map(\.text))")
        XCTAssertEqual(rows.last?["detail"]?["repeated"], .int(299), "the count, written at shutdown")
        XCTAssertEqual(rows.last?["detail"]?["app"]?.stringValue, runner)
        XCTAssertEqual(rows.last?["exe"]?.stringValue, runner)
        XCTAssertTrue(v.vaultctl(["audit"]).out.contains("grant\tno_dialog by \(runner) app executable:\(runner) (+299 more like it)"))
        let verified = v.vaultctl(["audit", "--verify"])
        XCTAssertEqual(verified.exit, 0, verified.out + verified.err)
    }

    /// A program run once per request (here `vaultctl token`, 75 processes)
    /// is written once per process, up to the log's cap a minute; the rest are
    /// counted, and the count is written when vaultd stops.
    func testReleasesFromANewProcessEachTimeAreWrittenUpToTheCapThenCounted() throws {
        let v = try startVaultd(config: "per_app = false\n" + VaultdProcess.fastPINConfig)
        try importSession(v, account: "kari", accessToken: "at-many", refreshToken: nil)
        for _ in 0..<75 {
            let r = v.vaultctl(["token", "kari"])
            XCTAssertEqual(r.exit, 0, r.err)
        }
        func releases() throws -> [JSON] { try auditEntries(v).filter { $0["event"] == "release" } }
        // Written on tasks: wait for the ones the cap lets through.
        XCTAssertTrue(try waitUntil(timeout: 10, interval: 0.1) { try releases().count >= 60 })
        XCTAssertEqual(try releases().count, 60, "75 processes in a minute: 60 written")
        try v.restart()
        let rows = try releases()
        XCTAssertEqual(rows.count, 61, "\(rows.map(\.text))")
        XCTAssertEqual(rows.last?["detail"]?["repeated"], .int(15))
        XCTAssertEqual(rows.last?["detail"]?["several_processes"], .bool(true))
        let verified = v.vaultctl(["audit", "--verify"])
        XCTAssertEqual(verified.exit, 0, verified.out + verified.err)
    }

    func testPerAppOffGivesEveryProgramEverySession() throws {
        let v = try startVaultd(config: "per_app = false\n" + VaultdProcess.fastPINConfig)
        try importSession(v, account: "kari", accessToken: "at-shared", refreshToken: nil)
        let r = v.vaultctl(["token", "kari"])
        XCTAssertEqual(r.exit, 0, r.err)
        XCTAssertEqual(r.out.trimmingCharacters(in: .whitespacesAndNewlines), "at-shared")
        XCTAssertTrue(v.vaultctl(["apps"]).out.contains("per_app = false"))
    }
}

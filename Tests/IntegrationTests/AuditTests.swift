import Foundation
import VaultProtocol
import XCTest

/// The audit log records security events without secrets, and its MAC chain
/// shows tampering done behind vaultd's back.
final class AuditTests: VaultdTestCase {
    func testAuditListsEventsAndDetectsTampering() throws {
        let v = try startVaultd()
        let token = "at-audit-\(UUID().uuidString)"
        try importSession(v, account: "audited", accessToken: token, refreshToken: "rt-audit-secret")
        enrollPIN(v)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let wrong = v.vaultctl(["unlock", "pin"], stdin: "000000\n")
        XCTAssertNotEqual(wrong.exit, 0, wrong.err)
        let right = v.vaultctl(["unlock", "pin"], stdin: "\(Self.pin)\n")
        XCTAssertEqual(right.exit, 0, right.err)
        XCTAssertTrue(right.out.contains("The vault is unlocked."), right.out)

        let listing = v.vaultctl(["audit", "--json"])
        XCTAssertEqual(listing.exit, 0, listing.err)
        let parsed = try JSON.parse(listing.out.trimmingCharacters(in: .whitespacesAndNewlines))
        let entries = try XCTUnwrap(parsed["entries"]?.arrayValue, listing.out)
        func has(_ event: String, _ outcome: String, factor: String? = nil) -> Bool {
            entries.contains { e in
                e["event"]?.stringValue == event && e["outcome"]?.stringValue == outcome
                    && (factor == nil || e["factor"]?.stringValue == factor)
            }
        }
        XCTAssertTrue(has("import", "ok"), listing.out)
        XCTAssertTrue(has("enroll", "ok", factor: "pin"), listing.out)
        XCTAssertTrue(has("lock", "ok"), listing.out)
        XCTAssertTrue(has("unlock", "failed", factor: "pin"), listing.out)
        XCTAssertTrue(has("unlock", "ok", factor: "pin"), listing.out)
        // Ordered as they happened.
        let order = entries.compactMap { e -> String? in
            guard let ev = e["event"]?.stringValue, let out = e["outcome"]?.stringValue else { return nil }
            return "\(ev):\(out)"
        }
        let wanted = ["enroll:ok", "lock:ok", "unlock:failed", "unlock:ok"]
        var idx = order.startIndex
        for w in wanted {
            guard let found = order[idx...].firstIndex(of: w) else { XCTFail("\(w) missing or out of order in \(order)"); break }
            idx = found + 1
        }
        // The requesting process is recorded.
        let unlockOK = entries.last { $0["event"] == "unlock" && $0["outcome"] == "ok" }
        XCTAssertTrue(unlockOK?["exe"]?.stringValue?.hasSuffix("vaultctl") == true, unlockOK?.text ?? "")
        XCTAssertNotNil(unlockOK?["pid"]?.intValue)
        // No secrets.
        for secret in [Self.pin, "000000", token, "rt-audit-secret"] {
            XCTAssertFalse(listing.out.contains(secret), "the audit listing holds a secret")
        }
        let human = v.vaultctl(["audit"])
        XCTAssertEqual(human.exit, 0)
        XCTAssertTrue(human.out.contains("unlock pin"), human.out)
        // --limit shows the newest entries (what happened last), oldest first.
        let lines = human.out.split(separator: "\n")
        let newest = v.vaultctl(["audit", "--limit", "2"])
        XCTAssertEqual(newest.exit, 0, newest.err)
        XCTAssertGreaterThan(lines.count, 2, human.out)
        XCTAssertEqual(newest.out.split(separator: "\n"), Array(lines.suffix(2)), "the newest two:\n\(newest.out)\nof\n\(human.out)")
        XCTAssertEqual(v.vaultctl(["audit", "--limit", "0"]).exit, 2)

        let verify = v.vaultctl(["audit", "--verify"])
        XCTAssertEqual(verify.exit, 0, verify.err)
        XCTAssertTrue(verify.out.contains("The audit log is intact."), verify.out)

        // Tamper with one row while vaultd is stopped.
        let failedSeq = try XCTUnwrap(entries.first { $0["event"] == "unlock" && $0["outcome"] == "failed" }?["seq"]?.intValue)
        XCTAssertEqual(v.stop()?.exit, 0)
        // SQLite itself refuses updates (append-only trigger)...
        let refused = try sqlite3(v.storePath, "UPDATE audit SET detail = '{\"failures\":0}' WHERE seq = \(failedSeq);")
        XCTAssertNotEqual(refused.exit, 0, "the append-only trigger did not stop an UPDATE")
        XCTAssertTrue(refused.err.contains("append-only"), refused.err)
        // ...so the attacker drops the trigger first, and hides the failed attempt.
        let row = "SELECT event, outcome, detail FROM audit WHERE seq = \(failedSeq);"
        let before = try sqlite3(v.storePath, row)
        let tamper = try sqlite3(v.storePath, """
            DROP TRIGGER audit_no_update;
            UPDATE audit SET outcome = 'ok', detail = '{}' WHERE seq = \(failedSeq);
            SELECT changes();
            """)
        XCTAssertEqual(tamper.exit, 0, tamper.err)
        XCTAssertEqual(tamper.out.trimmingCharacters(in: .whitespacesAndNewlines), "1", "the edit matched no row")
        let after = try sqlite3(v.storePath, row)
        XCTAssertTrue(before.out.contains("|failed|"), before.out)
        XCTAssertNotEqual(after.out, before.out, "the edit changed no byte of the entry: verify would have nothing to find")
        try v.start()
        let broken = v.vaultctl(["audit", "--verify"])
        XCTAssertEqual(broken.exit, 1, "out: \(broken.out) err: \(broken.err)")
        XCTAssertTrue((broken.out + broken.err).contains("The audit log was changed at entry \(failedSeq) or later."),
                      broken.out + broken.err)
        let brokenJSON = v.vaultctl(["audit", "--verify", "--json"])
        XCTAssertEqual(brokenJSON.exit, 1)
        XCTAssertTrue(brokenJSON.out.contains("\"first_bad\":\(failedSeq)"), brokenJSON.out)
    }

    func testDeletedAuditRowIsDetected() throws {
        let v = try startVaultd()
        enrollPIN(v)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        XCTAssertEqual(v.vaultctl(["unlock", "pin"], stdin: "\(Self.pin)\n").exit, 0)
        let entries = try auditEntries(v)
        XCTAssertGreaterThanOrEqual(entries.count, 3)
        let lockSeq = try XCTUnwrap(entries.first { $0["event"] == "lock" }?["seq"]?.intValue)
        XCTAssertEqual(v.stop()?.exit, 0)
        let tamper = try sqlite3(v.storePath, "DROP TRIGGER audit_no_delete; DELETE FROM audit WHERE seq = \(lockSeq); SELECT changes();")
        XCTAssertEqual(tamper.exit, 0, tamper.err)
        XCTAssertEqual(tamper.out.trimmingCharacters(in: .whitespacesAndNewlines), "1", "the delete removed no row")
        try v.start()
        let r = v.vaultctl(["audit", "--verify"])
        XCTAssertEqual(r.exit, 1, r.out + r.err)
    }

    func maxSeq(_ v: VaultdProcess) throws -> Int64 {
        let r = try sqlite3(v.storePath, "SELECT max(seq) FROM audit;")
        XCTAssertEqual(r.exit, 0, r.err)
        return try XCTUnwrap(Int64(r.out.trimmingCharacters(in: .whitespacesAndNewlines)), r.out)
    }

    /// Deleting the newest entries leaves a chain that verifies; the head kept
    /// beside the device key shows it, at start and in `audit --verify`.
    func testDeletedNewestEntriesAreReported() throws {
        try assertDeletedNewestEntriesAreReported(try startVaultd())
    }

    /// The same with the head in a real Secret Service item.
    func testDeletedNewestEntriesAreReportedWithTheSecretService() throws {
        let keyring = try PrivateKeyring(.unlocked)
        defer { keyring.stop() }
        let v = try makeVaultd(keyring: "secret-service", env: keyring.environment)
        try v.start()
        try assertDeletedNewestEntriesAreReported(v)
        XCTAssertFalse(FileManager.default.fileExists(atPath: v.dataDir + "/audit.head"))
    }

    func assertDeletedNewestEntriesAreReported(_ v: VaultdProcess) throws {
        enrollPIN(v)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        XCTAssertEqual(v.vaultctl(["unlock", "pin"], stdin: "\(Self.pin)\n").exit, 0)
        // Untouched, across a restart: intact.
        XCTAssertEqual(v.stop()?.exit, 0)
        try v.start()
        let intact = v.vaultctl(["audit", "--verify"])
        XCTAssertEqual(intact.exit, 0, intact.out + intact.err)
        XCTAssertTrue(intact.out.contains("The audit log is intact."), intact.out)
        XCTAssertFalse(v.log.contains("audit entries are missing"), v.log)

        XCTAssertEqual(v.stop()?.exit, 0)
        let newest = try maxSeq(v)
        let tamper = try sqlite3(v.storePath, "DROP TRIGGER audit_no_delete; DELETE FROM audit WHERE seq > \(newest - 2);")
        XCTAssertEqual(tamper.exit, 0, tamper.err)
        try v.start()
        XCTAssertTrue(v.log.contains("the newest audit entries are missing"), v.log)
        for (lang, sentence) in [("C.UTF-8", "The newest 2 entries of the audit log were missing when vaultd checked it at"),
                                 ("nb_NO.UTF-8", "De nyeste 2 oppføringene i hendelsesloggen manglet da vaultd sjekket den")] {
            let r = v.vaultctl(["audit", "--verify"], env: ["LANG": lang])
            XCTAssertEqual(r.exit, 1, r.out + r.err)
            XCTAssertTrue(r.err.contains(sentence), r.err)
        }
        let json = v.vaultctl(["audit", "--verify", "--json"])
        let result = try JSON.parse(json.out.trimmingCharacters(in: .whitespacesAndNewlines))
        XCTAssertEqual(result["ok"], .bool(false), json.out)
        XCTAssertEqual(result["truncated"]?.arrayValue?.first?["missing"]?.intValue, 2, json.out)
        XCTAssertTrue(try auditEntries(v).contains { $0["event"] == "audit_truncated" })
    }

    /// Rows deleted while vaultd runs show at the next audited event.
    func testNewestEntriesDeletedWhileRunningAreReported() throws {
        let v = try startVaultd()
        enrollPIN(v)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        XCTAssertEqual(v.vaultctl(["unlock", "pin"], stdin: "\(Self.pin)\n").exit, 0)
        let newest = try maxSeq(v)
        let tamper = try sqlite3(v.storePath, "DROP TRIGGER audit_no_delete; DELETE FROM audit WHERE seq > \(newest - 3);")
        XCTAssertEqual(tamper.exit, 0, tamper.err)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let r = v.vaultctl(["audit", "--verify"])
        XCTAssertEqual(r.exit, 1, r.out + r.err)
        XCTAssertTrue(r.err.contains("The newest 3 entries of the audit log were missing"), r.err)
    }
}

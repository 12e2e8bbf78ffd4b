import XCTest
@testable import VaultCore
import Keyring
import Locking
import VaultProtocol
import VaultStore
import VaultTestSupport

/// The audit log does not grow without end (AuditLog.Retention): the oldest
/// entries go, the chain still verifies from its anchor, and a prune never
/// erases the evidence of an edit. Someone with the file cannot move the
/// anchor to hide deleted entries (its tag is keyed from the device key).
final class AuditRetentionTests: XCTestCase {
    var fx: VaultFixture!
    var log: AuditLog!

    override func setUpWithError() throws {
        fx = try VaultFixture()
        log = try keeping(100)
    }

    /// A log over the fixture's file that keeps `entries` (and the standard
    /// days); entries of any age count (`floodProofDays` 0) unless told.
    func keeping(_ entries: Int64, pruneEvery: Int64 = 1_000, floodProofDays: Double = 0) throws -> AuditLog {
        var retention = AuditLog.Retention()
        retention.keepEntries = entries
        retention.pruneEvery = pruneEvery
        retention.floodProofDays = floodProofDays
        return try AuditLog(store: fx.store, deviceKey: fx.deviceKey, logger: VaultFixture.logger, retention: retention)
    }
    override func tearDown() { fx.cleanup() }

    func write(_ n: Int, from first: Int = 0) {
        for i in first..<(first + n) { log.record("test", detail: ["i": .int(Int64(i))]) }
    }

    /// One statement behind the vault's back, as someone with the file would
    /// (after `dropping` a guard trigger); returns the rows it changed.
    func raw(_ sql: String, _ arguments: [any SQLiteBindable] = [], dropping trigger: String? = nil) throws -> Int {
        let raw = try SQLiteConnection(path: fx.dir + "/vault.sqlite")
        defer { try? raw.close() }
        if let trigger { try raw.execute("DROP TRIGGER \(trigger)") }
        try raw.run(sql, arguments)
        return raw.changes
    }

    func testTheOldestEntriesPastTheCountGoAndTheChainStillVerifies() throws {
        write(250)
        XCTAssertEqual(log.prune(now: Date().timeIntervalSince1970), 150)
        let kept = try log.entries()
        XCTAssertEqual(kept.count, 100)
        XCTAssertEqual(kept.first?.seq, 151)
        XCTAssertEqual(kept.first?.detail, #"{"i":150}"#)
        XCTAssertNil(try log.verify())
        XCTAssertTrue(try log.check().intact)
        // Appending goes on from the newest; a second prune moves the anchor on.
        write(10, from: 250)
        XCTAssertEqual(log.prune(now: Date().timeIntervalSince1970), 10)
        XCTAssertEqual(try log.entries().first?.seq, 161)
        XCTAssertNil(try log.verify())
        // After a restart (a new log over the same file and key): the same.
        let again = try keeping(100)
        XCTAssertNil(try again.verify())
        XCTAssertEqual(again.prune(now: Date().timeIntervalSince1970), 0, "nothing more to delete")
    }

    func testEntriesOlderThanTheRetentionGoTheNewestStays() throws {
        write(5)
        let now = Date().timeIntervalSince1970
        XCTAssertEqual(log.prune(now: now), 0, "nothing is old yet")
        XCTAssertEqual(log.prune(now: now + (AuditLog.Retention.standard.keepDays + 1) * 86_400), 4)
        XCTAssertEqual(try log.entries().map(\.seq), [5], "the newest entry is always kept")
        XCTAssertNil(try log.verify())
    }

    /// An app that floods the log (its refusals at the cap of 60 a minute)
    /// cannot push recent evidence out: past the count, only entries older
    /// than `floodProofDays` go.
    func testAFloodCannotPushRecentEntriesOut() throws {
        log = try keeping(10, floodProofDays: 30)
        write(50)
        let now = Date().timeIntervalSince1970
        XCTAssertEqual(log.prune(now: now), 0, "all younger than 30 days: kept, over the count or not")
        XCTAssertEqual(log.prune(now: now + 31 * 86_400), 40, "a month on, the count applies")
        XCTAssertEqual(try log.entries().first?.seq, 41)
        XCTAssertNil(try log.verify())
        XCTAssertEqual(AuditLog.Retention.standard.floodProofDays, 30)
    }

    /// An entry edited in the stretch a prune would delete keeps the prune
    /// from running: the edit is still there for `verify` to name.
    func testAPruneNeverErasesAnEdit() throws {
        log = try keeping(20)
        write(50)
        XCTAssertEqual(try raw("UPDATE audit SET outcome = 'failed' WHERE seq = 10", dropping: "audit_no_update"), 1)
        XCTAssertEqual(log.prune(now: Date().timeIntervalSince1970), 0)
        XCTAssertEqual(try log.entries().count, 50)
        XCTAssertEqual(try log.verify(), 10)
    }

    /// Someone with the file deletes the oldest kept entries, or moves the
    /// anchor to a later entry (or back to an earlier one) to hide them: each
    /// is reported.
    func testTheAnchorCannotBeMovedToHideDeletedEntries() throws {
        log = try keeping(40)
        write(60)
        XCTAssertEqual(log.prune(now: Date().timeIntervalSince1970), 20)
        let firstAnchor = try XCTUnwrap(try fx.store.auditAnchor())
        write(20, from: 60)
        XCTAssertEqual(log.prune(now: Date().timeIntervalSince1970), 20)
        XCTAssertNil(try log.verify())

        // The schema still refuses to delete a kept entry...
        XCTAssertThrowsError(try raw("DELETE FROM audit WHERE seq = 41"))
        // ...so, as someone with the file would, drop the guard and delete it.
        XCTAssertEqual(try raw("DELETE FROM audit WHERE seq = 41", dropping: "audit_no_delete"), 1)
        XCTAssertEqual(try log.verify(), 42, "the entry after the deleted one no longer chains")
        XCTAssertEqual(try keeping(10).prune(now: Date().timeIntervalSince1970), 0, "not pruned over the gap")

        // Moving the anchor on to the deleted entry's place: its tag does not match.
        let row42 = try XCTUnwrap(try log.entries().first)
        XCTAssertEqual(try raw("UPDATE audit_anchor SET seq = 41, mac = ?", [row42.mac]), 1)
        XCTAssertEqual(try log.verify(), 42)
        // Back to the earlier genuine anchor: the chain from it does not reach the entries kept.
        XCTAssertEqual(try raw("UPDATE audit_anchor SET seq = ?, mac = ?, tag = ?",
                               [firstAnchor.seq, firstAnchor.mac, firstAnchor.tag]), 1)
        XCTAssertEqual(try log.verify(), 42)
        // No anchor at all: the first entry kept does not chain from the start.
        XCTAssertEqual(try raw("DELETE FROM audit_anchor"), 1)
        XCTAssertEqual(try log.verify(), 42)
    }

    /// A head store whose saves fail until told otherwise (a keyring that was away).
    final class Heads: AuditHeadStore, Sendable {
        let saved = Locked<String?>(nil)
        let failing = Locked(false)
        func loadAuditHead() throws(KeyringError) -> String? { saved.withLock { $0 } }
        func saveAuditHead(_ text: String) throws(KeyringError) {
            if failing.withLock({ $0 }) { throw .unavailable("away") }
            saved.withLock { $0 = text }
        }
    }

    /// The kept head's own entry went with the retention (its saves failed for
    /// that long): not reported as a truncation. Deleting the newest entries
    /// still is.
    func testAHeadOlderThanTheRetentionIsNotATruncation() throws {
        let heads = Heads()
        log = try keeping(30)
        log.keepHead(in: heads)
        write(10)
        log.flushHead()
        heads.failing.withLock { $0 = true }
        write(90, from: 10)
        log.flushHead()
        XCTAssertEqual(log.prune(now: Date().timeIntervalSince1970), 70)
        let restarted = try keeping(30)
        XCTAssertEqual(restarted.keepHead(in: heads), 0, "the head's entry was pruned, not lost")
        XCTAssertTrue(try restarted.check().intact)

        heads.failing.withLock { $0 = false }
        restarted.record("test")
        restarted.flushHead()
        XCTAssertEqual(try raw("DELETE FROM audit WHERE seq > 99", dropping: "audit_no_delete"), 2)
        XCTAssertEqual(try keeping(30).keepHead(in: heads), 2, "the newest entries deleted are still missed")
    }

    /// Every `pruneEvery`th entry prunes the log, off the caller's path; at
    /// the standard retention a vault's log is pruned every 1,000 entries.
    func testAppendsPruneAsTheyGo() throws {
        log = try keeping(30, pruneEvery: 50)
        write(49)
        log.flushHead()
        XCTAssertEqual(try log.entries().count, 49, "not yet")
        write(1, from: 49)
        log.flushHead()
        XCTAssertEqual(try log.entries().map(\.seq), Array(21...50))
        XCTAssertNil(try log.verify())
        XCTAssertEqual(AuditLog.Retention.standard.pruneEvery, 1_000)
    }
}

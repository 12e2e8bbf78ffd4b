import Foundation
import XCTest

@testable import VaultStore

final class RecordTests: StoreTestCase {
    func testMetaRoundTrip() throws {
        let store = try VaultStore(path: storePath())
        XCTAssertNil(try store.meta("vault_id"))
        try store.setMeta("vault_id", [1, 2, 3])
        try store.setMeta("device_key_check", [])
        XCTAssertEqual(try store.meta("vault_id"), [1, 2, 3])
        XCTAssertEqual(try store.meta("device_key_check"), [])
        try store.setMeta("vault_id", [9])
        XCTAssertEqual(try store.meta("vault_id"), [9])
    }

    func testKeyslotsRoundTripReplaceAndDelete() throws {
        let store = try VaultStore(path: storePath())
        XCTAssertEqual(try store.keyslots(), [])
        let device = slot("device", createdAt: 1)
        try store.updateKeyslots(put: [device], delete: [])
        XCTAssertEqual(try store.keyslots(), [device])

        // Enrolling the first factor replaces the device slot, in one call.
        let pin = slot("pin", createdAt: 2)
        var oidc = slot("oidc", createdAt: 3)
        try store.updateKeyslots(put: [pin, oidc], delete: ["device", "never-existed"])
        XCTAssertEqual(try store.keyslots(), [pin, oidc])

        // Put replaces by id.
        oidc.sealedKey = [7, 7, 7]
        oidc.binding = #"{"iss":"https://example","sub":"x"}"#
        oidc.version = 2
        try store.updateKeyslots(put: [oidc], delete: [])
        XCTAssertEqual(try store.keyslots(), [pin, oidc])

        // An id in both lists ends with the put row.
        let newPin = slot("pin", createdAt: 4)
        try store.updateKeyslots(put: [newPin], delete: ["pin"])
        XCTAssertEqual(try store.keyslots(), [oidc, newPin])

        try store.updateKeyslots(put: [], delete: ["pin", "oidc"])
        XCTAssertEqual(try store.keyslots(), [])
    }

    func testUpdateKeyslotsIsAtomic() throws {
        let store = try VaultStore(path: storePath())
        let device = slot("device")
        try store.updateKeyslots(put: [device], delete: [])

        // The second put row breaks a constraint (empty id) after the delete and
        // the first put already ran inside the transaction: nothing may stick.
        var broken = slot("fingerprint")
        broken.id = ""
        assertThrows({ $0.isIO }) { () throws(StoreError) in
            try store.updateKeyslots(put: [slot("pin"), broken], delete: ["device"])
        }
        XCTAssertEqual(try store.keyslots(), [device])

        // Same with an empty wrapped key.
        var empty = slot("oidc")
        empty.sealedKey = []
        assertThrows({ $0.isIO }) { () throws(StoreError) in
            try store.updateKeyslots(put: [slot("pin"), empty], delete: ["device"])
        }
        XCTAssertEqual(try store.keyslots(), [device])
    }

    func testSessionsRoundTrip() throws {
        let store = try VaultStore(path: storePath())
        XCTAssertEqual(try store.sessions(), [])
        XCTAssertNil(try store.session(id: "s000001"))

        let a = sessionRow(1)
        var b = sessionRow(2)
        b.sealedMeta = []  // empty blobs must come back empty, not fail NOT NULL
        try store.putSession(a)
        try store.putSession(b)
        XCTAssertEqual(try store.sessions(), [a, b])
        XCTAssertEqual(try store.session(id: a.id), a)
        XCTAssertEqual(try store.session(id: b.id), b)
        XCTAssertEqual(try store.sessions(tokenHash: a.tokenHash), [a])

        // Replace keeps one row per id.
        var a2 = a
        a2.sealedSecret = [1, 2, 3, 4]
        a2.recordVersion = 2
        a2.updatedAt += 100
        a2.tokenHash = String(repeating: "ff", count: 32)
        try store.putSession(a2)
        XCTAssertEqual(try store.sessions(), [a2, b])
        XCTAssertEqual(try store.sessions(tokenHash: a.tokenHash), [])
        XCTAssertEqual(try store.sessions(tokenHash: a2.tokenHash), [a2])

        XCTAssertTrue(try store.deleteSession(id: a.id))
        XCTAssertFalse(try store.deleteSession(id: a.id))
        XCTAssertEqual(try store.sessions(), [b])

        let many = (10..<20).map { sessionRow($0) }
        try store.putSessions(many)
        XCTAssertEqual(try store.sessions(), [b] + many)
        XCTAssertEqual(try store.deleteAllSessions(), 11)
        XCTAssertEqual(try store.deleteAllSessions(), 0)
        XCTAssertEqual(try store.sessions(), [])
    }

    func testPutSessionsIsAtomic() throws {
        let store = try VaultStore(path: storePath())
        try store.putSession(sessionRow(0))
        var broken = sessionRow(3)
        broken.id = ""
        broken.tokenHash = "MARKER-THAT-MUST-NOT-BE-LOGGED"
        do {
            try store.putSessions([sessionRow(1), sessionRow(2), broken])
            XCTFail("expected a constraint failure")
        } catch {
            XCTAssertTrue(error.isIO, "\(error)")
            // Details are for logs: the operation and SQLite's code, no row data.
            XCTAssertFalse(error.description.contains("MARKER"), error.description)
            XCTAssertTrue(error.description.contains("putSessions"), error.description)
        }
        XCTAssertEqual(try store.sessions(), [sessionRow(0)])
    }

    func testFailureCounters() throws {
        let store = try VaultStore(path: storePath())
        XCTAssertEqual(try store.failureCounter(factor: "pin"), FailureCounter(factor: "pin", failures: 0, lockedUntil: 0))
        XCTAssertEqual(try store.recordAttempt(factor: "pin") { _ in 0 }, FailureCounter(factor: "pin", failures: 1, lockedUntil: 0))
        XCTAssertEqual(try store.recordAttempt(factor: "pin") { _ in 0 }.failures, 2)
        XCTAssertEqual(try store.failureCounter(factor: "pin").failures, 2)
        XCTAssertEqual(try store.failureCounter(factor: "fingerprint").failures, 0)

        try store.setFailureCounter(FailureCounter(factor: "pin", failures: 5, lockedUntil: 1_800_000_000))
        XCTAssertEqual(try store.failureCounter(factor: "pin"), FailureCounter(factor: "pin", failures: 5, lockedUntil: 1_800_000_000))
        // Incrementing keeps the lock.
        XCTAssertEqual(try store.recordAttempt(factor: "pin") { _ in 0 }, FailureCounter(factor: "pin", failures: 6, lockedUntil: 1_800_000_000))

        try store.resetFailures(factor: "pin")
        XCTAssertEqual(try store.failureCounter(factor: "pin"), FailureCounter(factor: "pin", failures: 0, lockedUntil: 0))
        try store.resetFailures(factor: "never-seen")
    }

    func testIncrementFailuresIsDurableAcrossReopen() throws {
        let path = storePath()
        do {
            let store = try VaultStore(path: path)
            for _ in 0..<3 { _ = try store.recordAttempt(factor: "pin") { _ in 0 } }
            // A second handle sees the commit while the first is still open.
            let other = try VaultStore(path: path)
            XCTAssertEqual(try other.failureCounter(factor: "pin").failures, 3)
            try other.close()
            try store.close()
        }
        let reopened = try VaultStore(path: path)
        XCTAssertEqual(try reopened.failureCounter(factor: "pin").failures, 3)
        XCTAssertEqual(try reopened.recordAttempt(factor: "pin") { _ in 0 }.failures, 4)
        try reopened.close()
        // Not closed explicitly this time: deinit closes.
        do {
            let again = try VaultStore(path: path)
            XCTAssertEqual(try again.recordAttempt(factor: "pin") { _ in 0 }.failures, 5)
        }
        XCTAssertEqual(try VaultStore(path: path).failureCounter(factor: "pin").failures, 5)
    }

    func testConcurrentIncrementsAreNotLost() throws {
        let store = try VaultStore(path: storePath())
        let errors = LockedCounter()
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<10 {
                do { _ = try store.recordAttempt(factor: "pin") { _ in 0 } } catch { errors.add() }
            }
        }
        XCTAssertEqual(errors.value, 0)
        XCTAssertEqual(try store.failureCounter(factor: "pin").failures, 40)
    }

    func testAppendAuditChainsAndAssignsSeq() throws {
        let store = try VaultStore(path: storePath())
        XCTAssertNil(try store.lastAudit())
        var seenPrevious: [AuditRow?] = []
        var stored: [AuditRow] = []
        for i in 0..<5 {
            let row = try store.appendAudit { previous in
                seenPrevious.append(previous)
                return AuditRow(
                    seq: 999,  // ignored
                    at: 1_700_000_000.5 + Double(i), event: i == 0 ? "enroll" : "unlock",
                    factor: i % 2 == 0 ? "pin" : nil, outcome: "ok", detail: #"{"i":\#(i)}"#,
                    pid: i % 2 == 0 ? 4242 : nil, exe: i % 2 == 0 ? "/usr/bin/app" : nil,
                    mac: (previous?.mac ?? []) + [UInt8(i)])
            }
            stored.append(row)
        }
        XCTAssertEqual(stored.map(\.seq), [1, 2, 3, 4, 5])
        XCTAssertEqual(seenPrevious.count, 5)
        XCTAssertNil(seenPrevious[0] ?? nil)
        for i in 1..<5 {
            XCTAssertEqual(seenPrevious[i], stored[i - 1])
        }
        XCTAssertEqual(stored[4].mac, [0, 1, 2, 3, 4])
        XCTAssertEqual(try store.lastAudit(), stored[4])
        XCTAssertEqual(try store.auditRows(), stored)
        XCTAssertEqual(try store.auditRows(after: 2), Array(stored[2...]))
        XCTAssertEqual(try store.auditRows(after: 1, limit: 2), Array(stored[1...2]))
        XCTAssertEqual(try store.auditRows(after: 5), [])
        XCTAssertEqual(try store.auditRows(limit: 0), [])
        // The newest, oldest first: what `vaultctl audit` shows.
        XCTAssertEqual(try store.auditRows(newest: 2), Array(stored[(stored.count - 2)...]))
        XCTAssertEqual(try store.auditRows(newest: 100), stored)
        XCTAssertEqual(try store.auditRows(newest: 0), [])
    }

    func testAppendAuditCallerFailureWritesNothing() throws {
        struct Boom: Error { let secret = "do-not-log" }
        let store = try VaultStore(path: storePath())
        let first = try store.appendAudit { _ in AuditRow(at: 1, event: "start", outcome: "ok", detail: "{}", mac: [1]) }
        do {
            _ = try store.appendAudit { _ in throw Boom() }
            XCTFail("expected an error")
        } catch {
            XCTAssertTrue(error.isIO)
            XCTAssertFalse(error.description.contains("do-not-log"))
        }
        XCTAssertEqual(try store.auditRows(), [first])
        let second = try store.appendAudit { _ in AuditRow(at: 2, event: "lock", outcome: "ok", detail: "{}", mac: [2]) }
        XCTAssertEqual(second.seq, 2)
    }

    func testAuditIsAppendOnlyInSQLiteToo() throws {
        let path = storePath()
        let store = try VaultStore(path: path)
        _ = try store.appendAudit { _ in AuditRow(at: 1, event: "start", outcome: "ok", detail: "{}", mac: [1]) }
        XCTAssertThrowsError(try rawWrite(path, "UPDATE audit SET outcome = 'failed'"))
        XCTAssertThrowsError(try rawWrite(path, "DELETE FROM audit"))
        XCTAssertEqual(try store.auditRows().map(\.outcome), ["ok"])
    }

    func testJobs() throws {
        let store = try VaultStore(path: storePath())
        XCTAssertEqual(try store.dueJobs(now: 100), [])
        let a = try store.enqueueJob(JobRow(kind: "member-sync", payload: [1], notBefore: 0, createdAt: 10))
        let b = try store.enqueueJob(JobRow(kind: "member-sync", payload: [], notBefore: 200, createdAt: 11))
        XCTAssertGreaterThan(b.id, a.id)
        XCTAssertEqual(try store.dueJobs(now: 100), [a])
        XCTAssertEqual(try store.dueJobs(now: 200), [a, b])
        XCTAssertTrue(try store.rescheduleJob(id: a.id, notBefore: 300))
        XCTAssertEqual(try store.dueJobs(now: 200), [b])
        var aLater = a
        aLater.attempts = 1
        aLater.notBefore = 300
        XCTAssertEqual(try store.dueJobs(now: 300), [b, aLater])
        XCTAssertTrue(try store.deleteJob(id: a.id))
        XCTAssertFalse(try store.deleteJob(id: a.id))
        XCTAssertFalse(try store.rescheduleJob(id: a.id, notBefore: 1))
        XCTAssertEqual(try store.dueJobs(now: .max), [b])
        XCTAssertEqual(try store.dueJobs(now: .max, limit: 0), [])
    }

    func testDataSurvivesReopen() throws {
        let path = storePath()
        do {
            let store = try VaultStore(path: path)
            try store.setMeta("vault_id", [42])
            try store.updateKeyslots(put: [slot("device")], delete: [])
            try store.putSession(sessionRow(1))
            _ = try store.appendAudit { _ in AuditRow(at: 1, event: "start", outcome: "ok", detail: "{}", mac: [1]) }
        }
        let store = try VaultStore(path: path)
        XCTAssertEqual(try store.meta("vault_id"), [42])
        XCTAssertEqual(try store.keyslots(), [slot("device")])
        XCTAssertEqual(try store.sessions(), [sessionRow(1)])
        XCTAssertEqual(try store.lastAudit()?.seq, 1)
        XCTAssertEqual(try store.diagnostics().schemaVersion, VaultStore.schemaVersion)
        XCTAssertEqual(store.path, path)
    }

    func testClosedStoreThrowsInsteadOfCrashing() throws {
        let store = try VaultStore(path: storePath())
        try store.close()
        assertThrows({ _ in true }) { () throws(StoreError) in try store.sessions() }
        assertThrows({ _ in true }) { () throws(StoreError) in try store.putSession(sessionRow(1)) }
    }
}

final class LockedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}

import Foundation
import GRDB

// The record operations. Reads go through a reader snapshot; every write is
// one IMMEDIATE transaction (see `VaultStore.write`), durable on return.
//
// Blob parameters are bound as `coalesce(?, x'')`: GRDB binds an empty Data
// through a nil pointer, which SQLite stores as NULL, and an empty sealed value
// must come back as [], not trip NOT NULL.

extension VaultStore {
    // MARK: - Metadata

    public func meta(_ key: String) throws(StoreError) -> [UInt8]? {
        try read("meta") { db in
            try Row.fetchOne(db, sql: #"SELECT value FROM meta WHERE "key" = ?"#, arguments: [key])
                .map { try Self.bytes($0, 0) }
        }
    }

    public func setMeta(_ key: String, _ value: [UInt8]) throws(StoreError) {
        try write("setMeta") { db in
            try db.execute(
                sql: #"""
                    INSERT INTO meta ("key", value) VALUES (?, coalesce(?, x''))
                    ON CONFLICT("key") DO UPDATE SET value = excluded.value
                    """#,
                arguments: [key, Data(value)])
        }
    }

    // MARK: - Keyslots

    private static let keyslotColumns = "id, factor, version, salt, kdf, binding, sealed_key, created_at"

    public func keyslots() throws(StoreError) -> [KeyslotRow] {
        try read("keyslots") { db in
            let cursor = try Row.fetchCursor(
                db, sql: "SELECT \(Self.keyslotColumns) FROM keyslot ORDER BY created_at, id")
            var rows: [KeyslotRow] = []
            while let row = try cursor.next() {
                rows.append(
                    KeyslotRow(
                        id: try row.decode(String.self, atIndex: 0),
                        factor: try row.decode(String.self, atIndex: 1),
                        version: try row.decode(Int.self, atIndex: 2),
                        salt: try Self.bytes(row, 3),
                        kdf: try row.decode(String.self, atIndex: 4),
                        binding: try row.decode(String.self, atIndex: 5),
                        sealedKey: try Self.bytes(row, 6),
                        createdAt: try row.decode(Int64.self, atIndex: 7)))
            }
            return rows
        }
    }

    /// Atomically deletes the slots with ids in `delete` and inserts-or-replaces
    /// `put`, in one transaction: either all of it happens or none of it. An id
    /// in both lists ends up with the `put` row (deletes run first).
    public func updateKeyslots(put: [KeyslotRow], delete: [String]) throws(StoreError) {
        try write("updateKeyslots") { db in
            let remove = try db.cachedStatement(sql: "DELETE FROM keyslot WHERE id = ?")
            for id in delete {
                try remove.execute(arguments: [id])
            }
            try Self.putKeyslots(put, db)
        }
    }

    private static func putKeyslots(_ put: [KeyslotRow], _ db: Database) throws {
        // Not cached: see upsertSessions.
        let upsert = try db.makeStatement(sql: """
            INSERT INTO keyslot (\(Self.keyslotColumns))
            VALUES (?, ?, ?, coalesce(?, x''), ?, ?, coalesce(?, x''), ?)
            ON CONFLICT(id) DO UPDATE SET
                factor = excluded.factor, version = excluded.version, salt = excluded.salt,
                kdf = excluded.kdf, binding = excluded.binding, sealed_key = excluded.sealed_key,
                created_at = excluded.created_at
            """)
        for slot in put {
            try upsert.execute(arguments: [
                slot.id, slot.factor, slot.version, Data(slot.salt), slot.kdf, slot.binding,
                Data(slot.sealedKey), slot.createdAt,
            ])
        }
    }

    /// `vaultctl reset`, in one transaction: every session, keyslot, failure
    /// counter and stale mark goes, and `slots` (the new vault key's device
    /// slot) comes in, with `meta` (its public key). A crash leaves the old
    /// vault or the new one, never a mix.
    public func reset(slots: [KeyslotRow], meta: [String: [UInt8]]) throws(StoreError) -> Int {
        let removed: Int = try write("reset") { db in
            try db.execute(sql: "DELETE FROM session")
            let sessions = db.changesCount
            try db.execute(sql: "DELETE FROM keyslot")
            try db.execute(sql: "DELETE FROM failure_counter")
            try db.execute(sql: "DELETE FROM app_grant")
            try db.execute(sql: #"DELETE FROM meta WHERE "key" LIKE 'stale:%'"#)
            for (key, value) in meta {
                try db.execute(
                    sql: #"INSERT INTO meta ("key", value) VALUES (?, coalesce(?, x'')) ON CONFLICT("key") DO UPDATE SET value = excluded.value"#,
                    arguments: [key, Data(value)])
            }
            try Self.putKeyslots(slots, db)
            return sessions
        }
        return removed
    }

    // MARK: - App grants

    public func grants() throws(StoreError) -> [GrantRow] {
        try read("grants") { db in
            try Row.fetchAll(db, sql: "SELECT id, sealed, updated_at FROM app_grant ORDER BY rowid").map { row in
                GrantRow(id: row[0], sealed: try Self.bytes(row, 1), updatedAt: row[2])
            }
        }
    }

    /// Writes `put` and deletes `delete` in one transaction, with the audit
    /// entry that says why when there is one.
    public func updateGrants(put: [GrantRow], delete: [String],
                             auditing make: ((AuditRow?) throws -> AuditRow)? = nil) throws(StoreError) {
        try write("updateGrants") { db in
            for id in delete {
                try db.execute(sql: "DELETE FROM app_grant WHERE id = ?", arguments: [id])
            }
            for row in put {
                try db.execute(sql: """
                    INSERT INTO app_grant (id, sealed, updated_at) VALUES (?, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at
                    """, arguments: [row.id, Data(row.sealed), row.updatedAt])
            }
            if let make { _ = try Self.insertAudit(make, db) }
        }
    }

    /// Replaces an existing grant row only (a last use): a row deleted in the
    /// meantime (revoked) stays deleted. False when there was none.
    @discardableResult
    public func updateGrantIfPresent(_ row: GrantRow) throws(StoreError) -> Bool {
        try write("updateGrantIfPresent") { db in
            try db.execute(sql: "UPDATE app_grant SET sealed = ?, updated_at = ? WHERE id = ?",
                           arguments: [Data(row.sealed), row.updatedAt, row.id])
            return db.changesCount > 0
        }
    }

    // MARK: - Sessions

    private static let sessionColumns =
        "id, token_hash, sealed_meta, sealed_secret, record_version, created_at, updated_at"

    /// All sessions, in insertion order (oldest first; replacing a session
    /// keeps its place). Rowid order is a plain table scan: sorting by a column
    /// would make SQLite copy every sealed blob through a sorter, about twice
    /// as slow at 10,000 sessions.
    public func sessions() throws(StoreError) -> [SessionRow] {
        try read("sessions") { db in
            try RawColumns.collect(
                try db.makeStatement(sql: "SELECT \(Self.sessionColumns) FROM session ORDER BY rowid"),
                Self.sessionRow)
        }
    }

    public func session(id: String) throws(StoreError) -> SessionRow? {
        try read("session") { db in
            let statement = try db.cachedStatement(sql: "SELECT \(Self.sessionColumns) FROM session WHERE id = ?")
            try statement.setArguments([id])
            return try RawColumns.collect(statement, Self.sessionRow).first
        }
    }

    /// The sessions whose `tokenHash` matches (normally at most one), for revocation.
    public func sessions(tokenHash: String) throws(StoreError) -> [SessionRow] {
        try read("sessionsByTokenHash") { db in
            let statement = try db.cachedStatement(
                sql: "SELECT \(Self.sessionColumns) FROM session WHERE token_hash = ? ORDER BY rowid")
            try statement.setArguments([tokenHash])
            return try RawColumns.collect(statement, Self.sessionRow)
        }
    }

    /// Inserts or replaces by id; durable on return.
    public func putSession(_ row: SessionRow) throws(StoreError) {
        try write("putSession") { db in
            try Self.upsertSessions([row], db)
        }
    }

    /// Inserts or replaces by id and appends the audit entry that says why, in
    /// one transaction: one durable commit instead of two, where an answer
    /// waits for both (a refresh holds every waiting app until it returns).
    /// `make` is as for `appendAudit`; if it throws, neither row is written.
    public func putSession(_ row: SessionRow, auditing make: (AuditRow?) throws -> AuditRow) throws(StoreError) {
        try write("putSession") { db in
            try Self.upsertSessions([row], db)
            _ = try Self.insertAudit(make, db)
        }
    }

    /// Inserts or replaces many rows in one transaction (bulk loads, benchmarks).
    public func putSessions(_ rows: [SessionRow]) throws(StoreError) {
        try write("putSessions") { db in
            try Self.upsertSessions(rows, db)
        }
    }

    @discardableResult
    public func deleteSession(id: String) throws(StoreError) -> Bool {
        try write("deleteSession") { db in
            try db.execute(sql: "DELETE FROM session WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }

    @discardableResult
    public func deleteAllSessions() throws(StoreError) -> Int {
        try write("deleteAllSessions") { db in
            try db.execute(sql: "DELETE FROM session")
            return db.changesCount
        }
    }

    /// An upsert rather than INSERT OR REPLACE: REPLACE deletes and re-inserts,
    /// which gives the row a new rowid and moves it around the table on every
    /// token refresh.
    ///
    /// Not a cached statement: GRDB keeps a cached statement's last arguments
    /// until its next use, so the last sealed blobs written would stay
    /// referenced for the life of vaultd (LeakSanitizer also reported them as
    /// leaked: the reference sits in a Swift enum whose spare bits hide the
    /// pointer). Preparing once per write costs microseconds next to the fsync.
    private static func upsertSessions(_ rows: [SessionRow], _ db: Database) throws {
        let statement = try db.makeStatement(sql: """
            INSERT INTO session (\(sessionColumns))
            VALUES (?, ?, coalesce(?, x''), coalesce(?, x''), ?, ?, ?)
            ON CONFLICT(id) DO UPDATE SET
                token_hash = excluded.token_hash, sealed_meta = excluded.sealed_meta,
                sealed_secret = excluded.sealed_secret, record_version = excluded.record_version,
                created_at = excluded.created_at, updated_at = excluded.updated_at
            """)
        for row in rows {
            try statement.execute(arguments: [
                row.id, row.tokenHash, Data(row.sealedMeta), Data(row.sealedSecret), row.recordVersion,
                row.createdAt, row.updatedAt,
            ])
        }
    }

    private static func sessionRow(_ statement: OpaquePointer) -> SessionRow {
        SessionRow(
            id: RawColumns.text(statement, 0),
            tokenHash: RawColumns.text(statement, 1),
            sealedMeta: RawColumns.bytes(statement, 2),
            sealedSecret: RawColumns.bytes(statement, 3),
            recordVersion: Int(RawColumns.int64(statement, 4)),
            createdAt: RawColumns.int64(statement, 5),
            updatedAt: RawColumns.int64(statement, 6))
    }

    // MARK: - Failure counters

    /// The counter for `factor`, or a zero counter if there is none.
    public func failureCounter(factor: String) throws(StoreError) -> FailureCounter {
        try read("failureCounter") { db in
            try Self.counter(factor, db)
        }
    }

    /// Counts an attempt *before* it is checked, together with the lockout a
    /// failure would bring (`lockedUntil(failures)`), in one fsync'd
    /// transaction: killing vaultd while the attempt is checked leaves it
    /// counted and the lockout in force. A right answer then `resetFailures`.
    public func recordAttempt(factor: String, lockedUntil: (_ failures: Int) -> Int64) throws(StoreError) -> FailureCounter {
        try write("recordAttempt") { db in
            var c = try Self.counter(factor, db)
            c.failures += 1
            c.lockedUntil = max(c.lockedUntil, lockedUntil(c.failures))
            try db.execute(
                sql: """
                    INSERT INTO failure_counter (factor, failures, locked_until) VALUES (?, ?, ?)
                    ON CONFLICT(factor) DO UPDATE SET
                        failures = excluded.failures, locked_until = excluded.locked_until
                    """,
                arguments: [c.factor, c.failures, c.lockedUntil])
            return c
        }
    }

    public func setFailureCounter(_ c: FailureCounter) throws(StoreError) {
        try write("setFailureCounter") { db in
            try db.execute(
                sql: """
                    INSERT INTO failure_counter (factor, failures, locked_until) VALUES (?, ?, ?)
                    ON CONFLICT(factor) DO UPDATE SET
                        failures = excluded.failures, locked_until = excluded.locked_until
                    """,
                arguments: [c.factor, c.failures, c.lockedUntil])
        }
    }

    /// Back to zero failures and no lock.
    public func resetFailures(factor: String) throws(StoreError) {
        try write("resetFailures") { db in
            try db.execute(sql: "DELETE FROM failure_counter WHERE factor = ?", arguments: [factor])
        }
    }

    private static func counter(_ factor: String, _ db: Database) throws -> FailureCounter {
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT failures, locked_until FROM failure_counter WHERE factor = ?",
                arguments: [factor])
        else {
            return FailureCounter(factor: factor, failures: 0, lockedUntil: 0)
        }
        return FailureCounter(
            factor: factor,
            failures: try row.decode(Int.self, atIndex: 0),
            lockedUntil: try row.decode(Int64.self, atIndex: 1))
    }

    // MARK: - Audit

    private static let auditColumns = "seq, at, event, factor, outcome, detail, pid, exe, mac"

    /// Atomically reads the last row (or nil) and appends the row `make`
    /// returns, with `seq` assigned by the store (last + 1). `make` runs inside
    /// the write transaction, so no other append can slip between the row it
    /// chained from and its own. If `make` throws, nothing is written and the
    /// error comes back as `.io` naming only the error's type.
    public func appendAudit(_ make: (AuditRow?) throws -> AuditRow) throws(StoreError) -> AuditRow {
        try write("appendAudit") { db in try Self.insertAudit(make, db) }
    }

    private static func insertAudit(_ make: (AuditRow?) throws -> AuditRow, _ db: Database) throws -> AuditRow {
        let last = try lastAuditRow(db)
        var row = try make(last)
        row.seq = (last?.seq ?? 0) + 1
        try db.execute(
            sql: """
                INSERT INTO audit (\(auditColumns))
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, coalesce(?, x''))
                """,
            arguments: [
                row.seq, row.at, row.event, row.factor, row.outcome, row.detail,
                row.pid.map { Int64($0) }, row.exe, Data(row.mac),
            ])
        return row
    }

    /// Rows with `seq > after`, in order, at most `limit` of them.
    public func auditRows(after seq: Int64 = 0, limit: Int = 1000) throws(StoreError) -> [AuditRow] {
        guard limit > 0 else { return [] }  // SQLite reads a negative LIMIT as "no limit"
        return try read("auditRows") { db in
            let cursor = try Row.fetchCursor(
                db, sql: "SELECT \(Self.auditColumns) FROM audit WHERE seq > ? ORDER BY seq LIMIT ?",
                arguments: [seq, limit])
            var rows: [AuditRow] = []
            while let row = try cursor.next() {
                rows.append(try Self.auditRow(row))
            }
            return rows
        }
    }

    public func lastAudit() throws(StoreError) -> AuditRow? {
        try read("lastAudit") { db in
            try Self.lastAuditRow(db)
        }
    }

    private static func lastAuditRow(_ db: Database) throws -> AuditRow? {
        // Cached: every audited change reads it, a refresh while apps wait among them.
        try Row.fetchOne(db.cachedStatement(sql: "SELECT \(auditColumns) FROM audit ORDER BY seq DESC LIMIT 1"))
            .map(auditRow)
    }

    private static func auditRow(_ row: Row) throws -> AuditRow {
        let pid = try row.decode(Int64?.self, atIndex: 6)
        return AuditRow(
            seq: try row.decode(Int64.self, atIndex: 0),
            at: try row.decode(Double.self, atIndex: 1),
            event: try row.decode(String.self, atIndex: 2),
            factor: try row.decode(String?.self, atIndex: 3),
            outcome: try row.decode(String.self, atIndex: 4),
            detail: try row.decode(String.self, atIndex: 5),
            pid: pid.flatMap { Int32(exactly: $0) },
            exe: try row.decode(String?.self, atIndex: 7),
            mac: try bytes(row, 8))
    }

    // MARK: - Jobs (durable work queue)

    private static let jobColumns = "id, kind, payload, attempts, not_before, created_at"

    /// Adds a job; its `id` (and `attempts`, reset to 0) is assigned by the store.
    @discardableResult
    public func enqueueJob(_ job: JobRow) throws(StoreError) -> JobRow {
        try write("enqueueJob") { db in
            try db.execute(
                sql: """
                    INSERT INTO job (kind, payload, attempts, not_before, created_at)
                    VALUES (?, coalesce(?, x''), 0, ?, ?)
                    """,
                arguments: [job.kind, Data(job.payload), job.notBefore, job.createdAt])
            var stored = job
            stored.id = db.lastInsertedRowID
            stored.attempts = 0
            return stored
        }
    }

    /// Jobs with `notBefore <= now`, earliest first. Handing out does not
    /// remove: call `deleteJob` when done or `rescheduleJob` to try later.
    public func dueJobs(now: Int64, limit: Int = 100) throws(StoreError) -> [JobRow] {
        guard limit > 0 else { return [] }
        return try read("dueJobs") { db in
            let cursor = try Row.fetchCursor(
                db, sql: "SELECT \(Self.jobColumns) FROM job WHERE not_before <= ? ORDER BY not_before, id LIMIT ?",
                arguments: [now, limit])
            var rows: [JobRow] = []
            while let row = try cursor.next() {
                rows.append(
                    JobRow(
                        id: try row.decode(Int64.self, atIndex: 0),
                        kind: try row.decode(String.self, atIndex: 1),
                        payload: try Self.bytes(row, 2),
                        attempts: try row.decode(Int.self, atIndex: 3),
                        notBefore: try row.decode(Int64.self, atIndex: 4),
                        createdAt: try row.decode(Int64.self, atIndex: 5)))
            }
            return rows
        }
    }

    /// Puts a job back for later and counts the attempt. False if it is gone.
    @discardableResult
    public func rescheduleJob(id: Int64, notBefore: Int64) throws(StoreError) -> Bool {
        try write("rescheduleJob") { db in
            try db.execute(
                sql: "UPDATE job SET attempts = attempts + 1, not_before = ? WHERE id = ?",
                arguments: [notBefore, id])
            return db.changesCount > 0
        }
    }

    @discardableResult
    public func deleteJob(id: Int64) throws(StoreError) -> Bool {
        try write("deleteJob") { db in
            try db.execute(sql: "DELETE FROM job WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }

    // MARK: - Decoding

    /// A BLOB column as bytes, copied once straight out of SQLite's buffer.
    /// NULL (never written by this store) reads as empty.
    @inline(__always)
    static func bytes(_ row: Row, _ index: Int) throws -> [UInt8] {
        try row.withUnsafeData(atIndex: index) { data in
            data.map { [UInt8]($0) } ?? []
        }
    }
}

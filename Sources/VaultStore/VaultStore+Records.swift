// The record operations. Reads go through a reader snapshot; every write is
// one IMMEDIATE transaction (see `VaultStore.write`), durable on return.
// An empty byte array is bound as an empty blob (SQLiteBindable), never NULL.

extension VaultStore {
    // MARK: - Metadata

    public func meta(_ key: String) throws(StoreError) -> [UInt8]? {
        try read("meta") { db in
            try db.one(#"SELECT value FROM meta WHERE "key" = ?"#, [key]) { $0.bytes(0) }
        }
    }

    public func setMeta(_ key: String, _ value: [UInt8]) throws(StoreError) {
        try write("setMeta") { db in
            try db.run(
                #"""
                    INSERT INTO meta ("key", value) VALUES (?, ?)
                    ON CONFLICT("key") DO UPDATE SET value = excluded.value
                    """#,
                [key, value])
        }
    }

    // MARK: - Keyslots

    private static let keyslotColumns = "id, factor, version, salt, kdf, binding, sealed_key, created_at"

    public func keyslots() throws(StoreError) -> [KeyslotRow] {
        try read("keyslots") { db in
            try db.rows("SELECT \(Self.keyslotColumns) FROM keyslot ORDER BY created_at, id") { row in
                KeyslotRow(
                    id: row.text(0), factor: row.text(1), version: row.int(2), salt: row.bytes(3),
                    kdf: row.text(4), binding: row.text(5), sealedKey: row.bytes(6), createdAt: row.int64(7))
            }
        }
    }

    /// Atomically deletes the slots with ids in `delete` and inserts-or-replaces
    /// `put`, in one transaction: either all of it happens or none of it. An id
    /// in both lists ends up with the `put` row (deletes run first).
    public func updateKeyslots(put: [KeyslotRow], delete: [String]) throws(StoreError) {
        try write("updateKeyslots") { db in
            for id in delete {
                try db.run("DELETE FROM keyslot WHERE id = ?", [id])
            }
            try Self.putKeyslots(put, db)
        }
    }

    private static let upsertKeyslot = """
            INSERT INTO keyslot (\(keyslotColumns))
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(id) DO UPDATE SET
                factor = excluded.factor, version = excluded.version, salt = excluded.salt,
                kdf = excluded.kdf, binding = excluded.binding, sealed_key = excluded.sealed_key,
                created_at = excluded.created_at
            """

    private static func putKeyslots(_ put: [KeyslotRow], _ db: SQLiteConnection) throws {
        for slot in put {
            try db.run(upsertKeyslot, [
                slot.id, slot.factor, slot.version, slot.salt, slot.kdf, slot.binding, slot.sealedKey, slot.createdAt,
            ])
        }
    }

    /// `vaultctl reset`, in one transaction: every session, keyslot, failure
    /// counter and stale mark goes, and `slots` (the new vault key's device
    /// slot) comes in, with `meta` (its public key). A crash leaves the old
    /// vault or the new one, never a mix.
    public func reset(slots: [KeyslotRow], meta: [String: [UInt8]]) throws(StoreError) -> Int {
        let removed: Int = try write("reset") { db in
            try db.run("DELETE FROM session")
            let sessions = db.changes
            try db.run("DELETE FROM keyslot")
            try db.run("DELETE FROM failure_counter")
            try db.run("DELETE FROM app_grant")
            try db.run(#"DELETE FROM meta WHERE "key" LIKE 'stale:%'"#)
            for (key, value) in meta {
                try db.run(
                    #"INSERT INTO meta ("key", value) VALUES (?, ?) ON CONFLICT("key") DO UPDATE SET value = excluded.value"#,
                    [key, value])
            }
            try Self.putKeyslots(slots, db)
            return sessions
        }
        return removed
    }

    // MARK: - App grants

    public func grants() throws(StoreError) -> [GrantRow] {
        try read("grants") { db in
            try db.rows("SELECT id, sealed, updated_at FROM app_grant ORDER BY rowid") { row in
                GrantRow(id: row.text(0), sealed: row.bytes(1), updatedAt: row.int64(2))
            }
        }
    }

    /// Writes `put` and deletes `delete` in one transaction, with the audit
    /// entry that says why when there is one.
    public func updateGrants(put: [GrantRow], delete: [String],
                             auditing make: ((AuditRow?) throws -> AuditRow)? = nil) throws(StoreError) {
        try write("updateGrants") { db in
            for id in delete {
                try db.run("DELETE FROM app_grant WHERE id = ?", [id])
            }
            for row in put {
                try db.run("""
                    INSERT INTO app_grant (id, sealed, updated_at) VALUES (?, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at
                    """, [row.id, row.sealed, row.updatedAt])
            }
            if let make { _ = try Self.insertAudit(make, db) }
        }
    }

    /// Replaces an existing grant row only (a last use): a row deleted in the
    /// meantime (revoked) stays deleted. False when there was none.
    @discardableResult
    public func updateGrantIfPresent(_ row: GrantRow) throws(StoreError) -> Bool {
        try write("updateGrantIfPresent") { db in
            try db.run("UPDATE app_grant SET sealed = ?, updated_at = ? WHERE id = ?", [row.sealed, row.updatedAt, row.id])
            return db.changes > 0
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
            try db.rows("SELECT \(Self.sessionColumns) FROM session ORDER BY rowid", [], Self.sessionRow)
        }
    }

    public func session(id: String) throws(StoreError) -> SessionRow? {
        try read("session") { db in
            try db.one("SELECT \(Self.sessionColumns) FROM session WHERE id = ?", [id], Self.sessionRow)
        }
    }

    /// The sessions whose `tokenHash` matches (normally at most one), for revocation.
    public func sessions(tokenHash: String) throws(StoreError) -> [SessionRow] {
        try read("sessionsByTokenHash") { db in
            try db.rows("SELECT \(Self.sessionColumns) FROM session WHERE token_hash = ? ORDER BY rowid", [tokenHash],
                        Self.sessionRow)
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
            try db.run("DELETE FROM session WHERE id = ?", [id])
            return db.changes > 0
        }
    }

    @discardableResult
    public func deleteAllSessions() throws(StoreError) -> Int {
        try write("deleteAllSessions") { db in
            try db.run("DELETE FROM session")
            return db.changes
        }
    }

    /// An upsert rather than INSERT OR REPLACE: REPLACE deletes and re-inserts,
    /// which gives the row a new rowid and moves it around the table on every
    /// token refresh.
    private static let upsertSession = """
        INSERT INTO session (\(sessionColumns))
        VALUES (?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT(id) DO UPDATE SET
            token_hash = excluded.token_hash, sealed_meta = excluded.sealed_meta,
            sealed_secret = excluded.sealed_secret, record_version = excluded.record_version,
            created_at = excluded.created_at, updated_at = excluded.updated_at
        """

    private static func upsertSessions(_ rows: [SessionRow], _ db: SQLiteConnection) throws {
        for row in rows {
            try db.run(upsertSession, [
                row.id, row.tokenHash, row.sealedMeta, row.sealedSecret, row.recordVersion, row.createdAt, row.updatedAt,
            ])
        }
    }

    private static func sessionRow(_ row: SQLiteRow) -> SessionRow {
        SessionRow(
            id: row.text(0), tokenHash: row.text(1), sealedMeta: row.bytes(2), sealedSecret: row.bytes(3),
            recordVersion: row.int(4), createdAt: row.int64(5), updatedAt: row.int64(6))
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
            try db.run(Self.upsertCounter, [c.factor, c.failures, c.lockedUntil])
            return c
        }
    }

    private static let upsertCounter = """
        INSERT INTO failure_counter (factor, failures, locked_until) VALUES (?, ?, ?)
        ON CONFLICT(factor) DO UPDATE SET failures = excluded.failures, locked_until = excluded.locked_until
        """

    public func setFailureCounter(_ c: FailureCounter) throws(StoreError) {
        try write("setFailureCounter") { db in
            try db.run(Self.upsertCounter, [c.factor, c.failures, c.lockedUntil])
        }
    }

    /// Back to zero failures and no lock.
    public func resetFailures(factor: String) throws(StoreError) {
        try write("resetFailures") { db in
            try db.run("DELETE FROM failure_counter WHERE factor = ?", [factor])
        }
    }

    private static func counter(_ factor: String, _ db: SQLiteConnection) throws -> FailureCounter {
        try db.one("SELECT failures, locked_until FROM failure_counter WHERE factor = ?", [factor]) { row in
            FailureCounter(factor: factor, failures: row.int(0), lockedUntil: row.int64(1))
        } ?? FailureCounter(factor: factor, failures: 0, lockedUntil: 0)
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

    private static func insertAudit(_ make: (AuditRow?) throws -> AuditRow, _ db: SQLiteConnection) throws -> AuditRow {
        let last = try lastAuditRow(db)
        var row = try make(last)
        row.seq = (last?.seq ?? 0) + 1
        try db.run(
            "INSERT INTO audit (\(auditColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [row.seq, row.at, row.event, row.factor, row.outcome, row.detail, row.pid.map { Int64($0) }, row.exe, row.mac])
        return row
    }

    /// Rows with `seq > after`, in order, at most `limit` of them.
    public func auditRows(after seq: Int64 = 0, limit: Int = 1000) throws(StoreError) -> [AuditRow] {
        guard limit > 0 else { return [] }  // SQLite reads a negative LIMIT as "no limit"
        return try read("auditRows") { db in
            try db.rows("SELECT \(Self.auditColumns) FROM audit WHERE seq > ? ORDER BY seq LIMIT ?", [seq, limit],
                        Self.auditRow)
        }
    }

    /// The newest `limit` rows, oldest first (what a person looking at the
    /// log wants to see: what happened last).
    public func auditRows(newest limit: Int) throws(StoreError) -> [AuditRow] {
        guard limit > 0 else { return [] }
        return try read("auditRowsNewest") { db in
            try db.rows("SELECT \(Self.auditColumns) FROM audit ORDER BY seq DESC LIMIT ?", [limit], Self.auditRow)
        }.reversed()
    }

    public func lastAudit() throws(StoreError) -> AuditRow? {
        try read("lastAudit") { db in
            try Self.lastAuditRow(db)
        }
    }

    /// The oldest seq stamped at `at` (Unix seconds) or later, or nil when
    /// every row is older. Walks from the oldest row and stops at the first
    /// young enough (no index on `at`: the rows before it are the ones a
    /// prune deletes, and in the usual case the first row already is).
    public func firstAuditSeq(notBefore at: Double) throws(StoreError) -> Int64? {
        try read("firstAuditSeq") { db in
            try db.one("SELECT seq FROM audit WHERE at >= ? ORDER BY seq LIMIT 1", [at]) { $0.int64(0) }
        }
    }

    /// Where the audit chain starts once older rows were pruned; nil before the first prune.
    public func auditAnchor() throws(StoreError) -> AuditAnchor? {
        try read("auditAnchor") { db in
            try db.one("SELECT seq, mac, tag FROM audit_anchor WHERE id = 1", []) {
                AuditAnchor(seq: $0.int64(0), mac: $0.bytes(1), tag: $0.bytes(2))
            }
        }
    }

    /// Moves the anchor to `anchor` and deletes the rows up to its seq, in one
    /// transaction (the schema refuses to delete any row past the anchor).
    /// Returns how many rows were deleted.
    public func pruneAudit(to anchor: AuditAnchor) throws(StoreError) -> Int {
        try write("pruneAudit") { db in
            try db.run(
                #"""
                    INSERT INTO audit_anchor (id, seq, mac, tag) VALUES (1, ?, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, mac = excluded.mac, tag = excluded.tag
                    """#,
                [anchor.seq, anchor.mac, anchor.tag])
            try db.run("DELETE FROM audit WHERE seq <= ?", [anchor.seq])
            return db.changes
        }
    }

    private static func lastAuditRow(_ db: SQLiteConnection) throws -> AuditRow? {
        try db.one("SELECT \(auditColumns) FROM audit ORDER BY seq DESC LIMIT 1", [], auditRow)
    }

    private static func auditRow(_ row: SQLiteRow) -> AuditRow {
        AuditRow(
            seq: row.int64(0), at: row.double(1), event: row.text(2), factor: row.optionalText(3),
            outcome: row.text(4), detail: row.text(5), pid: row.optionalInt64(6).flatMap { Int32(exactly: $0) },
            exe: row.optionalText(7), mac: row.bytes(8))
    }

    // MARK: - Jobs (durable work queue)

    private static let jobColumns = "id, kind, payload, attempts, not_before, created_at"

    /// Adds a job; its `id` (and `attempts`, reset to 0) is assigned by the store.
    @discardableResult
    public func enqueueJob(_ job: JobRow) throws(StoreError) -> JobRow {
        try write("enqueueJob") { db in
            try db.run("INSERT INTO job (kind, payload, attempts, not_before, created_at) VALUES (?, ?, 0, ?, ?)",
                       [job.kind, job.payload, job.notBefore, job.createdAt])
            var stored = job
            stored.id = db.lastInsertRowID
            stored.attempts = 0
            return stored
        }
    }

    /// Jobs with `notBefore <= now`, earliest first. Handing out does not
    /// remove: call `deleteJob` when done or `rescheduleJob` to try later.
    public func dueJobs(now: Int64, limit: Int = 100) throws(StoreError) -> [JobRow] {
        guard limit > 0 else { return [] }
        return try read("dueJobs") { db in
            try db.rows("SELECT \(Self.jobColumns) FROM job WHERE not_before <= ? ORDER BY not_before, id LIMIT ?",
                        [now, limit]) { row in
                JobRow(id: row.int64(0), kind: row.text(1), payload: row.bytes(2), attempts: row.int(3),
                       notBefore: row.int64(4), createdAt: row.int64(5))
            }
        }
    }

    /// Puts a job back for later and counts the attempt. False if it is gone.
    @discardableResult
    public func rescheduleJob(id: Int64, notBefore: Int64) throws(StoreError) -> Bool {
        try write("rescheduleJob") { db in
            try db.run("UPDATE job SET attempts = attempts + 1, not_before = ? WHERE id = ?", [notBefore, id])
            return db.changes > 0
        }
    }

    @discardableResult
    public func deleteJob(id: Int64) throws(StoreError) -> Bool {
        try write("deleteJob") { db in
            try db.run("DELETE FROM job WHERE id = ?", [id])
            return db.changes > 0
        }
    }
}

/// The schema, as migrations applied in order, each in its own transaction.
/// Each migration also records the schema version it produces in `PRAGMA
/// user_version` and in `store_info`, so that an older SessionVault can tell
/// "newer than me" before it writes anything (see `VaultStore.refuseNewerSchema`).
///
/// Which migrations ran is kept in `grdb_migrations`, the ledger SessionVault
/// kept when it used GRDB: stores written before and after read the same way,
/// and an older SessionVault opening a store made now finds its migrations done.
enum Schema {
    /// Bump together with a new migration below.
    static let version = 3

    /// Every migration identifier below, for the read-only probe.
    static var migrationIdentifiers: Set<String> { Set(migrations.map(\.identifier)) }

    /// Runs the migrations `connection`'s store has not had yet.
    static func migrate(_ connection: SQLiteConnection) throws(StoreError) {
        do {
            try connection.execute("CREATE TABLE IF NOT EXISTS grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
            let applied = Set(try connection.rows("SELECT identifier FROM grdb_migrations") { $0.text(0) })
            for (identifier, sql) in migrations where !applied.contains(identifier) {
                try connection.transaction(immediate: true) {
                    try connection.execute(sql)
                    try connection.run("INSERT INTO grdb_migrations (identifier) VALUES (?)", [identifier])
                }
            }
        } catch {
            throw StoreError.from(error, "migrate")
        }
    }

    /// Identifier and SQL, in the order they run. Never edit one that shipped: add another.
    static let migrations: [(identifier: String, sql: String)] = [
        ("v1", """
                CREATE TABLE store_info (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    schema_version INTEGER NOT NULL,
                    created_at INTEGER NOT NULL
                );
                CREATE TABLE meta (
                    "key" TEXT PRIMARY KEY NOT NULL CHECK ("key" <> ''),
                    value BLOB NOT NULL
                );
                CREATE TABLE keyslot (
                    id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
                    factor TEXT NOT NULL,
                    version INTEGER NOT NULL,
                    salt BLOB NOT NULL,
                    kdf TEXT NOT NULL,
                    binding TEXT NOT NULL,
                    -- a wrapped key is never empty: an empty one is a caller bug
                    sealed_key BLOB NOT NULL CHECK (length(sealed_key) > 0),
                    created_at INTEGER NOT NULL
                );
                CREATE TABLE session (
                    id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
                    token_hash TEXT NOT NULL,
                    sealed_meta BLOB NOT NULL,
                    sealed_secret BLOB NOT NULL,
                    record_version INTEGER NOT NULL,
                    created_at INTEGER NOT NULL,
                    updated_at INTEGER NOT NULL
                );
                CREATE INDEX session_token_hash ON session(token_hash);
                CREATE TABLE failure_counter (
                    factor TEXT PRIMARY KEY NOT NULL,
                    failures INTEGER NOT NULL CHECK (failures >= 0),
                    locked_until INTEGER NOT NULL
                );
                -- seq is the rowid: assigned by the store inside the appending
                -- transaction, so it is strictly increasing.
                CREATE TABLE audit (
                    seq INTEGER PRIMARY KEY,
                    at REAL NOT NULL,
                    event TEXT NOT NULL,
                    factor TEXT,
                    outcome TEXT NOT NULL,
                    detail TEXT NOT NULL,
                    pid INTEGER,
                    exe TEXT,
                    mac BLOB NOT NULL
                );
                -- Append-only, enforced by SQLite too, so a bug elsewhere in the
                -- daemon cannot rewrite history (a later migration may drop these
                -- to add rotation).
                CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
                BEGIN SELECT RAISE(ABORT, 'audit is append-only'); END;
                CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
                BEGIN SELECT RAISE(ABORT, 'audit is append-only'); END;
                -- AUTOINCREMENT: a job id is never reused, even after deletion.
                CREATE TABLE job (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    kind TEXT NOT NULL,
                    payload BLOB NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    not_before INTEGER NOT NULL DEFAULT 0,
                    created_at INTEGER NOT NULL
                );
                CREATE INDEX job_due ON job(not_before, id);
                INSERT INTO store_info (id, schema_version, created_at)
                    VALUES (1, 1, CAST(strftime('%s', 'now') AS INTEGER));
                PRAGMA user_version = 1;
                """),
        // Which app may use which account (VaultCore's AppGrants): one row per
        // app and account, its content sealed, its id a keyed hash of both.
        ("v2", """
                CREATE TABLE app_grant (
                    id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
                    sealed BLOB NOT NULL CHECK (length(sealed) > 0),
                    updated_at INTEGER NOT NULL
                );
                UPDATE store_info SET schema_version = 2;
                PRAGMA user_version = 2;
                """),
        // The audit log's retention (VaultCore's AuditLog.prune): the rows up to
        // the anchor's seq may be deleted, and no others, so a bug elsewhere
        // still cannot rewrite history. The anchor is where the chain starts
        // once they are gone: that row's MAC, and a tag over seq and MAC keyed
        // from the device key (one row, or none before the first prune).
        ("v3", """
                CREATE TABLE audit_anchor (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    seq INTEGER NOT NULL CHECK (seq > 0),
                    mac BLOB NOT NULL CHECK (length(mac) > 0),
                    tag BLOB NOT NULL CHECK (length(tag) > 0)
                );
                DROP TRIGGER audit_no_delete;
                CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
                WHEN OLD.seq > coalesce((SELECT seq FROM audit_anchor WHERE id = 1), 0)
                BEGIN SELECT RAISE(ABORT, 'audit is append-only'); END;
                UPDATE store_info SET schema_version = 3;
                PRAGMA user_version = 3;
                """),
    ]
}

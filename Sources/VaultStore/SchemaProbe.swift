import Foundation
import GRDB
import GRDBSQLite

/// Reads the schema version of an existing file without writing anything.
///
/// This runs before GRDB opens the file, because opening a `DatabasePool`
/// writes (it switches the journal to WAL and primes the -wal file). It uses
/// the SQLite C API rather than a read-only GRDB connection because only the
/// C API lets it pass `SQLITE_OPEN_URI` for `immutable=1`: a plain read-only
/// connection to a WAL database leaves new, empty -wal and -shm files behind,
/// and "refuse, touch nothing" should mean nothing.
enum SchemaProbe {
    /// The highest schema version the file claims, in `PRAGMA user_version`,
    /// in `store_info`, or implied by GRDB migrations this build does not know.
    static func storedVersion(path: String) throws(StoreError) -> Int {
        // immutable=1 skips locking and the -wal/-shm files. That is exact only
        // while no connection anywhere has the store open and no crash left a
        // WAL behind, which is when -wal and -shm are both absent. Otherwise
        // read through the WAL like anyone else. (It also matters in-process:
        // closing an immutable connection closes its descriptor outright, which
        // would drop the POSIX locks of an open VaultStore on the same file.)
        let quiet = !exists(path + "-wal") && !exists(path + "-shm") && isEmptyOrMissing(path + "-journal")
        let target = fileURI(path) + (quiet ? "?immutable=1" : "?mode=ro")
        var handle: OpaquePointer?
        let opened = sqlite3_open_v2(target, &handle, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nil)
        // A handle is allocated even when open fails; it must be closed either way.
        defer { sqlite3_close_v2(handle) }
        guard opened == SQLITE_OK, let db = handle else {
            throw StoreError.from(DatabaseError(resultCode: ResultCode(rawValue: opened)), "open")
        }
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, 5000)

        // The first read of the header is where a non-database file fails (NOTADB).
        var version = try queryInt(db, "PRAGMA user_version") ?? 0
        if try tableExists(db, "store_info") {
            version = max(version, try queryInt(db, "SELECT MAX(schema_version) FROM store_info") ?? 0)
        }
        if try tableExists(db, "grdb_migrations") {
            let applied = try queryStrings(db, "SELECT identifier FROM grdb_migrations")
            if !applied.allSatisfy(Schema.migrationIdentifiers.contains) {
                // Applied by a newer build, even if it forgot to bump the version.
                version = max(version, Schema.version + 1)
            }
        }
        return version
    }

    private static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    private static func isEmptyOrMissing(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) != 0 || st.st_size == 0
    }

    /// `file:` URI for `path`; everything but unreserved characters and '/'
    /// is percent-encoded so '?', '#' and '%' in a directory name stay literal.
    static func fileURI(_ path: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~/")
        let encoded = path.addingPercentEncoding(withAllowedCharacters: allowed) ?? path
        return "file:" + encoded
    }

    private static func tableExists(_ db: OpaquePointer, _ name: String) throws(StoreError) -> Bool {
        // `name` is one of our constants, never user input.
        try queryInt(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '\(name)'") == 1
    }

    private static func queryInt(_ db: OpaquePointer, _ sql: String) throws(StoreError) -> Int? {
        var value: Int?
        try query(db, sql) { statement in
            if value == nil, sqlite3_column_type(statement, 0) != SQLITE_NULL {
                value = Int(sqlite3_column_int64(statement, 0))
            }
        }
        return value
    }

    private static func queryStrings(_ db: OpaquePointer, _ sql: String) throws(StoreError) -> [String] {
        var values: [String] = []
        try query(db, sql) { statement in
            values.append(RawColumns.text(statement, 0))
        }
        return values
    }

    private static func query(_ db: OpaquePointer, _ sql: String, _ row: (OpaquePointer) -> Void) throws(StoreError) {
        var statement: OpaquePointer?
        let prepared = sqlite3_prepare_v2(db, sql, -1, &statement, nil)
        defer { sqlite3_finalize(statement) }
        guard prepared == SQLITE_OK, let statement else {
            throw StoreError.from(DatabaseError(resultCode: ResultCode(rawValue: prepared)), "open")
        }
        while true {
            let step = sqlite3_step(statement)
            if step == SQLITE_DONE { return }
            guard step == SQLITE_ROW else {
                throw StoreError.from(DatabaseError(resultCode: ResultCode(rawValue: step)), "open")
            }
            row(statement)
        }
    }
}

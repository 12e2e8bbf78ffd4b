import CSQLite

#if canImport(Glibc)
import Glibc
#endif

/// Reads the schema version of an existing file without writing anything.
///
/// This runs before the store opens the file, because that writes (it switches
/// the journal to WAL and primes the -wal file). It opens a `file:` URI with
/// `immutable=1` when it can: a plain read-only connection to a WAL database
/// leaves new, empty -wal and -shm files behind, and "refuse, touch nothing"
/// should mean nothing.
enum SchemaProbe {
    /// The highest schema version the file claims, in `PRAGMA user_version`,
    /// in `store_info`, or implied by migrations this build does not know.
    static func storedVersion(path: String) throws(StoreError) -> Int {
        // immutable=1 skips locking and the -wal/-shm files. That is exact only
        // while no connection anywhere has the store open and no crash left a
        // WAL behind, which is when -wal and -shm are both absent. Otherwise
        // read through the WAL like anyone else. (It also matters in-process:
        // closing an immutable connection closes its descriptor outright, which
        // would drop the POSIX locks of an open VaultStore on the same file.)
        let quiet = !exists(path + "-wal") && !exists(path + "-shm") && isEmptyOrMissing(path + "-journal")
        let target = fileURI(path) + (quiet ? "?immutable=1" : "?mode=ro")
        do {
            let db = try SQLiteConnection(path: target, flags: SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, busyTimeoutMilliseconds: 5000)
            // The first read of the header is where a non-database file fails (NOTADB).
            var version = try db.one("PRAGMA user_version") { $0.int(0) } ?? 0
            if try tableExists(db, "store_info") {
                version = max(version, try db.one("SELECT MAX(schema_version) FROM store_info") { $0.optionalInt64(0) }
                    .flatMap { $0 }.map(Int.init) ?? 0)
            }
            if try tableExists(db, "grdb_migrations") {
                let applied = try db.rows("SELECT identifier FROM grdb_migrations") { $0.text(0) }
                if !applied.allSatisfy(Schema.migrationIdentifiers.contains) {
                    // Applied by a newer build, even if it forgot to bump the version.
                    version = max(version, Schema.version + 1)
                }
            }
            return version
        } catch {
            throw StoreError.from(error, "open")
        }
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
        let hex = Array("0123456789ABCDEF".utf8)
        var encoded: [UInt8] = Array("file:".utf8)
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a") ... UInt8(ascii: "z"), UInt8(ascii: "A") ... UInt8(ascii: "Z"),
                 UInt8(ascii: "0") ... UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
                encoded.append(byte)
            default:
                encoded += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xf)]]
            }
        }
        return String(decoding: encoded, as: UTF8.self)
    }

    private static func tableExists(_ db: SQLiteConnection, _ name: String) throws(SQLiteError) -> Bool {
        try db.one("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", [name]) { $0.int(0) } == 1
    }
}

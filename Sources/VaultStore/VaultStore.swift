import GRDB

/// SQLite persistence for the vault: keyslots, sealed sessions, failure
/// counters, the audit chain, small metadata and a job queue.
///
/// The store only ever sees opaque bytes: the vault core seals before writing.
/// Every write is one `BEGIN IMMEDIATE` transaction committed with
/// `synchronous=FULL` in WAL mode, so it is on disk when the call returns and a
/// failure leaves nothing half-written.
public final class VaultStore: Sendable {
    /// The schema version this build writes and understands.
    public static let schemaVersion: Int = Schema.version

    public let path: String
    let pool: DatabasePool

    /// Opens or creates the store.
    ///
    /// Creates a missing parent directory with 0700 and a new file with 0600
    /// (SQLite gives -wal and -shm the file's mode). Refuses a symlinked file
    /// or directory, or one owned by another uid (`.unsafePath`). Uses WAL with
    /// `synchronous=FULL` on the writer, checked to read back 2. Refuses a
    /// schema newer than `schemaVersion` with `.tooNew` without writing to the
    /// file.
    public init(path: String) throws(StoreError) {
        guard !path.isEmpty else { throw .unsafePath("empty store path") }
        self.path = path

        try PathGuard.prepareDirectory(PathGuard.parentDirectory(of: path))
        let file = try PathGuard.openDatabaseFile(path)
        defer { PathGuard.release(file.fd) }
        let sidecars = [path + "-wal", path + "-shm", path + "-journal"]
        for sidecar in sidecars {
            try PathGuard.checkSidecar(sidecar)
        }

        // Before anything opens the file read-write (GRDB's WAL setup writes
        // on open, migrations write): a newer schema is left exactly as it is.
        if !file.created && file.size > 0 {
            try Self.refuseNewerSchema(path)
        }
        PathGuard.restrictMode(path)
        for sidecar in sidecars {
            PathGuard.restrictMode(sidecar)
        }

        do {
            pool = try DatabasePool(path: path, configuration: Self.configuration())
        } catch {
            throw StoreError.from(error, "open")
        }
        // SQLite must have opened the file we checked. In a directory only we
        // can write nobody else can swap it; this catches the rest (a shared
        // sticky directory such as /tmp, our own bugs).
        guard PathGuard.identity(of: path) == file.identity else {
            throw .unsafePath("\(path) changed while it was being opened")
        }

        try makeWriterDurable()
        do {
            try Schema.migrator.migrate(pool)
        } catch {
            throw StoreError.from(error, "migrate")
        }
        // SQLite created these with the database file's mode; make sure anyway.
        for sidecar in sidecars {
            PathGuard.restrictMode(sidecar)
        }
    }

    private static func configuration() -> Configuration {
        var config = Configuration()
        config.label = "VaultStore"
        // Another process (a second vaultd started by mistake, a backup tool)
        // may hold the lock briefly: wait rather than fail at once.
        config.busyMode = .timeout(5)
        // 2-core machines; reads are mostly at startup.
        config.maximumReaderCount = 2
        config.prepareDatabase { db in
            // synchronous here is for non-WAL moments only: GRDB's WAL setup
            // resets the writer to NORMAL afterwards (see makeWriterDurable).
            // secure_delete: freed pages are zeroed, so deleted sealed records
            // do not linger in the file. temp_store: no temp files on disk.
            try db.execute(sql: """
                PRAGMA synchronous = FULL;
                PRAGMA secure_delete = ON;
                PRAGMA temp_store = MEMORY;
                """)
        }
        return config
    }

    /// In WAL mode GRDB sets `synchronous=NORMAL` on the writer after
    /// `prepareDatabase` ran, and NORMAL may lose the last commits on power
    /// loss. The vault relies on a commit being durable on return (failure
    /// counters are incremented before a PIN is checked), so set FULL here and
    /// refuse to run if it does not read back.
    private func makeWriterDurable() throws(StoreError) {
        let state: (Int?, String?)
        do {
            state = try pool.barrierWriteWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
                return (
                    try Int.fetchOne(db, sql: "PRAGMA synchronous"),
                    try String.fetchOne(db, sql: "PRAGMA journal_mode")
                )
            }
        } catch {
            throw StoreError.from(error, "configure writer")
        }
        guard state.0 == 2 else {
            throw .io("synchronous=FULL did not stick on the writer (reads \(state.0.map(String.init) ?? "nothing"))")
        }
        guard state.1?.lowercased() == "wal" else {
            throw .io("journal_mode is \(state.1 ?? "unknown"), not wal")
        }
    }

    /// Throws `.tooNew` if the file's schema is newer than this build,
    /// having read it without writing (see `SchemaProbe`).
    static func refuseNewerSchema(_ path: String) throws(StoreError) {
        let found = try SchemaProbe.storedVersion(path: path)
        if found > Schema.version {
            throw .tooNew(found: found, supported: Schema.version)
        }
    }

    /// Closes the connections. Later calls throw. Optional: deinit closes too.
    public func close() throws(StoreError) {
        do {
            try pool.close()
        } catch {
            throw StoreError.from(error, "close")
        }
    }

    /// The writer connection's settings, as SQLite reports them.
    public func diagnostics() throws(StoreError) -> StoreDiagnostics {
        do {
            return try pool.writeWithoutTransaction { db in
                StoreDiagnostics(
                    journalMode: try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "",
                    synchronous: try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1,
                    schemaVersion: try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0,
                    sqliteVersion: try String.fetchOne(db, sql: "SELECT sqlite_version()") ?? "")
            }
        } catch {
            throw StoreError.from(error, "diagnostics")
        }
    }

    // MARK: - Access helpers

    /// A read from a snapshot on a reader connection.
    func read<T>(_ operation: String, _ body: (Database) throws -> T) throws(StoreError) -> T {
        do {
            return try pool.read(body)
        } catch {
            throw StoreError.from(error, operation)
        }
    }

    /// One IMMEDIATE transaction on the writer: the write lock is taken at
    /// BEGIN, so read-then-write steps inside cannot interleave with another
    /// process, and an error anywhere rolls everything back.
    func write<T>(_ operation: String, _ body: (Database) throws -> T) throws(StoreError) -> T {
        do {
            return try pool.writeWithoutTransaction { db in
                var result: T?
                try db.inTransaction(.immediate) {
                    result = try body(db)
                    return .commit
                }
                guard let result else {
                    throw StoreError.io("\(operation): transaction produced no result")
                }
                return result
            }
        } catch {
            throw StoreError.from(error, operation)
        }
    }
}

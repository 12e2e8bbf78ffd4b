import CSQLite

/// SQLite persistence for the vault: keyslots, sealed sessions, failure
/// counters, the audit chain, small metadata and a job queue.
///
/// The store only ever sees opaque bytes: the vault core seals before writing.
/// Every write is one `BEGIN IMMEDIATE` transaction committed with
/// `synchronous=FULL` in WAL mode, so it is on disk when the call returns and a
/// failure leaves nothing half-written.
///
/// Two connections, each behind its own lock: the writer, and a reader that
/// reads from a WAL snapshot, so a read never waits for a write's fsync.
public final class VaultStore: Sendable {
    /// The schema version this build writes and understands.
    public static let schemaVersion: Int = Schema.version

    public let path: String
    private let writer: SerializedConnection
    private let reader: SerializedConnection

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

        // Before anything opens the file read-write (switching to WAL writes,
        // migrations write): a newer schema is left exactly as it is.
        if !file.created && file.size > 0 {
            try Self.refuseNewerSchema(path)
        }
        PathGuard.restrictMode(path)
        for sidecar in sidecars {
            PathGuard.restrictMode(sidecar)
        }

        let writerConnection: SQLiteConnection
        do {
            writerConnection = try Self.connect(path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
        } catch {
            throw StoreError.from(error, "open")
        }
        // SQLite must have opened the file we checked. In a directory only we
        // can write nobody else can swap it; this catches the rest (a shared
        // sticky directory such as /tmp, our own bugs).
        guard PathGuard.identity(of: path) == file.identity else {
            throw .unsafePath("\(path) changed while it was being opened")
        }
        try Self.makeDurable(writerConnection)
        try Schema.migrate(writerConnection)
        writer = SerializedConnection(writerConnection)
        // Opened after the writer made the file WAL and created -wal and -shm,
        // which a read-only connection cannot create.
        do {
            reader = SerializedConnection(try Self.connect(path, flags: SQLITE_OPEN_READONLY))
        } catch {
            throw StoreError.from(error, "open")
        }
        // SQLite created these with the database file's mode; make sure anyway.
        for sidecar in sidecars {
            PathGuard.restrictMode(sidecar)
        }
    }

    /// A connection with the store's settings. `secure_delete`: freed pages
    /// are zeroed, so deleted sealed records do not linger in the file.
    /// `temp_store`: no temp files on disk. The busy timeout: another process
    /// (a second vaultd started by mistake, a backup tool) may hold the lock
    /// briefly; wait rather than fail at once. `NOFOLLOW`: PathGuard checked
    /// the path is no link; SQLite refuses one too.
    private static func connect(_ path: String, flags: Int32) throws(SQLiteError) -> SQLiteConnection {
        let connection = try SQLiteConnection(path: path, flags: flags | SQLITE_OPEN_NOFOLLOW, busyTimeoutMilliseconds: 5000)
        try connection.execute("""
            PRAGMA secure_delete = ON;
            PRAGMA temp_store = MEMORY;
            """)
        return connection
    }

    /// WAL, with `synchronous=FULL` on the writer: NORMAL may lose the last
    /// commits on power loss, and the vault relies on a commit being durable
    /// on return (failure counters are incremented before a PIN is checked).
    /// Refuses to run if either does not read back.
    private static func makeDurable(_ connection: SQLiteConnection) throws(StoreError) {
        let journal: String?
        let synchronous: Int?
        do {
            journal = try connection.one("PRAGMA journal_mode = WAL") { $0.text(0) }
            try connection.execute("PRAGMA synchronous = FULL")
            synchronous = try connection.one("PRAGMA synchronous") { $0.int(0) }
        } catch {
            throw StoreError.from(error, "configure writer")
        }
        guard synchronous == 2 else {
            throw .io("synchronous=FULL did not stick on the writer (reads \(synchronous.map(String.init) ?? "nothing"))")
        }
        guard journal?.lowercased() == "wal" else {
            throw .io("journal_mode is \(journal ?? "unknown"), not wal")
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
            try reader.with { try $0.close() }
            try writer.with { try $0.close() }
        } catch {
            throw StoreError.from(error, "close")
        }
    }

    /// The writer connection's settings, as SQLite reports them.
    public func diagnostics() throws(StoreError) -> StoreDiagnostics {
        do {
            return try writer.with { db in
                StoreDiagnostics(
                    journalMode: try db.one("PRAGMA journal_mode") { $0.text(0) } ?? "",
                    synchronous: try db.one("PRAGMA synchronous") { $0.int(0) } ?? -1,
                    schemaVersion: try db.one("PRAGMA user_version") { $0.int(0) } ?? 0,
                    sqliteVersion: try db.one("SELECT sqlite_version()") { $0.text(0) } ?? "")
            }
        } catch {
            throw StoreError.from(error, "diagnostics")
        }
    }

    // MARK: - Access helpers

    /// The writer connection as it is, outside any transaction (tests set pragmas through it).
    func onWriter<T: Sendable>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try writer.with(body)
    }

    /// A read from one snapshot on the reader connection.
    func read<T: Sendable>(_ operation: String, _ body: (SQLiteConnection) throws -> T) throws(StoreError) -> T {
        do {
            return try reader.with { db in try db.transaction(immediate: false) { try body(db) } }
        } catch {
            throw StoreError.from(error, operation)
        }
    }

    /// One IMMEDIATE transaction on the writer: the write lock is taken at
    /// BEGIN, so read-then-write steps inside cannot interleave with another
    /// process, and an error anywhere rolls everything back.
    func write<T: Sendable>(_ operation: String, _ body: (SQLiteConnection) throws -> T) throws(StoreError) -> T {
        do {
            return try writer.with { db in try db.transaction(immediate: true) { try body(db) } }
        } catch {
            throw StoreError.from(error, operation)
        }
    }
}

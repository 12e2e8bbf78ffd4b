import CSQLite
import Locking

/// SQLite's C API, as thin as the store needs it: a connection, statements
/// prepared once per connection, typed binds and column reads.
///
/// It replaces GRDB, whose Foundation dependency (formatters, NSNumber,
/// NSRegularExpression) linked Foundation and ICU's 37 MB of data into vaultd.
/// Not thread-safe by itself (opened with `SQLITE_OPEN_NOMUTEX`): every
/// connection is used under one lock (`VaultStore`, `SQLiteMemberRegistry`).

/// A SQLite result code, extended (`SQLITE_IOERR_FSYNC`…). Only the code:
/// SQLite's messages may quote SQL or values, which are not for logs.
public struct SQLiteError: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: Int32

    public init(code: Int32) {
        self.code = code
    }

    /// The primary result code (`SQLITE_IOERR` for `SQLITE_IOERR_FSYNC`).
    public var primary: Int32 { code & 0xff }

    public var description: String { "SQLite error \(code)" }
}

/// A value that can be bound to a statement's parameter.
public protocol SQLiteBindable {
    func bind(to statement: OpaquePointer, at index: Int32) -> Int32
}

extension Int64: SQLiteBindable {
    public func bind(to statement: OpaquePointer, at index: Int32) -> Int32 { sqlite3_bind_int64(statement, index, self) }
}

extension Int: SQLiteBindable {
    public func bind(to statement: OpaquePointer, at index: Int32) -> Int32 { sqlite3_bind_int64(statement, index, Int64(self)) }
}

extension Double: SQLiteBindable {
    public func bind(to statement: OpaquePointer, at index: Int32) -> Int32 { sqlite3_bind_double(statement, index, self) }
}

extension String: SQLiteBindable {
    public func bind(to statement: OpaquePointer, at index: Int32) -> Int32 {
        // withCString gives a pointer even for "": an empty string, not NULL.
        withCString { csqlite_bind_text(statement, index, $0, Int32(utf8.count)) }
    }
}

/// A blob. Empty binds as an empty blob, not NULL.
extension Array: SQLiteBindable where Element == UInt8 {
    public func bind(to statement: OpaquePointer, at index: Int32) -> Int32 {
        withUnsafeBytes { csqlite_bind_blob(statement, index, $0.baseAddress, Int32($0.count)) }
    }
}

extension Optional: SQLiteBindable where Wrapped: SQLiteBindable {
    public func bind(to statement: OpaquePointer, at index: Int32) -> Int32 {
        switch self {
        case .some(let value): return value.bind(to: statement, at: index)
        case .none: return sqlite3_bind_null(statement, index)
        }
    }
}

/// The current row of a statement. Valid only inside the closure it is passed
/// to: every accessor copies out of SQLite's buffer, and NULL reads as empty,
/// zero or nil rather than trapping.
public struct SQLiteRow {
    let statement: OpaquePointer

    public func isNull(_ index: Int32) -> Bool { sqlite3_column_type(statement, index) == SQLITE_NULL }

    public func int64(_ index: Int32) -> Int64 { sqlite3_column_int64(statement, index) }

    public func int(_ index: Int32) -> Int { Int(sqlite3_column_int64(statement, index)) }

    public func double(_ index: Int32) -> Double { sqlite3_column_double(statement, index) }

    public func text(_ index: Int32) -> String {
        guard let pointer = sqlite3_column_text(statement, index) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, index))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    public func optionalText(_ index: Int32) -> String? { isNull(index) ? nil : text(index) }

    public func optionalInt64(_ index: Int32) -> Int64? { isNull(index) ? nil : int64(index) }

    public func optionalDouble(_ index: Int32) -> Double? { isNull(index) ? nil : double(index) }

    /// A blob, copied once (one memcpy: loading 10,000 sessions at start-up
    /// is dominated by these copies).
    public func bytes(_ index: Int32) -> [UInt8] {
        guard let pointer = sqlite3_column_blob(statement, index) else { return [] }
        let count = Int(sqlite3_column_bytes(statement, index))
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            if let base = buffer.baseAddress { base.initialize(from: pointer.assumingMemoryBound(to: UInt8.self), count: count) }
            initialized = count
        }
    }

    public func optionalBytes(_ index: Int32) -> [UInt8]? { isNull(index) ? nil : bytes(index) }
}

/// One open database connection, with its prepared statements.
public final class SQLiteConnection {
    private var handle: OpaquePointer?
    /// Prepared once per SQL text (the store's SQL is constant): after each
    /// use a statement is reset and its bindings cleared, so SQLite keeps no
    /// copy of the last values bound.
    private var statements: [String: OpaquePointer] = [:]

    /// Opens `path` (a file name, or a `file:` URI with `SQLITE_OPEN_URI`).
    /// Extended result codes are on and foreign keys are enforced.
    public init(path: String, flags: Int32 = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                busyTimeoutMilliseconds: Int32 = 0) throws(SQLiteError) {
        var opened: OpaquePointer?
        let code = sqlite3_open_v2(path, &opened, flags | SQLITE_OPEN_NOMUTEX, nil)
        guard code == SQLITE_OK, let opened else {
            // A handle is allocated even when open fails; it must be closed either way.
            sqlite3_close_v2(opened)
            throw SQLiteError(code: code)
        }
        handle = opened
        sqlite3_extended_result_codes(opened, 1)
        if busyTimeoutMilliseconds > 0 { sqlite3_busy_timeout(opened, busyTimeoutMilliseconds) }
        try execute("PRAGMA foreign_keys = ON")
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    /// Closes the connection; later calls throw `SQLITE_MISUSE`.
    public func close() throws(SQLiteError) {
        guard let handle else { return }
        for statement in statements.values { sqlite3_finalize(statement) }
        statements = [:]
        let code = sqlite3_close(handle)
        guard code == SQLITE_OK else { throw SQLiteError(code: code) }
        self.handle = nil
    }

    private func open() throws(SQLiteError) -> OpaquePointer {
        guard let handle else { throw SQLiteError(code: SQLITE_MISUSE) }
        return handle
    }

    /// Runs one or more statements that take no parameters and return no rows.
    public func execute(_ sql: String) throws(SQLiteError) {
        let code = sqlite3_exec(try open(), sql, nil, nil, nil)
        guard code == SQLITE_OK else { throw SQLiteError(code: code) }
    }

    /// Runs one statement with `arguments`, stepping it to the end; rows it returns are ignored.
    public func run(_ sql: String, _ arguments: [any SQLiteBindable] = []) throws(SQLiteError) {
        try withStatement(sql, arguments) { statement throws(SQLiteError) in
            while try step(statement) {}
        }
    }

    /// Every row of one statement, mapped by `row`.
    public func rows<T>(_ sql: String, _ arguments: [any SQLiteBindable] = [],
                        _ row: (SQLiteRow) -> T) throws(SQLiteError) -> [T] {
        try withStatement(sql, arguments) { statement throws(SQLiteError) in
            var rows: [T] = []
            while try step(statement) { rows.append(row(SQLiteRow(statement: statement))) }
            return rows
        }
    }

    /// The first row of one statement, mapped by `row`; nil when there is none.
    public func one<T>(_ sql: String, _ arguments: [any SQLiteBindable] = [],
                       _ row: (SQLiteRow) -> T) throws(SQLiteError) -> T? {
        try withStatement(sql, arguments) { statement throws(SQLiteError) in
            try step(statement) ? row(SQLiteRow(statement: statement)) : nil
        }
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    public var changes: Int { handle.map { Int(sqlite3_changes64($0)) } ?? 0 }

    public var lastInsertRowID: Int64 { handle.map { sqlite3_last_insert_rowid($0) } ?? 0 }

    /// `body` inside `BEGIN IMMEDIATE` (the write lock taken at once, so
    /// read-then-write steps cannot interleave with another connection) or a
    /// plain deferred `BEGIN` (a read snapshot); committed when it returns,
    /// rolled back when it throws.
    public func transaction<T>(immediate: Bool, _ body: () throws -> T) throws -> T {
        try execute(immediate ? "BEGIN IMMEDIATE" : "BEGIN")
        let result: T
        do {
            result = try body()
            try execute("COMMIT")
        } catch {
            // A failed COMMIT may leave the transaction open; a failed statement always does.
            if let handle, sqlite3_get_autocommit(handle) == 0 { sqlite3_exec(handle, "ROLLBACK", nil, nil, nil) }
            throw error
        }
        return result
    }

    private func withStatement<T>(_ sql: String, _ arguments: [any SQLiteBindable],
                                  _ body: (OpaquePointer) throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (offset, argument) in arguments.enumerated() {
            let code = argument.bind(to: statement, at: Int32(offset + 1))
            guard code == SQLITE_OK else { throw SQLiteError(code: code) }
        }
        return try body(statement)
    }

    private func prepared(_ sql: String) throws(SQLiteError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(try open(), sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            throw SQLiteError(code: code)
        }
        statements[sql] = statement
        return statement
    }

    /// True when a row is ready, false when the statement is done.
    private func step(_ statement: OpaquePointer) throws(SQLiteError) -> Bool {
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code:
            // sqlite3_step gives the primary code only; the connection has the extended one.
            throw SQLiteError(code: handle.map { sqlite3_extended_errcode($0) } ?? code)
        }
    }
}

/// A connection shared between threads, one at a time: every use holds its
/// lock. (`SQLiteConnection` is opened `NOMUTEX`, so this lock is the only one.)
public final class SerializedConnection: Sendable {
    /// The connection as the lock's value. A class so the value is Sendable
    /// (the lock hands it to a closure); unchecked because only the lock
    /// reaches it. Not a `Locked(())` beside the connection: a zero-sized
    /// value shares its address with the lock's own fields, and
    /// ThreadSanitizer reported the lock's read of them as a race.
    private final class Held: @unchecked Sendable {
        let connection: SQLiteConnection
        init(_ connection: SQLiteConnection) { self.connection = connection }
    }

    private let held: Locked<Held>

    public init(_ connection: sending SQLiteConnection) {
        held = Locked(Held(connection))
    }

    public func with<T: Sendable>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try held.withLock { held in try body(held.connection) }
    }
}

import Foundation
import GRDB
import GRDBSQLite

/// Column readers over a raw statement, for the paths where GRDB's row
/// decoding dominates (loading every session at startup: about 3x faster in
/// debug builds). Every accessor copies out of SQLite's buffer before the next
/// step, and reads NULL as empty rather than trapping.
enum RawColumns {
    static func text(_ statement: OpaquePointer, _ index: Int32) -> String {
        guard let pointer = sqlite3_column_text(statement, index) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, index))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    static func bytes(_ statement: OpaquePointer, _ index: Int32) -> [UInt8] {
        guard let pointer = sqlite3_column_blob(statement, index) else { return [] }
        let count = Int(sqlite3_column_bytes(statement, index))
        // One memcpy: the generic Array(sequence) initializer copies byte by
        // byte in debug builds, which dominated loading 10,000 sessions.
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            if let base = buffer.baseAddress {
                memcpy(base, pointer, count)
            }
            initialized = count
        }
    }

    static func int64(_ statement: OpaquePointer, _ index: Int32) -> Int64 {
        sqlite3_column_int64(statement, index)
    }

    /// Steps a prepared GRDB statement to the end, mapping each row.
    static func collect<T>(_ statement: Statement, _ row: (OpaquePointer) -> T) throws -> [T] {
        let handle = statement.sqliteStatement
        defer { sqlite3_reset(handle) }
        var rows: [T] = []
        while true {
            let step = sqlite3_step(handle)
            if step == SQLITE_DONE { return rows }
            guard step == SQLITE_ROW else {
                throw DatabaseError(resultCode: ResultCode(rawValue: step))
            }
            rows.append(row(handle))
        }
    }
}

import GRDB

/// Everything the store can throw. Details are meant for logs: they name the
/// operation and the SQLite result code, never row data (the rows are sealed
/// anyway, but ids and token hashes are not for logs either).
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Written by a newer SessionVault: refuse, touch nothing.
    case tooNew(found: Int, supported: Int)
    /// Cannot open / not a database / permissions.
    case unreadable(String)
    /// A symlink, or a directory/file owned by another uid.
    case unsafePath(String)
    /// A write failed (disk full, read-only): nothing half-written.
    case io(String)

    public var description: String {
        switch self {
        case let .tooNew(found, supported):
            return "store schema version \(found) is newer than this SessionVault supports (\(supported))"
        case let .unreadable(detail):
            return "store unreadable: \(detail)"
        case let .unsafePath(detail):
            return "unsafe store path: \(detail)"
        case let .io(detail):
            return "store write failed: \(detail)"
        }
    }
}

extension StoreError {
    /// Maps any error escaping GRDB (or a caller's closure) to a StoreError.
    ///
    /// Only the result code and SQLite's generic text for it are kept: GRDB's
    /// own `description` may carry the SQL and, with some configurations, the
    /// statement arguments, which would be row data.
    static func from(_ error: any Error, _ operation: String) -> StoreError {
        if let storeError = error as? StoreError {
            return storeError
        }
        if let dbError = error as? DatabaseError {
            let detail = "\(operation): SQLite error \(dbError.extendedResultCode)"
            switch dbError.resultCode {
            case .SQLITE_NOTADB, .SQLITE_CANTOPEN, .SQLITE_CORRUPT, .SQLITE_PERM, .SQLITE_AUTH,
                 .SQLITE_FORMAT, .SQLITE_NOLFS:
                return .unreadable(detail)
            default:
                // FULL, READONLY, IOERR, BUSY, LOCKED, CONSTRAINT, ...: the
                // operation did not happen (SQLite rolled the statement or
                // transaction back).
                return .io(detail)
            }
        }
        if error is RowDecodingError {
            // Its description quotes the row; say only what kind of problem it was.
            return .unreadable("\(operation): unexpected column type or missing column")
        }
        return .io("\(operation): \(type(of: error))")
    }
}

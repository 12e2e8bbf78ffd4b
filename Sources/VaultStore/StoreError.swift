import CSQLite

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
    /// Maps any error escaping SQLite (or a caller's closure) to a StoreError.
    /// Only the result code is kept: never SQL or row data.
    static func from(_ error: any Error, _ operation: String) -> StoreError {
        if let storeError = error as? StoreError {
            return storeError
        }
        if let dbError = error as? SQLiteError {
            let detail = "\(operation): \(dbError)"
            switch dbError.primary {
            case SQLITE_NOTADB, SQLITE_CANTOPEN, SQLITE_CORRUPT, SQLITE_PERM, SQLITE_AUTH, SQLITE_FORMAT, SQLITE_NOLFS:
                return .unreadable(detail)
            default:
                // FULL, READONLY, IOERR, BUSY, LOCKED, CONSTRAINT, ...: the
                // operation did not happen (SQLite rolled the statement or
                // transaction back).
                return .io(detail)
            }
        }
        return .io("\(operation): \(type(of: error))")
    }
}

import FoundationEssentials
import CSQLite
import NationalID
import SodiumKit
import VaultProtocol
import VaultStore

/// A member registry in a local SQLite file, for the demo and for tests: it
/// plays the organization's member system, so it keeps the number in the
/// member record (that is where it belongs) — never in the vault's store.
///
/// Tables: `member` (id, name, national_id, its source and time),
/// `login` (provider, subject → member), `membership` (member, organization,
/// roles), `idempotency` (key → first answer) and `write_log` (one row per
/// number written, so a test or the demo can show "written exactly once").
public final class SQLiteMemberRegistry: MemberRegistry {
    /// A member to seed the demo with.
    public struct SeedMember: Sendable {
        public var id: String
        public var name: String
        public var logins: [MemberKey]
        public var organizations: [Organization]
        /// Synthetic numbers only in seeds: never a real person's.
        public var nationalID: String?

        public init(id: String, name: String, logins: [MemberKey], organizations: [Organization], nationalID: String? = nil) {
            self.id = id
            self.name = name
            self.logins = logins
            self.organizations = organizations
            self.nationalID = nationalID
        }
    }

    public let path: String
    private let connection: SerializedConnection

    public init(path: String) throws(RegistryError) {
        self.path = path
        do {
            let db = try SQLiteConnection(path: path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
            try db.execute("""
                    CREATE TABLE IF NOT EXISTS member (
                        id TEXT PRIMARY KEY NOT NULL,
                        name TEXT NOT NULL,
                        national_id BLOB,
                        national_id_source TEXT,
                        national_id_updated_at REAL
                    );
                    CREATE TABLE IF NOT EXISTS login (
                        provider TEXT NOT NULL,
                        subject TEXT NOT NULL,
                        member_id TEXT NOT NULL REFERENCES member(id) ON DELETE CASCADE,
                        PRIMARY KEY (provider, subject)
                    );
                    CREATE TABLE IF NOT EXISTS membership (
                        member_id TEXT NOT NULL REFERENCES member(id) ON DELETE CASCADE,
                        org_id TEXT NOT NULL,
                        org_name TEXT NOT NULL,
                        roles TEXT NOT NULL DEFAULT '[]',
                        PRIMARY KEY (member_id, org_id)
                    );
                    CREATE TABLE IF NOT EXISTS idempotency (
                        "key" TEXT PRIMARY KEY NOT NULL,
                        result TEXT NOT NULL,
                        at REAL NOT NULL
                    );
                    CREATE TABLE IF NOT EXISTS write_log (
                        seq INTEGER PRIMARY KEY,
                        member_id TEXT NOT NULL,
                        source TEXT NOT NULL,
                        idempotency_key TEXT NOT NULL,
                        at REAL NOT NULL
                    );
                    """)
            connection = SerializedConnection(db)
        } catch {
            throw Self.storageError(error, "open")
        }
    }

    // MARK: - Seeding (demo)

    /// Adds or replaces members, their logins and memberships.
    public func seed(_ members: [SeedMember]) throws(RegistryError) {
        do {
            try write { db in
                for m in members {
                    var digits = m.nationalID.map { Array($0.utf8) }
                    defer { if digits != nil { Sodium.wipe(&digits!) } }
                    try db.run(
                        """
                            INSERT INTO member (id, name, national_id, national_id_source, national_id_updated_at)
                            VALUES (?, ?, ?, ?, ?)
                            ON CONFLICT(id) DO UPDATE SET name = excluded.name, national_id = excluded.national_id,
                                national_id_source = excluded.national_id_source,
                                national_id_updated_at = excluded.national_id_updated_at
                            """,
                        [m.id, m.name, digits, digits == nil ? nil : "seed", digits == nil ? nil : Self.now()])
                    try db.run("DELETE FROM login WHERE member_id = ?", [m.id])
                    for login in m.logins {
                        try db.run("INSERT OR REPLACE INTO login (provider, subject, member_id) VALUES (?, ?, ?)",
                                   [login.provider, login.subject, m.id])
                    }
                    try db.run("DELETE FROM membership WHERE member_id = ?", [m.id])
                    for org in m.organizations {
                        try db.run("INSERT INTO membership (member_id, org_id, org_name, roles) VALUES (?, ?, ?, ?)",
                                   [m.id, org.id, org.name, JSON.array(org.roles.map { .string($0) }).text])
                    }
                }
            }
        } catch {
            throw Self.storageError(error, "seed")
        }
    }

    /// Seeds from a JSON file: `[{"id","name","logins":[{"provider","subject"}],
    /// "organizations":[{"id","name","roles":[…]}],"national_id":null|"…"}]`.
    public func seed(jsonFile: String) throws(RegistryError) {
        guard let data = FileManager.default.contents(atPath: jsonFile) else {
            throw .storage("cannot read the seed file")
        }
        let json: JSON
        do {
            json = try JSON.parse(Array(data))
        } catch {
            throw .badResponse("seed file is not JSON (offset \(error.offset))")
        }
        var members: [SeedMember] = []
        for entry in json.arrayValue ?? [] {
            guard let id = entry["id"]?.stringValue else { throw .badResponse("seed member without id") }
            let logins = (entry["logins"]?.arrayValue ?? []).compactMap { l -> MemberKey? in
                guard let p = l["provider"]?.stringValue, let s = l["subject"]?.stringValue else { return nil }
                return MemberKey(provider: p, subject: s)
            }
            let orgs = (entry["organizations"]?.arrayValue ?? []).compactMap { o -> Organization? in
                guard let oid = o["id"]?.stringValue else { return nil }
                return Organization(id: oid, name: o["name"]?.stringValue ?? oid,
                                    roles: (o["roles"]?.arrayValue ?? []).compactMap(\.stringValue))
            }
            members.append(SeedMember(id: id, name: entry["name"]?.stringValue ?? id, logins: logins,
                                      organizations: orgs, nationalID: entry["national_id"]?.stringValue))
        }
        try seed(members)
    }

    /// How many times a number was written to this member's record (demo, tests).
    public func writeCount(memberID: String) throws(RegistryError) -> Int {
        do {
            return try read { db in
                try db.one("SELECT count(*) FROM write_log WHERE member_id = ?", [memberID]) { $0.int(0) } ?? 0
            }
        } catch {
            throw Self.storageError(error, "writeCount")
        }
    }

    /// Where the number on record came from, and when (demo, tests).
    public func nationalIDSource(memberID: String) throws(RegistryError) -> (source: String, at: Double)? {
        do {
            return try read { db in
                try db.one("SELECT national_id_source, national_id_updated_at FROM member WHERE id = ?", [memberID]) {
                    row -> (source: String, at: Double)? in
                    guard let source = row.optionalText(0), let at = row.optionalDouble(1) else { return nil }
                    return (source, at)
                } ?? nil
            }
        } catch {
            throw Self.storageError(error, "nationalIDSource")
        }
    }

    // MARK: - MemberRegistry

    public func lookup(memberKey: MemberKey) async throws(RegistryError) -> MemberRecord? {
        let found: (String, [UInt8]?, [Organization])?
        do {
            found = try read { db in
                guard let memberID = try Self.memberID(db, memberKey) else { return nil }
                let stored = try db.one("SELECT national_id FROM member WHERE id = ?", [memberID]) { $0.optionalBytes(0) } ?? nil
                let orgs = try db.rows(
                    "SELECT org_id, org_name, roles FROM membership WHERE member_id = ? ORDER BY org_id", [memberID]
                ) { row in
                    let roles = (try? JSON.parse(row.text(2)))?.arrayValue?.compactMap(\.stringValue) ?? []
                    return Organization(id: row.text(0), name: row.text(1), roles: roles)
                }
                return (memberID, stored, orgs)
            }
        } catch {
            throw Self.storageError(error, "lookup")
        }
        guard let (memberID, stored, orgs) = found else { return nil }
        let onRecord: NationalIDOnRecord
        if var digits = stored, !digits.isEmpty {
            do {
                onRecord = .number(try SecureBytes.consuming(&digits))
            } catch {
                throw .storage("secure memory")
            }
        } else {
            onRecord = .none
        }
        return MemberRecord(memberID: memberID, nationalID: onRecord, organizations: orgs)
    }

    @discardableResult
    public func setNationalID(memberKey: MemberKey, number: NationalIDNumber, source: String,
                              idempotencyKey: String) async throws(RegistryError) -> SetNationalIDResult {
        enum Answer: String { case written, unchanged, conflict, notFound = "not_found" }
        let answer: Answer
        do {
            answer = try write { db -> Answer in
                // A repeat of a write we already answered gets the same answer, nothing more.
                if let first = try db.one(#"SELECT result FROM idempotency WHERE "key" = ?"#, [idempotencyKey], { $0.text(0) }),
                    let replay = Answer(rawValue: first)
                {
                    return replay
                }
                let result: Answer
                if let memberID = try Self.memberID(db, memberKey) {
                    var stored = try db.one("SELECT national_id FROM member WHERE id = ?", [memberID]) { $0.bytes(0) } ?? []
                    defer { Sodium.wipe(&stored) }
                    if stored.isEmpty {
                        var digits = number.withUnsafeDigits { Array($0) }
                        defer { Sodium.wipe(&digits) }
                        let now = Self.now()
                        try db.run(
                            "UPDATE member SET national_id = ?, national_id_source = ?, national_id_updated_at = ? WHERE id = ?",
                            [digits, source, now, memberID])
                        try db.run("INSERT INTO write_log (member_id, source, idempotency_key, at) VALUES (?, ?, ?, ?)",
                                   [memberID, source, idempotencyKey, now])
                        result = .written
                    } else {
                        let same = number.withUnsafeDigits { d in
                            Sodium.constantTimeEqual(stored, Array(d))
                        }
                        result = same ? .unchanged : .conflict
                    }
                } else {
                    result = .notFound
                }
                try db.run(#"INSERT INTO idempotency ("key", result, at) VALUES (?, ?, ?)"#,
                           [idempotencyKey, result.rawValue, Self.now()])
                return result
            }
        } catch {
            throw Self.storageError(error, "setNationalID")
        }
        switch answer {
        case .written: return .written
        case .unchanged: return .unchanged
        case .conflict: throw .conflict
        case .notFound: throw .memberNotFound
        }
    }

    private static func memberID(_ db: SQLiteConnection, _ key: MemberKey) throws -> String? {
        try db.one("SELECT member_id FROM login WHERE provider = ? AND subject = ?", [key.provider, key.subject]) { $0.text(0) }
    }

    private func read<T: Sendable>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try connection.with(body)
    }

    private func write<T: Sendable>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try connection.with { db in try db.transaction(immediate: true) { try body(db) } }
    }

    /// Unix seconds, as the registry records times.
    private static func now() -> Double { Date().timeIntervalSince1970 }

    /// Only SQLite's result code: its messages may quote statement arguments.
    private static func storageError(_ error: any Error, _ operation: String) -> RegistryError {
        if let e = error as? RegistryError { return e }
        if let db = error as? SQLiteError { return .storage("\(operation): \(db)") }
        return .storage("\(operation): \(type(of: error))")
    }
}

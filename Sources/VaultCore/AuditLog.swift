import SodiumKit
import Foundation
import Logging
import VaultProtocol
import VaultStore

/// The security event log, in the store. Each entry carries a MAC over its
/// content and the previous entry's MAC, keyed from the device key, so editing
/// or deleting an entry in the middle breaks the chain (`verify`).
/// Entries never hold secrets: only event names, factor ids, counts and the
/// requesting process.
public final class AuditLog: Sendable {
    private let store: VaultStore
    private let key: SecureBytes
    private let logger: Logger

    init(store: VaultStore, deviceKey: SecureBytes, logger: Logger) throws(SodiumError) {
        self.store = store
        self.key = try KeyDerivation.derive(key: deviceKey, parts: [.label("sessionvault/audit/v1")])
        self.logger = logger
    }

    static func canonical(_ row: AuditRow, previousMAC: [UInt8]) -> [UInt8] {
        let v: JSON = [
            "prev": .string(Digest.hex(previousMAC)), "at": .double(row.at), "event": .string(row.event),
            "factor": row.factor.map { .string($0) } ?? .null, "outcome": .string(row.outcome),
            "detail": .string(row.detail), "pid": row.pid.map { .int(Int64($0)) } ?? .null,
            "exe": row.exe.map { .string($0) } ?? .null,
        ]
        return v.serialized()
    }

    /// One event, ready to be chained onto the log by the store: `record`
    /// appends it alone; `Vault.persist` writes it in the same transaction as
    /// the session change it describes.
    struct Entry {
        let event: String
        let factor: String?
        let outcome: String
        let make: (AuditRow?) throws -> AuditRow
    }

    func entry(_ event: String, factor: String? = nil, outcome: String = "ok",
               detail: [String: JSON] = [:], requester: Requester? = nil) -> Entry {
        let at = Date().timeIntervalSince1970
        let detailText = JSON.object(detail).text
        let key = self.key
        return Entry(event: event, factor: factor, outcome: outcome) { previous in
            var row = AuditRow(seq: 0, at: at, event: event, factor: factor, outcome: outcome, detail: detailText,
                               pid: requester.flatMap { $0.pid > 0 ? $0.pid : nil }, exe: requester?.executable, mac: [])
            row.mac = try KeyDerivation.mac(key: key, message: AuditLog.canonical(row, previousMAC: previous?.mac ?? []))
            return row
        }
    }

    /// Records one event. A failure to write the audit log is logged, never
    /// turned into a failure of the operation it describes.
    public func record(_ event: String, factor: String? = nil, outcome: String = "ok",
                       detail: [String: JSON] = [:], requester: Requester? = nil) {
        let entry = entry(event, factor: factor, outcome: outcome, detail: detail, requester: requester)
        do {
            _ = try store.appendAudit(entry.make)
        } catch {
            logger.error("audit log write failed", metadata: ["event": "\(event)", "error": "\(error)"])
        }
        written(entry)
    }

    /// The log line for an entry the store has written.
    func written(_ entry: Entry) {
        logger.info("audit", metadata: ["event": "\(entry.event)", "factor": "\(entry.factor ?? "-")", "outcome": "\(entry.outcome)"])
    }

    public func entries(after seq: Int64 = 0, limit: Int = 1000) throws(StoreError) -> [AuditRow] {
        try store.auditRows(after: seq, limit: limit)
    }

    /// Walks the chain; returns the seq of the first entry whose MAC does not
    /// match, or nil when the whole log verifies.
    public func verify() throws(StoreError) -> Int64? {
        var previous: [UInt8] = []
        var after: Int64 = 0
        while true {
            let rows = try store.auditRows(after: after, limit: 1000)
            if rows.isEmpty { return nil }
            for row in rows {
                let expected = (try? KeyDerivation.mac(key: key, message: AuditLog.canonical(row, previousMAC: previous))) ?? []
                if !Sodium.constantTimeEqual(expected, row.mac) { return row.seq }
                previous = row.mac
                after = row.seq
            }
        }
    }
}

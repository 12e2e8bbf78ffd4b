import Dispatch
import SodiumKit
import FoundationEssentials
import Keyring
import Locking
import Logging
import VaultProtocol
import VaultStore

/// The security event log, in the store. Each entry carries a MAC over its
/// content and the previous entry's MAC, keyed from the device key, so editing
/// or deleting an entry in the middle breaks the chain (`verify`). Deleting
/// the newest entries, or putting back an older vault file, leaves a chain
/// that still verifies; so the head (last seq and MAC) is also kept outside
/// the file (`keepHead`), and a log that no longer reaches it is reported.
/// Entries never hold secrets: only event names, factor ids, counts and the
/// requesting process.
public final class AuditLog: Sendable {
    private let store: VaultStore
    private let key: SecureBytes
    private let logger: Logger
    /// Where the head is kept, the head last saved there, and a shortfall an
    /// append found (the entry it chained from was older than the saved head).
    private let head = Locked<HeadState>(HeadState())
    /// Saves of the head, in order, off the caller's path: a Secret Service
    /// write takes milliseconds, and appends happen inside refreshes and
    /// unlocks. A head saved late only lags the log (a weaker check, never a
    /// false report); `flushHead` waits for the saves queued so far.
    private let headQueue = DispatchQueue(label: "sessionvault.audit-head")
    /// Refusals a client repeats at will: counted, not each written (AuditRepeats.swift).
    private let repeats = Locked(AuditRepeats())
    /// The broker's clock (Unix seconds), for the repeats' windows.
    private let clock: @Sendable () -> Double
    /// How much of the log is kept (`prune`).
    let retention: Retention

    private struct HeadState {
        var store: (any AuditHeadStore)?
        var saved: Head?
        var shortfall: (missing: Int64, headSeq: Int64)?
    }

    /// The newest entry's seq and MAC.
    struct Head: Equatable {
        var seq: Int64
        var mac: [UInt8]

        init(seq: Int64, mac: [UInt8]) {
            self.seq = seq
            self.mac = mac
        }

        /// "SEQ MAC-HEX", as stored.
        init?(text: String) {
            let parts = text.split(separator: " ")
            guard parts.count == 2, let seq = Int64(parts[0]), seq >= 0, let mac = Digest.bytes(fromHex: parts[1]) else { return nil }
            self.init(seq: seq, mac: mac)
        }

        var text: String { "\(seq) \(Digest.hex(mac))" }
    }

    init(store: VaultStore, deviceKey: SecureBytes, logger: Logger,
         clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 },
         retention: Retention = .standard) throws(SodiumError) {
        self.store = store
        self.clock = clock
        self.retention = retention
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
        return Entry(event: event, factor: factor, outcome: outcome) { [self] previous in
            if event != AuditLog.truncatedEvent { noteShortfall(previous: previous) }
            var row = AuditRow(seq: 0, at: at, event: event, factor: factor, outcome: outcome, detail: detailText,
                               pid: requester.flatMap { $0.pid > 0 ? $0.pid : nil }, exe: requester?.executable, mac: [])
            row.mac = try KeyDerivation.mac(key: key, message: AuditLog.canonical(row, previousMAC: previous?.mac ?? []))
            return row
        }
    }

    /// Records one event. A failure to write the audit log is logged, never
    /// turned into a failure of the operation it describes. A client's refusal
    /// (a requester with a pid, an outcome other than `ok`), or a release, that
    /// repeats one written in the last minute is counted instead, and past
    /// `AuditRepeats.maxPerWindow` entries a minute such entries are counted per
    /// kind (AuditRepeats); the counts are written when their minute is over.
    public func record(_ event: String, factor: String? = nil, outcome: String = "ok",
                       detail: [String: JSON] = [:], requester: Requester? = nil) {
        let (due, admitted) = admit(event, factor: factor, outcome: outcome, detail: detail, requester: requester)
        writeRepeats(due)
        if admitted { append(entry(event, factor: factor, outcome: outcome, detail: detail, requester: requester)) }
    }

    /// `record`, with the write (an fsync, and the head saved) on a task: for
    /// the release path, which must never wait for the disk. What is written
    /// or counted is decided here, so an app asking from a new process each
    /// time starts at most one task per entry written, not one per request.
    public func recordSoon(_ event: String, outcome: String = "ok", detail: [String: JSON] = [:], requester: Requester) {
        let (due, admitted) = admit(event, factor: nil, outcome: outcome, detail: detail, requester: requester)
        // The executable is read now, while the client is surely still there.
        let made = admitted ? entry(event, outcome: outcome, detail: detail, requester: requester.withExecutableRead) : nil
        guard made != nil || !due.isEmpty else { return }
        Task.detached(priority: .utility) { [self] in
            writeRepeats(due)
            if let made { append(made) }
        }
    }

    /// Whether an entry is written now (or counted, AuditRepeats), and the
    /// counts whose minute is over, to be written first.
    private func admit(_ event: String, factor: String?, outcome: String, detail: [String: JSON],
                       requester: Requester?) -> (due: [(key: AuditRepeats.Key, count: AuditRepeats.Count)], admitted: Bool) {
        let now = clock()
        let due = repeats.withLock { $0.due(now: now) }
        guard let requester, requester.pid > 0, outcome != "ok" || event == AuditLog.releaseEvent else { return (due, true) }
        let key = AuditRepeats.Key(event: event, factor: factor, outcome: outcome,
                                   detail: JSON.object(detail).text, pid: requester.pid)
        switch repeats.withLock({ $0.admit(key, detail: detail, requester: requester, now: now) }) {
        case .write:
            return (due, true)
        case .counted(let first):
            // Written when the window is over, even if nothing else is recorded by then.
            if first {
                headQueue.asyncAfter(deadline: .now() + AuditRepeats.window + 1) { [self] in
                    writeRepeats(repeats.withLock { $0.due(now: clock()) })
                }
            }
            return (due, false)
        }
    }

    /// A session handed to an app.
    public static let releaseEvent = "release"

    /// Writes every repeat counted so far, its window over or not (vaultd calls it at shutdown).
    public func flushRepeats() {
        writeRepeats(repeats.withLock { $0.due(now: clock(), all: true) })
    }

    private func writeRepeats(_ due: [(key: AuditRepeats.Key, count: AuditRepeats.Count)]) {
        for (key, count) in due {
            var detail = count.detail
            detail["repeated"] = .int(Int64(count.repeated))
            append(entry(key.event, factor: key.factor, outcome: key.outcome, detail: detail, requester: count.requester))
        }
    }

    private func append(_ entry: Entry) {
        do {
            let row = try store.appendAudit(entry.make)
            if row.seq % retention.pruneEvery == 0 { pruneSoon() }
        } catch {
            logger.error("audit log write failed", metadata: ["event": "\(entry.event)", "error": "\(error)"])
        }
        written(entry)
    }

    /// The log line for an entry the store has written; moves the kept head on.
    func written(_ entry: Entry) {
        logger.info("audit", metadata: ["event": "\(entry.event)", "factor": "\(entry.factor ?? "-")", "outcome": "\(entry.outcome)"])
        if entry.event != AuditLog.truncatedEvent { advanceHead() }
    }

    /// The event recorded when the log no longer reaches its kept head.
    static let truncatedEvent = "audit_truncated"

    /// Keeps the chain head in `headStore` from now on, after checking the log
    /// against the head saved there: returns how many of the newest entries
    /// are missing (0 when none, or when no head was saved yet). A shortfall is
    /// logged and recorded as an `audit_truncated` entry, which `check`
    /// reports from then on. `startingOver`: the device key is new, so a head
    /// saved before belongs to a vault that can no longer open.
    @discardableResult
    public func keepHead(in headStore: any AuditHeadStore, startingOver: Bool = false) -> Int64 {
        let saved: Head?
        do {
            saved = startingOver ? nil : try headStore.loadAuditHead().flatMap(Head.init(text:))
        } catch {
            logger.warning("the audit log's head could not be read; truncation of the log cannot be checked this time",
                           metadata: ["error": "\(error)"])
            saved = nil
        }
        head.withLock { $0 = HeadState(store: headStore, saved: saved) }
        let missing = saved.map(shortfall) ?? 0
        if let saved, missing > 0 { reportMissing(missing, headSeq: saved.seq) }
        saveHead()
        return missing
    }

    /// How many of the newest entries the log lacks against `saved`: 0 while
    /// the chain still runs through it.
    private func shortfall(_ saved: Head) -> Int64 {
        guard let last = try? store.lastAudit() else { return saved.seq }
        if last.seq < saved.seq { return saved.seq - last.seq }
        // The head's entry itself went with the retention (its saves failed for
        // that long): the chain was checked through it when it was pruned.
        if let start = try? chainStart(), start.after >= saved.seq { return 0 }
        guard let row = try? store.auditRows(after: saved.seq - 1, limit: 1).first, row.seq == saved.seq,
              Sodium.constantTimeEqual(row.mac, saved.mac) else {
            // Deleted and others appended in their place: at least the head is gone.
            return 1
        }
        return 0
    }

    private func reportMissing(_ missing: Int64, headSeq: Int64) {
        logger.warning("the newest audit entries are missing: the log was truncated or an older vault file was put back",
                       metadata: ["missing": "\(missing)", "head_seq": "\(headSeq)"])
        record(AuditLog.truncatedEvent, outcome: "detected", detail: ["missing": .int(missing), "head_seq": .int(headSeq)])
    }

    /// Inside an append's transaction: the entry it chains from must be the
    /// saved head or newer, or rows were deleted while vaultd runs.
    private func noteShortfall(previous: AuditRow?) {
        head.withLock { h in
            guard h.store != nil, let saved = h.saved else { return }
            let seq = previous?.seq ?? 0
            if seq < saved.seq {
                h.shortfall = (saved.seq - seq, saved.seq)
            } else if seq == saved.seq, let previous, !Sodium.constantTimeEqual(previous.mac, saved.mac) {
                h.shortfall = (1, saved.seq)
            }
        }
    }

    /// After an append: reports a shortfall it found, then saves the newest
    /// entry as the head.
    private func advanceHead() {
        let found = head.withLock { h in
            defer { h.shortfall = nil }
            return h.shortfall
        }
        if let found { reportMissing(found.missing, headSeq: found.headSeq) }
        headQueue.async { self.saveHead() }
    }

    /// Waits until the head saves queued so far are done (vaultd calls it at shutdown).
    public func flushHead() {
        headQueue.sync {}
    }

    private func saveHead() {
        let (headStore, saved) = head.withLock { ($0.store, $0.saved) }
        guard let headStore, let last = try? store.lastAudit() else { return }
        let next = Head(seq: last.seq, mac: last.mac)
        guard next != saved else { return }
        do {
            try headStore.saveAuditHead(next.text)
            head.withLock { $0.saved = next }
        } catch {
            logger.warning("the audit log's head could not be saved", metadata: ["error": "\(error)"])
        }
    }

    public func entries(after seq: Int64 = 0, limit: Int = 1000) throws(StoreError) -> [AuditRow] {
        try store.auditRows(after: seq, limit: limit)
    }

    /// Which entries a reader asks for: those after an entry (paging through
    /// the log from its start), or the newest ones (what happened last).
    public enum Page: Sendable, Equatable {
        case after(Int64, limit: Int)
        case newest(Int)
    }

    public func entries(_ page: Page) throws(StoreError) -> [AuditRow] {
        switch page {
        case .after(let seq, let limit): try store.auditRows(after: seq, limit: limit)
        case .newest(let limit): try store.auditRows(newest: limit)
        }
    }

    /// How much of the log is kept (`prune`): nothing older than `keepDays`
    /// days, and past `keepEntries` entries the oldest go as well, but never
    /// one younger than `floodProofDays`: an app that can make entries (its
    /// refusals and releases, at the log's cap of 60 a minute) cannot flood
    /// recent evidence out of the log, only grow it for as long as it keeps
    /// that up. The newest entry is always kept.
    public struct Retention: Sendable {
        public var keepDays: Double = 400
        public var keepEntries: Int64 = 100_000
        public var floodProofDays: Double = 30
        /// Every this many entries appended, the log is pruned (off the caller's path).
        public var pruneEvery: Int64 = 1_000

        public init() {}
        public static let standard = Retention()
    }

    /// `prune` on the head's queue, by the wall clock the entries are stamped
    /// with (vaultd calls it at start; appends call it every `pruneEvery`).
    public func pruneSoon() {
        headQueue.async { [self] in prune(now: Date().timeIntervalSince1970) }
    }

    /// Deletes the oldest entries past the retention and moves the anchor (the
    /// chain's start) to the last one deleted. Only a stretch whose chain
    /// verifies, up to and including the entry kept after it, is deleted: a
    /// prune never erases the evidence of an edit (an edited or removed entry
    /// stays where `verify` reports it). Returns how many were deleted.
    @discardableResult
    public func prune(now: Double) -> Int {
        do {
            guard let last = try store.lastAudit() else { return 0 }
            // The last entry older than a day count: the one before the first that is not.
            func lastOlder(thanDays days: Double) throws(StoreError) -> Int64 {
                (try store.firstAuditSeq(notBefore: now - days * 86_400)).map { $0 - 1 } ?? last.seq
            }
            let byAge = try lastOlder(thanDays: retention.keepDays)
            let byCount = min(last.seq - retention.keepEntries, try lastOlder(thanDays: retention.floodProofDays))
            let cutoff = min(max(byAge, byCount), last.seq - 1)
            guard var walk = try chainStart(), cutoff > walk.after else { return 0 }
            var cut: AuditRow?
            while walk.after <= cutoff {
                let rows = try store.auditRows(after: walk.after, limit: 1000)
                if rows.isEmpty { break }
                for row in rows where walk.after <= cutoff {
                    guard macMatches(row, previous: walk.previous) else {
                        logger.warning("the audit log was not pruned: an entry in the stretch to delete does not verify",
                                       metadata: ["seq": "\(row.seq)"])
                        return 0
                    }
                    if row.seq == cutoff { cut = row }
                    walk = (row.mac, row.seq)
                }
            }
            guard let cut else { return 0 }
            let anchor = AuditAnchor(seq: cut.seq, mac: cut.mac, tag: try anchorTag(seq: cut.seq, mac: cut.mac))
            let deleted = try store.pruneAudit(to: anchor)
            logger.info("audit log pruned", metadata: ["deleted": "\(deleted)", "first_kept": "\(cut.seq + 1)"])
            return deleted
        } catch {
            logger.warning("the audit log could not be pruned", metadata: ["error": "\(error)"])
            return 0
        }
    }

    /// Where the chain starts: after the anchor once entries were pruned, else
    /// at the beginning; nil when an anchor is there whose tag does not verify
    /// (not written by vaultd: the log is not trusted from its start).
    private func chainStart() throws(StoreError) -> (previous: [UInt8], after: Int64)? {
        guard let anchor = try store.auditAnchor() else { return ([], 0) }
        guard let tag = try? anchorTag(seq: anchor.seq, mac: anchor.mac), Sodium.constantTimeEqual(tag, anchor.tag) else { return nil }
        return (anchor.mac, anchor.seq)
    }

    private func anchorTag(seq: Int64, mac: [UInt8]) throws -> [UInt8] {
        try KeyDerivation.mac(key: key, message: Array("sessionvault/audit-anchor \(seq) \(Digest.hex(mac))".utf8))
    }

    private func macMatches(_ row: AuditRow, previous: [UInt8]) -> Bool {
        let expected = (try? KeyDerivation.mac(key: key, message: AuditLog.canonical(row, previousMAC: previous))) ?? []
        return Sodium.constantTimeEqual(expected, row.mac)
    }

    /// Walks the chain from its start (the anchor, once older entries were
    /// pruned); returns the seq of the first entry whose MAC does not match
    /// (the one after the anchor when the anchor itself is forged), or nil
    /// when the whole log verifies.
    public func verify() throws(StoreError) -> Int64? {
        guard let start = try chainStart() else { return (try store.auditAnchor()?.seq ?? 0) + 1 }
        var previous = start.previous
        var after = start.after
        while true {
            let rows = try store.auditRows(after: after, limit: 1000)
            if rows.isEmpty { return nil }
            for row in rows {
                if !macMatches(row, previous: previous) { return row.seq }
                previous = row.mac
                after = row.seq
            }
        }
    }

    /// What `check` found.
    public struct Verification: Sendable, Equatable {
        /// The first entry whose MAC does not match (edited, or one before it deleted).
        public var firstBad: Int64?
        /// How many of the newest entries are missing now, against the kept head.
        public var missing: Int64
        /// Shortfalls found earlier (at a start, or while running), as recorded in the log.
        public var truncations: [Truncation]

        public var intact: Bool { firstBad == nil && missing == 0 && truncations.isEmpty }
    }

    public struct Truncation: Sendable, Equatable {
        /// The `audit_truncated` entry that records it.
        public var seq: Int64
        public var at: Double
        public var missing: Int64
    }

    /// The chain (`verify`), the kept head, and the shortfalls recorded before.
    public func check() throws(StoreError) -> Verification {
        let firstBad = try verify()
        let saved = head.withLock { $0.saved }
        var truncations: [Truncation] = []
        var after: Int64 = 0
        while true {
            let rows = try store.auditRows(after: after, limit: 1000)
            guard let last = rows.last else { break }
            for row in rows where row.event == AuditLog.truncatedEvent {
                let missing = (try? JSON.parse(row.detail))?["missing"]?.intValue ?? 1
                truncations.append(Truncation(seq: row.seq, at: row.at, missing: missing))
            }
            after = last.seq
        }
        return Verification(firstBad: firstBad, missing: saved.map(shortfall) ?? 0, truncations: truncations)
    }
}

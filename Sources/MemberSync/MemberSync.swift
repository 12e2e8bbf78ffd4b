import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import NationalID
import SodiumKit
import VaultProtocol
import VaultStore

/// Keeps the member record's national identity number in step with what
/// logins say, and the member's organization/role context.
///
/// After a login that yields a national ID, the broker calls
/// `sync(provider:subject:nationalID:source:)`:
///
/// - the number is validated first (`invalid` otherwise; nothing is sent);
/// - the registry is asked for the member (`lookup`);
/// - no number on record → written (conditional write, with an idempotency
///   key) → `updated`, audited with time and source;
/// - the same number → no write → `confirmed` ("confirmed, no change");
/// - a different number → no write → `conflict`, listed by `conflicts()`;
/// - registry unreachable / 5xx → `queued`: a job in the store's `job` table,
///   its payload sealed (XChaCha20-Poly1305) under a key derived from the key
///   the broker passes in. `runDue()` retries due jobs with exponential
///   backoff; the queue survives restarts because it is in the store. Each job
///   keeps one idempotency key for all its attempts, so a write whose answer
///   was lost is never applied twice.
///
/// Audit entries go to the broker's closure; they and every error, conflict
/// and stored byte carry the number only masked (`DDMMYY*****`) or as a keyed
/// hash, and never the login's subject.
public actor MemberSync {
    public struct Configuration: Sendable {
        /// Which numbers count as valid (e.g. `.productionOnly` to refuse synthetic ones).
        public var parseOptions: ParseOptions
        /// First retry after this many seconds; doubles per failed attempt…
        public var backoffBase: Double
        /// …up to this.
        public var backoffCap: Double
        /// Random extra delay, as a fraction of the delay (spreads many vaults' retries).
        public var backoffJitter: Double
        /// Jobs handled per `runDue()` pass.
        public var batchSize: Int

        public init(parseOptions: ParseOptions = .default, backoffBase: Double = 30, backoffCap: Double = 3600,
                    backoffJitter: Double = 0.2, batchSize: Int = 50) {
            self.parseOptions = parseOptions
            self.backoffBase = backoffBase
            self.backoffCap = backoffCap
            self.backoffJitter = backoffJitter
            self.batchSize = batchSize
        }
    }

    public typealias AuditSink = @Sendable (SyncAuditEvent) -> Void
    /// Unix seconds.
    public typealias Clock = @Sendable () -> Double

    /// The `job.kind` of queued syncs.
    public static let jobKind = "member-sync"
    /// Meta keys: conflicts; per member key (keyed hash): last known
    /// organizations, and the chosen active organization.
    static let conflictsMetaKey = "member-sync:conflicts"
    static let orgsMetaPrefix = "member-sync:orgs:"
    static let activeOrgMetaPrefix = "member-sync:active-org:"

    static let jobPayloadVersion: UInt8 = 1
    static let jobAD = Array("sessionvault/member-sync/job/v1".utf8)

    private let store: VaultStore
    private let registry: any MemberRegistry
    private let sealKey: SecureBytes
    private let hashKey: SecureBytes
    private let audit: AuditSink
    private let configuration: Configuration
    private let clock: Clock
    private var running = false

    /// - Parameters:
    ///   - key: 32 bytes the broker derives from the device key, e.g.
    ///     `KeyDerivation.derive(key: deviceKey, parts: [.label("sessionvault/member-sync/v1")])`.
    ///     It must stay the same across restarts: it opens queued jobs and keys
    ///     the hashes in audit entries and conflicts.
    ///   - audit: called for every outcome; map it to `AuditLog.record(event, outcome:, detail:)`.
    public init(store: VaultStore, registry: any MemberRegistry, key: SecureBytes,
                configuration: Configuration = Configuration(), audit: @escaping AuditSink,
                clock: @escaping Clock = { Date().timeIntervalSince1970 }) throws(SodiumError) {
        self.store = store
        self.registry = registry
        self.sealKey = try KeyDerivation.derive(key: key, parts: [.label("sessionvault/member-sync/seal/v1")])
        self.hashKey = try KeyDerivation.derive(key: key, parts: [.label("sessionvault/member-sync/hash/v1")])
        self.audit = audit
        self.configuration = configuration
        self.clock = clock
    }

    /// "vipps" → "vipps-login": the source recorded with the number.
    public static func source(forProvider provider: String) -> String { provider + "-login" }

    // MARK: - After a login

    /// Validates the number and brings the member record in step. Never
    /// throws: every path ends in an outcome and an audit entry.
    public func sync(provider: String, subject: String, nationalID: SecureBytes, source: String? = nil) async -> SyncResult {
        let source = source ?? Self.source(forProvider: provider)
        let key = MemberKey(provider: provider, subject: subject)
        let number: NationalIDNumber
        do {
            number = try NationalIDNumber(secure: nationalID, options: configuration.parseOptions)
        } catch {
            emit("invalid", ["source": .string(source), "provider": .string(provider), "reason": .string(error.code),
                             "message": .string("not a valid national identity number; not synced")])
            return SyncResult(outcome: .invalid(error), context: cachedContext(key))
        }
        let idempotencyKey = Digest.hex(Random.bytes(16))
        let base = baseDetail(number: number, provider: provider, source: source)
        switch await attempt(key: key, number: number, source: source, idempotencyKey: idempotencyKey, detail: base) {
        case .done(let outcome, let context):
            return SyncResult(outcome: outcome, context: context ?? cachedContext(key))
        case .retry(let error):
            var detail = base
            detail["reason"] = .string(error.description)
            do {
                let (job, retryAt, existing) = try enqueue(key: key, number: number, source: source,
                                                           idempotencyKey: idempotencyKey)
                detail["job"] = .int(job)
                detail["retry_at"] = .int(retryAt)
                detail["message"] = .string(existing ? "member registry unavailable; already queued"
                                                     : "member registry unavailable; queued for retry")
                emit("queued", detail)
                return SyncResult(outcome: .queued, context: cachedContext(key))
            } catch {
                detail["message"] = .string("member registry unavailable and the retry could not be queued")
                detail["store_error"] = .string("\(error)")
                emit("failed", detail)
                return SyncResult(outcome: .failed(.storage("queue: \(error)")), context: cachedContext(key))
            }
        }
    }

    // MARK: - Periodically

    /// Retries the queued syncs that are due. Call it every few seconds to a
    /// minute (and once at start). Overlapping calls return at once.
    @discardableResult
    public func runDue() async -> RunReport {
        var report = RunReport()
        guard !running else { return report }
        running = true
        defer { running = false }
        let now = clock()
        let jobs: [JobRow]
        do {
            jobs = try store.dueJobs(now: Int64(now), limit: max(configuration.batchSize, 1))
                .filter { $0.kind == Self.jobKind }
        } catch {
            emit("failed", ["message": .string("could not read the member-sync queue"), "store_error": .string("\(error)")])
            return report
        }
        for job in jobs {
            report.attempted += 1
            guard let request = openJob(job) else {
                report.dropped += 1
                continue
            }
            var base = baseDetail(number: request.number, provider: request.key.provider, source: request.source)
            base["job"] = .int(job.id)
            base["attempts"] = .int(Int64(job.attempts + 1))
            switch await attempt(key: request.key, number: request.number, source: request.source,
                                 idempotencyKey: request.idempotencyKey, detail: base) {
            case .done(let outcome, _):
                switch outcome {
                case .updated: report.updated += 1
                case .confirmed: report.confirmed += 1
                case .conflict: report.conflicts += 1
                default: report.dropped += 1
                }
                do {
                    try store.deleteJob(id: job.id)
                } catch {
                    // Left in the queue: the next pass repeats it with the same
                    // idempotency key and finds the record already up to date.
                    emit("failed", ["job": .int(job.id), "message": .string("could not remove a finished job"),
                                    "store_error": .string("\(error)")])
                }
            case .retry(let error):
                let retryAt = Int64(clock() + delay(afterAttempts: job.attempts + 1))
                do {
                    try store.rescheduleJob(id: job.id, notBefore: retryAt)
                } catch {
                    emit("failed", ["job": .int(job.id), "message": .string("could not reschedule a job"),
                                    "store_error": .string("\(error)")])
                }
                report.rescheduled += 1
                var detail = base
                detail["reason"] = .string(error.description)
                detail["retry_at"] = .int(retryAt)
                detail["message"] = .string("member registry still unavailable; retry scheduled")
                emit("retry_scheduled", detail)
            }
        }
        report.pending = (try? pendingCount()) ?? 0
        return report
    }

    /// Queued syncs (due or not).
    public func pendingCount() throws(StoreError) -> Int {
        try allJobs().count
    }

    /// Unix seconds at which the earliest queued sync is due; nil when none is queued.
    public func nextDue() throws(StoreError) -> Int64? {
        try allJobs().map(\.notBefore).min()
    }

    // MARK: - Conflicts

    /// Conflicts waiting for a person, oldest first.
    public func conflicts() throws(StoreError) -> [SyncConflict] {
        guard let bytes = try store.meta(Self.conflictsMetaKey), !bytes.isEmpty,
              let list = (try? JSON.parse(bytes))?.arrayValue
        else { return [] }
        return list.compactMap(SyncConflict.init(json:)).sorted { $0.firstSeen < $1.firstSeen }
    }

    /// Removes a conflict once a person has fixed the record. False if there is no such conflict.
    @discardableResult
    public func resolveConflict(id: String) throws(StoreError) -> Bool {
        var list = try conflicts()
        guard let index = list.firstIndex(where: { $0.id == id }) else { return false }
        let removed = list.remove(at: index)
        try saveConflicts(list)
        emit("conflict_resolved", ["conflict": .string(id), "member": .string(removed.memberID),
                                   "nin": .string(removed.loginNumber), "nin_hash": .string(removed.loginHash)])
        return true
    }

    // MARK: - Organization context

    /// The member's organizations as last seen in the registry (kept in the
    /// store, so known across restarts and registry outages) and the active one.
    public func context(provider: String, subject: String) -> MemberContext? {
        cachedContext(MemberKey(provider: provider, subject: subject))
    }

    /// Asks the registry for the member's organizations (for logins that
    /// brought no national ID, and unlocks that want fresh roles). Falls back
    /// to the last known context when the registry cannot be reached.
    public func refreshContext(provider: String, subject: String) async -> MemberContext? {
        let key = MemberKey(provider: provider, subject: subject)
        do {
            guard let record = try await registry.lookup(memberKey: key) else { return nil }
            return remember(record, for: key)
        } catch {
            return cachedContext(key)
        }
    }

    /// Chooses the active organization (`vaultctl context ORG`; ORG is an id
    /// or a name, case-insensitive). Remembered in the store.
    @discardableResult
    public func setActiveOrganization(_ org: String, provider: String, subject: String) throws(ContextError) -> MemberContext {
        let key = MemberKey(provider: provider, subject: subject)
        guard var context = cachedContext(key) else { throw .unknownMember }
        let wanted = org.lowercased()
        guard let chosen = context.organizations.first(where: { $0.id.lowercased() == wanted })
            ?? context.organizations.first(where: { $0.name.lowercased() == wanted })
        else { throw .notAMember(org, yours: context.organizations.map(\.name)) }
        do {
            try store.setMeta(Self.activeOrgMetaPrefix + memberKeyHash(key), Array(chosen.id.utf8))
        } catch {
            throw .store("\(error)")
        }
        context.active = chosen
        emit("context_changed", ["member": .string(context.memberID), "org": .string(chosen.id)])
        return context
    }

    // MARK: - One attempt

    private enum Attempt {
        case done(SyncOutcome, MemberContext?)
        case retry(RegistryError)
    }

    private func attempt(key: MemberKey, number: NationalIDNumber, source: String, idempotencyKey: String,
                         detail base: [String: JSON]) async -> Attempt {
        var detail = base
        let record: MemberRecord?
        do {
            record = try await registry.lookup(memberKey: key)
        } catch {
            if error.isRetryable { return .retry(error) }
            return finishFailed(error, detail: detail)
        }
        guard let record else {
            detail["message"] = .string("no member is linked to this login; nothing synced")
            emit("no_member", detail)
            return .done(.noMember, nil)
        }
        let context = remember(record, for: key)
        detail["member"] = .string(record.memberID)

        switch record.nationalID.matches(number) {
        case .some(true):
            detail["message"] = .string("confirmed, no change")
            emit("confirmed", detail)
            return .done(.confirmed, context)
        case .some(false):
            recordConflict(key: key, number: number, record: record, source: source, detail: &detail)
            return .done(.conflict, context)
        case .none:
            break
        }

        do {
            let result = try await registry.setNationalID(memberKey: key, number: number, source: source,
                                                          idempotencyKey: idempotencyKey)
            switch result {
            case .written:
                detail["message"] = .string("national identity number added to the member record")
                detail["synced_at"] = .double(clock())
                emit("updated", detail)
                return .done(.updated, context)
            case .unchanged:
                detail["message"] = .string("confirmed, no change")
                emit("confirmed", detail)
                return .done(.confirmed, context)
            }
        } catch {
            switch error {
            case .conflict:
                // Someone wrote a different number between lookup and write.
                let refused = MemberRecord(memberID: record.memberID, nationalID: .none, organizations: record.organizations)
                recordConflict(key: key, number: number, record: refused, source: source, detail: &detail)
                return .done(.conflict, context)
            default:
                if error.isRetryable { return .retry(error) }
                return finishFailed(error, detail: detail)
            }
        }
    }

    private func finishFailed(_ error: RegistryError, detail base: [String: JSON]) -> Attempt {
        var detail = base
        detail["reason"] = .string(error.description)
        if error == .memberNotFound {
            detail["message"] = .string("no member is linked to this login; nothing synced")
            emit("no_member", detail)
            return .done(.noMember, nil)
        }
        detail["message"] = .string("the member registry refused the sync")
        emit("failed", detail)
        return .done(.failed(error), nil)
    }

    // MARK: - Audit details

    private func baseDetail(number: NationalIDNumber, provider: String, source: String) -> [String: JSON] {
        var d: [String: JSON] = ["source": .string(source), "provider": .string(provider), "nin": .string(number.masked)]
        if let hash = try? number.keyedHash(key: hashKey) { d["nin_hash"] = .string(hash) }
        return d
    }

    private func emit(_ outcome: String, _ detail: [String: JSON]) {
        audit(SyncAuditEvent(at: clock(), outcome: outcome, detail: detail))
    }

    // MARK: - Conflicts (stored in the meta table)

    private func recordConflict(key: MemberKey, number: NationalIDNumber, record: MemberRecord, source: String,
                                detail: inout [String: JSON]) {
        let now = clock()
        let loginHash = (try? number.keyedHash(key: hashKey)) ?? ""
        var recordMasked: String?
        var recordHash: String?
        if case .number(let stored) = record.nationalID {
            recordMasked = Self.mask(stored)
            recordHash = try? Digest.hex(KeyDerivation.derive(
                key: hashKey, parts: [.label("sessionvault/national-id/v1"), .secret(stored)]).unsafeCopyToArray())
        }
        let keyHash = memberKeyHash(key)
        var conflictID = ""
        do {
            var list = try conflicts()
            if let i = list.firstIndex(where: { $0.memberKeyHash == keyHash && $0.loginHash == loginHash
                && $0.recordHash == recordHash })
            {
                list[i].lastSeen = now
                list[i].count += 1
                list[i].source = source
                conflictID = list[i].id
            } else {
                conflictID = "c-" + Digest.hex(Random.bytes(4))
                list.append(SyncConflict(
                    id: conflictID, firstSeen: now, lastSeen: now, count: 1, provider: key.provider, source: source,
                    memberID: record.memberID, loginNumber: number.masked, loginHash: loginHash,
                    recordNumber: recordMasked, recordHash: recordHash, memberKeyHash: keyHash))
            }
            try saveConflicts(list)
        } catch {
            detail["store_error"] = .string("\(error)")
        }
        detail["conflict"] = .string(conflictID)
        if let recordMasked { detail["record_nin"] = .string(recordMasked) }
        if let recordHash { detail["record_nin_hash"] = .string(recordHash) }
        detail["message"] = .string("a different national identity number is on record; not overwritten — a person must resolve it")
        emit("conflict", detail)
    }

    private func saveConflicts(_ list: [SyncConflict]) throws(StoreError) {
        try store.setMeta(Self.conflictsMetaKey, JSON.array(list.map(\.json)).serialized())
    }

    /// `DDMMYY*****` for a stored value that is 11 ASCII digits; a neutral
    /// placeholder for anything else (never any of its characters).
    static func mask(_ raw: SecureBytes) -> String {
        raw.withUnsafeBytes { p -> String in
            guard p.count == 11, p.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return "(not 11 digits)" }
            return String(decoding: p.prefix(6), as: UTF8.self) + "*****"
        }
    }

    // MARK: - Organization context (stored in the meta table)

    private func memberKeyHash(_ key: MemberKey) -> String {
        let hash = try? KeyDerivation.derive(
            key: hashKey, parts: [.label("sessionvault/member-key/v1"), .label(key.provider), .label(key.subject)])
        return hash.map { Digest.hex(Array($0.unsafeCopyToArray().prefix(16))) } ?? "unknown"
    }

    @discardableResult
    private func remember(_ record: MemberRecord, for key: MemberKey) -> MemberContext {
        let orgs: JSON = [
            "member": .string(record.memberID),
            "orgs": .array(record.organizations.map {
                ["id": .string($0.id), "name": .string($0.name), "roles": .array($0.roles.map { .string($0) })]
            }),
        ]
        try? store.setMeta(Self.orgsMetaPrefix + memberKeyHash(key), orgs.serialized())
        return resolve(memberID: record.memberID, organizations: record.organizations, key: key)
    }

    private func cachedContext(_ key: MemberKey) -> MemberContext? {
        guard let bytes = try? store.meta(Self.orgsMetaPrefix + memberKeyHash(key)), !bytes.isEmpty,
              let json = try? JSON.parse(bytes), let memberID = json["member"]?.stringValue
        else { return nil }
        let orgs = (json["orgs"]?.arrayValue ?? []).compactMap { o -> Organization? in
            guard let id = o["id"]?.stringValue else { return nil }
            return Organization(id: id, name: o["name"]?.stringValue ?? id,
                                roles: (o["roles"]?.arrayValue ?? []).compactMap(\.stringValue))
        }
        return resolve(memberID: memberID, organizations: orgs, key: key)
    }

    private func resolve(memberID: String, organizations: [Organization], key: MemberKey) -> MemberContext {
        var active: Organization?
        if let stored = try? store.meta(Self.activeOrgMetaPrefix + memberKeyHash(key)), !stored.isEmpty {
            let id = String(decoding: stored, as: UTF8.self)
            active = organizations.first { $0.id == id }
        }
        if active == nil, organizations.count == 1 { active = organizations[0] }
        return MemberContext(memberID: memberID, organizations: organizations, active: active)
    }

    // MARK: - The queue

    struct QueuedSync {
        var key: MemberKey
        var number: NationalIDNumber
        var source: String
        var idempotencyKey: String
    }

    /// Seconds to wait after `attempts` failed attempts.
    func delay(afterAttempts attempts: Int) -> Double {
        let exponent = Double(min(max(attempts, 0), 30))
        let d = min(configuration.backoffCap, configuration.backoffBase * exp2(exponent))
        let jitter = configuration.backoffJitter > 0 ? Double.random(in: 0..<configuration.backoffJitter) : 0
        return d * (1 + jitter)
    }

    private func allJobs() throws(StoreError) -> [JobRow] {
        try store.dueJobs(now: Int64.max, limit: 100_000).filter { $0.kind == Self.jobKind }
    }

    /// Queues a sync unless the same one (same login, same number) is queued
    /// already. Returns the job id, when it is due, and whether it existed.
    private func enqueue(key: MemberKey, number: NationalIDNumber, source: String, idempotencyKey: String)
        throws(StoreError) -> (Int64, Int64, Bool)
    {
        let tag = jobTag(key: key, number: number)
        for job in try allJobs() where job.payload.count > 33 && Array(job.payload[1..<33]) == tag {
            return (job.id, job.notBefore, true)
        }
        let now = clock()
        let notBefore = Int64(now + delay(afterAttempts: 0))
        let payload: [UInt8]
        do {
            payload = try sealJob(QueuedSync(key: key, number: number, source: source, idempotencyKey: idempotencyKey),
                                  tag: tag)
        } catch {
            throw .io("sealing the queued sync failed: \(error)")
        }
        let row = try store.enqueueJob(JobRow(kind: Self.jobKind, payload: payload, notBefore: notBefore,
                                              createdAt: Int64(now)))
        return (row.id, notBefore, false)
    }

    /// 32 bytes naming (login, number) without revealing either.
    private func jobTag(key: MemberKey, number: NationalIDNumber) -> [UInt8] {
        let hash = try? KeyDerivation.derive(
            key: hashKey, parts: [.label("sessionvault/member-sync/job-tag/v1"), .label(key.provider),
                                  .label(key.subject), .secret(number.secureDigits)])
        return hash?.unsafeCopyToArray() ?? Random.bytes(32)
    }

    /// Payload: version (1) ‖ tag (32) ‖ SecretBox(provider, subject, source,
    /// idempotency key, digits — each u16-length-prefixed), with the tag in
    /// the associated data.
    private func sealJob(_ job: QueuedSync, tag: [UInt8]) throws(SodiumError) -> [UInt8] {
        let fields: [[UInt8]] = [Array(job.key.provider.utf8), Array(job.key.subject.utf8), Array(job.source.utf8),
                                 Array(job.idempotencyKey.utf8)]
        let digitCount = job.number.secureDigits.count
        let total = fields.reduce(0) { $0 + 2 + $1.count } + 2 + digitCount
        let plaintext: SecureBytes
        do {
            plaintext = try SecureBytes(count: total) { out in
                var offset = 0
                func put(_ bytes: UnsafeRawBufferPointer) {
                    out[offset] = UInt8(bytes.count >> 8)
                    out[offset + 1] = UInt8(bytes.count & 0xff)
                    offset += 2
                    if bytes.count > 0 {
                        UnsafeMutableRawBufferPointer(rebasing: out[offset..<offset + bytes.count]).copyMemory(from: bytes)
                    }
                    offset += bytes.count
                }
                for field in fields { field.withUnsafeBytes(put) }
                job.number.withUnsafeDigits(put)
            }
        } catch {
            throw .outOfSecureMemory
        }
        let box = try SecretBox.seal(plaintext, key: sealKey, associatedData: Self.jobAD + tag)
        return [Self.jobPayloadVersion] + tag + box.bytes
    }

    /// Opens a queued job; drops (and audits) one that cannot be read.
    private func openJob(_ job: JobRow) -> QueuedSync? {
        func drop(_ why: String) -> QueuedSync? {
            _ = try? store.deleteJob(id: job.id)
            emit("dropped", ["job": .int(job.id), "reason": .string(why),
                             "message": .string("a queued sync could not be read and was removed")])
            return nil
        }
        let payload = job.payload
        guard payload.count > 33, payload[0] == Self.jobPayloadVersion else { return drop("unknown payload format") }
        let tag = Array(payload[1..<33])
        let opened: SecureBytes
        do {
            opened = try SecretBox.open(SealedBox(bytes: Array(payload[33...])), key: sealKey,
                                        associatedData: Self.jobAD + tag)
        } catch {
            return drop("payload does not open (another device key?)")
        }
        var strings: [String] = []
        var digits: SecureBytes?
        let ok = opened.withUnsafeBytes { p -> Bool in
            var offset = 0
            for index in 0..<5 {
                guard offset + 2 <= p.count else { return false }
                let length = Int(p[offset]) << 8 | Int(p[offset + 1])
                offset += 2
                guard offset + length <= p.count else { return false }
                let field = UnsafeRawBufferPointer(rebasing: p[offset..<offset + length])
                if index < 4 {
                    strings.append(String(decoding: field, as: UTF8.self))
                } else {
                    digits = try? SecureBytes(count: length) { $0.copyMemory(from: field) }
                }
                offset += length
            }
            return offset == p.count
        }
        guard ok, strings.count == 4, let digits else { return drop("payload malformed") }
        let number: NationalIDNumber
        do {
            number = try NationalIDNumber(secure: digits, options: configuration.parseOptions)
        } catch {
            return drop("queued number no longer valid (\(error.code))")
        }
        return QueuedSync(key: MemberKey(provider: strings[0], subject: strings[1]), number: number, source: strings[2],
                          idempotencyKey: strings[3])
    }
}

import Locking
import VaultProtocol

/// Entries a client can cause at will: refusals (an app asking again and
/// again for a login it may not use, or for an op only the person may call)
/// and releases from a new process each time (one a minute per process and
/// account gets this far, `ReleaseAuditLimiter`). Each audit
/// entry is a durable write (an fsync, and the head saved to the keyring), so
/// without a bound a looping app could keep the store's writer busy, stall
/// the broker and fill the disk (measured before this: 1,800 entries a second,
/// 1.3 MB a second of log, release p99 2.8× beside it).
///
/// So a refusal is written the first time; the same refusal (event, factor,
/// outcome and detail) for the same process within `window` is only counted,
/// and at most `maxPerWindow` such entries are written a window in all — past that
/// they are counted per kind, across processes. When a count's window is over
/// its total is written as one entry with `"repeated": N` (and
/// `"several_processes": true` for the per-kind count), so the log still says
/// how many there were. Person-driven outcomes differ in their detail (a wrong
/// PIN carries its failure count) or come from separate processes, so they
/// are written one by one as before.
struct AuditRepeats {
    static let window: Double = 60
    static let maxPerWindow = 60

    struct Key: Hashable {
        var event: String
        var factor: String?
        var outcome: String
        var detail: String
        /// 0 for the count of refusals over `maxPerWindow`, whichever process.
        var pid: Int32
    }

    /// A written refusal and the repeats counted since.
    struct Count {
        var since: Double
        var repeated: Int
        var detail: [String: JSON]
        var requester: Requester?
    }

    /// What `admit` decided.
    enum Decision: Equatable {
        /// Write it now.
        case write
        /// Counted; `first` when it is the first repeat in its window (the
        /// caller arranges for the count to be written when the window ends).
        case counted(first: Bool)
    }

    private(set) var counts: [Key: Count] = [:]
    /// When each refusal written in the last window was written (at most `maxPerWindow`).
    private var writtenAt: [Double] = []

    mutating func admit(_ key: Key, detail: [String: JSON], requester: Requester, now: Double) -> Decision {
        if let c = counts[key], now - c.since < Self.window {
            counts[key]?.repeated += 1
            return .counted(first: c.repeated == 0)
        }
        writtenAt.removeAll { now - $0 >= Self.window }
        guard writtenAt.count < Self.maxPerWindow else {
            var kind = key
            kind.pid = 0
            kind.detail = ""
            var c = counts[kind] ?? Count(since: now, repeated: 0, detail: ["several_processes": true], requester: nil)
            c.repeated += 1
            counts[kind] = c
            return .counted(first: c.repeated == 1)
        }
        writtenAt.append(now)
        // The executable is read now, while the process is surely there: a
        // count written a minute later names it too.
        counts[key] = Count(since: now, repeated: 0, detail: detail, requester: requester.withExecutableRead)
        return .write
    }

    /// The counts whose window is over (every count when `all`), removed;
    /// only those with repeats, to be written.
    mutating func due(now: Double, all: Bool = false) -> [(key: Key, count: Count)] {
        let over = counts.filter { all || now - $0.value.since >= Self.window }
        for key in over.keys { counts[key] = nil }
        return over.filter { $0.value.repeated > 0 }
            .map { (key: $0.key, count: $0.value) }
            .sorted { $0.count.since < $1.count.since }
    }
}

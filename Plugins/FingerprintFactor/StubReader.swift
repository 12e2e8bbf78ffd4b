import FoundationEssentials
import VaultFactor
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A simulated fingerprint sensor whose whole state lives in one JSON file, so
/// that vaultd (scanning) and `vault-fpstub` (plugging, enrolling, scripting
/// scans) can share it across processes.
///
/// The file says whether the reader is plugged in, which fingers are enrolled
/// (name → template id; every enrollment draws a new random template id, so
/// removing and re-adding the same finger *is* a change), and a queue of scripted
/// scan outcomes. No file means no reader.
///
/// Any program running as the user can write that file and so make the reader
/// report a match: it is a simulation for demos and tests, never a production
/// reader (vaultd runs it only with `--demo` or `allow_stub_reader = true`).
///
/// Every change takes an exclusive `flock` on `<path>.lock`, reads the file,
/// and writes a complete new file beside it that is then renamed over the old
/// one; readers therefore never see half a file and need no lock.
public struct StubReader: FingerprintReader {
    /// The state file.
    public let path: String
    /// How often a waiting scan looks at the file.
    public let pollInterval: Duration

    /// `path`: the state file; vaultd and vault-fpstub find the same one with
    /// `Paths.stubReaderState` (DaemonConfig).
    public init(path: String, pollInterval: Duration = .milliseconds(20)) {
        self.path = path
        self.pollInterval = pollInterval
    }

    /// The lock file that serializes changes.
    public var lockPath: String { path + ".lock" }

    // MARK: - FingerprintReader

    public func presence() async -> ReaderPresence {
        do {
            guard let state = try load() else { return .absent }
            return state.present ? .present : .absent
        } catch {
            // A file that can't be read is a broken reader, not a missing one:
            // `enrolledFingers` then fails and the factor says so.
            return .present
        }
    }

    /// No hardware name: status lines stay plain "Fingerprint enabled".
    public func deviceName() async -> String? { nil }

    public func enrolledFingers() async throws(ReaderError) -> [EnrolledFinger] {
        let state: StubState?
        do {
            state = try load()
        } catch {
            throw .failed(error.description)
        }
        guard let state, state.present else { throw .absent }
        return state.enrolledFingers
    }

    /// Takes the head of the scripted queue. With an empty queue, looks again
    /// every `pollInterval` until an outcome is queued (→ it), the reader is
    /// unplugged or its state removed (→ `.disconnected`), `timeout` passes
    /// (→ `.timeout`) or the task is cancelled (→ `.cancelled`).
    public func scan(timeout: Duration) async -> ScanOutcome {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            if Task.isCancelled { return .cancelled }
            let peek: StubState?
            do {
                peek = try load()
            } catch {
                return .hardwareError
            }
            guard let peek, peek.present else { return .disconnected }
            if !peek.queue.isEmpty {
                do {
                    if let outcome = try popScan() { return outcome }
                } catch {
                    return .hardwareError
                }
                // Someone else took it (or unplugged) between the peek and the lock: look again.
                continue
            }
            let left = clock.now.duration(to: deadline)
            if left <= .zero { return .timeout }
            do {
                try await Task.sleep(for: min(pollInterval, left))
            } catch {
                return .cancelled
            }
        }
    }

    /// Under the lock: pops the head of the queue and turns it into an outcome.
    /// nil when there was nothing to pop after all.
    private func popScan() throws(StubError) -> ScanOutcome? {
        try mutate { (state: inout StubState?) throws(StubError) -> ScanOutcome? in
            guard var s = state else { return .disconnected }
            guard s.present else { return .disconnected }
            guard !s.queue.isEmpty else { return nil }
            let scripted = s.queue.removeFirst()
            state = s
            return scripted.outcome(enrolled: s.fingers)
        }
    }

    // MARK: - Control (vault-fpstub and tests)

    /// The current state, or nil when there is no reader (no state file).
    public func load() throws(StubError) -> StubState? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .io("could not read \(path): \(errnoText())")
        }
        do {
            return try JSONDecoder().decode(StubState.self, from: data)
        } catch {
            throw .corrupt(path: path)
        }
    }

    /// Plugs the reader in, creating an empty state (no fingers, no queue) if there is none.
    @discardableResult
    public func plug() throws(StubError) -> StubState {
        try mutate { (state: inout StubState?) throws(StubError) -> StubState in
            var s = state ?? StubState()
            s.present = true
            state = s
            return s
        }
    }

    /// Unplugs the reader; its fingers and queue stay. Without a state: nothing to do.
    public func unplug() throws(StubError) {
        try mutate { (state: inout StubState?) throws(StubError) in
            state?.present = false
        }
    }

    /// Enrolls `name` with a new random template id (a finger already enrolled
    /// is enrolled again and so gets a new one). Needs a state (`plug` first).
    @discardableResult
    public func enrollFinger(_ name: String) throws(StubError) -> EnrolledFinger {
        try StubReader.validate(fingerName: name)
        return try mutate { (state: inout StubState?) throws(StubError) -> EnrolledFinger in
            guard var s = state else { throw .noReader(path: path) }
            let finger = EnrolledFinger(name: name, templateID: StubReader.newTemplateID())
            s.fingers[name] = finger.templateID
            state = s
            return finger
        }
    }

    /// Removes an enrolled finger.
    public func removeFinger(_ name: String) throws(StubError) {
        try mutate { (state: inout StubState?) throws(StubError) in
            guard var s = state else { throw .noReader(path: path) }
            guard s.fingers.removeValue(forKey: name) != nil else {
                throw .unknownFinger(name, enrolled: s.fingers.keys.sorted())
            }
            state = s
        }
    }

    /// Appends a scripted outcome to the scan queue.
    public func enqueue(_ scan: ScriptedScan) throws(StubError) {
        if let finger = scan.finger { try StubReader.validate(fingerName: finger) }
        try mutate { (state: inout StubState?) throws(StubError) in
            guard var s = state else { throw .noReader(path: path) }
            s.queue.append(scan)
            state = s
        }
    }

    /// Empties the scan queue.
    public func clearQueue() throws(StubError) {
        try mutate { (state: inout StubState?) throws(StubError) in
            state?.queue = []
        }
    }

    /// Removes the state, even an unreadable one: no reader any more. (The lock
    /// file stays: removing it while another process waits on it would break
    /// the mutual exclusion.)
    public func reset() throws(StubError) {
        try withLock { () throws(StubError) in
            if unlink(path) != 0 && errno != ENOENT { throw .io("could not remove \(path): \(errnoText())") }
        }
    }

    /// Finger names: 1–64 characters from A–Z, a–z, 0–9, "-", "_" and ".".
    public static func validate(fingerName name: String) throws(StubError) {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
        guard !name.isEmpty, name.count <= 64, name.allSatisfy({ allowed.contains($0) }) else {
            throw .badFingerName(name)
        }
    }

    static func newTemplateID() -> String {
        var rng = SystemRandomNumberGenerator()
        let words = [rng.next(), rng.next()] as [UInt64]
        return words.map { w in
            let hex = String(w, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }

    // MARK: - Locked, atomic read-modify-write

    /// Runs `body` on the state under the lock and writes back what it leaves:
    /// a state is written atomically (temp file + rename), nil removes the file.
    /// Nothing is written when the state is unchanged or `body` throws.
    func mutate<T>(_ body: (inout StubState?) throws(StubError) -> T) throws(StubError) -> T {
        try withLock { () throws(StubError) -> T in
            let before = try load()
            var state = before
            let result = try body(&state)
            if state != before {
                if let state {
                    try write(state)
                } else if unlink(path) != 0 && errno != ENOENT {
                    throw .io("could not remove \(path): \(errnoText())")
                }
            }
            return result
        }
    }

    /// Runs `body` holding the exclusive lock on `lockPath`.
    private func withLock<T>(_ body: () throws(StubError) -> T) throws(StubError) -> T {
        try ensureDirectory()
        let lockFD = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lockFD >= 0 else { throw .io("could not open \(lockPath): \(errnoText())") }
        defer { close(lockFD) }
        while flock(lockFD, LOCK_EX) != 0 {
            guard errno == EINTR else { throw .io("could not lock \(lockPath): \(errnoText())") }
        }
        defer { _ = flock(lockFD, LOCK_UN) }
        return try body()
    }

    private func write(_ state: StubState) throws(StubError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let bytes: [UInt8]
        do {
            bytes = Array(try encoder.encode(state)) + [0x0A]
        } catch {
            throw .io("could not encode the state: \(error)")
        }
        let temp = "\(path).tmp.\(getpid()).\(StubReader.newTemplateID().prefix(8))"
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .io("could not create \(temp): \(errnoText())") }
        var ok = true
        bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            var offset = 0
            while offset < raw.count {
                let n = systemWrite(fd, base + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    ok = false
                    return
                }
                offset += n
            }
        }
        if ok && fsync(fd) != 0 { ok = false }
        let detail = errnoText()
        close(fd)
        guard ok, rename(temp, path) == 0 else {
            let why = ok ? errnoText() : detail
            unlink(temp)
            throw .io("could not write \(path): \(why)")
        }
    }

    private func ensureDirectory() throws(StubError) {
        let dir = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        guard !dir.isEmpty, !FileManager.default.fileExists(atPath: dir) else { return }
        do {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            // errno still holds the failed mkdir's reason: FileManager makes no call after it.
            throw .io("could not create \(dir): \(errnoText())")
        }
    }

    private func errnoText() -> String { String(cString: strerror(errno)) }
}

/// write(2), out of the way of `StubReader.write(_:)`.
private func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
    return Glibc.write(fd, buffer, count)
    #else
    return Darwin.write(fd, buffer, count)
    #endif
}

/// What the state file holds.
public struct StubState: Codable, Sendable, Equatable {
    public var present: Bool
    /// Finger name → template id.
    public var fingers: [String: String]
    /// Scripted scan outcomes, head first.
    public var queue: [ScriptedScan]

    public init(present: Bool = true, fingers: [String: String] = [:], queue: [ScriptedScan] = []) {
        self.present = present
        self.fingers = fingers
        self.queue = queue
    }

    /// The enrolled fingers, sorted by name.
    public var enrolledFingers: [EnrolledFinger] {
        fingers.sorted { $0.key < $1.key }.map { EnrolledFinger(name: $0.key, templateID: $0.value) }
    }
}

/// One scripted scan outcome, as queued by `vault-fpstub next OUTCOME [FINGER]`.
public struct ScriptedScan: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        case match
        case noMatch = "no-match"
        case retry
        case error
        case disconnect
        case timeout
        case cancel
    }

    public var outcome: Kind
    /// For `match`: the finger that touches the sensor (nil: the first enrolled finger).
    public var finger: String?

    public init(_ outcome: Kind, finger: String? = nil) {
        self.outcome = outcome
        self.finger = outcome == .match ? finger : nil
    }

    /// What the sensor reports for this scripted scan, given the fingers enrolled
    /// when it is taken. As on a real sensor, a finger that is not enrolled (or
    /// any finger when none is) does not match.
    public func outcome(enrolled fingers: [String: String]) -> ScanOutcome {
        switch outcome {
        case .match:
            if let finger {
                return fingers[finger] != nil ? .match(finger: finger) : .noMatch
            }
            return fingers.keys.min().map { .match(finger: $0) } ?? .noMatch
        case .noMatch: return .noMatch
        case .retry: return .retry
        case .error: return .hardwareError
        case .disconnect: return .disconnected
        case .timeout: return .timeout
        case .cancel: return .cancelled
        }
    }

    /// "match right-index", "no-match", …
    public var label: String { finger.map { "\(outcome.rawValue) \($0)" } ?? outcome.rawValue }
}

public enum StubError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No state file: the reader was never plugged in (or was reset).
    case noReader(path: String)
    case unknownFinger(String, enrolled: [String])
    case badFingerName(String)
    case corrupt(path: String)
    case io(String)

    public var description: String {
        switch self {
        case .noReader(let path):
            return "There is no stub reader at \(path). Run “vault-fpstub plug” first."
        case .unknownFinger(let name, let enrolled):
            let known = enrolled.isEmpty ? "No fingers are enrolled." : "Enrolled: \(enrolled.joined(separator: ", "))."
            return "The finger “\(name)” is not enrolled. \(known)"
        case .badFingerName(let name):
            return "“\(name)” is not a usable finger name. Use 1–64 letters, digits, “-”, “_” or “.”, e.g. right-index-finger."
        case .corrupt(let path):
            return "The stub reader's state file \(path) could not be understood. Run “vault-fpstub reset”, then “vault-fpstub plug”."
        case .io(let detail):
            return detail
        }
    }
}

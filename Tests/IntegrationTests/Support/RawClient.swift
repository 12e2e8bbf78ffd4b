import Foundation
import VaultClient
import VaultProtocol
#if canImport(Glibc)
import Glibc
#endif

/// A test failure outside an assertion (a timeout, a dead daemon).
struct IntegrationError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Seconds since the epoch, as a Double, for deadlines.
func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Polls `condition` every `interval` until it holds or `timeout` passes.
@discardableResult
func waitUntil(timeout: Double, interval: Double = 0.1, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = monotonicNow() + timeout
    while true {
        if try condition() { return true }
        if monotonicNow() >= deadline { return false }
        usleep(UInt32(interval * 1_000_000))
    }
}

/// What one bounded read from the socket produced.
enum ReadOutcome: Equatable {
    case line([UInt8])
    case eof
    case timeout
}

/// A raw NDJSON client over the Unix socket with bounded reads, for what the
/// blocking `VaultConnection` cannot express: malformed frames, half lines,
/// pipelining, timeouts, and watching for the server closing the connection.
final class RawClient {
    let path: String
    private(set) var fd: Int32
    private var buffer: [UInt8] = []
    private var nextID: Int64 = 1
    private(set) var sawEOF = false
    /// Every frame read that was not the answer a `call` waited for (acks, prompts).
    private(set) var sideFrames: [JSON] = []
    /// Every byte the server sent on this connection, to check what never passed it.
    private(set) var received: [UInt8] = []

    init(path: String) throws {
        self.path = path
        guard let fd = connectUnixSocket(path) else { throw IntegrationError("connect(\(path)) failed: errno \(errno)") }
        self.fd = fd
    }

    deinit { close() }

    func close() {
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }

    /// Writes all bytes; false when the peer is gone.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool { writeAll(fd, bytes) }

    @discardableResult
    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    @discardableResult
    func send(_ request: Request) -> Bool { send(request.encoded()) }

    /// Reads one line (without the newline), waiting at most `timeout` seconds.
    func readLine(timeout: Double) -> ReadOutcome {
        let deadline = monotonicNow() + timeout
        while true {
            if let nl = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[..<nl])
                buffer.removeSubrange(...nl)
                return .line(line)
            }
            if sawEOF { return .eof }
            let remaining = deadline - monotonicNow()
            if remaining <= 0 { return .timeout }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let rc = poll(&pfd, 1, Int32(remaining * 1000) + 1)
            if rc < 0 {
                if errno == EINTR { continue }
                sawEOF = true
                continue
            }
            if rc == 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                // ECONNRESET and friends: the server closed on us.
                sawEOF = true
                continue
            }
            if n == 0 {
                sawEOF = true
                continue
            }
            buffer.append(contentsOf: chunk[0..<n])
            received.append(contentsOf: chunk[0..<n])
        }
    }

    /// Reads one JSON frame; throws on timeout, end of stream or bad JSON.
    func readJSON(timeout: Double = 15) throws -> JSON {
        switch readLine(timeout: timeout) {
        case .line(let bytes):
            do {
                return try JSON.parse(bytes)
            } catch {
                throw IntegrationError("server sent a line that is not JSON: \(String(decoding: bytes, as: UTF8.self))")
            }
        case .eof: throw IntegrationError("the server closed the connection")
        case .timeout: throw IntegrationError("no answer within \(timeout) s")
        }
    }

    /// True when the server closes the connection within `timeout` (any lines
    /// still arriving before the close are returned through `extra`).
    func waitForClose(timeout: Double, extra: inout [[UInt8]]) -> Bool {
        let deadline = monotonicNow() + timeout
        while true {
            let remaining = deadline - monotonicNow()
            if remaining <= 0 { return false }
            switch readLine(timeout: remaining) {
            case .line(let l): extra.append(l)
            case .eof: return true
            case .timeout: return false
            }
        }
    }

    func freshID() -> Int64 {
        defer { nextID += 1 }
        return nextID
    }

    /// Says hello; returns the whole response envelope.
    @discardableResult
    func hello(interactive: Bool = false, lang: String = "en", timeout: Double = 15) throws -> JSON {
        try call("hello", ["version": 1, "client": "integration-tests", "lang": .string(lang), "interactive": .bool(interactive)],
                 timeout: timeout)
    }

    /// Sends one request and returns its final envelope (`ok`, `result` / `error`).
    /// Prompts for this request are answered through `onPrompt` with an `answer`
    /// op; the acknowledgements of those answers are kept in `sideFrames`.
    func call(_ op: String, _ fields: [String: JSON] = [:], id: JSON? = nil, timeout: Double = 30,
              onPrompt: ((Prompt) -> PromptReply)? = nil) throws -> JSON {
        let rid = id ?? .int(freshID())
        if op == "import" {
            for key in ["access_token", "refresh_token"] { if let t = fields[key]?.stringValue { SecretLedger.record("token", t) } }
        }
        guard send(Request(id: rid, op: op, fields: fields)) else { throw IntegrationError("send failed (\(op))") }
        let deadline = monotonicNow() + timeout
        while true {
            let remaining = deadline - monotonicNow()
            if remaining <= 0 { throw IntegrationError("no final answer to \(op) within \(timeout) s") }
            let frame = try readJSON(timeout: remaining)
            if frame["event"]?.stringValue == "prompt", frame["id"] == rid {
                guard let pj = frame["prompt"], let prompt = Prompt(json: pj) else {
                    throw IntegrationError("malformed prompt: \(frame.text)")
                }
                sideFrames.append(frame)
                let reply = onPrompt?(prompt) ?? (prompt.kind == .message ? .none : .cancel)
                switch reply {
                case .none: break
                case .cancel:
                    send(Request(id: .int(freshID()), op: "answer", fields: ["pid": .string(prompt.pid), "cancel": true]))
                case .value(let v):
                    if prompt.kind == .secret, let typed = v.stringValue { SecretLedger.record("pin", typed) }
                    send(Request(id: .int(freshID()), op: "answer", fields: ["pid": .string(prompt.pid), "value": v]))
                }
                continue
            }
            if frame["id"] == rid { return frame }
            sideFrames.append(frame)
        }
    }

    /// The answer to request `id`, sent earlier (many may be in flight on one
    /// connection); frames for others are kept in `sideFrames`.
    func answer(to id: JSON, timeout: Double = 30) throws -> JSON {
        let deadline = monotonicNow() + timeout
        while true {
            let remaining = deadline - monotonicNow()
            if remaining <= 0 { throw IntegrationError("no answer to request \(id.text) within \(timeout) s") }
            let frame = try readJSON(timeout: remaining)
            if frame["id"] == id { return frame }
            sideFrames.append(frame)
        }
    }
}

/// Answers prompts from a script: secret prompts get the next secret (then
/// cancel), confirm prompts get `confirm`; everything is recorded.
final class PromptScript {
    var secrets: [String]
    var confirm: Bool
    /// Values for `choice` prompts, in turn; none left → cancel.
    var choices: [String]
    /// Called with every prompt before it is answered (e.g. to unplug a reader mid-scan).
    var onPrompt: ((Prompt) -> Void)?
    private(set) var prompts: [Prompt] = []
    var messages: [String] { prompts.filter { $0.kind == .message }.map(\.text) }
    var secretPrompts: Int { prompts.filter { $0.kind == .secret }.count }
    var confirmPrompts: [String] { prompts.filter { $0.kind == .confirm }.map(\.text) }

    init(secrets: [String] = [], confirm: Bool = true, choices: [String] = [], onPrompt: ((Prompt) -> Void)? = nil) {
        self.secrets = secrets
        self.confirm = confirm
        self.choices = choices
        self.onPrompt = onPrompt
    }

    func answer(_ prompt: Prompt) -> PromptReply {
        prompts.append(prompt)
        onPrompt?(prompt)
        if prompt.kind == .choice, !choices.isEmpty { return .value(.string(choices.removeFirst())) }
        switch prompt.kind {
        case .secret:
            guard !secrets.isEmpty else { return .cancel }
            return .value(.string(secrets.removeFirst()))
        case .confirm:
            return .value(.bool(confirm))
        case .message, .openURL:
            return .none
        case .choice:
            return .cancel
        }
    }

    var handler: (Prompt) -> PromptReply { { [self] p in self.answer(p) } }
}

extension JSON {
    var isOK: Bool { self["ok"]?.boolValue == true }
    var result: JSON? { self["result"] }
    var errorCode: String? { self["error"]?["code"]?.stringValue }
    var errorMessage: String? { self["error"]?["message"]?.stringValue }
}

/// A Unix socket of `kind` (SOCK_STREAM, SOCK_DGRAM; flags may be or-ed in)
/// bound at `path`: a test's own server, impostor or notify socket.
func boundUnixSocket(at path: String, kind: Int32) throws -> Int32 {
    let fd = socket(AF_UNIX, kind | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw IntegrationError("socket: errno \(errno)") }
    var addr = sockaddr_un()
    addr.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    let bound = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard bound == 0 else {
        let code = errno
        close(fd)
        throw IntegrationError("bind at \(path): errno \(code)")
    }
    return fd
}

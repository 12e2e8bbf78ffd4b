import CVaultShims
import Locking
// App authors depend on the VaultClient product alone; the wire types in its
// API (JSON, Language, Prompt) come with it.
@_exported import VaultProtocol
@_exported import VaultWire
#if canImport(Glibc)
import Glibc
#endif

/// What can go wrong talking to vaultd, each with a sentence for a person.
public enum ClientError: Error, Sendable {
    /// No vaultd answers at the socket path.
    case notRunning(String)
    /// Whatever answers at the socket path runs as another user (or its
    /// uid could not be read): nothing was sent to it.
    case foreignServer(String)
    /// Whatever answers at the socket path runs as us but inside a sandbox
    /// (its root directory is not ours): an app's impostor, not vaultd.
    /// Nothing was sent to it. Its `code` is `foreign_server` too.
    case sandboxedServer(String)
    /// vaultd closed the connection before answering.
    case closed
    /// A reply we could not understand (a bug on one side).
    case malformed(String)
    /// vaultd answered with an error.
    case vault(code: String, message: String, extra: [String: JSON])

    public var code: String {
        switch self {
        case .notRunning: return "not_running"
        case .foreignServer, .sandboxedServer: return "foreign_server"
        case .closed: return "closed"
        case .malformed: return "malformed"
        case .vault(let code, _, _): return code
        }
    }

    public func message(_ language: Language) -> String {
        switch self {
        case .notRunning: return Messages.daemonNotRunning.text(language)
        case .foreignServer(let path): return Messages.foreignServer(path).text(language)
        case .sandboxedServer(let path): return Messages.sandboxedServer(path).text(language)
        case .closed: return Messages.daemonClosed.text(language)
        case .malformed: return Messages.standard(.internal).text(language)
        case .vault(_, let message, _): return message
        }
    }
}

/// How a client answers a prompt event.
public enum PromptReply: Sendable {
    case value(JSON)
    case cancel
    /// For `message` prompts: nothing to answer.
    case none
}

/// A blocking connection to vaultd, for command-line tools and benchmarks.
/// One request at a time; prompts arriving before the answer are handed to
/// the caller's prompt handler and answered on the same connection.
public final class VaultConnection {
    public let socketPath: String
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var chunk = [UInt8](repeating: 0, count: 65_536)
    private var nextID: Int64 = 1
    /// Vault events (after `watch`) that arrived while an answer was awaited.
    private var pendingEvents: [WatchEvent] = []
    /// A `hello` queued by `greet`: its id and line, written with the next
    /// request's line.
    private var queuedHello: (id: Int64, line: [UInt8])?

    /// `$SESSIONVAULT_SOCKET`, else `$XDG_RUNTIME_DIR/sessionvault/vault.sock`,
    /// else `/tmp/sessionvault-UID/vault.sock` (what vaultd uses by default).
    public static func defaultSocketPath() -> String {
        if let s = getenv("SESSIONVAULT_SOCKET").map({ String(cString: $0) }), !s.isEmpty { return s }
        if let r = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !r.isEmpty { return r + "/sessionvault/vault.sock" }
        return "/tmp/sessionvault-\(getuid())/vault.sock"
    }

    public init(socketPath: String? = nil) throws(ClientError) {
        let path = socketPath ?? VaultConnection.defaultSocketPath()
        self.socketPath = path
        guard let fd = connectUnixSocket(path) else { throw .notRunning(path) }
        // Anyone who can create the socket path first (another user, when the
        // directory is /tmp/sessionvault-UID) could pose as vaultd and collect
        // PINs and imported tokens: only a server running as us is spoken to.
        guard let server = serverCredentials(fd), server.uid == getuid() else {
            close(fd)
            throw .foreignServer(path)
        }
        // Our own uid is not enough: an app in a sandbox runs as us, and one
        // allowed to write the socket's directory can put its own socket at
        // the path and relay to vaultd (which takes the path back within a
        // second, but a client may connect in between). vaultd never runs in
        // a sandbox, so a server whose root directory is not ours is refused.
        guard !runsUnderAnotherRoot(pid: server.pid) else {
            close(fd)
            throw .sandboxedServer(path)
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Says hello; returns the server's result (`version`, `server`, `locked`,
    /// and `prompter` when vaultd will show this client's prompts itself).
    /// `vaultPrompts`: vaultd asks the person itself (its own pinentry dialog,
    /// on this process's display) and this client never sees a prompt or a PIN.
    @discardableResult
    public func hello(client: String, language: Language, interactive: Bool, vaultPrompts: Bool = false) throws(ClientError) -> JSON {
        try call("hello", helloFields(client: client, language: language, interactive: interactive, vaultPrompts: vaultPrompts))
    }

    /// Says hello with the next request instead of before it: both lines go
    /// out in one write and both answers come back together, so a client
    /// that connects for one request waits one round trip, not two (several
    /// requests may be in flight on a connection, and vaultd takes a
    /// connection's lines in order, so the request is served in the
    /// language and mode this hello names). For a client that does not
    /// need hello's result. A refused hello is thrown by that request's `call`.
    public func greet(client: String, language: Language, interactive: Bool, vaultPrompts: Bool = false) {
        let id = nextID
        nextID += 1
        queuedHello = (id, Request(id: .int(id), op: "hello",
                                   fields: helloFields(client: client, language: language, interactive: interactive,
                                                       vaultPrompts: vaultPrompts)).encoded())
    }

    private func helloFields(client: String, language: Language, interactive: Bool, vaultPrompts: Bool) -> [String: JSON] {
        var fields: [String: JSON] = ["version": .int(Wire.version), "client": .string(client),
                                      "lang": .string(language.rawValue), "interactive": .bool(interactive)]
        if vaultPrompts {
            fields["prompter"] = "vault"
            for (key, value) in Self.displayFields() { fields[key] = .string(value) }
        }
        return fields
    }

    /// Where this process is shown, for vaultd's dialogs: `DISPLAY`,
    /// `WAYLAND_DISPLAY`, and the terminal on stdin (and its `TERM`) if there is one.
    public static func displayFields() -> [String: String] {
        var out: [String: String] = [:]
        if let d = getenv("DISPLAY").map({ String(cString: $0) }), !d.isEmpty { out["display"] = d }
        if let w = getenv("WAYLAND_DISPLAY").map({ String(cString: $0) }), !w.isEmpty { out["wayland_display"] = w }
        if isatty(STDIN_FILENO) == 1, let t = ttyname(STDIN_FILENO) {
            out["tty"] = String(cString: t)
            if let term = getenv("TERM").map({ String(cString: $0) }), !term.isEmpty { out["term"] = term }
        }
        return out
    }

    /// Sends one request and waits for its final answer, relaying prompts.
    public func call(_ op: String, _ fields: [String: JSON] = [:], onPrompt: ((Prompt) -> PromptReply)? = nil) throws(ClientError) -> JSON {
        let greeting = queuedHello
        queuedHello = nil
        let id = nextID
        nextID += 1
        try send((greeting?.line ?? []) + Request(id: .int(id), op: op, fields: fields).encoded())
        while true {
            let line = try readLine()
            guard let reply = try? JSON.parse(line), let o = reply.objectValue else { throw .malformed("reply is not a JSON object") }
            if o["event"]?.stringValue == "prompt" {
                guard let promptJSON = o["prompt"], let prompt = Prompt(json: promptJSON) else { throw .malformed("bad prompt") }
                let answer = onPrompt?(prompt) ?? (prompt.kind == .message ? .none : .cancel)
                switch answer {
                case .none: break
                case .cancel:
                    try sendAnswer(pid: prompt.pid, fields: ["cancel": true])
                case .value(let v):
                    try sendAnswer(pid: prompt.pid, fields: ["value": v])
                }
                continue
            }
            if o["event"]?.stringValue == "vault" {
                pendingEvents.append(WatchEvent(o))
                continue
            }
            // A queued hello's answer comes first: only its refusal matters.
            if let greeting, o["id"] == .int(greeting.id) {
                if o["ok"]?.boolValue != true { throw Self.failure(o) }
                continue
            }
            // Acknowledgements of our answers carry their own ids; skip them.
            if let rid = o["id"], rid != .int(id), rid != .null { continue }
            if o["ok"]?.boolValue == true { return o["result"] ?? .object([:]) }
            throw Self.failure(o)
        }
    }

    /// The error an answer without `"ok": true` carries.
    private static func failure(_ o: [String: JSON]) -> ClientError {
        guard let err = o["error"]?.objectValue, let code = err["code"]?.stringValue else { return .malformed("reply has neither result nor error") }
        var extra = err
        extra["code"] = nil
        extra["message"] = nil
        return .vault(code: code, message: err["message"]?.stringValue ?? code, extra: extra)
    }

    /// Asks for vault events on this connection; returns `watching` and
    /// `locked` (the state now). Then `nextEvent` reads them.
    @discardableResult
    public func watch() throws(ClientError) -> JSON { try call("watch") }

    /// The next vault event (after `watch`), waiting for it.
    public func nextEvent() throws(ClientError) -> WatchEvent {
        if !pendingEvents.isEmpty { return pendingEvents.removeFirst() }
        while true {
            let line = try readLine()
            guard let reply = try? JSON.parse(line), let o = reply.objectValue else { throw .malformed("reply is not a JSON object") }
            if o["event"]?.stringValue == "vault" { return WatchEvent(o) }
        }
    }

    /// Vault events as an async sequence, on a connection of their own read on
    /// a thread of their own (a blocking read must not hold a task's thread).
    /// Ends with an error when vaultd goes away; stops when the consumer does.
    public static func events(socketPath: String? = nil, client: String) -> AsyncThrowingStream<WatchEvent, any Error> {
        AsyncThrowingStream { continuation in
            let connection: VaultConnection
            do {
                connection = try VaultConnection(socketPath: socketPath)
                try connection.hello(client: client, language: .en, interactive: false)
                try connection.watch()
            } catch {
                continuation.finish(throwing: error)
                return
            }
            let fd = connection.fd
            // Wakes the blocked read when the consumer stops listening.
            continuation.onTermination = { _ in _ = shutdown(fd, Int32(SHUT_RDWR)) }
            let reader = EventReader(connection) {
                do {
                    while true {
                        if case .terminated = continuation.yield(try $0.nextEvent()) { break }
                    }
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            reader.start()
        }
    }

    private func sendAnswer(pid: String, fields: [String: JSON]) throws(ClientError) {
        var f = fields
        f["pid"] = .string(pid)
        let id = nextID
        nextID += 1
        try send(Request(id: .int(id), op: "answer", fields: f).encoded())
    }

    /// Writes raw bytes (tests use this to send malformed frames).
    public func send(_ bytes: [UInt8]) throws(ClientError) {
        guard writeAll(fd, bytes) else { throw .closed }
    }

    /// Reads one line (without the newline).
    public func readLine() throws(ClientError) -> [UInt8] {
        while true {
            // memchr, not a generic element search: answers carry ~1 KB tokens.
            let newline = buffer.withUnsafeBytes { raw -> Int? in
                guard let base = raw.baseAddress, let hit = memchr(base, 0x0A, raw.count) else { return nil }
                return base.distance(to: UnsafeRawPointer(hit))
            }
            if let nl = newline {
                let line = Array(buffer[..<nl])
                buffer.removeSubrange(...nl)
                return line
            }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw .closed }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }
}

/// One vault event (docs/protocol.md, "Events"): `kind` is `locked`,
/// `unlocked`, `session_expired`, `logged_out`, `grant_revoked` or `resync`
/// (events were missed: read `status` again).
public struct WatchEvent: Sendable, Equatable {
    public var kind: String
    /// For `locked`: why (`request`, `idle`, `screen_locked`, `sleep`, …).
    public var reason: String?
    /// For the per-account kinds.
    public var account: String?
    /// For `grant_revoked`.
    public var app: String?

    init(_ o: [String: JSON]) {
        kind = o["kind"]?.stringValue ?? ""
        reason = o["reason"]?.stringValue
        account = o["account"]?.stringValue
        app = o["app"]?.stringValue
    }
}

/// Hands the connection to a thread of its own (Locking's pthread, not
/// Foundation's Thread: VaultClient does without Foundation, so vaultctl never
/// loads it), which alone uses it from then on.
private final class EventReader: @unchecked Sendable {
    let connection: VaultConnection
    let body: (VaultConnection) -> Void

    init(_ connection: VaultConnection, body: @escaping (VaultConnection) -> Void) {
        self.connection = connection
        self.body = body
    }

    func start() {
        runOnNewThread(named: "vault-events") { self.body(self.connection) }
    }
}

/// A stream socket connected to the Unix socket at `path` (close-on-exec), or
/// nil (with `errno` set) when nobody listens there or the path does not fit
/// in `sun_path`. Public for vault-bench, which talks to another agent's socket
/// the same way, and for the tests' raw client.
public func connectUnixSocket(_ path: String) -> Int32? {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return nil }
    var addr = sockaddr_un()
    addr.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
        close(fd)
        errno = ENAMETOOLONG
        return nil
    }
    withUnsafeMutableBytes(of: &addr.sun_path) { raw in
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard rc == 0 else {
        let code = errno
        close(fd)
        errno = code
        return nil
    }
    return fd
}

/// The uid of the process at the other end of a connected Unix socket
/// (`SO_PEERCRED`: who created the listening socket), nil if unreadable.
public func serverUID(_ fd: Int32) -> UInt32? {
    serverCredentials(fd)?.uid
}

/// The pid (in our pid namespace; 0 when the server's process is not in it)
/// and uid of whoever listens at the other end of a connected Unix socket.
func serverCredentials(_ fd: Int32) -> (pid: Int32, uid: UInt32)? {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    return sv_peer_credentials(fd, &pid, &uid) == 0 ? (pid, uid) : nil
}

/// True only when process `pid` demonstrably runs in a sandbox: its root
/// directory (`/proc/PID/root/`) is not ours. Everything that cannot tell is
/// false: pid 0 (the server is outside our pid namespace, as vaultd is for a
/// client inside a Flatpak sandbox); a client that is itself in a Flatpak
/// sandbox (`/.flatpak-info`: its root is the sandbox's, so vaultd's differs
/// by design; bubblewrap run by root shares the pid namespace and can read
/// vaultd's root); or `/proc/PID/root` unreadable (the real vaultd is not
/// dumpable, so to a process without CAP_SYS_PTRACE it is). The same rule
/// as the Python client's `_runs_under_another_root`.
///
/// An impostor can make its own root unreadable (`PR_SET_DUMPABLE` 0), so a
/// second sign is read that every process may read and none can hide: its
/// pid namespaces (`NSpid` in `/proc/PID/status`). More than one pid there
/// means it runs in a pid namespace below ours, as every Flatpak app does and
/// vaultd never does.
public func runsUnderAnotherRoot(pid: Int32) -> Bool {
    guard pid > 0, access("/.flatpak-info", F_OK) != 0 else { return false }
    if let depth = pidNamespaceDepth(pid: pid), depth > 1 { return true }
    guard let theirs = directoryIdentity("/proc/\(pid)/root/"), let ours = directoryIdentity("/") else { return false }
    return theirs != ours
}

/// How many pid namespaces, from ours down, process `pid` has a pid in
/// (`NSpid`); nil when it cannot be read.
func pidNamespaceDepth(pid: Int32) -> Int? {
    guard let file = fopen("/proc/\(pid)/status", "r") else { return nil }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 512)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard text.hasPrefix("NSpid:") else { continue }
        return text.dropFirst(6).split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).count
    }
    return nil
}

/// Device and inode of the directory at `path` (followed: the trailing slash
/// makes stat go through /proc's magic root link), nil when unreadable.
private func directoryIdentity(_ path: String) -> [UInt64]? {
    var st = stat()
    return stat(path, &st) == 0 ? [UInt64(st.st_dev), UInt64(st.st_ino)] : nil
}

extension Messages {
    /// What answers at the socket runs as us but in a sandbox: a client refuses it.
    /// (Beside `foreignServer`, whose first words it shares.)
    public static func sandboxedServer(_ path: String) -> LocalizedText {
        LocalizedText(
            en: "The program at \(path) is not your vaultd (it runs inside an app's sandbox), so nothing was sent to it. An app may have put its own socket there: try again in a few seconds, and if this message comes back, close your sandboxed (Flatpak) apps, or log out and in again.",
            nb: "Programmet på \(path) er ikke din vaultd (det kjører i sandkassen til en app), så ingenting ble sendt til det. En app kan ha lagt sin egen socket der: prøv igjen om noen sekunder, og hvis denne meldingen kommer tilbake, lukk appene som kjører i sandkasse (Flatpak), eller logg ut og inn igjen.")
    }
}

/// Writes all of `bytes` to a socket (retrying after signals, never raising
/// SIGPIPE); false when the peer is gone.
public func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    var off = 0
    while off < bytes.count {
        let n = bytes.withUnsafeBytes { raw in
            Glibc.send(fd, raw.baseAddress.map { $0 + off }, bytes.count - off, Int32(MSG_NOSIGNAL))
        }
        if n < 0 {
            if errno == EINTR { continue }
            return false
        }
        off += n
    }
    return true
}

import CVaultShims
import LineFraming
import Locking
import NIOCore
import Synchronization
import VaultCore
import VaultProtocol
import VaultWire
#if canImport(Glibc)
import Glibc
#endif

/// A connection's transport, from accept to close, on its event loop: who the
/// peer is, the per-connection limits, framing, and writing; it makes the
/// `Connection` (below) and feeds it lines. What a line means is the
/// `RequestHandler`'s business; this file is the only transport.
///
/// The limits, each enforced here once:
/// - the connection cap (`ConnectionLimits.maxConnections`), and a confined
///   app's share of it (`maxPerConfinedApp`): one `rate_limited`, then closed;
/// - another uid: one `forbidden`, then closed, nothing read;
/// - a line over `Wire.maxLineBytes`: one `bad_request`, then closed (LineSplitter);
/// - idle: closed after `idleTimeout` with no complete line and nothing in flight
///   (a connection that said `watch` waits for events and is never idle);
/// - requests in flight (`maxInFlight`): the next gets `rate_limited` (Connection.begin);
/// - unsent answers: past `maxUnsentBytes` the connection is not read until the
///   client has read some of them (NIO's BackPressureHandler on the channel's
///   write-buffer water mark), so a client that sends without reading cannot
///   grow vaultd's memory.
final class ConnectionHandler: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: NIO calls a handler only on its channel's event loop; the
    // fields below are touched nowhere else. Tasks use `client`.
    typealias InboundIn = ByteBuffer

    let handler: RequestHandler
    let limits: ConnectionLimits
    let connections: ConnectionSet
    let ownUID: UInt32
    /// The peer (`SO_PEERCRED`), read before the first byte; nil if unreadable.
    let peer: Requester?
    var client: Connection?
    var splitter = LineSplitter()
    /// When the last complete line arrived (partial lines do not count), or
    /// the connection opened: the event loop's clock (CLOCK_MONOTONIC, as
    /// `Connection`'s; a test's `EmbeddedEventLoop` moves it by hand).
    var lastLineNanos: UInt64 = 0
    var idleCheck: Scheduled<Void>?
    /// Set while this handler reads: answers written on the event loop then
    /// wait for one flush at the end of the read, so a client that sent
    /// `hello` and `session` together gets both answers in one write.
    let reading = ReadBurst()

    /// The cap was full when it was accepted: refused as over the cap even if
    /// a place came free since (its peer was not read).
    let overCapAtAccept: Bool

    init(handler: RequestHandler, limits: ConnectionLimits, connections: ConnectionSet, ownUID: UInt32, peer: Requester?,
         overCapAtAccept: Bool = false) {
        self.handler = handler
        self.limits = limits
        self.connections = connections
        self.ownUID = ownUID
        self.peer = peer
        self.overCapAtAccept = overCapAtAccept
    }

    func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        defer { context.fireChannelActive() }
        // A peer of another uid is refused below; it takes no place in an app's share meanwhile.
        let app = peer.flatMap { $0.uid == ownUID ? $0.confinedKey : nil }
        let admission = overCapAtAccept ? .full : connections.add(channel, limit: limits.maxConnections, app: app,
                                                                  perAppLimit: limits.maxPerConfinedApp)
        switch admission {
        case .added:
            break
        case .full:
            ChannelLink(channel: channel).sendAndClose(RequestHandler.refusal(.tooManyConnections(limit: limits.maxConnections)))
            return
        case .appFull:
            let failure = VaultFailure(.rateLimited, message: Messages.tooManyConnectionsForApp(peer?.app?.shortName, limit: limits.maxPerConfinedApp),
                                       extra: ["retry_after": .int(1)])
            ChannelLink(channel: channel).sendAndClose(RequestHandler.refusal(failure))
            return
        }
        guard let peer, peer.uid == ownUID else {
            ChannelLink(channel: channel).sendAndClose(RequestHandler.refusal(VaultFailure(.forbidden)))
            return
        }
        client = Connection(link: ChannelLink(channel: channel, burst: reading), requester: peer)
        lastLineNanos = context.eventLoop.now.uptimeNanoseconds
        if limits.idleTimeout > 0 {
            scheduleIdleCheck(on: context.eventLoop, channel: channel, in: .seconds(Int64(limits.idleTimeout)))
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let client else { return }   // refused: nothing is read
        var bytes = unwrapInboundIn(data)
        reading.active = true
        defer {
            reading.active = false
            if reading.written {
                reading.written = false
                context.channel.flush()
            }
        }
        splitter.feed(&bytes) { frame in
            switch frame {
            case .line(let line):
                lastLineNanos = context.eventLoop.now.uptimeNanoseconds
                handler.handle(line: line.readableBytesView, from: client)
                // The line may hold a PIN (`answer`) or tokens (`import`): once
                // handled, its bytes in the read buffer are wiped.
                line.withUnsafeReadableBytes { sv_wipe(UnsafeMutableRawPointer(mutating: $0.baseAddress), UInt($0.count)) }
            case .tooLong:
                handler.lineTooLong(client)
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        idleCheck?.cancel()
        idleCheck = nil
        connections.remove(context.channel)
        if let client { handler.watchers.remove(client) }
        client?.close()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    /// Closes the connection once it has been idle for the configured time:
    /// nothing in flight, no complete line and no answer for that long.
    /// Checked when the earliest possible deadline comes, not on every line.
    func scheduleIdleCheck(on loop: any EventLoop, channel: any Channel, in delay: TimeAmount) {
        let loopBound = NIOLoopBound(self, eventLoop: loop)
        idleCheck = loop.scheduleTask(in: delay) {
            loopBound.value.checkIdle(on: loop, channel: channel)
        }
    }

    func checkIdle(on loop: any EventLoop, channel: any Channel) {
        guard let client else { return }
        let timeout = UInt64(limits.idleTimeout) * 1_000_000_000
        // A watcher waits for events by design: it is never idle, and no
        // check is left scheduled for it.
        if client.isWatching { return }
        let (busy, lastAnswered) = client.activity
        if busy {
            scheduleIdleCheck(on: loop, channel: channel, in: .nanoseconds(Int64(timeout)))
            return
        }
        let deadline = max(lastLineNanos, lastAnswered) + timeout
        let now = loop.now.uptimeNanoseconds
        if now >= deadline {
            channel.close(promise: nil)
        } else {
            scheduleIdleCheck(on: loop, channel: channel, in: .nanoseconds(Int64(deadline - now)))
        }
    }
}

/// Where a connection's lines go: the transport behind a `Connection`
/// (Connection.swift's NIO channel in vaultd, a recorder in the tests).
protocol ClientLink: Sendable {
    /// Writes one line. The bytes may hold an access token: the transport
    /// wipes every copy it makes once written.
    func send(_ line: [UInt8])
    /// Writes one line, then closes the connection.
    func sendAndClose(_ line: [UInt8])
    /// Writes one line and calls `whenWritten` once it has left vaultd (or
    /// the connection closed): how `watch` bounds a watcher's backlog.
    func send(_ line: [UInt8], whenWritten: @escaping @Sendable () -> Void)
}

extension ClientLink {
    func send(_ line: [UInt8], whenWritten: @escaping @Sendable () -> Void) {
        send(line)
        whenWritten()
    }
}

/// One client connection: who is at the other end, what it said in `hello`,
/// its open prompts, its requests in flight and its `watch` queue. The one
/// type that is a connection: `ConnectionHandler` (above) is its transport on
/// the event loop, which feeds it lines and owns the bytes not yet framed;
/// everything else about the connection is here, shared with the tasks that
/// serve its requests (which may wait for a prompt's answer).
final class Connection: Sendable {
    let link: any ClientLink
    let requester: Requester
    /// Fired when the connection closes: vaultd's own dialogs for its requests close with it.
    let hangup = Hangup()

    private struct Inner {
        var language: Language = .en
        var interactive = false
        /// `"prompter": "vault"` and the client's display (VaultPrompter.swift).
        var prompter = HelloPrompter()
        var waiting: [String: CheckedContinuation<PromptAnswer, Never>] = [:]
        var nextPrompt = 0
        var closed = false
    }
    private let inner = Locked(Inner())
    /// Requests being served in tasks (a prompt waiting counts). Atomics, not
    /// the lock: the transport counts every request in, the tasks count them out.
    private let inFlight = Atomic<Int>(0)
    /// When a request served in a task was last answered (0: none yet).
    private let lastAnsweredNanos = Atomic<UInt64>(0)
    /// The `watch` op's state for this connection (Watch.swift).
    let watch = Locked(Watch())

    init(link: any ClientLink, requester: Requester) {
        self.link = link
        self.requester = requester
    }

    var language: Language { inner.withLock { $0.language } }
    var interactive: Bool { inner.withLock { $0.interactive } }
    var prompter: HelloPrompter { inner.withLock { $0.prompter } }

    func settle(language: Language, interactive: Bool, prompter: HelloPrompter) {
        inner.withLock {
            $0.language = language
            $0.interactive = interactive
            $0.prompter = prompter
        }
    }

    /// Counts a request in, unless `limit` are in flight already. Only the
    /// transport's one thread counts in, so the check cannot be overtaken.
    func begin(limit: Int) -> Bool {
        guard inFlight.load(ordering: .acquiring) < limit else { return false }
        inFlight.add(1, ordering: .relaxed)
        return true
    }

    func ended() {
        lastAnsweredNanos.store(Connection.monotonicNanos(), ordering: .relaxed)
        inFlight.subtract(1, ordering: .releasing)
    }

    /// Whether a request is in flight, and when the last one was answered
    /// (CLOCK_MONOTONIC nanoseconds): the transport's idle check reads it.
    var activity: (busy: Bool, lastAnsweredNanos: UInt64) {
        (inFlight.load(ordering: .acquiring) > 0, lastAnsweredNanos.load(ordering: .relaxed))
    }

    static func monotonicNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    func newPromptID() -> String {
        inner.withLock { s in
            s.nextPrompt += 1
            return "p\(s.nextPrompt)"
        }
    }

    /// Records `pid` as open, then calls `ask` (which sends the prompt), and
    /// parks the caller until `resolve` is called for `pid` (or the connection
    /// closes). The order matters: a client may answer before `ask` returns,
    /// and its answer must find the question already open.
    func wait(for pid: String, ask: () -> Void) async -> PromptAnswer {
        await withCheckedContinuation { (c: CheckedContinuation<PromptAnswer, Never>) in
            let closed = inner.withLock { s -> Bool in
                if s.closed { return true }
                s.waiting[pid] = c
                return false
            }
            if closed {
                c.resume(returning: .cancelled)
                return
            }
            ask()
        }
    }

    /// Returns false when no prompt with that id is waiting.
    @discardableResult
    func resolve(_ pid: String, with answer: PromptAnswer) -> Bool {
        let c = inner.withLock { $0.waiting.removeValue(forKey: pid) }
        c?.resume(returning: answer)
        return c != nil
    }

    /// The client went away: every open question counts as cancelled.
    func close() {
        let all = inner.withLock { s -> [CheckedContinuation<PromptAnswer, Never>] in
            s.closed = true
            defer { s.waiting.removeAll() }
            return Array(s.waiting.values)
        }
        for c in all { c.resume(returning: .cancelled) }
        hangup.fire()
    }
}

/// Whether a connection's handler is reading now, and whether it wrote an
/// answer meanwhile. Touched only on the channel's event loop (ChannelLink
/// checks `inEventLoop` before it looks).
final class ReadBurst: @unchecked Sendable {
    var active = false
    var written = false
}

/// A `ClientLink` over a NIO channel (writes are safe from any thread).
struct ChannelLink: ClientLink {
    let channel: any Channel
    /// The handler's read in progress, if any: an answer written on the event
    /// loop during it is flushed once at its end (ConnectionHandler.channelRead).
    var burst: ReadBurst? = nil

    func send(_ line: [UInt8]) {
        _ = write(line)
    }

    func send(_ line: [UInt8], whenWritten: @escaping @Sendable () -> Void) {
        write(line).whenComplete { _ in whenWritten() }
    }

    func sendAndClose(_ line: [UInt8]) {
        let channel = self.channel
        write(line).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Copies `line` into a channel buffer and writes it; both copies are
    /// wiped, the array at once and the buffer once it is written (an answer
    /// may carry an access token).
    private func write(_ line: [UInt8]) -> EventLoopFuture<Void> {
        var buffer = channel.allocator.buffer(capacity: line.count)
        buffer.writeBytes(line)
        var line = line
        line.withUnsafeMutableBytes { sv_wipe($0.baseAddress, UInt($0.count)) }
        let written = buffer
        let future: EventLoopFuture<Void>
        if let burst, channel.eventLoop.inEventLoop, burst.active {
            burst.written = true
            future = channel.write(buffer)
        } else {
            future = channel.writeAndFlush(buffer)
        }
        future.whenComplete { _ in
            written.withUnsafeReadableBytes { sv_wipe(UnsafeMutableRawPointer(mutating: $0.baseAddress), UInt($0.count)) }
        }
        return future
    }
}

/// The open client connections: counted against the cap, and closed at
/// shutdown (which cancels their open questions) instead of leaving tasks
/// waiting on a dying loop.
final class ConnectionSet: Sendable {
    private struct Open {
        var channels: [ObjectIdentifier: (channel: any Channel, app: String?)] = [:]
        /// Connections per confined app (`Requester.confinedKey`).
        var perApp: [String: Int] = [:]
    }
    private let open = Locked(Open())

    enum Admission: Equatable {
        case added
        /// `limit` connections are open.
        case full
        /// Its confined app holds `perAppLimit` of them.
        case appFull
    }

    /// Adds `c` unless `limit` connections are open, or `app` (a confined
    /// app's key; nil: not counted per app) holds `perAppLimit` of them.
    func add(_ c: any Channel, limit: Int, app: String? = nil, perAppLimit: Int = .max) -> Admission {
        open.withLock { o in
            guard o.channels.count < limit else { return .full }
            if let app {
                guard o.perApp[app, default: 0] < perAppLimit else { return .appFull }
                o.perApp[app, default: 0] += 1
            }
            o.channels[ObjectIdentifier(c)] = (c, app)
            return .added
        }
    }
    func remove(_ c: any Channel) {
        open.withLock { o in
            guard let app = o.channels.removeValue(forKey: ObjectIdentifier(c))?.app else { return }
            if let n = o.perApp[app], n > 1 { o.perApp[app] = n - 1 } else { o.perApp[app] = nil }
        }
    }
    var count: Int { open.withLock { $0.channels.count } }
    func count(of app: String) -> Int { open.withLock { $0.perApp[app, default: 0] } }
    func closeAll() {
        for c in open.withLock({ $0.channels.values.map(\.channel) }) { c.close(promise: nil) }
    }
}

/// Glibc's `struct ucred` needs `_GNU_SOURCE` and is not visible from Swift;
/// this has the same layout (pid, uid, gid) for `getsockopt(SO_PEERCRED)`.
struct PeerCredentials {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0

    /// The connecting process and which app it is, read once at accept; nil
    /// when its credentials cannot be read (then nothing is served).
    ///
    /// The app is read from `/proc/PID` (`AppIdentity.of`), which names
    /// whatever process has that pid *now*. So vaultd holds a pidfd of the
    /// peer (`SO_PEERPIDFD`, taken by the kernel at connect; else
    /// `pidfd_open` at accept) and reads `/proc` only while the pidfd says the
    /// process still runs: a peer that exited before it was read (its pid
    /// free for another process, or a zombie whose root is gone) is
    /// *unidentified*, trusted least, never "not sandboxed". So is pid 0 (a
    /// peer in another pid namespace) and a peer no pidfd can be had for.
    static func of(_ channel: any Channel) -> EventLoopFuture<Requester?> {
        guard let provider = channel as? any SocketOptionProvider else { return channel.eventLoop.makeSucceededFuture(nil) }
        let credentials = provider.unsafeGetSocketOption(level: .socket, name: NIOBSDSocket.Option(rawValue: SO_PEERCRED))
            .map { (c: PeerCredentials) -> PeerCredentials? in c }
            .recover { _ in nil }
        return credentials.flatMap { (c: PeerCredentials?) -> EventLoopFuture<Requester?> in
            guard let c else { return channel.eventLoop.makeSucceededFuture(nil) }
            return provider.unsafeGetSocketOption(level: .socket, name: NIOBSDSocket.Option(rawValue: PeerCredentials.soPeerPidfd))
                .map { (fd: CInt) -> CInt in fd }
                .recover { _ in -1 }
                .map { (pidfd: CInt) -> Requester? in identify(c, pidfd: pidfd) }
        }
    }

    /// `SO_PEERPIDFD` (Linux 6.5); Glibc's headers may not have it yet.
    static let soPeerPidfd: CInt = 77

    /// The requester for credentials `c`, with its app read through `pidfd`
    /// (or one opened now). Closes the pidfd.
    static func identify(_ c: PeerCredentials, pidfd given: CInt, procRoot: String = "/proc") -> Requester {
        var requester = Requester(pid: c.pid, uid: c.uid)
        guard c.pid > 0 else {
            if given >= 0 { close(given) }
            requester.unidentified = true
            return requester
        }
        let pidfd = given >= 0 ? given : sv_peer_pidfd(-1, c.pid)
        guard pidfd >= 0 else {
            requester.unidentified = true
            return requester
        }
        defer { close(pidfd) }
        // Alive before the read (the pid is this peer's) and after it (what
        // was read was this peer's, not a successor's).
        guard sv_pidfd_alive(pidfd) == 1 else {
            requester.unidentified = true
            return requester
        }
        let app = AppIdentity.of(pid: c.pid, procRoot: procRoot)
        guard let app, sv_pidfd_alive(pidfd) == 1 else {
            requester.unidentified = true
            return requester
        }
        requester.app = app
        return requester
    }
}

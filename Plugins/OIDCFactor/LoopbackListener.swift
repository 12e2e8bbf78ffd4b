import CVaultShims
import NIOCore
import NIOHTTP1
import NIOPosix
import Locking
import OIDCToken
import VaultFactor
#if canImport(Glibc)
import Glibc
#endif

/// The page the browser shows after the redirect: plain HTML, no scripts, no
/// links, no styles from elsewhere. Says in the person's language what happened.
struct BrowserPage: Sendable {
    var status: HTTPResponseStatus
    var language: Language
    var heading: String
    var message: String
    /// Sent as `Location` (the launch page's one redirect, to the provider).
    var location: String? = nil

    func html() -> [UInt8] {
        let lang = language.rawValue
        let text = """
            <!DOCTYPE html>
            <html lang="\(lang)">
            <head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">\
            <title>\(HTML.escape(heading))</title></head>
            <body>
            <main>
            <h1>\(HTML.escape(heading))</h1>
            <p>\(HTML.escape(message))</p>
            </main>
            </body>
            </html>

            """
        return Array(text.utf8)
    }


    static func notFound(_ language: Language) -> BrowserPage {
        BrowserPage(status: .notFound, language: language, heading: "SessionVault",
                    message: language == .nb ? "Siden finnes ikke." : "There is nothing here.")
    }

    /// For a request on the redirect path without this login's `state`.
    static func notThisLogin(_ language: Language) -> BrowserPage {
        BrowserPage(status: .badRequest, language: language, heading: "SessionVault",
                    message: Messages.browserNotThisLogin.text(language))
    }

    /// The launch page opened a second time: the login has ended.
    static func openedTwice(_ language: Language) -> BrowserPage {
        BrowserPage(status: .gone, language: language, heading: "SessionVault",
                    message: Messages.loginPageOpenedTwice.text(language) + ".")
    }
}

/// An RFC 8252 loopback redirect listener on 127.0.0.1 (ephemeral or fixed port).
///
/// The browser is started at a one-time **launch page** on this listener
/// (`/login/<random>`), never at the provider's address: whatever starts a
/// browser puts its address on the browser's command line, which every program
/// of every user can read (`ps`, `/proc/PID/cmdline`; a Snap app of this user
/// too), and with the authorization request (its `state`, PKCE challenge and
/// nonce) another program could log in at the provider *as someone else* and
/// bring that answer here first. The launch page answers the first request
/// with a redirect to the provider; a second request for it ends the login
/// (`WaitError.openedTwice`): whoever came first, the person's browser or
/// another program, the other one's login cannot be finished.
///
/// It hands exactly one request on the redirect path to the login flow — the
/// first that carries this login's `state` — holds that browser request open
/// until the flow says how the login ended, then answers it with a page and
/// closes everything. Any local process can reach the port: a connection is
/// served only when the kernel's socket table says this user's own program
/// made it (another user who learnt the launch page would otherwise open it
/// before the person's browser). A request
/// without the right `state` gets a 400 page and the listener keeps waiting:
/// a stray or hostile request neither ends nor decides the login. Other paths
/// get 404; later redirects get "already handled". Requests whose `Host` is
/// not the loopback address (a DNS-rebinding page) are refused.
///
/// Connections that send no request cost vaultd a descriptor and buffers
/// each, and any local process can open them for as long as the login waits:
/// so at most `Limits.connections` are held at once (a new one closes the
/// oldest that has sent nothing, so a pile of idle ones never keeps the
/// browser out), and one that has sent no whole request within
/// `Limits.requestWithin` is closed.
final class LoopbackListener: Sendable {
    /// Limits against other local processes, as sshd's `MaxStartups` and
    /// `LoginGraceTime`. A browser sends its redirect as soon as it connects.
    struct Limits: Sendable {
        /// Connections held at once, the redirect's own included.
        var connections = 32
        /// Time from connect to a whole request.
        var requestWithin: TimeAmount = .seconds(10)
    }

    struct Redirect: Sendable {
        var query: [(String, String)]
    }

    enum StartError: Error, Equatable {
        /// The fixed port is taken, by this user's own program (most likely another login).
        case portInUse
        /// The fixed port is taken by another user's program, which the person cannot stop.
        case portHeldByAnotherUser
        case failed
    }

    enum WaitError: Error, Equatable {
        case timeout
        case cancelled
        /// The launch page was asked for twice: something besides the person's browser has it.
        case openedTwice
    }

    private enum Phase {
        case listening
        case redirected
        case finished
    }

    private struct State {
        var phase: Phase = .listening
        var received: Redirect?
        var waitError: WaitError?
        var waiter: CheckedContinuation<Result<Redirect, WaitError>, Never>?
        var reply: EventLoopPromise<BrowserPage>?
        var replyChannel: ObjectIdentifier?
        var children: [ObjectIdentifier: any Channel] = [:]
        /// Connections that have sent no whole request yet, oldest first.
        var silent: [ObjectIdentifier] = []
        var strayRequests = 0
        var silentClosed = 0
        var otherUsersRefused = 0
        /// Where the launch page sends the browser (the provider's authorization request).
        var launchTarget: String?
        var launchesServed = 0
    }

    let redirectURI: String
    /// The one-time page the browser is started at (`launch(to:)`).
    let launchURL: String
    let port: Int
    let path: String
    private let launchPath: String
    let language: Language
    /// The login's `state`: only a request carrying it is a redirect.
    private let expectedState: String
    private let host = "127.0.0.1"
    private let state = Locked(State())
    private let serverChannel = Locked<(any Channel)?>(nil)
    private let eventLoop: any EventLoop
    private let limits: Limits

    private init(port: Int, path: String, language: Language, expectedState: String, eventLoop: any EventLoop,
                 limits: Limits) {
        self.limits = limits
        self.port = port
        self.path = path
        self.language = language
        self.expectedState = expectedState
        self.redirectURI = "http://127.0.0.1:\(port)\(path)"
        launchPath = "/login/" + Randomness.token(bytes: 32)
        launchURL = "http://127.0.0.1:\(port)\(launchPath)"
        self.eventLoop = eventLoop
    }

    /// Binds the listener. Port 0 means an ephemeral port.
    static func start(group: any EventLoopGroup, port: UInt16, path: String, language: Language,
                      expectedState: String, limits: Limits = Limits()) async throws(StartError) -> LoopbackListener {
        let box = ListenerBox()
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 16)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard let listener = box.listener else { throw ChannelError.ioOnClosedChannel }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(RedirectHandler(listener: listener))
                    listener.register(channel)
                }
            }
            .childChannelOption(.maxMessagesPerRead, value: 1)
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(host: "127.0.0.1", port: Int(port)).get()
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            let owner = sv_tcp4_loopback_listener_owner(port)
            throw owner >= 0 && owner != Int(getuid()) ? .portHeldByAnotherUser : .portInUse
        } catch {
            throw .failed
        }
        guard let bound = channel.localAddress?.port else {
            try? await channel.close()
            throw .failed
        }
        let listener = LoopbackListener(port: bound, path: path, language: language, expectedState: expectedState,
                                        eventLoop: channel.eventLoop, limits: limits)
        listener.serverChannel.withLock { $0 = channel }
        box.listener = listener
        return listener
    }

    fileprivate func register(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        let ours = LoopbackListener.madeByThisUser(channel)
        let (accepted, oldest) = state.withLock { s -> (Bool, (any Channel)?) in
            guard s.phase != .finished else { return (false, nil) }
            guard ours else {
                s.otherUsersRefused += 1
                return (false, nil)
            }
            var oldest: (any Channel)?
            if s.children.count >= limits.connections, !s.silent.isEmpty {
                oldest = s.children.removeValue(forKey: s.silent.removeFirst())
                s.silentClosed += 1
            }
            // Full of connections that each sent a request (only the redirect is held): refused.
            guard s.children.count < limits.connections else { return (false, nil) }
            s.children[id] = channel
            s.silent.append(id)
            return (true, oldest)
        }
        oldest?.close(promise: nil)
        if !accepted {
            channel.close(promise: nil)
            return
        }
        channel.closeFuture.whenComplete { [weak self] _ in
            self?.state.withLock { s in
                s.children.removeValue(forKey: id)
                s.silent.removeAll { $0 == id }
            }
        }
        channel.eventLoop.scheduleTask(in: limits.requestWithin) { [weak self] in
            let late = self?.state.withLock { s -> (any Channel)? in
                guard let at = s.silent.firstIndex(of: id) else { return nil }
                s.silent.remove(at: at)
                s.silentClosed += 1
                return s.children.removeValue(forKey: id)
            }
            late?.close(promise: nil)
        }
    }

    /// Whether the program at the other end of `channel` runs as this user:
    /// the kernel names the owner of the connecting socket. Unknown is no.
    static func madeByThisUser(_ channel: any Channel) -> Bool {
        guard case .v4(let peer)? = channel.remoteAddress, case .v4(let here)? = channel.localAddress else { return false }
        let owner = sv_tcp4_owner(peer.address.sin_addr.s_addr, UInt16(bigEndian: peer.address.sin_port),
                                  here.address.sin_addr.s_addr, UInt16(bigEndian: here.address.sin_port))
        return owner >= 0 && owner == Int(getuid())
    }

    /// Called on the child channel's event loop for each complete request.
    fileprivate func handle(_ head: HTTPRequestHead, channel: any Channel) -> EventLoopFuture<BrowserPage> {
        let loop = channel.eventLoop
        state.withLock { s in s.silent.removeAll { $0 == ObjectIdentifier(channel) } }
        // Split path and query; the path must match exactly.
        let uri = head.uri
        let pathPart: Substring
        let queryPart: Substring
        if let q = uri.firstIndex(of: "?") {
            pathPart = uri[..<q]
            queryPart = uri[uri.index(after: q)...]
        } else {
            pathPart = uri[...]
            queryPart = ""
        }
        guard head.method == .GET, pathPart == path || (pathPart == launchPath && queryPart.isEmpty) else {
            return loop.makeSucceededFuture(.notFound(language))
        }
        // DNS rebinding: a page on another origin cannot make its requests carry this Host.
        let hostHeader = head.headers["host"]
        guard hostHeader.count == 1, hostHeader[0] == "\(host):\(port)" else {
            return loop.makeSucceededFuture(BrowserPage(
                status: .badRequest, language: language, heading: "SessionVault",
                message: language == .nb ? "Ugyldig forespørsel." : "Invalid request."))
        }
        if pathPart == launchPath { return loop.makeSucceededFuture(openLaunchPage()) }
        guard let query = FormEncoding.parseQuery(queryPart),
              query.contains(where: { $0.0 == "state" && constantTimeEquals($0.1, expectedState) }) else {
            state.withLock { $0.strayRequests += 1 }
            return loop.makeSucceededFuture(.notThisLogin(language))
        }
        let promise = loop.makePromise(of: BrowserPage.self)
        let id = ObjectIdentifier(channel)
        let (accepted, waiter) = state.withLock { s -> (Bool, CheckedContinuation<Result<Redirect, WaitError>, Never>?) in
            guard s.phase == .listening else { return (false, nil) }
            s.phase = .redirected
            s.reply = promise
            s.replyChannel = id
            let redirect = Redirect(query: query)
            if let w = s.waiter {
                s.waiter = nil
                return (true, w)
            }
            s.received = redirect
            return (true, nil)
        }
        guard accepted else {
            promise.succeed(BrowserPage(status: .ok, language: language, heading: "SessionVault",
                                        message: Messages.browserAlreadyHandled.text(language)))
            return promise.futureResult
        }
        waiter?.resume(returning: .success(Redirect(query: query)))
        return promise.futureResult
    }

    /// Sets where the launch page sends the browser and returns the page's
    /// address: the only address of this login that leaves vaultd.
    func launch(to authorizationURL: String) -> String {
        state.withLock { $0.launchTarget = authorizationURL }
        return launchURL
    }

    /// The launch page: the first request is sent on to the provider; a second
    /// one ends the login, and one after the redirect came is remembered until
    /// `stop`, so the flow does not keep a login another program may have
    /// finished. Once the login has ended it is only "already handled".
    private func openLaunchPage() -> BrowserPage {
        enum Answer { case notYet, over, onward(String), again }
        let answer = state.withLock { s -> Answer in
            guard let target = s.launchTarget else { return .notYet }  // its address is not out yet
            guard s.phase != .finished else { return .over }  // the login has ended, however it went
            s.launchesServed += 1
            if s.launchesServed > 1 { return .again }
            return s.phase == .listening ? .onward(target) : .over
        }
        let target: String
        switch answer {
        case .notYet: return .notFound(language)
        case .over:
            return BrowserPage(status: .ok, language: language, heading: "SessionVault",
                               message: Messages.browserAlreadyHandled.text(language))
        case .again:
            failWait(.openedTwice)
            return .openedTwice(language)
        case .onward(let t): target = t
        }
        return BrowserPage(status: .found, language: language, heading: "SessionVault",
                           message: Messages.browserGoingToLogin.text(language), location: target)
    }

    /// Stops taking requests into the login (`finish` answers and closes) and
    /// says whether the launch page was asked for more than once until now:
    /// from here on nothing a request brings changes how the login ends.
    func stop() -> Bool {
        state.withLock { s in
            s.phase = .finished
            return s.launchesServed > 1
        }
    }

    /// Requests on the redirect path that lacked the login's `state` (ignored).
    var strayRequests: Int { state.withLock { $0.strayRequests } }

    /// Connections closed before they sent a whole request (`Limits`).
    var silentClosed: Int { state.withLock { $0.silentClosed } }

    /// Connections refused because another user's program made them.
    var otherUsersRefused: Int { state.withLock { $0.otherUsersRefused } }

    /// Waits for the redirect. `timeout`: the login is abandoned (5 minutes
    /// without a redirect ends it as `timeout`).
    func nextRedirect(timeout: Duration) async throws(WaitError) -> Redirect {
        let timer = eventLoop.scheduleTask(in: TimeAmount(timeout)) { [weak self] in
            self?.failWait(.timeout)
        }
        defer { timer.cancel() }
        let outcome: Result<Redirect, WaitError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (cont: CheckedContinuation<Result<Redirect, WaitError>, Never>) in
                let immediate = state.withLock { s -> Result<Redirect, WaitError>? in
                    if let r = s.received {
                        s.received = nil
                        return .success(r)
                    }
                    if let e = s.waitError { return .failure(e) }
                    s.waiter = cont
                    return nil
                }
                if let immediate { cont.resume(returning: immediate) }
            }
        } onCancel: {
            self.failWait(.cancelled)
        }
        return try outcome.get()
    }

    private func failWait(_ error: WaitError) {
        let waiter = state.withLock { s -> CheckedContinuation<Result<Redirect, WaitError>, Never>? in
            guard s.phase == .listening, s.waitError == nil else { return nil }
            s.waitError = error
            s.phase = .finished  // a redirect arriving now is too late
            let w = s.waiter
            s.waiter = nil
            return w
        }
        waiter?.resume(returning: .failure(error))
    }

    /// Answers the waiting browser request (if any) with `page`, stops listening
    /// and closes every connection. Safe to call more than once.
    func finish(_ page: BrowserPage) async {
        let (reply, replyChannel, children, waiter) = state.withLock { s in
            s.phase = .finished
            if s.waitError == nil { s.waitError = .cancelled }
            let taken = (s.reply, s.replyChannel, s.children, s.waiter)
            s.reply = nil
            s.waiter = nil
            s.children = [:]
            return taken
        }
        waiter?.resume(returning: .failure(.cancelled))
        reply?.succeed(page)
        let server = serverChannel.withLock { c -> (any Channel)? in
            let taken = c
            c = nil
            return taken
        }
        if let server { try? await server.close() }
        for (id, child) in children where id != replyChannel {
            child.close(promise: nil)
        }
    }
}

/// Lets the child initializer reach the listener, which exists only after bind.
private final class ListenerBox: Sendable {
    private let value = Locked<LoopbackListener?>(nil)
    var listener: LoopbackListener? {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}

private final class RedirectHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let listener: LoopbackListener
    private var head: HTTPRequestHead?

    init(listener: LoopbackListener) {
        self.listener = listener
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
        case .body:
            break  // a redirect has no body; anything sent is dropped, never buffered
        case .end:
            guard let h = head else { return }
            head = nil
            let future = listener.handle(h, channel: context.channel)
            let bound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
            future.whenComplete { result in
                let (context, handler) = bound.value
                let page: BrowserPage
                switch result {
                case .success(let p): page = p
                case .failure: page = .notFound(handler.listener.language)
                }
                handler.respond(context: context, page: page)
            }
        }
    }

    private func respond(context: ChannelHandlerContext, page: BrowserPage) {
        let body = page.html()
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "text/html; charset=utf-8")
        headers.add(name: "content-length", value: String(body.count))
        headers.add(name: "cache-control", value: "no-store")
        headers.add(name: "pragma", value: "no-cache")
        headers.add(name: "content-security-policy", value: "default-src 'none'; frame-ancestors 'none'")
        headers.add(name: "referrer-policy", value: "no-referrer")
        headers.add(name: "x-content-type-options", value: "nosniff")
        headers.add(name: "connection", value: "close")
        if let location = page.location { headers.add(name: "location", value: location) }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: page.status, headers: headers))),
                      promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
        let done = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: done)
        let channel = context.channel
        done.futureResult.whenComplete { _ in channel.close(promise: nil) }
    }
}

import CVaultShims
import NIOCore
import Locking
import Synchronization
import VaultCore
import VaultFactor
import VaultProtocol

/// How a person answered a prompt.
enum PromptAnswer: Sendable {
    case value(JSON)
    /// A string answer, in secure memory from the read buffer on (`answer`'s
    /// `value` never becomes a Swift String on its way to a PIN check).
    case secret(SecureBytes)
    case cancelled
    case timedOut
}

/// Per-connection state shared between the event loop (which reads frames) and
/// the tasks serving requests (which may wait for a prompt's answer).
final class ConnectionState: Sendable {
    struct Inner {
        var language: Language = .en
        var interactive = false
        /// `"prompter": "vault"` and the client's display (VaultPrompter.swift).
        var prompter = HelloPrompter()
        var requester = Requester(pid: 0, uid: 0, executable: nil)
        var waiting: [String: CheckedContinuation<PromptAnswer, Never>] = [:]
        var nextPrompt = 0
        var closed = false
    }
    let inner = Locked(Inner())

    var language: Language { inner.withLock { $0.language } }
    var interactive: Bool { inner.withLock { $0.interactive } }
    var requester: Requester { inner.withLock { $0.requester } }
    var prompter: HelloPrompter { inner.withLock { $0.prompter } }

    /// Requests being served in tasks (a prompt waiting counts): the
    /// connection is not idle while any is in flight. Atomics, not the lock:
    /// the event loop counts every request in, the tasks count them out.
    private let inFlight = Atomic<Int>(0)
    private let lastAnsweredNanos = Atomic<UInt64>(NIODeadline.now().uptimeNanoseconds)

    func began() { inFlight.add(1, ordering: .relaxed) }

    func ended() {
        lastAnsweredNanos.store(NIODeadline.now().uptimeNanoseconds, ordering: .relaxed)
        inFlight.subtract(1, ordering: .releasing)
    }

    /// Whether a request is in flight, and when the last one was answered.
    var activity: (busy: Bool, lastAnswered: NIODeadline) {
        (inFlight.load(ordering: .acquiring) > 0, NIODeadline.uptimeNanoseconds(lastAnsweredNanos.load(ordering: .relaxed)))
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
    }
}

/// The factor conversation for one request on one connection: each question
/// becomes a `prompt` event carrying the request's id, answered by an `answer` op.
struct ServerConversation: ClientConversation {
    let state: ConnectionState
    let channel: any Channel
    let requestID: JSON
    let language: Language
    let isInteractive: Bool
    let requester: Requester
    let promptTimeout: Int64
    /// The authorization-endpoint origins of the configured providers.
    let openableOrigins: @Sendable () async -> [String]

    func send(_ prompt: Prompt) {
        var buffer = channel.allocator.buffer(capacity: 128)
        buffer.writeBytes(Response.prompt(id: requestID, prompt: prompt).encoded())
        channel.writeAndFlush(buffer, promise: nil)
    }

    func show(_ message: LocalizedText) async {
        guard isInteractive else { return }
        send(Prompt(pid: state.newPromptID(), kind: .message, text: message.text(language)))
    }

    func ask(_ kind: Prompt.Kind, _ text: LocalizedText, extra: [String: JSON] = [:]) async throws(FactorError) -> JSON {
        switch try await prompt(kind, text, extra: extra) {
        case .value(let v): return v
        // Not a secret prompt (a confirm or a choice): its answer may be a String.
        case .secret(let bytes): return .string(bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) })
        case .cancelled: throw .cancelled
        case .timedOut: throw .timeout
        }
    }

    /// Sends a prompt and waits for its answer (or its timeout).
    func prompt(_ kind: Prompt.Kind, _ text: LocalizedText, extra: [String: JSON] = [:]) async throws(FactorError) -> PromptAnswer {
        guard isInteractive else { throw .notInteractive }
        let pid = state.newPromptID()
        let state = self.state
        // A task, not an event-loop timer: the loop may already be gone at shutdown.
        let timeout = Duration.seconds(promptTimeout)
        let timer = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { state.resolve(pid, with: .timedOut) }
        }
        let prompt = Prompt(pid: pid, kind: kind, text: text.text(language), extra: extra)
        let answer = await state.wait(for: pid) { send(prompt) }
        timer.cancel()
        return answer
    }

    func askSecret(_ text: LocalizedText) async throws(FactorError) -> SecureBytes {
        switch try await prompt(.secret, text) {
        case .secret(let bytes): return bytes
        case .timedOut: throw .timeout
        case .value, .cancelled: throw .cancelled
        }
    }

    func openURL(_ url: String, _ text: LocalizedText) async throws(FactorError) {
        guard isInteractive else { throw .notInteractive }
        // The client opens only a URL on one of these origins (docs/protocol.md):
        // a plugin or anything else that names another page gets it printed.
        let origins = await openableOrigins().map { JSON.string($0) }
        send(Prompt(pid: state.newPromptID(), kind: .openURL, text: text.text(language),
                    extra: ["url": .string(url), "origins": .array(origins)]))
    }

    func choose(_ prompt: LocalizedText, options: [ChoiceOption]) async throws(FactorError) -> String {
        let values = options.map { o -> JSON in ["value": .string(o.value), "label": .string(o.label.text(language))] }
        switch try await ask(.choice, prompt, extra: ["options": .array(values)]) {
        case .string(let s) where options.contains(where: { $0.value == s }): return s
        default: throw .cancelled
        }
    }

    var rateLimitKey: String { requester.executable ?? "pid:\(requester.pid)" }

    func confirm(_ prompt: LocalizedText) async throws(FactorError) -> Bool {
        switch try await ask(.confirm, prompt) {
        case .bool(let b): return b
        case .string(let s): return ["yes", "y", "ja", "j", "true"].contains(s.lowercased())
        default: return false
        }
    }
}

/// Reads frames, answers the connection-level ops inline (`hello`, `answer`)
/// and serves every other request in its own task, so several requests can be
/// in flight on one connection and a slow one (waiting for a fingerprint)
/// never holds up the others.
final class ConnectionHandler: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: NIO calls a handler only on its channel's event loop; the
    // fields below are touched nowhere else. Tasks use `state` and `channel`.
    typealias InboundIn = ByteBuffer

    let router: RequestRouter
    let state = ConnectionState()
    /// Another uid, or over the connection cap: one answer, then closed.
    var refused = false
    var splitter = LineSplitter()
    /// When the last complete frame arrived (partial lines do not count).
    var lastFrame = NIODeadline.now()
    var idleCheck: Scheduled<Void>?

    /// What the release lane, which accepts every connection, hands over.
    struct HandOver: Sendable {
        /// The peer (`SO_PEERCRED`); nil if it could not be read.
        var peer: Requester?
        /// What it read and did not serve.
        var input: [UInt8] = []
        /// What it could not yet write.
        var output: [UInt8] = []
    }
    var handedOver: HandOver

    init(router: RequestRouter, handedOver: HandOver) {
        self.router = router
        self.handedOver = handedOver
    }

    func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        defer {
            // What the lane read may hold an answer's PIN or import's tokens.
            handedOver.input.withUnsafeMutableBytes { sv_wipe($0.baseAddress, UInt($0.count)) }
            handedOver = HandOver()
        }
        guard router.connections.add(channel, limit: router.limits.maxConnections) else {
            refuse(.tooManyConnections(limit: router.limits.maxConnections), channel: channel)
            context.fireChannelActive()
            return
        }
        guard let peer = handedOver.peer, peer.uid == router.ownUID else {
            // Another uid: one `forbidden`, then close. Nothing else is read.
            refuse(VaultFailure(.forbidden), channel: channel)
            context.fireChannelActive()
            return
        }
        state.inner.withLock { $0.requester = peer }
        if router.limits.idleTimeout > 0 {
            scheduleIdleCheck(on: context.eventLoop, channel: channel, in: .seconds(Int64(router.limits.idleTimeout)))
        }
        if !handedOver.output.isEmpty {
            var buffer = channel.allocator.buffer(capacity: handedOver.output.count)
            buffer.writeBytes(handedOver.output)
            channel.writeAndFlush(buffer, promise: nil)
        }
        if !handedOver.input.isEmpty {
            var buffer = channel.allocator.buffer(capacity: handedOver.input.count)
            buffer.writeBytes(handedOver.input)
            feed(&buffer, channel: channel)
        }
        context.fireChannelActive()
    }

    func refuse(_ failure: VaultFailure, channel: any Channel) {
        refused = true
        var buffer = channel.allocator.buffer(capacity: 256)
        buffer.writeBytes(Response.failure(id: .null, error: failure, language: .en).encoded())
        channel.writeAndFlush(buffer).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Closes the connection once it has been idle for the configured time:
    /// nothing in flight, no complete frame and no answer for that long.
    /// Checked when the earliest possible deadline comes, not on every frame.
    func scheduleIdleCheck(on loop: any EventLoop, channel: any Channel, in delay: TimeAmount) {
        let loopBound = NIOLoopBound(self, eventLoop: loop)
        idleCheck = loop.scheduleTask(in: delay) {
            loopBound.value.checkIdle(on: loop, channel: channel)
        }
    }

    func checkIdle(on loop: any EventLoop, channel: any Channel) {
        let timeout = TimeAmount.seconds(Int64(router.limits.idleTimeout))
        let (busy, lastAnswered) = state.activity
        if busy {
            scheduleIdleCheck(on: loop, channel: channel, in: timeout)
            return
        }
        let deadline = max(lastFrame, lastAnswered) + timeout
        let now = NIODeadline.now()
        if now >= deadline {
            channel.close(promise: nil)
        } else {
            scheduleIdleCheck(on: loop, channel: channel, in: deadline - now)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        idleCheck?.cancel()
        idleCheck = nil
        router.connections.remove(context.channel)
        state.close()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if refused { return }
        var bytes = unwrapInboundIn(data)
        feed(&bytes, channel: context.channel)
    }

    func feed(_ bytes: inout ByteBuffer, channel: any Channel) {
        splitter.feed(&bytes) { frame in
            lastFrame = .now()
            handle(frame, channel: channel)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func write(_ response: Response, to channel: any Channel) {
        var buffer = channel.allocator.buffer(capacity: 256)
        buffer.writeBytes(response.encoded())
        channel.writeAndFlush(buffer, promise: nil)
    }

    func handle(_ frame: Frame, channel: any Channel) {
        let language = state.language
        switch frame {
        case .tooLong:
            var buffer = channel.allocator.buffer(capacity: 256)
            let failure = VaultFailure.badRequest(LocalizedText(
                en: "The request line is longer than 65,536 bytes. The connection will be closed; send shorter requests.",
                nb: "Forespørselslinjen er lengre enn 65 536 byte. Forbindelsen lukkes; send kortere forespørsler."))
            buffer.writeBytes(Response.failure(id: .null, error: failure, language: language).encoded())
            channel.writeAndFlush(buffer).whenComplete { _ in channel.close(promise: nil) }
        case .line(let buffer):
            // The line may hold a PIN (`answer`) or tokens (`import`): once
            // parsed, its bytes in the read buffer are wiped.
            defer { buffer.withUnsafeReadableBytes { sv_wipe(UnsafeMutableRawPointer(mutating: $0.baseAddress), UInt($0.count)) } }
            let request: Request
            var secret: SecureBytes?
            do {
                request = try Request.decode(line: buffer.readableBytesView, secretField: "value") { bytes in
                    secret = try? SecureBytes(count: bytes.count) { $0.copyMemory(from: UnsafeRawBufferPointer(bytes)) }
                }
            } catch {
                write(.failure(id: error.id, error: error.failure, language: language), to: channel)
                return
            }
            switch request.op {
            case "hello":
                hello(request, channel: channel)
            case "answer":
                write(answer(request, secret: secret), to: channel)
            case "session":
                // The common case, an unlocked vault with a fresh token, is answered
                // right here on the event loop; a token that is due (or short of
                // `min_valid`) joins its session's refresh from here too. Anything
                // else takes the full path (locked, unknown account, malformed
                // `min_valid`).
                guard let (account, minValid) = RequestRouter.fastSession(request) else {
                    serve(request, channel: channel)
                    break
                }
                switch router.vault.releaseIfReady(account: account, minValid: minValid,
                                                   orWait: { answerWhenRefreshed(request.id, channel: channel) }) {
                case .released(let released):
                    answer(released, id: request.id, channel: channel)
                case .waiting:
                    // Answered on this event loop, so after this line.
                    state.began()
                case .fullPath:
                    serve(request, channel: channel)
                }
            default:
                serve(request, channel: channel)
            }
        }
    }

    func answer(_ released: ReleasedSession, id: JSON, channel: any Channel) {
        // Audit first: the client may exit the moment it has its answer.
        router.auditRelease(released, requester: state.requester)
        ConnectionHandler.writeWiping(released.answer(id: id), to: channel)
    }

    /// Writes `bytes` (an answer that may carry an access token), wiping the
    /// array at once and the buffer once it is written.
    static func writeWiping(_ bytes: consuming [UInt8], to channel: any Channel) {
        var buffer = channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        bytes.withUnsafeMutableBytes { sv_wipe($0.baseAddress, UInt($0.count)) }
        let written = buffer
        channel.writeAndFlush(buffer).whenComplete { _ in
            written.withUnsafeReadableBytes { sv_wipe(UnsafeMutableRawPointer(mutating: $0.baseAddress), UInt($0.count)) }
        }
    }

    /// The answer to a request that joined a running refresh, written from
    /// the connection's event loop when the refresh settles.
    func answerWhenRefreshed(_ id: JSON, channel: any Channel) -> Vault.RefreshWaiter {
        let handler = self
        return { result in
            channel.eventLoop.execute {
                switch result {
                case .success(let released):
                    handler.answer(released, id: id, channel: channel)
                case .failure(let error):
                    var out = channel.allocator.buffer(capacity: 256)
                    out.writeBytes(Response.failure(id: id, error: error, language: handler.state.language).encoded())
                    channel.writeAndFlush(out, promise: nil)
                }
                handler.state.ended()
            }
        }
    }

    /// Serves a request in its own task: it may wait for the person.
    func serve(_ request: Request, channel: any Channel) {
        let router = self.router
        let state = self.state
        state.began()
        Task {
            let response = await router.handle(request, state: state, channel: channel)
            ConnectionHandler.writeWiping(response.encoded(), to: channel)
            state.ended()
        }
    }


    /// Settles language and interactivity at once (later frames on this
    /// connection rely on them), then answers with the lock state. A client
    /// asking for a newer version gets version 1 answers and sees our version.
    func hello(_ request: Request, channel: any Channel) {
        let language = Language(rawValue: request["lang"]?.stringValue ?? "") ?? .en
        let interactive = request["interactive"]?.boolValue ?? false
        let prompter = HelloPrompter(request)
        state.inner.withLock {
            $0.language = language
            $0.interactive = interactive
            $0.prompter = prompter
        }
        let router = self.router
        Task {
            let locked = await router.vault.isLocked
            var result: [String: JSON] = [
                "version": .int(Wire.version), "server": .string(router.serverName), "locked": .bool(locked),
            ]
            // Says the client's prompts will be vaultd's own dialogs.
            if prompter.vault && router.prompterFactory != nil { result["prompter"] = "vault" }
            var out = channel.allocator.buffer(capacity: 128)
            out.writeBytes(Response.success(id: request.id, result: .object(result)).encoded())
            channel.writeAndFlush(out, promise: nil)
        }
    }

    func answer(_ request: Request, secret: SecureBytes?) -> Response {
        guard let pid = request["pid"]?.stringValue else {
            return .failure(id: request.id, error: .badRequest(LocalizedText(
                en: "An answer needs the “pid” of the prompt it answers.",
                nb: "Et svar trenger «pid» for spørsmålet det svarer på.")), language: state.language)
        }
        let answer: PromptAnswer
        if request["cancel"]?.boolValue == true {
            answer = .cancelled
        } else if let secret {
            answer = .secret(secret)
        } else if let value = request["value"], value != .null {
            answer = .value(value)
        } else {
            answer = .cancelled
        }
        guard state.resolve(pid, with: answer) else {
            return .failure(id: request.id, error: .badRequest(LocalizedText(
                en: "There is no open question with that id. It may have timed out; start again.",
                nb: "Det finnes ikke noe åpent spørsmål med den ID-en. Det kan ha gått ut på tid; begynn på nytt.")),
                language: state.language)
        }
        return .success(id: request.id, result: [:])
    }
}

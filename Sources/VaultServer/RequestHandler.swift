import CVaultShims
import FoundationEssentials
import Locking
import Synchronization
import VaultCore
import VaultFactor
import VaultProtocol
import VaultWire

/// Answers a client's lines: decodes each request, answers `hello` and
/// `answer` at once (later lines rely on them), serves every other op in its
/// own task, so a slow one (waiting for a fingerprint) never holds up the
/// others, and encodes every answer. No transport code: the transport hands
/// it whole lines and a `ClientLink` to write to.
struct RequestHandler: Sendable {
    let vault: Vault
    let serverName: String
    let promptTimeout: Int64
    /// Requests one connection may have waiting for answers; the next gets `rate_limited`.
    let maxInFlight: Int
    /// The origins an `open_url` prompt lets the client open (VaultServer's init).
    let openableOrigins: @Sendable () async -> [String]
    /// vaultd's own dialogs for clients that said `"prompter": "vault"` (VaultPrompter.swift).
    var prompterFactory: VaultPrompterFactory? = nil
    /// The connections that said `watch` (Watch.swift).
    let watchers = Watchers()

    /// One whole line from `client`, without its newline. Everything it needs
    /// from the line is read before this returns: the caller wipes the line then.
    func handle<Line: Collection<UInt8>>(line: Line, from client: Connection) {
        let language = client.language
        let request: Request
        var secret: SecureBytes?
        do {
            // An `answer`'s value (a PIN) goes from the line straight into secure memory.
            request = try Request.decode(line: line, secretField: "value") { bytes in
                secret = try? SecureBytes(count: bytes.count) { $0.copyMemory(from: UnsafeRawBufferPointer(bytes)) }
            }
        } catch {
            client.link.send(Response.failure(id: error.id, error: error.failure, language: language).encoded())
            return
        }
        switch request.op {
        case "hello":
            hello(request, client: client)
        case "answer":
            client.link.send(answer(request, secret: secret, client: client).encoded())
        case "watch":
            watch(request, client: client)
        default:
            // A session in memory, fresh and granted is answered here, on the
            // thread that read the request: no task, no hop to the broker.
            if request.op == "session", let answer = releaseIfReady(request, client: client) {
                client.link.send(answer)
                return
            }
            guard client.begin(limit: maxInFlight) else {
                client.link.send(Response.failure(id: request.id, error: .tooManyRequestsInFlight(limit: maxInFlight),
                                                  language: language).encoded())
                return
            }
            Task {
                let response = await respond(to: request, client: client)
                // Counted out before the answer goes: a client that waits for
                // an answer before sending its 33rd request is never refused.
                client.ended()
                client.link.send(response.encoded())
            }
        }
    }

    /// The answer to a `session` request the broker can give without waiting
    /// (`Vault.releaseIfReady`, the same decision every release takes); nil
    /// sends it the long way, which also answers a malformed request.
    func releaseIfReady(_ request: Request, client: Connection) -> [UInt8]? {
        guard let minValid = RequestHandler.minValid(request), let account = try? optionalString(request, "account"),
              let released = vault.releaseIfReady(account: account, minValid: minValid, requester: client.requester,
                                                  interactive: client.interactive) else { return nil }
        return Response.success(id: request.id, result: released.json).encoded()
    }

    /// A line that grew past `Wire.maxLineBytes`: one answer, then the
    /// connection closes (the rest of such a line is never read).
    func lineTooLong(_ client: Connection) {
        // The limit as each language writes it: 65,536 and 65 536 (a no-break space).
        let digits = Array(String(Wire.maxLineBytes))
        func grouped(_ separator: String) -> String {
            digits.enumerated().map { i, d in (i > 0 && (digits.count - i) % 3 == 0 ? separator : "") + String(d) }.joined()
        }
        let (en, nb) = (grouped(","), grouped("\u{00A0}"))
        let failure = VaultFailure.badRequest(LocalizedText(
            en: "The request line is longer than \(en) bytes. The connection will be closed; send shorter requests.",
            nb: "Forespørselslinjen er lengre enn \(nb) byte. Forbindelsen lukkes; send kortere forespørsler."))
        client.link.sendAndClose(Response.failure(id: .null, error: failure, language: client.language).encoded())
    }

    /// The one answer to a connection refused before any request (another
    /// uid, or over the connection cap).
    static func refusal(_ failure: VaultFailure) -> [UInt8] {
        Response.failure(id: .null, error: failure, language: .en).encoded()
    }

    func respond(to request: Request, client: Connection) async -> Response {
        // vaultd's own dialogs for a client that asked for them; else prompts relayed as events.
        let conversation: any ClientConversation = client.prompter.conversation(
            prompterFactory, language: client.language, requester: client.requester, hangup: client.hangup)
            ?? ServerConversation(client: client, requestID: request.id, promptTimeout: promptTimeout,
                                  openableOrigins: openableOrigins)
        do {
            return .success(id: request.id, result: try await route(request, conversation))
        } catch {
            return .failure(id: request.id, error: error, language: client.language)
        }
    }

    /// Settles language and interactivity at once (later lines on this
    /// connection rely on them), then answers with the lock state. A client
    /// asking for a newer version gets version 1 answers and sees our version.
    func hello(_ request: Request, client: Connection) {
        let language = Language(rawValue: request["lang"]?.stringValue ?? "") ?? .en
        let prompter = HelloPrompter(request)
        client.settle(language: language, interactive: request["interactive"]?.boolValue ?? false, prompter: prompter)
        var result: [String: JSON] = [
            "version": .int(Wire.version), "server": .string(serverName), "locked": .bool(vault.isLocked),
        ]
        // Says the client's prompts will be vaultd's own dialogs.
        if prompter.vault && prompterFactory != nil { result["prompter"] = "vault" }
        client.link.send(Response.success(id: request.id, result: .object(result)).encoded())
    }

    /// Starts sending the connection vault events. It is counted as a watcher
    /// at once, so nothing that happens while the lock state is read is lost;
    /// its events wait until this answer is written.
    func watch(_ request: Request, client: Connection) {
        let first = client.startWatching()
        if first { watchers.add(client, events: vault.events) }
        client.link.send(Response.success(id: request.id, result: ["watching": true, "locked": .bool(vault.isLocked)]).encoded())
        if first { client.watchAnswered() }
    }

    func answer(_ request: Request, secret: SecureBytes?, client: Connection) -> Response {
        guard let pid = request["pid"]?.stringValue else {
            return .failure(id: request.id, error: .badRequest(LocalizedText(
                en: "An answer needs the “pid” of the prompt it answers.",
                nb: "Et svar trenger «pid» for spørsmålet det svarer på.")), language: client.language)
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
        guard client.resolve(pid, with: answer) else {
            return .failure(id: request.id, error: .badRequest(LocalizedText(
                en: "There is no open question with that id. It may have timed out; start again.",
                nb: "Det finnes ikke noe åpent spørsmål med den ID-en. Det kan ha gått ut på tid; begynn på nytt.")),
                language: client.language)
        }
        return .success(id: request.id, result: [:])
    }
}

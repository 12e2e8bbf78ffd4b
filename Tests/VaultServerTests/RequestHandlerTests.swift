import Foundation
import Locking
import Logging
import PINFactor
import SodiumKit
import VaultCore
import VaultFactor
import VaultProtocol
import VaultStore
import VaultWire
import XCTest
@testable import VaultServer

/// The lines a handler wrote, in order, in place of a socket.
final class RecordingLink: ClientLink {
    let lines = Locked<[[UInt8]]>([])
    let closed = Locked(false)
    func send(_ line: [UInt8]) { lines.withLock { $0.append(line) } }
    func sendAndClose(_ line: [UInt8]) {
        send(line)
        closed.withLock { $0 = true }
    }
    var written: [JSON] { lines.withLock { $0 }.compactMap { try? JSON.parse(Array($0.dropLast())) } }

    /// The first line written that `matches`, waiting up to `seconds` for it.
    func first(within seconds: Double = 10, where matches: (JSON) -> Bool) async throws -> JSON {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let hit = written.first(where: matches) { return hit }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw NoSuchLine()
    }
    struct NoSuchLine: Error {}
    func answer(to id: JSON) async throws -> JSON { try await first { $0["id"] == id && $0["event"] == nil } }
}

/// The request handler without a transport: every op's envelope, the
/// in-flight cap, prompts and answers, and what an app's socket receives.
final class RequestHandlerTests: XCTestCase {
    var dir = ""
    var vault: Vault!
    let pin = "482915"

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "handler-\(UUID().uuidString)"
        vault = try Self.pinVault(in: dir)
    }

    /// A vault in `dir` with the PIN factor (5 free tries), no idle timeout.
    static func pinVault(in dir: String) throws -> Vault {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let store = try VaultStore(path: dir + "/vault.sqlite")
        let pinFactor = PINFactor(throttle: ThrottlePolicy(freeAttempts: 5, firstDelay: 30, maxDelay: 120))
        return try Vault(store: store, deviceKey: try SecureBytes.random(count: 32), factors: [pinFactor],
                         config: VaultConfig(idleTimeout: 0), logger: logger)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func handler(maxInFlight: Int = 32) -> RequestHandler {
        RequestHandler(vault: vault, serverName: "vaultd/test", promptTimeout: 30, maxInFlight: maxInFlight, openableOrigins: { [] })
    }

    func send(_ h: RequestHandler, _ client: Connection, _ op: String, id: JSON, _ fields: [String: JSON] = [:]) {
        h.handle(line: Request(id: id, op: op, fields: fields).encoded().dropLast(), from: client)
    }

    /// A session in memory, fresh and granted to the asking app is answered on
    /// the thread that read the request: the answer is written before `handle`
    /// returns (no task, no hop to the broker). Anything the decision sends to
    /// the broker (a lock, an app without a grant) is answered later, in the
    /// broker's words.
    func testAFreshGrantedSessionIsAnsweredBeforeTheLineIsHandled() async throws {
        let link = RecordingLink()
        let me = Requester(pid: getpid(), uid: getuid(), app: AppIdentity(kind: .executable, name: "/usr/bin/mentor-app"))
        let client = Connection(link: link, requester: me)
        let h = handler()
        send(h, client, "import", id: 1, ["issuer": "https://idp.example", "client_id": "app", "account": "kari",
                                          "refresh_token": "rt-secret", "access_token": "at-1", "expires_at": 4_102_444_800])
        _ = try await link.answer(to: 1)
        func answeredAlready(_ id: JSON) -> JSON? { link.written.first { $0["id"] == id } }

        send(h, client, "session", id: "fast", ["account": "kari"])
        XCTAssertEqual(answeredAlready("fast")?["result"]?["access_token"], "at-1", "not answered before handle returned")
        send(h, client, "hello", id: "hello")
        XCTAssertEqual(answeredAlready("hello")?["result"]?["locked"], false, "hello waited for the broker")

        // Another app: the grant is the broker's to ask about (here: refused, nobody to ask).
        let otherLink = RecordingLink()
        let other = Connection(link: otherLink, requester: Requester(pid: getpid(), uid: getuid(),
                                                                 app: AppIdentity(kind: .flatpak, name: "org.example.Other")))
        // Asked directly, not raced against the task that serves it: the reading
        // thread has no answer for it.
        XCTAssertNil(h.releaseIfReady(Request(id: "other", op: "session", fields: ["account": "kari"]), client: other))
        send(h, other, "session", id: "other", ["account": "kari"])
        let refused = try await otherLink.answer(to: "other")
        XCTAssertEqual(refused["error"]?["code"], "app_not_allowed")

        // Locked: the broker answers, and it releases nothing.
        await vault.lock(reason: "test")
        send(h, client, "session", id: "locked", ["account": "kari"])
        let locked = try await link.answer(to: "locked")
        XCTAssertNil(locked["result"]?["access_token"], "\(locked)")
        XCTAssertEqual(locked["error"]?["code"], "locked")
    }

    func testALineThatIsNotARequestGetsBadRequestWithANullID() async throws {
        let link = RecordingLink()
        let client = Connection(link: link, requester: Requester(pid: 1, uid: 1))
        handler().handle(line: Array("{not json".utf8), from: client)
        let r = try await link.first { _ in true }
        XCTAssertEqual(r["id"], .null)
        XCTAssertEqual(r["error"]?["code"], "bad_request")
    }

    func testHelloSettlesTheLanguageForTheLinesAfterIt() async throws {
        let link = RecordingLink()
        let client = Connection(link: link, requester: Requester(pid: 1, uid: 1))
        let h = handler()
        send(h, client, "hello", id: 1, ["lang": "nb"])
        send(h, client, "frobnicate", id: 2)
        let hello = try await link.answer(to: 1)
        XCTAssertEqual(hello["result"]?["server"], "vaultd/test")
        XCTAssertEqual(hello["result"]?["version"], .int(1))
        let unknown = try await link.answer(to: 2)
        XCTAssertTrue(unknown["error"]?["message"]?.stringValue?.hasPrefix("Ukjent operasjon") == true, "\(unknown)")
    }

    func testAnAnswerToNoOpenQuestionIsABadRequest() async throws {
        let link = RecordingLink()
        let client = Connection(link: link, requester: Requester(pid: 1, uid: 1))
        send(handler(), client, "answer", id: 5, ["pid": "p9", "value": "x"])
        let r = try await link.answer(to: 5)
        XCTAssertEqual(r["error"]?["code"], "bad_request")
    }

    /// An import, then a release: the envelope carries the token and the
    /// claims, never the refresh token, and the release is audited once.
    func testASessionIsReleasedInOneEnvelopeAndAudited() async throws {
        let link = RecordingLink()
        // As Connection.swift makes it: with the app identity read from the pid.
        let client = Connection(link: link, requester: Requester(pid: getpid(), uid: getuid(), app: AppIdentity.of(pid: getpid())))
        let h = handler()
        send(h, client, "import", id: 1, ["issuer": "https://idp.example", "client_id": "app", "account": "kari",
                                          "refresh_token": "rt-secret", "access_token": "at-1", "expires_at": 4_102_444_800])
        _ = try await link.answer(to: 1)
        send(h, client, "session", id: "s", ["account": "kari"])
        let r = try await link.answer(to: "s")
        XCTAssertEqual(r["ok"], true, "\(r)")
        XCTAssertEqual(r["result"]?["access_token"], "at-1")
        XCTAssertEqual(r["result"]?["token_type"], "Bearer")
        XCTAssertEqual(r["result"]?["account"], "kari")
        XCTAssertEqual(r["result"]?["expires_at"], .int(4_102_444_800))
        XCTAssertFalse(link.lines.withLock { $0 }.contains { String(decoding: $0, as: UTF8.self).contains("rt-secret") })
        try await Task.sleep(for: .milliseconds(200))   // the audit write is on a task
        XCTAssertEqual(try vault.audit.entries(after: 0, limit: 100).filter { $0.event == "release" }.count, 1)
    }

    /// Requests waiting for the person count against the cap; the next one is
    /// refused at once with its sentence; the PIN travels only inward.
    func testRequestsPastTheInFlightCapAreRateLimitedAndThePINNeverComesBack() async throws {
        let link = RecordingLink()
        let client = Connection(link: link, requester: Requester(pid: 1, uid: 1))
        let h = handler(maxInFlight: 2)
        send(h, client, "hello", id: 0, ["interactive": true])
        _ = try await link.answer(to: 0)
        // Enroll a PIN through prompts, as a terminal client would.
        send(h, client, "enroll", id: "e", ["factor": "pin"])
        for _ in 0..<2 {
            let p = try await link.first { $0["event"] == "prompt" && !(self.answered.withLock { $0 }).contains($0["prompt"]?["pid"]?.stringValue ?? "") }
            let pid = p["prompt"]?["pid"]?.stringValue ?? ""
            _ = answered.withLock { $0.insert(pid) }
            send(h, client, "answer", id: .string("a-\(pid)"), ["pid": .string(pid), "value": .string(pin)])
        }
        let enrolled = try await link.answer(to: "e")
        XCTAssertEqual(enrolled["ok"], true, "\(enrolled)")
        await vault.lock(reason: "test")
        // Two unlocks wait at the PIN prompt: the cap is full.
        send(h, client, "unlock", id: "u1")
        send(h, client, "unlock", id: "u2")
        let prompt = try await link.first { $0["event"] == "prompt" && $0["id"] == "u1" || $0["event"] == "prompt" && $0["id"] == "u2" }
        send(h, client, "status", id: "over")
        let over = try await link.answer(to: "over")
        XCTAssertEqual(over["error"]?["code"], "rate_limited")
        XCTAssertEqual(over["error"]?["message"], .string(Messages.tooManyRequestsInFlight(limit: 2).en))
        let pid = prompt["prompt"]?["pid"]?.stringValue ?? ""
        send(h, client, "answer", id: "a", ["pid": .string(pid), "value": .string(pin)])
        let u1 = try await link.answer(to: "u1")
        let u2 = try await link.answer(to: "u2")
        XCTAssertEqual(u1["ok"], true, "\(u1)")
        XCTAssertEqual(u2["ok"], true, "\(u2)")
        send(h, client, "status", id: "after")
        let after = try await link.answer(to: "after")
        XCTAssertEqual(after["ok"], true, "the cap frees as answers go out")
        XCTAssertFalse(link.lines.withLock { $0 }.contains { String(decoding: $0, as: UTF8.self).contains(pin) },
                       "the PIN was written back to the client")
    }
    let answered = Locked<Set<String>>([])

    func testALineTooLongIsAnsweredAndTheConnectionClosed() async throws {
        let link = RecordingLink()
        let client = Connection(link: link, requester: Requester(pid: 1, uid: 1))
        handler().lineTooLong(client)
        let r = try await link.first { _ in true }
        XCTAssertEqual(r["error"]?["code"], "bad_request")
        XCTAssertTrue(link.closed.withLock { $0 })
    }
}

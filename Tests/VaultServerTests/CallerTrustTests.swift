import CVaultShims
import Foundation
import Locking
import VaultCore
import VaultFactor
import VaultProtocol
import VaultStore
import VaultWire
import XCTest
@testable import VaultServer

/// Who may call what (docs/protocol.md): each test plays a confined caller
/// (a sandboxed app, or a peer vaultd could not identify) against the real
/// request handler and broker, with an unconfined caller as the control that
/// shows the same request does work for the person.
final class CallerTrustTests: XCTestCase {
    var dir = ""
    var vault: Vault!
    let pin = "482915"
    let answered = Locked<Set<String>>([])

    let person = Requester(pid: 7, uid: 1, app: AppIdentity(kind: .executable, name: "/usr/bin/vaultctl"))
    let sandboxed = Requester(pid: 4242, uid: 1, app: AppIdentity(kind: .flatpak, name: "org.example.Evil"))
    let unidentified = Requester(pid: 4243, uid: 1, unidentified: true)

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "trust-\(UUID().uuidString)"
        vault = try RequestHandlerTests.pinVault(in: dir)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func handler() -> RequestHandler {
        RequestHandler(vault: vault, serverName: "vaultd/test", promptTimeout: 30, maxInFlight: 32, openableOrigins: { [] })
    }

    /// Sends one request and waits for its answer.
    func call(_ h: RequestHandler, _ client: Connection, _ link: RecordingLink, _ op: String, id: JSON,
              _ fields: [String: JSON] = [:]) async throws -> JSON {
        h.handle(line: Request(id: id, op: op, fields: fields).encoded().dropLast(), from: client)
        return try await link.answer(to: id)
    }

    /// The person enrolls a PIN and imports `kari` from vaultctl (prompts answered with the PIN).
    func personSetsUp(_ h: RequestHandler) async throws -> (Connection, RecordingLink) {
        let link = RecordingLink()
        let client = Connection(link: link, requester: person)
        _ = try await call(h, client, link, "hello", id: 0, ["interactive": true])
        let answered = self.answered, pin = self.pin
        let answering = Task {
            while !Task.isCancelled {
                if let p = link.written.first(where: { $0["event"] == "prompt" && $0["prompt"]?["kind"] == "secret"
                    && !answered.withLock { $0 }.contains($0["prompt"]?["pid"]?.stringValue ?? "") }) {
                    let pid = p["prompt"]?["pid"]?.stringValue ?? ""
                    _ = answered.withLock { $0.insert(pid) }
                    h.handle(line: Request(id: .string("a-\(pid)"), op: "answer", fields: ["pid": .string(pid), "value": .string(pin)])
                        .encoded().dropLast(), from: client)
                }
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        defer { answering.cancel() }
        let enrolled = try await call(h, client, link, "enroll", id: "e", ["factor": "pin"])
        XCTAssertEqual(enrolled["ok"], true, "\(enrolled)")
        let imported = try await call(h, client, link, "import", id: "i", [
            "issuer": "https://idp.example", "client_id": "app", "account": "kari",
            "refresh_token": "rt-person", "access_token": "at-person", "expires_at": 4_102_444_800])
        XCTAssertEqual(imported["ok"], true, "\(imported)")
        return (client, link)
    }

    func testConfinedCallersGetNoAdminOpWhateverTheySend() async throws {
        let h = handler()
        _ = try await personSetsUp(h)
        let ops: [(String, [String: JSON])] = [
            ("reset", ["confirm": true]), ("disable", ["factor": "pin", "confirm": true]), ("enroll", ["factor": "pin"]),
            ("reenroll", ["factor": "pin"]), ("allow_app", ["app": "flatpak:org.example.Evil", "account": "kari"]),
            ("sync_conflicts", [:]),
        ]
        for requester in [sandboxed, unidentified] {
            let link = RecordingLink()
            let client = Connection(link: link, requester: requester)
            _ = try await call(h, client, link, "hello", id: 0, ["interactive": true])
            for (n, (op, fields)) in ops.enumerated() {
                let r = try await call(h, client, link, op, id: .int(Int64(n + 1)), fields)
                XCTAssertEqual(r["error"]?["code"], "app_not_allowed", "\(op) from \(requester.trust): \(r)")
            }
            XCTAssertFalse(link.written.contains { $0["event"] == "prompt" }, "no question was put to a confined app")
        }
        // Nothing changed: the PIN is still enrolled and kari's session is still there.
        let factors = await vault.factorStatuses()
        XCTAssertEqual(factors.first { $0.factor == .pin }?.state, .enabled)
        let accounts = await vault.accounts(visibleTo: person).map(\.account)
        XCTAssertEqual(accounts, ["kari"])
    }

    func testASandboxedAppCannotImportOverAnotherAppsAccount() async throws {
        let h = handler()
        let (personClient, personLink) = try await personSetsUp(h)
        let link = RecordingLink()
        let client = Connection(link: link, requester: sandboxed)
        _ = try await call(h, client, link, "hello", id: 0)
        let r = try await call(h, client, link, "import", id: 1, [
            "issuer": "https://idp.example", "client_id": "app", "account": "kari",
            "refresh_token": "rt-evil", "access_token": "at-evil", "expires_at": 4_102_444_800])
        XCTAssertEqual(r["error"]?["code"], "app_not_allowed", "\(r)")
        XCTAssertEqual(r["error"]?["message"], .string(Messages.importNotYours.en))
        // A new account of its own it may import.
        let own = try await call(h, client, link, "import", id: 2, [
            "issuer": "https://idp.example", "client_id": "app", "account": "evil-own", "access_token": "at-own"])
        XCTAssertEqual(own["ok"], true, "\(own)")
        let mine = try await call(h, personClient, personLink, "session", id: "s", ["account": "kari"])
        XCTAssertEqual(mine["result"]?["access_token"], "at-person", "the owner's session was not replaced")
    }

    func testAnUnconfinedImportOverAnotherAppsAccountAsksThePerson() async throws {
        let h = handler()
        _ = try await personSetsUp(h)
        let link = RecordingLink()
        let other = Requester(pid: 8, uid: 1, app: AppIdentity(kind: .executable, name: "/usr/bin/other-app"))
        let client = Connection(link: link, requester: other)
        _ = try await call(h, client, link, "hello", id: 0)   // not interactive: cannot be asked
        let r = try await call(h, client, link, "import", id: 1, [
            "issuer": "https://idp.example", "client_id": "app", "account": "kari", "access_token": "at-other"])
        XCTAssertEqual(r["error"]?["code"], "app_not_allowed", "never replaced silently: \(r)")
    }

    func testNoPINQuestionIsRelayedToASandboxedApp() async throws {
        let h = handler()
        let (personClient, personLink) = try await personSetsUp(h)
        await vault.lock(reason: "test")
        for requester in [sandboxed, unidentified] {
            let link = RecordingLink()
            let client = Connection(link: link, requester: requester)
            _ = try await call(h, client, link, "hello", id: 0, ["interactive": true])
            let r: JSON
            do { r = try await call(h, client, link, "unlock", id: 1) } catch { return XCTFail("no answer: \(link.written)") }
            XCTAssertEqual(r["error"]?["code"], "locked", "\(r)")
            XCTAssertFalse(link.written.contains { $0["event"] == "prompt" }, "a PIN question reached a confined app")
        }
        // The control: the person's interactive client is asked, and answers.
        h.handle(line: Request(id: "u", op: "unlock", fields: [:]).encoded().dropLast(), from: personClient)
        let prompt = try await personLink.first { $0["event"] == "prompt" && $0["id"] == "u" }
        XCTAssertEqual(prompt["prompt"]?["kind"], "secret")
        let pid = prompt["prompt"]?["pid"] ?? .null
        h.handle(line: Request(id: "a", op: "answer", fields: ["pid": pid, "value": .string(pin)]).encoded().dropLast(), from: personClient)
        let unlocked = try await personLink.answer(to: "u")
        XCTAssertEqual(unlocked["ok"], true, "\(unlocked)")
    }

    func testAnUnidentifiedPeerSeesNoAccountAndAConfinedAppReadsOnlyItsOwnAudit() async throws {
        let h = handler()
        _ = try await personSetsUp(h)
        let link = RecordingLink()
        let client = Connection(link: link, requester: unidentified)
        let status = try await call(h, client, link, "status", id: 1)
        XCTAssertEqual(status["result"]?["accounts"], .array([]), "\(status)")
        let session = try await call(h, client, link, "session", id: 2, ["account": "kari"])
        XCTAssertEqual(session["error"]?["code"], "app_not_allowed", "\(session)")
        XCTAssertEqual(session["error"]?["message"], .string(Messages.unidentifiedApp.en))
        let audit = try await call(h, client, link, "audit", id: 3)
        XCTAssertEqual(audit["result"]?["entries"], .array([]), "an unidentified peer reads no audit entry")

        let sandboxLink = RecordingLink()
        let sandboxClient = Connection(link: sandboxLink, requester: sandboxed)
        _ = try await call(h, sandboxClient, sandboxLink, "import", id: 1, [
            "issuer": "https://idp.example", "client_id": "app", "account": "evil-own", "access_token": "at-own"])
        let own = try await call(h, sandboxClient, sandboxLink, "audit", id: 2)
        guard case .array(let entries)? = own["result"]?["entries"] else { return XCTFail("\(own)") }
        XCTAssertFalse(entries.isEmpty, "its own grant is there")
        for e in entries {
            XCTAssertEqual(e["detail"]?["app"], "org.example.Evil", "\(e)")
        }
        let all = try vault.audit.entries(after: 0, limit: 1000)
        XCTAssertGreaterThan(all.count, entries.count, "the log holds the person's entries too")
    }

    func testAConfinedAppsDisplayHintsAreDropped() {
        let captured = Locked<[PromptContext]>([])
        let factory: VaultPrompterFactory = { context in
            captured.withLock { $0.append(context) }
            return SilentConversation(requester: context.requester)
        }
        var hello = HelloPrompter()
        hello.vault = true
        hello.display = ":77"
        hello.waylandDisplay = "attacker-wl"
        hello.tty = "/dev/pts/77"
        for requester in [sandboxed, unidentified, person] {
            _ = hello.conversation(factory, language: .en, requester: requester, hangup: Hangup())
        }
        let contexts = captured.withLock { $0 }
        XCTAssertEqual(contexts.count, 3)
        for c in contexts.prefix(2) {
            XCTAssertNil(c.display)
            XCTAssertNil(c.waylandDisplay)
            XCTAssertNil(c.tty)
        }
        XCTAssertEqual(contexts.last?.display, ":77", "an unconfined client's hints are kept")
        XCTAssertEqual(contexts.last?.tty, "/dev/pts/77")
    }

    /// The identity is read only while the peer's pidfd says it runs: a peer
    /// that has exited (its pid free for reuse) is unidentified, never "not sandboxed".
    func testAPeerThatExitedBeforeItWasReadIsUnidentified() throws {
        let me = PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())
        let live = PeerCredentials.identify(me, pidfd: -1)
        XCTAssertFalse(live.unidentified)
        XCTAssertNotNil(live.app)

        let zero = PeerCredentials.identify(PeerCredentials(pid: 0, uid: getuid(), gid: getgid()), pidfd: -1)
        XCTAssertEqual(zero.trust, .unidentified, "pid 0 (another pid namespace) is not trusted")

        // A child whose pidfd vaultd took while it ran, then exited and was reaped.
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["30"]
        try child.run()
        let pidfd = sv_peer_pidfd(-1, child.processIdentifier)
        XCTAssertGreaterThanOrEqual(pidfd, 0, "pidfd_open works here")
        child.terminate()
        child.waitUntilExit()
        let gone = PeerCredentials.identify(PeerCredentials(pid: child.processIdentifier, uid: getuid(), gid: getgid()), pidfd: pidfd)
        XCTAssertEqual(gone.trust, .unidentified)
        XCTAssertNil(gone.app)
        // And with no pidfd to be had at all (the pid is gone): the same.
        let noFD = PeerCredentials.identify(PeerCredentials(pid: child.processIdentifier, uid: getuid(), gid: getgid()), pidfd: -1)
        XCTAssertEqual(noFD.trust, .unidentified)
    }
}

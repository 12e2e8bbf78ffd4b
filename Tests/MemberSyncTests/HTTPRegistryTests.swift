import Foundation
import XCTest

@testable import MemberSync
import NationalID
import SodiumKit
import VaultProtocol
import VaultStore
import VaultTestSupport

/// The HTTP registry against Fixtures/fake_registry.py on 127.0.0.1, started
/// and stopped by each test.
final class HTTPRegistryTests: SyncTestCase {
    let number = syntheticNumber(day: 12, month: 4, yy: 85, start: 0)
    let other = syntheticNumber(day: 3, month: 9, yy: 71, start: 0)
    let audit = AuditRecorder()
    let clock = TestClock(start: 1_800_000_000)
    var server: FakeRegistryServer!
    var key: SecureBytes!
    /// Everything a test saw that could leak: error texts, outcomes.
    var seen: [String] = []

    override func setUpWithError() throws {
        try super.setUpWithError()
        server = FakeRegistryServer(statePath: tmp + "/registry-state.json")
        try server.start()
        key = try SecureBytes.random(count: 32)
    }

    override func tearDownWithError() throws {
        server?.stop()
        let everything = seen.joined(separator: "\n") + audit.text
        assertNotInClear(number, in: everything, "errors, outcomes or audit events")
        assertNotInClear(other, in: everything, "errors, outcomes or audit events")
        assertNotInClear(number, in: storeBytes(), "the vault store")
        assertNotInClear(other, in: storeBytes(), "the vault store")
        try super.tearDownWithError()
    }

    func seed() async throws {
        try await server.control([
            "seed": [
                "m-empty": FakeRegistryServer.member(logins: [("vipps", "sub-kari")], nationalID: nil, orgs: [nhf]),
                "m-same": FakeRegistryServer.member(logins: [("bankid", "sub-ola")], nationalID: number, orgs: [nhf, hlf]),
                "m-other": FakeRegistryServer.member(logins: [("vipps", "sub-per")], nationalID: other, orgs: [hlf]),
            ],
        ])
    }

    func registry(token: String = "test-token", timeout: Duration = .seconds(5), comparisonKey: SecureBytes? = nil,
                  baseURL: String? = nil) -> HTTPMemberRegistry {
        HTTPMemberRegistry(baseURL: (baseURL ?? server.baseURL) + "/", authHeader: .bearer(token), timeout: timeout,
                           comparisonKey: comparisonKey)
    }

    func engine(_ store: VaultStore, _ registry: any MemberRegistry) throws -> MemberSync {
        try MemberSync(store: store, registry: registry, key: key, configuration: .init(backoffJitter: 0),
                       audit: audit.sink, clock: clock.reading)
    }

    func sync(_ engine: MemberSync, _ provider: String, _ subject: String, _ text: String) async throws -> SyncOutcome {
        let result = await engine.sync(provider: provider, subject: subject, nationalID: try SecureBytes.utf8(text))
        seen.append("\(result.outcome)")
        return result.outcome
    }

    // MARK: - Outcomes

    func testOutcomesOverHTTP() async throws {
        try await seed()
        let engine = try engine(try openStore(), registry())
        var outcome = try await sync(engine, "vipps", "sub-kari", number)
        XCTAssertEqual(outcome, .updated)
        var writes = try await server.writeCount()
        XCTAssertEqual(writes, 1)
        let state = try await server.state()
        XCTAssertEqual(state["members"]?["m-empty"]?["national_id_source"], "vipps-login")
        XCTAssertEqual(audit.last("updated")?.detail["source"], "vipps-login")

        outcome = try await sync(engine, "bankid", "sub-ola", number)
        XCTAssertEqual(outcome, .confirmed)
        XCTAssertEqual(audit.last("confirmed")?.detail["message"], "confirmed, no change")

        outcome = try await sync(engine, "vipps", "sub-per", number)
        XCTAssertEqual(outcome, .conflict)
        let conflicts = try await engine.conflicts()
        XCTAssertEqual(conflicts.map(\.memberID), ["m-other"])
        XCTAssertEqual(conflicts.first?.recordNumber, String(other.prefix(6)) + "*****")
        seen.append(conflicts.map { $0.publicJSON.text }.joined())

        outcome = try await sync(engine, "vipps", "nobody", number)
        XCTAssertEqual(outcome, .noMember)

        writes = try await server.writeCount()
        XCTAssertEqual(writes, 1, "only the empty record was written")
        let after = try await server.state()
        XCTAssertEqual(after["members"]?["m-other"]?["national_id"]?.stringValue == other, true,
                       "the conflicting record keeps its number")

        // The organizations came along.
        let context = await engine.context(provider: "bankid", subject: "sub-ola")
        XCTAssertEqual(context?.organizations.map(\.id), ["nhf", "hlf"])
    }

    func testKeyedHashComparison() async throws {
        try await seed()
        let comparisonKey = try SecureBytes.random(count: 32)
        let hexKey = Digest.hex(comparisonKey.unsafeCopyToArray())
        try await server.control(["hash_key": .string(hexKey)])
        let engine = try engine(try openStore(), registry(comparisonKey: comparisonKey))
        var outcome = try await sync(engine, "bankid", "sub-ola", number)
        XCTAssertEqual(outcome, .confirmed, "the registry's hash (Python's BLAKE2b) matches ours")
        outcome = try await sync(engine, "vipps", "sub-per", number)
        XCTAssertEqual(outcome, .conflict)
        let conflicts = try await engine.conflicts()
        XCTAssertNil(conflicts.first?.recordNumber)
        let writes = try await server.writeCount()
        XCTAssertEqual(writes, 0)

        // A hash but no key configured: not understood, so kept for later.
        let noKey = try self.engine(try openStore(), registry())
        outcome = try await sync(noKey, "bankid", "sub-ola", number)
        XCTAssertEqual(outcome, .queued)
    }

    func testAuthAndStatusMapping() async throws {
        try await seed()
        let bad = registry(token: "wrong")
        do {
            _ = try await bad.lookup(memberKey: MemberKey(provider: "vipps", subject: "sub-kari"))
            XCTFail("no error for a wrong token")
        } catch {
            XCTAssertEqual(error, .rejected(status: 401))
            XCTAssertTrue(error.isRetryable, "fixed by configuration; nothing may be lost meanwhile")
            seen.append(error.description)
        }
        for (status, expected) in [(500, RegistryError.unavailable(status: 500)), (503, .unavailable(status: 503)),
                                   (429, .unavailable(status: 429)), (400, .rejected(status: 400))] {
            try await server.control(["fail": ["count": 1, "status": .int(Int64(status))]])
            do {
                _ = try await registry().lookup(memberKey: MemberKey(provider: "vipps", subject: "sub-kari"))
                XCTFail("no error for \(status)")
            } catch {
                XCTAssertEqual(error, expected)
                seen.append(error.description)
            }
        }
        let none = try await registry().lookup(memberKey: MemberKey(provider: "vipps", subject: "nobody"))
        XCTAssertNil(none)
    }

    func testTimeoutIsUnreachable() async throws {
        try await seed()
        try await server.control(["delay": 2])
        let started = Date()
        do {
            _ = try await registry(timeout: .milliseconds(300))
                .lookup(memberKey: MemberKey(provider: "vipps", subject: "sub-kari"))
            XCTFail("no timeout")
        } catch {
            XCTAssertEqual(error, .unreachable("timeout"))
            seen.append(error.description)
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.8)
        try await server.control(["delay": 0])
    }

    func testRegistryReplaysAnIdempotencyKey() async throws {
        try await seed()
        let r = registry()
        let login = MemberKey(provider: "vipps", subject: "sub-kari")
        let n = try NationalIDNumber(number)
        let first = try await r.setNationalID(memberKey: login, number: n, source: "vipps-login", idempotencyKey: "same")
        let second = try await r.setNationalID(memberKey: login, number: n, source: "vipps-login", idempotencyKey: "same")
        XCTAssertEqual(first, .written)
        XCTAssertEqual(second, .written, "the first answer, replayed")
        let writes = try await server.writeCount()
        XCTAssertEqual(writes, 1)
    }

    // MARK: - Outages

    func test5xxIsQueuedThenWrittenExactlyOnce() async throws {
        try await seed()
        let engine = try engine(try openStore(), registry())
        try await server.control(["fail": ["count": 1, "status": 503]])
        let outcome = try await sync(engine, "vipps", "sub-kari", number)
        XCTAssertEqual(outcome, .queued)
        XCTAssertEqual(audit.last("queued")?.detail["reason"]?.stringValue, "member registry unavailable (HTTP 503)")
        clock.advance(30)
        let report = await engine.runDue()
        XCTAssertEqual(report.updated, 1)
        let writes = try await server.writeCount()
        XCTAssertEqual(writes, 1)
        let pending = try await engine.pendingCount()
        XCTAssertEqual(pending, 0)
    }

    func testLostAnswerAfterTheWriteIsNotWrittenTwice() async throws {
        try await seed()
        let engine = try engine(try openStore(), registry())
        // The registry writes, then answers 500: the vault cannot know it worked.
        try await server.control(["fail_after_write": 1])
        let outcome = try await sync(engine, "vipps", "sub-kari", number)
        XCTAssertEqual(outcome, .queued)
        clock.advance(30)
        let report = await engine.runDue()
        XCTAssertEqual(report.confirmed, 1, "the retry finds the number already on record")
        let writes = try await server.writeCount()
        XCTAssertEqual(writes, 1)
    }

    func testConnectionRefusedThenServerComesBackAcrossARestart() async throws {
        try await seed()
        let port = server.port
        server.stop()

        var store: VaultStore? = try openStore()
        var engine: MemberSync? = try self.engine(store!, registry(baseURL: "http://127.0.0.1:\(port)"))
        var outcome = try await sync(engine!, "vipps", "sub-kari", number)
        XCTAssertEqual(outcome, .queued)
        let reason = audit.last("queued")?.detail["reason"]?.stringValue ?? ""
        XCTAssertTrue(reason.hasPrefix("member registry unreachable"), reason)
        seen.append(reason)
        // A second login while it is down: still one job.
        outcome = try await sync(engine!, "vipps", "sub-kari", number)
        XCTAssertEqual(outcome, .queued)
        // Due, still down: rescheduled.
        clock.advance(30)
        var report = await engine!.runDue()
        XCTAssertEqual(report.rescheduled, 1)

        // vaultd restarts (new store handle, new engine); the registry comes back on its port.
        engine = nil
        try store?.close()
        store = nil
        try server.start(port: port)
        let reopened = try openStore()
        let restarted = try self.engine(reopened, registry(baseURL: "http://127.0.0.1:\(port)"))
        let pending = try await restarted.pendingCount()
        XCTAssertEqual(pending, 1)
        clock.advance(60)
        report = await restarted.runDue()
        XCTAssertEqual(report.updated, 1)
        XCTAssertEqual(report.pending, 0)
        var writes = try await server.writeCount()
        XCTAssertEqual(writes, 1)

        // Nothing more to do, and nothing written again.
        clock.advance(3600)
        report = await restarted.runDue()
        XCTAssertEqual(report.attempted, 0)
        outcome = try await sync(restarted, "vipps", "sub-kari", number)
        XCTAssertEqual(outcome, .confirmed)
        writes = try await server.writeCount()
        XCTAssertEqual(writes, 1)
        XCTAssertEqual(audit.outcomes().filter { $0 == "updated" }.count, 1)
    }
}

import XCTest
@testable import VaultCore
import Locking
import VaultFactor
import VaultProtocol
import VaultStore
import VaultTestSupport

/// An app that loops on what it is refused must not write the audit log (a
/// durable write each) as fast as it asks: the first refusal is written, the
/// repeats are counted and written as one entry when the minute is over.
final class AuditRepeatsTests: XCTestCase {
    /// An app with no dialog to ask through, so each request for a login it
    /// was not granted is refused (`grant` / `no_dialog`).
    final class UngrantedApp: ClientConversation, Sendable {
        let language: Language = .en
        var isInteractive: Bool { false }
        let requester: Requester

        init(pid: Int32, name: String = "org.example.Looping") {
            requester = Requester(pid: pid, uid: 0, executable: "/app/bin/looping", app: AppIdentity(kind: .flatpak, name: name))
        }
        func show(_ message: LocalizedText) async {}
        func askSecret(_ prompt: LocalizedText) async throws(FactorError) -> SecureBytes { throw .notInteractive }
        func confirm(_ prompt: LocalizedText) async throws(FactorError) -> Bool { throw .notInteractive }
        func askGrant(_ question: GrantQuestion) async throws(FactorError) -> GrantAnswer { throw .notInteractive }
    }

    var fx: VaultFixture!
    let clock = TestClock()

    override func setUpWithError() throws { fx = try VaultFixture() }
    override func tearDown() { fx.cleanup() }

    func refusals(_ vault: Vault) throws -> [AuditRow] {
        try vault.audit.entries().filter { $0.event == "grant" && $0.outcome == "no_dialog" }
    }

    func refuse(_ vault: Vault, _ app: UngrantedApp, times: Int) async {
        for _ in 0..<times {
            do {
                _ = try await vault.release(account: "kari", conversation: app)
                XCTFail("an ungranted app got the session")
            } catch {
                XCTAssertEqual(error.code, .appNotAllowed)
            }
        }
    }

    func testOneAppRefusedInALoopWritesOneEntryThenItsCount() async throws {
        let vault = try fx.vault([], clock: clock)
        _ = try await vault.importSession(importRequest(account: "kari", token: "T1"), conversation: UngrantedApp(pid: 1, name: "org.example.Owner"))
        let looping = UngrantedApp(pid: 4242)
        await refuse(vault, looping, times: 500)
        var rows = try refusals(vault)
        XCTAssertEqual(rows.count, 1, "500 refusals in a minute: the first written, the rest counted")
        XCTAssertEqual(rows.first?.pid, 4242)

        // Within the minute, still counted; once it is over, the next refusal
        // writes the count first, then itself.
        clock.advance(59)
        await refuse(vault, looping, times: 1)
        XCTAssertEqual(try refusals(vault).count, 1)
        clock.advance(2)
        await refuse(vault, looping, times: 1)
        rows = try refusals(vault)
        XCTAssertEqual(rows.count, 3, "\(rows.map(\.detail))")
        let count = try JSON.parse(Array(rows[1].detail.utf8))
        XCTAssertEqual(count["repeated"], .int(500), "499 in the first loop and one at 59 s")
        XCTAssertEqual(count["app"], "org.example.Looping")
        XCTAssertEqual(count["account"], "kari")
        XCTAssertEqual(rows[1].pid, 4242)
        XCTAssertEqual(rows[1].exe, "/app/bin/looping")
        XCTAssertNil(try JSON.parse(Array(rows[2].detail.utf8))["repeated"])
        XCTAssertNil(try vault.audit.verify(), "counts are chained like every entry")
    }

    func testACountIsWrittenAtShutdownAndAnotherProcessIsWrittenAtOnce() async throws {
        let vault = try fx.vault([], clock: clock)
        _ = try await vault.importSession(importRequest(account: "kari", token: "T1"), conversation: UngrantedApp(pid: 1, name: "org.example.Owner"))
        await refuse(vault, UngrantedApp(pid: 10), times: 3)
        // Another process of the same app: its own first refusal is written.
        await refuse(vault, UngrantedApp(pid: 11), times: 1)
        XCTAssertEqual(try refusals(vault).map(\.pid), [10, 11])
        vault.audit.flushRepeats()
        let rows = try refusals(vault)
        XCTAssertEqual(rows.map(\.pid), [10, 11, 10])
        XCTAssertEqual(try JSON.parse(Array(rows[2].detail.utf8))["repeated"], .int(2))
        vault.audit.flushRepeats()
        XCTAssertEqual(try refusals(vault).count, 3, "nothing counted twice")
    }

    /// A forking attacker (a new process per request) meets the cap on
    /// refusals written a minute; the rest are counted across processes.
    func testManyProcessesMeetTheCapAndAreCountedTogether() async throws {
        let vault = try fx.vault([], clock: clock)
        _ = try await vault.importSession(importRequest(account: "kari", token: "T1"), conversation: UngrantedApp(pid: 1, name: "org.example.Owner"))
        for pid in Int32(100)..<Int32(100 + AuditRepeats.maxPerWindow + 40) {
            await refuse(vault, UngrantedApp(pid: pid), times: 2)
        }
        XCTAssertEqual(try refusals(vault).count, AuditRepeats.maxPerWindow)
        clock.advance(61)
        vault.audit.record("lock", outcome: "ok", detail: ["reason": "test"])
        let rows = try refusals(vault)
        let counts = rows.compactMap { try? JSON.parse(Array($0.detail.utf8)) }.filter { $0["repeated"] != nil }
        // Each written process's second refusal, then the 40 processes over the cap (2 each).
        XCTAssertEqual(counts.filter { $0["several_processes"] == nil }.count, AuditRepeats.maxPerWindow)
        let several = counts.filter { $0["several_processes"] == .bool(true) }
        XCTAssertEqual(several.map { $0["repeated"] }, [.int(80)])
        XCTAssertNil(rows.first { (try? JSON.parse(Array($0.detail.utf8)))?["several_processes"] != nil }?.pid,
                     "a count across processes names none")
    }

    /// A granted app that asks from a new process each time (a helper run per
    /// request) was written once per release, with no bound: each an fsync'd
    /// write on a task. Its releases meet the same cap a minute; the rest are
    /// counted and written as one entry.
    func testReleasesFromANewProcessEachTimeMeetTheCap() async throws {
        let vault = try fx.vault([], clock: clock)
        _ = try await vault.importSession(importRequest(account: "kari", token: "T1"), conversation: UngrantedApp(pid: 1, name: "org.example.Owner"))
        let processes = AuditRepeats.maxPerWindow + 40
        for pid in Int32(100)..<Int32(100 + processes) {
            let released = try await vault.release(account: "kari", conversation: UngrantedApp(pid: pid, name: "org.example.Owner"))
            XCTAssertEqual(released.accessToken, "at-T1")
        }
        func releases() throws -> [AuditRow] { try vault.audit.entries().filter { $0.event == "release" } }
        // The entries written are written on tasks: wait for them.
        let deadline = Date().addingTimeInterval(10)
        while try releases().count < AuditRepeats.maxPerWindow, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        XCTAssertEqual(Set(try releases().compactMap(\.pid)), Set(100..<(100 + Int32(AuditRepeats.maxPerWindow))),
                       "the first processes of the minute, each written (on tasks, so in any order)")
        vault.audit.flushRepeats()
        let rows = try releases()
        XCTAssertEqual(rows.count, AuditRepeats.maxPerWindow + 1, "\(processes) releases: \(AuditRepeats.maxPerWindow) written, one count")
        let count = try JSON.parse(Array(try XCTUnwrap(rows.last).detail.utf8))
        XCTAssertEqual(count["repeated"], .int(40))
        XCTAssertEqual(count["several_processes"], .bool(true))
        XCTAssertNil(try vault.audit.verify())
    }

    /// What a person does is not counted away: each wrong PIN carries its own
    /// failure count, and vaultd's own entries (no peer) are never limited.
    func testOnlyAClientsRepeatedRefusalsAreCounted() {
        var r = AuditRepeats()
        let person = Requester(pid: 7, uid: 0, executable: "/usr/bin/vaultctl")
        func key(_ failures: Int) -> AuditRepeats.Key {
            .init(event: "unlock", factor: "pin", outcome: "failed", detail: "{\"failures\":\(failures)}", pid: 7)
        }
        XCTAssertEqual(r.admit(key(1), detail: [:], requester: person, now: 0), .write)
        XCTAssertEqual(r.admit(key(2), detail: [:], requester: person, now: 1), .write)
        XCTAssertEqual(r.admit(key(2), detail: [:], requester: person, now: 2), .counted(first: true))
        XCTAssertEqual(r.admit(key(2), detail: [:], requester: person, now: 3), .counted(first: false))
        XCTAssertTrue(r.due(now: 60).isEmpty, "key(1) is over but had no repeats; key(2)'s minute is not")
        XCTAssertEqual(r.due(now: 61).map(\.count.repeated), [2])
        XCTAssertTrue(r.counts.isEmpty, "nothing kept after its minute")
    }
}

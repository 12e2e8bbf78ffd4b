import Foundation
import XCTest

@testable import MemberSync
import NationalID
import SodiumKit
import VaultProtocol
import VaultStore
import VaultTestSupport

let nhf = Organization(id: "nhf", name: "Norges Handikapforbund", roles: ["peer-mentor"])
let hlf = Organization(id: "hlf", name: "Hørselshemmedes Landsforbund", roles: ["member", "coordinator"])

/// Sync outcomes against the SQLite demo registry, the durable queue, conflicts,
/// the organization context and the age policy.
final class SQLiteSyncTests: SyncTestCase {
    let number = syntheticNumber(day: 12, month: 4, yy: 85, start: 0)
    let other = syntheticNumber(day: 3, month: 9, yy: 71, start: 0)
    var registry: SQLiteMemberRegistry!
    let audit = AuditRecorder()
    let clock = TestClock(start: 1_800_000_000)
    var key: SecureBytes!

    override func setUpWithError() throws {
        try super.setUpWithError()
        registry = try SQLiteMemberRegistry(path: tmp + "/registry.sqlite")
        try registry.seed([
            .init(id: "m-empty", name: "Kari", logins: [MemberKey(provider: "vipps", subject: "sub-kari")],
                  organizations: [nhf]),
            .init(id: "m-same", name: "Ola", logins: [MemberKey(provider: "bankid", subject: "sub-ola")],
                  organizations: [nhf, hlf], nationalID: number),
            .init(id: "m-other", name: "Per", logins: [MemberKey(provider: "vipps", subject: "sub-per")],
                  organizations: [hlf], nationalID: other),
        ])
        key = try SecureBytes.random(count: 32)
    }

    func engine(_ store: VaultStore, _ registry: any MemberRegistry, key: SecureBytes? = nil) throws -> MemberSync {
        try MemberSync(store: store, registry: registry, key: key ?? self.key,
                       configuration: .init(backoffJitter: 0), audit: audit.sink, clock: clock.reading)
    }

    func secure(_ text: String) throws -> SecureBytes { try SecureBytes.utf8(text) }

    // MARK: - The three cases

    func testNoNumberOnRecordIsWrittenAndAuditedWithSource() async throws {
        let store = try openStore()
        let sync = try engine(store, registry)
        let result = await sync.sync(provider: "vipps", subject: "sub-kari", nationalID: try secure(number))
        XCTAssertEqual(result.outcome, .updated)
        XCTAssertEqual(try registry.writeCount(memberID: "m-empty"), 1)
        XCTAssertEqual(try registry.nationalIDSource(memberID: "m-empty")?.source, "vipps-login")

        let event = try XCTUnwrap(audit.last("updated"))
        XCTAssertEqual(event.event, "member_sync")
        XCTAssertEqual(event.at, clock.now)
        XCTAssertEqual(event.detail["source"], "vipps-login")
        XCTAssertEqual(event.detail["member"], "m-empty")
        XCTAssertEqual(event.detail["nin"]?.stringValue, String(number.prefix(6)) + "*****")
        XCTAssertEqual(event.detail["nin_hash"]?.stringValue?.count, 64)
        XCTAssertNotNil(event.detail["synced_at"])

        // The record now holds the number: the next login confirms it.
        let again = await sync.sync(provider: "vipps", subject: "sub-kari", nationalID: try secure(number))
        XCTAssertEqual(again.outcome, .confirmed)
        XCTAssertEqual(try registry.writeCount(memberID: "m-empty"), 1)

        // The session's context: the only organization is active.
        let context = try XCTUnwrap(result.context)
        XCTAssertEqual(context.memberID, "m-empty")
        XCTAssertEqual(context.active, nhf)
        XCTAssertEqual(context.claims["org"], "nhf")
        XCTAssertEqual(context.claims["roles"], ["peer-mentor"])
        assertNotInClear(number, in: audit.text, "the audit events")
    }

    func testSameNumberIsConfirmedWithoutWrite() async throws {
        let flaky = FlakyRegistry(registry)
        let sync = try engine(try openStore(), flaky)
        let result = await sync.sync(provider: "bankid", subject: "sub-ola", nationalID: try secure(number))
        XCTAssertEqual(result.outcome, .confirmed)
        XCTAssertEqual(flaky.writes, 0, "no write is even attempted")
        XCTAssertEqual(try registry.writeCount(memberID: "m-same"), 0)
        let event = try XCTUnwrap(audit.last("confirmed"))
        XCTAssertEqual(event.detail["message"], "confirmed, no change")
        XCTAssertEqual(event.detail["source"], "bankid-login")
        XCTAssertEqual(audit.outcomes(), ["confirmed"])
    }

    func testDifferentNumberIsAConflictAndNotOverwritten() async throws {
        let store = try openStore()
        let flaky = FlakyRegistry(registry)
        let sync = try engine(store, flaky)
        let result = await sync.sync(provider: "vipps", subject: "sub-per", nationalID: try secure(number))
        XCTAssertEqual(result.outcome, .conflict)
        XCTAssertEqual(flaky.writes, 0)
        // The record still holds its own number.
        let record = try await registry.lookup(memberKey: MemberKey(provider: "vipps", subject: "sub-per"))
        XCTAssertEqual(record?.nationalID.matches(try NationalIDNumber(other)), true)

        var conflicts = try await sync.conflicts()
        XCTAssertEqual(conflicts.count, 1)
        let c = try XCTUnwrap(conflicts.first)
        XCTAssertEqual(c.memberID, "m-other")
        XCTAssertEqual(c.source, "vipps-login")
        XCTAssertEqual(c.loginNumber, String(number.prefix(6)) + "*****")
        XCTAssertEqual(c.recordNumber, String(other.prefix(6)) + "*****")
        XCTAssertNotEqual(c.loginHash, c.recordHash)
        XCTAssertEqual(c.count, 1)
        let event = try XCTUnwrap(audit.last("conflict"))
        XCTAssertEqual(event.detail["conflict"]?.stringValue, c.id)

        // The same conflict again is counted, not listed twice.
        clock.advance(60)
        _ = await sync.sync(provider: "vipps", subject: "sub-per", nationalID: try secure(number))
        conflicts = try await sync.conflicts()
        XCTAssertEqual(conflicts.count, 1)
        XCTAssertEqual(conflicts.first?.count, 2)
        XCTAssertEqual(conflicts.first?.lastSeen, clock.now)

        // Conflicts survive a restart (they are in the store), and a person resolves them.
        let restarted = try engine(store, registry)
        let ids = try await restarted.conflicts().map(\.id)
        XCTAssertEqual(ids, [c.id])
        let resolved = try await restarted.resolveConflict(id: c.id)
        XCTAssertTrue(resolved)
        let resolvedAgain = try await restarted.resolveConflict(id: c.id)
        XCTAssertFalse(resolvedAgain)
        let remaining = try await restarted.conflicts().count
        XCTAssertEqual(remaining, 0)
        XCTAssertEqual(audit.last("conflict_resolved")?.detail["conflict"]?.stringValue, c.id)

        let listing = conflicts.map { $0.publicJSON.text }.joined()
        assertNotInClear(number, in: listing, "the conflict list")
        assertNotInClear(other, in: listing, "the conflict list")
        XCTAssertFalse(listing.contains("sub-per"), "the subject appears in the conflict list")
        assertNotInClear(number, in: audit.text, "the audit events")
        assertNotInClear(other, in: audit.text, "the audit events")
        assertNotInClear(number, in: storeBytes(), "the vault store")
        assertNotInClear(other, in: storeBytes(), "the vault store")
    }

    // MARK: - Other outcomes

    func testInvalidNumberIsNeverSent() async throws {
        let flaky = FlakyRegistry(registry)
        let sync = try engine(try openStore(), flaky)
        var bad = Array(number)
        bad[10] = bad[10] == "0" ? "1" : "0"
        for text in [String(bad), "1234567890", "abcdefghijk", ""] {
            let result = await sync.sync(provider: "vipps", subject: "sub-kari", nationalID: try secure(text))
            guard case .invalid = result.outcome else { return XCTFail("accepted an invalid number") }
        }
        XCTAssertEqual(flaky.calls, 0)
        XCTAssertEqual(audit.outcomes(), ["invalid", "invalid", "invalid", "invalid"])
        XCTAssertEqual(audit.events.first?.detail["reason"], "check_digit_2")
        assertNotInClear(String(bad), in: audit.text, "the audit events")
    }

    func testProductionOnlyRefusesSyntheticNumbers() async throws {
        let sync = try MemberSync(store: try openStore(), registry: registry, key: key,
                                  configuration: .init(parseOptions: .productionOnly), audit: audit.sink)
        let result = await sync.sync(provider: "vipps", subject: "sub-kari", nationalID: try secure(number))
        XCTAssertEqual(result.outcome, .invalid(.kindNotAccepted))
    }

    func testLoginWithoutMember() async throws {
        let sync = try engine(try openStore(), registry)
        let result = await sync.sync(provider: "vipps", subject: "nobody", nationalID: try secure(number))
        XCTAssertEqual(result.outcome, .noMember)
        XCTAssertNil(result.context)
        XCTAssertEqual(audit.outcomes(), ["no_member"])
    }

    func testRefusalIsNotQueued() async throws {
        let flaky = FlakyRegistry(registry)
        flaky.fail(next: 1, with: .rejected(status: 400))
        let sync = try engine(try openStore(), flaky)
        let result = await sync.sync(provider: "vipps", subject: "sub-kari", nationalID: try secure(number))
        XCTAssertEqual(result.outcome, .failed(.rejected(status: 400)))
        let pending = try await sync.pendingCount()
        XCTAssertEqual(pending, 0)
    }

    // MARK: - The queue

    func testUnreachableIsQueuedAndRetriedWithBackoffThenWrittenOnce() async throws {
        let store = try openStore()
        let flaky = FlakyRegistry(registry)
        flaky.fail(next: 3)
        let sync = try engine(store, flaky)
        let start = clock.now
        let result = await sync.sync(provider: "vipps", subject: "sub-kari", nationalID: try secure(number))
        XCTAssertEqual(result.outcome, .queued)
        var pending = try await sync.pendingCount()
        XCTAssertEqual(pending, 1)
        var due = try await sync.nextDue()
        XCTAssertEqual(due, Int64(start + 30))
        let queued = try XCTUnwrap(audit.last("queued"))
        XCTAssertEqual(queued.detail["retry_at"], .int(Int64(start + 30)))
        XCTAssertNotNil(queued.detail["reason"])

        // The job payload is sealed: no number, no subject.
        let job = try XCTUnwrap(try store.dueJobs(now: .max).first)
        XCTAssertEqual(job.kind, "member-sync")
        assertNotInClear(number, in: job.payload, "the job payload")
        assertNotInClear("sub-kari", in: job.payload, "the job payload")

        // Not due yet: nothing happens.
        var report = await sync.runDue()
        XCTAssertEqual(report.attempted, 0)

        // Due, still down: 60 s, then 120 s (doubling).
        clock.advance(30)
        report = await sync.runDue()
        XCTAssertEqual(report.rescheduled, 1)
        due = try await sync.nextDue()
        XCTAssertEqual(due, Int64(clock.now + 60))
        clock.advance(60)
        report = await sync.runDue()
        XCTAssertEqual(report.rescheduled, 1)
        due = try await sync.nextDue()
        XCTAssertEqual(due, Int64(clock.now + 120))
        XCTAssertEqual(audit.last("retry_scheduled")?.detail["attempts"], .int(2))

        // Back up.
        clock.advance(120)
        report = await sync.runDue()
        XCTAssertEqual(report.updated, 1)
        XCTAssertEqual(report.pending, 0)
        XCTAssertEqual(try registry.writeCount(memberID: "m-empty"), 1)
        pending = try await sync.pendingCount()
        XCTAssertEqual(pending, 0)
        XCTAssertEqual(audit.last("updated")?.detail["source"], "vipps-login")

        clock.advance(3600)
        report = await sync.runDue()
        XCTAssertEqual(report.attempted, 0)
        XCTAssertEqual(try registry.writeCount(memberID: "m-empty"), 1)
        assertNotInClear(number, in: audit.text, "the audit events")
        assertNotInClear(number, in: storeBytes(), "the vault store")
    }

    func testSameSyncIsQueuedOnce() async throws {
        let flaky = FlakyRegistry(registry)
        flaky.fail(next: 10)
        let sync = try engine(try openStore(), flaky)
        for _ in 0..<3 {
            let result = await sync.sync(provider: "vipps", subject: "sub-kari", nationalID: try secure(number))
            XCTAssertEqual(result.outcome, .queued)
        }
        var pending = try await sync.pendingCount()
        XCTAssertEqual(pending, 1)
        // Another number for the same login is a different job.
        _ = await sync.sync(provider: "vipps", subject: "sub-kari", nationalID: try secure(other))
        pending = try await sync.pendingCount()
        XCTAssertEqual(pending, 2)
    }

    func testWriteFailureAfterLookupIsQueuedToo() async throws {
        // lookup works, the write fails (registry fell over in between).
        final class WriteFails: MemberRegistry, @unchecked Sendable {
            let inner: any MemberRegistry
            var fail = true
            init(_ inner: any MemberRegistry) { self.inner = inner }
            func lookup(memberKey: MemberKey) async throws(RegistryError) -> MemberRecord? {
                try await inner.lookup(memberKey: memberKey)
            }
            func setNationalID(memberKey: MemberKey, number: NationalIDNumber, source: String,
                               idempotencyKey: String) async throws(RegistryError) -> SetNationalIDResult {
                if fail { throw .unavailable(status: 503) }
                return try await inner.setNationalID(memberKey: memberKey, number: number, source: source,
                                                     idempotencyKey: idempotencyKey)
            }
        }
        let failing = WriteFails(registry)
        let sync = try engine(try openStore(), failing)
        let result = await sync.sync(provider: "vipps", subject: "sub-kari", nationalID: try secure(number))
        XCTAssertEqual(result.outcome, .queued)
        XCTAssertEqual(result.context?.active, nhf, "the lookup's organizations are kept even when the write fails")
        failing.fail = false
        clock.advance(31)
        let report = await sync.runDue()
        XCTAssertEqual(report.updated, 1)
        XCTAssertEqual(try registry.writeCount(memberID: "m-empty"), 1)
    }

    func testQueueSurvivesReopeningTheStore() async throws {
        var store: VaultStore? = try openStore()
        let flaky = FlakyRegistry(registry)
        flaky.fail(next: 1)
        var sync: MemberSync? = try engine(store!, flaky)
        let result = await sync!.sync(provider: "vipps", subject: "sub-kari", nationalID: try secure(number))
        XCTAssertEqual(result.outcome, .queued)
        sync = nil
        try store?.close()
        store = nil

        // A new process: new store handle, new engine, same key (from the device key).
        let reopened = try openStore()
        let restarted = try engine(reopened, registry)
        var pending = try await restarted.pendingCount()
        XCTAssertEqual(pending, 1)
        clock.advance(30)
        let report = await restarted.runDue()
        XCTAssertEqual(report.updated, 1)
        XCTAssertEqual(try registry.writeCount(memberID: "m-empty"), 1)
        pending = try await restarted.pendingCount()
        XCTAssertEqual(pending, 0)
    }

    func testJobSealedUnderAnotherKeyIsDroppedAndAudited() async throws {
        let store = try openStore()
        let flaky = FlakyRegistry(registry)
        flaky.fail(next: 1)
        let first = try engine(store, flaky)
        _ = await first.sync(provider: "vipps", subject: "sub-kari", nationalID: try secure(number))
        let otherKey = try engine(store, registry, key: try SecureBytes.random(count: 32))
        clock.advance(30)
        let report = await otherKey.runDue()
        XCTAssertEqual(report.dropped, 1)
        XCTAssertEqual(audit.last("dropped")?.detail["job"], .int(1))
        XCTAssertEqual(try registry.writeCount(memberID: "m-empty"), 0)
    }

    func testBackoffSchedule() async throws {
        let sync = try engine(try openStore(), registry)
        var delays: [Double] = []
        for attempts in 0..<10 { delays.append(await sync.delay(afterAttempts: attempts)) }
        XCTAssertEqual(delays, [30, 60, 120, 240, 480, 960, 1920, 3600, 3600, 3600])
        let capped = await sync.delay(afterAttempts: 10_000)
        XCTAssertEqual(capped, 3600)
        let jittered = try MemberSync(store: try openStore(), registry: registry, key: key,
                                      configuration: .init(backoffJitter: 0.2), audit: audit.sink)
        for _ in 0..<20 {
            let d = await jittered.delay(afterAttempts: 1)
            XCTAssertGreaterThanOrEqual(d, 60)
            XCTAssertLessThan(d, 72)
        }
    }

    // MARK: - Organization context

    func testActiveOrganizationIsChosenAndRemembered() async throws {
        let store = try openStore()
        let sync = try engine(store, registry)
        let result = await sync.sync(provider: "bankid", subject: "sub-ola", nationalID: try secure(number))
        var context = try XCTUnwrap(result.context)
        XCTAssertEqual(context.organizations.map(\.id), ["hlf", "nhf"])
        XCTAssertNil(context.active)
        XCTAssertTrue(context.needsChoice)
        XCTAssertNil(context.claims["org"])
        XCTAssertEqual(context.claims["orgs"]?.arrayValue?.count, 2)

        context = try await sync.setActiveOrganization("HLF", provider: "bankid", subject: "sub-ola")
        XCTAssertEqual(context.active, hlf)
        XCTAssertEqual(context.claims["org"], "hlf")
        XCTAssertEqual(context.claims["org_name"], "Hørselshemmedes Landsforbund")
        XCTAssertEqual(context.claims["roles"], ["member", "coordinator"])
        // By name, too.
        context = try await sync.setActiveOrganization("norges handikapforbund", provider: "bankid", subject: "sub-ola")
        XCTAssertEqual(context.active, nhf)
        context = try await sync.setActiveOrganization("hlf", provider: "bankid", subject: "sub-ola")

        // After a restart, with the registry down: still known and still hlf.
        let flaky = FlakyRegistry(registry)
        flaky.fail(next: 100)
        let restarted = try engine(store, flaky)
        let active = await restarted.context(provider: "bankid", subject: "sub-ola")?.active
        XCTAssertEqual(active, hlf)
        let refreshed = await restarted.refreshContext(provider: "bankid", subject: "sub-ola")?.active
        XCTAssertEqual(refreshed, hlf)
        let queued = await restarted.sync(provider: "bankid", subject: "sub-ola", nationalID: try secure(number))
        XCTAssertEqual(queued.outcome, .queued)
        XCTAssertEqual(queued.context?.active, hlf)

        do {
            try await restarted.setActiveOrganization("blindeforbundet", provider: "bankid", subject: "sub-ola")
            XCTFail("chose an organization the member is not in")
        } catch {
            XCTAssertEqual(error, .notAMember("blindeforbundet", yours: ["Hørselshemmedes Landsforbund", "Norges Handikapforbund"]))
            XCTAssertEqual(error.message.en, "You are not a member of “blindeforbundet”. Choose one of yours: Hørselshemmedes Landsforbund, Norges Handikapforbund.")
        }
        do {
            try await restarted.setActiveOrganization("hlf", provider: "vipps", subject: "never-seen")
            XCTFail("chose an organization for an unknown member")
        } catch {
            XCTAssertEqual(error, .unknownMember)
        }
        // The context is stored under a keyed hash, not the subject.
        XCTAssertNil(try store.meta("member-sync:active-org:sub-ola"))
        let bytes = storeBytes()
        assertNotInClear("sub-ola", in: bytes, "the vault store")
    }

    func testRefreshContextForLoginsWithoutNationalID() async throws {
        let sync = try engine(try openStore(), registry)
        let context = await sync.refreshContext(provider: "vipps", subject: "sub-per")
        XCTAssertEqual(context?.active, hlf)
        let unknown = await sync.refreshContext(provider: "vipps", subject: "nobody")
        XCTAssertNil(unknown)
    }

    // MARK: - Seeding the demo registry

    func testSeedFromJSONFile() async throws {
        let path = tmp + "/seed.json"
        let seed: JSON = [[
            "id": "m-demo", "name": "Demo",
            "logins": [["provider": "demo", "subject": "demo-1"]],
            "organizations": [["id": "nhf", "name": "Norges Handikapforbund", "roles": ["peer-mentor"]]],
            "national_id": nil,
        ]]
        try Data(seed.serialized()).write(to: URL(fileURLWithPath: path))
        try registry.seed(jsonFile: path)
        let sync = try engine(try openStore(), registry)
        let result = await sync.sync(provider: "demo", subject: "demo-1", nationalID: try secure(number))
        XCTAssertEqual(result.outcome, .updated)
        XCTAssertEqual(result.context?.active, nhf)
        XCTAssertEqual(try registry.nationalIDSource(memberID: "m-demo")?.source, "demo-login")
    }

    func testRegistryHonoursIdempotencyKeys() async throws {
        let login = MemberKey(provider: "vipps", subject: "sub-kari")
        let n = try NationalIDNumber(number)
        let first = try await registry.setNationalID(memberKey: login, number: n, source: "vipps-login", idempotencyKey: "k1")
        XCTAssertEqual(first, .written)
        let replay = try await registry.setNationalID(memberKey: login, number: n, source: "vipps-login", idempotencyKey: "k1")
        XCTAssertEqual(replay, .written, "a repeated key gets the first answer")
        let fresh = try await registry.setNationalID(memberKey: login, number: n, source: "vipps-login", idempotencyKey: "k2")
        XCTAssertEqual(fresh, .unchanged)
        XCTAssertEqual(try registry.writeCount(memberID: "m-empty"), 1)
        let different = try NationalIDNumber(other)
        do {
            try await registry.setNationalID(memberKey: login, number: different, source: "x", idempotencyKey: "k3")
            XCTFail("overwrote a number")
        } catch {
            XCTAssertEqual(error, .conflict)
        }
    }
}

/// The minimum-age policy (min_age per provider → age_requirement).
final class AgePolicyTests: XCTestCase {
    func testMinimumAge() throws {
        let policy = MinimumAgePolicy(minAge: 18)
        let today = BirthDate(year: 2026, month: 11, day: 22)
        let sixteen = try NationalIDNumber(syntheticNumber(day: 1, month: 6, yy: 10))  // 2010
        let adult = try NationalIDNumber(syntheticNumber(day: 1, month: 6, yy: 0))  // 2000
        let turns18Today = try NationalIDNumber(syntheticNumber(day: 22, month: 11, yy: 8))  // 2008-11-22
        let turns18Tomorrow = try NationalIDNumber(syntheticNumber(day: 23, month: 11, yy: 8))

        let failure = try XCTUnwrap(policy.check(nationalID: sixteen, today: today))
        XCTAssertEqual(failure.code, .ageRequirement)
        XCTAssertEqual(failure.message.en, "You must be at least 18 to use this service")
        XCTAssertEqual(failure.message.nb, "Du må være minst 18 år for å bruke denne tjenesten")
        XCTAssertNil(policy.check(nationalID: adult, today: today))
        XCTAssertNil(policy.check(nationalID: turns18Today, today: today))
        XCTAssertNotNil(policy.check(nationalID: turns18Tomorrow, today: today))

        // No number: the provider's birthdate claim; neither: refused.
        XCTAssertNil(policy.check(nationalID: nil as NationalIDNumber?, birthdateClaim: "2001-01-01", today: today))
        XCTAssertNotNil(policy.check(nationalID: nil as NationalIDNumber?, birthdateClaim: "2012-01-01", today: today))
        XCTAssertNotNil(policy.check(nationalID: nil as NationalIDNumber?, today: today))
        XCTAssertNotNil(policy.check(nationalID: nil as NationalIDNumber?, birthdateClaim: "garbage", today: today))
        // A number from 2032 encodes no century: the claim decides.
        let from2032 = try NationalIDNumber("30108299939")
        XCTAssertNil(from2032.birthDate)
        XCTAssertNotNil(policy.check(nationalID: from2032, today: today))
        XCTAssertNil(policy.check(nationalID: from2032, birthdateClaim: "1982-10-30", today: today))

        // From the raw login value.
        XCTAssertNil(policy.check(nationalID: try SecureBytes.utf8(syntheticNumber(day: 1, month: 6, yy: 0)), today: today))
        XCTAssertNotNil(policy.check(nationalID: try SecureBytes.utf8("12345678901"), today: today))

        let sixteenPolicy = MinimumAgePolicy(minAge: 16)
        XCTAssertNil(sixteenPolicy.check(nationalID: sixteen, today: today))
        XCTAssertEqual(MinimumAgePolicy(minAge: 21).failure.message.en, "You must be at least 21 to use this service")
    }
}

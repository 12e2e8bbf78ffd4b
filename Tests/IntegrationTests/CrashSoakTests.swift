import Foundation
import Locking
import VaultProtocol
import XCTest
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The crash soak: `kill -9` of a real vaultd at random points during logins,
/// refreshes with rotation, PIN enrollments, PIN removals and wrong PINs,
/// against the strict BankID provider (which rotates refresh tokens and
/// revokes a whole family when an old one is reused). After every kill vaultd
/// starts again on the same files and must show:
///   - the store opens, `PRAGMA integrity_check` is ok;
///   - what was acknowledged before the kill is there (a login's session, an
///     enrolled or removed PIN), and the PIN keyslot, if any, opens;
///   - every stored session refreshes at the provider: its refresh token is
///     the one the provider accepts. The provider keeps the previous token
///     usable until its successor is first used (`rotation_grace`, as Auth0 and
///     Okta do), because a kill between the provider's answer and vaultd's
///     durable write is a lost answer no client can recover from. So the test
///     also checks that the grace was needed only after a refresh the app had
///     *not* been given: a released token means the rotated refresh token was
///     already stored;
///   - the PIN failure counter never goes back, and a wrong PIN the app was
///     told about is counted.
/// Two kinds of refresh run with `rotation_grace` off, as a provider without
/// the overlap (the strict provider's default, possibly BankID) would:
///   - `strictRefresh`, killed with `kill -9`: the session must still refresh
///     afterwards, unless the provider rotated the token during this very
///     refresh and the app had not been given the answer. That loss (the new
///     refresh token existed only in the killed process) is what no client can
///     prevent; it must then end cleanly (`session_expired`, the record gone,
///     a login works) and is counted.
///   - `termRefresh`, stopped with SIGTERM: vaultd waits for the refresh in
///     flight (at most 5 s), exits 0, and the session must always refresh.
/// `SOAK_CYCLES` (default 1000) and `SOAK_SEED` repeat or shorten a run.
final class CrashSoakTests: OIDCTestCase {
    enum Op: String, CaseIterable {
        case login, refresh, enrollPIN, disablePIN, wrongPIN, strictRefresh, termRefresh

        /// A refresh with `rotation_grace` off at the provider.
        var strict: Bool { self == .strictRefresh || self == .termRefresh }
    }

    /// How one op ended from the app's side before the kill.
    enum Outcome: Sendable {
        case acknowledged(JSON)
        case interrupted(String)
    }

    static let wrongPIN = "173946"
    static let freeAttempts = 1

    func testKill9AtRandomPointsKeepsEverySessionAndKeyslotUsable() throws {
        let env = ProcessInfo.processInfo.environment
        let cycles = env["SOAK_CYCLES"].flatMap(Int.init) ?? 1000
        let seed = env["SOAK_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64.max / 2)
        var rng = SplitMix64(seed: seed)
        print("crash soak: \(cycles) cycles, SOAK_SEED=\(seed)")

        let bankid = try startProvider("bankid")
        // 30 s is inside vaultd's 60 s refresh window: every release refreshes and rotates.
        try bankid.admin("config", ["access_ttl": 30, "rotation_grace": true])
        // One free try, then one-second lockouts: every wrong PIN reaches the
        // lockout, so kills land inside the write that counts an attempt and
        // sets the lockout it brings (one transaction), without slowing the soak.
        let config = "[pin]\nargon_memory_mib = 64\nfree_attempts = \(Self.freeAttempts)\nfirst_delay = 1\nmax_delay = 1\n"
            + OIDCTestCase.noFingerprint + "\n" + bankid.configTable()
        let v = try startVaultd(config: config)
        let started = monotonicNow()

        // What the test knows for certain: the last state vaultd acknowledged.
        var pinEnrolled = false
        var hasSession = false
        var lastFailures = 0
        var graceSeen: Int64 = 0
        var estimate: [Op: Double] = [:]
        var tally: [Op: (acknowledged: Int, interrupted: Int)] = [:]
        var graceNeeded = 0
        var maxFailures = 0
        // Sessions lost in the window between the provider's rotation and vaultd's commit (strictRefresh only).
        var lostInRotation = 0
        var reuseAllowed: Int64 = 0
        var slowestStop = 0.0
        var stopsDuringRotation = 0

        for cycle in 0..<cycles {
            // The op, chosen among those that make sense now.
            var choices: [Op] = [.login, .login, .refresh, .refresh, .refresh, .strictRefresh, .termRefresh]
            choices.append(pinEnrolled ? .disablePIN : .enrollPIN)
            if pinEnrolled { choices.append(.wrongPIN) }
            if !hasSession { choices = [.login] }
            let op = choices[Int(rng.next() % UInt64(choices.count))]

            let failuresBefore = lastFailures
            // A PIN op waits out a lockout (at most a second or two) so it is judged on its own.
            if [.wrongPIN, .disablePIN].contains(op) { try waitOutLockout(v) }
            if op.strict { try bankid.admin("config", ["rotation_grace": false]) }
            // A 50 ms token endpoint, so the SIGTERM lands inside the refresh.
            if op == .termRefresh { try bankid.behave(["slow_token": ["value": .double(0.05), "times": 1, "grant": "refresh_token"]]) }
            let opStartNs = monotonicNanoseconds()
            let outcome = Locked<Outcome?>(nil)
            let done = DispatchSemaphore(value: 0)
            let socket = v.socketPath
            let opStart = monotonicNow()
            let thread = Thread {
                let result = Self.run(op, socket: socket)
                outcome.withLock { $0 = result }
                done.signal()
            }
            thread.start()
            // Kill somewhere inside the op's usual duration (a little past it, so
            // some kills land just after the answer too).
            let typical = estimate[op] ?? 0.05
            usleep(UInt32(Double(rng.next() % 1_000) / 1_000 * typical * 1.2 * 1_000_000))
            if op == .termRefresh {
                let stopStart = monotonicNow()
                let signalNs = monotonicNanoseconds()
                let exit = v.stop(timeout: 15)
                let took = monotonicNow() - stopStart
                // The provider rotated after the signal: vaultd waited for that refresh.
                if let rotated = try bankid.stats()["last_rotation_ns"]?.intValue, UInt64(rotated) > signalNs { stopsDuringRotation += 1 }
                try bankid.behave(["slow_token": .null])
                slowestStop = max(slowestStop, took)
                XCTAssertTrue(exit?.signaled == false && exit?.exit == 0, "cycle \(cycle): vaultd did not exit 0 on SIGTERM: \(String(describing: exit))")
                XCTAssertLessThan(took, 6, "cycle \(cycle): SIGTERM took \(took) s, past the 5 s bound")
            } else {
                v.kill9()
            }
            XCTAssertEqual(done.wait(timeout: .now() + 30), .success, "cycle \(cycle): the \(op) client hung after the kill")
            let result = outcome.withLock { $0 } ?? .interrupted("no result")
            // Learn each op's duration: from answers, and by reaching further after each kill that was too early.
            if case .acknowledged = result {
                let took = monotonicNow() - opStart
                estimate[op] = typical * 0.8 + took * 0.2
            } else {
                estimate[op] = min(typical * 1.15, 5)
            }

            // What the app was told before the kill must have been durable.
            var acknowledged = false
            if case .acknowledged(let r) = result {
                acknowledged = true
                switch op {
                case .login:
                    XCTAssertTrue(r.isOK, "cycle \(cycle): login failed: \(r.text)")
                    if r.isOK { hasSession = true }
                case .refresh, .strictRefresh:
                    XCTAssertTrue(r.isOK, "cycle \(cycle): release failed: \(r.text)")
                case .termRefresh:
                    // Answered before vaultd stopped, or told the refresh was cut off (or that it is locked).
                    XCTAssertTrue(r.isOK || ["cancelled", "locked"].contains(r.errorCode ?? ""), "cycle \(cycle): \(r.text)")
                case .enrollPIN:
                    XCTAssertTrue(r.isOK, "cycle \(cycle): enroll failed: \(r.text)")
                    if r.isOK { pinEnrolled = true }
                case .disablePIN:
                    XCTAssertTrue(r.isOK, "cycle \(cycle): disable failed: \(r.text)")
                    if r.isOK { pinEnrolled = false }
                case .wrongPIN:
                    // no_match, or cancelled when the PIN prompt came back for another try
                    // (which the script cancels): either way the wrong PIN was checked.
                    XCTAssertTrue(["no_match", "cancelled", "locked_out"].contains(r["error"]?["code"]?.stringValue), "cycle \(cycle): \(r.text)")
                }
            }
            tally[op, default: (0, 0)].acknowledged += acknowledged ? 1 : 0
            tally[op, default: (0, 0)].interrupted += acknowledged ? 0 : 1

            // The PIN failure counter as the killed vaultd left it (read from a copy,
            // so sqlite3 does not recover the WAL before vaultd does).
            let failures = try failureCounter(v)
            let lockedUntil = try lockoutEnd(v)
            if failures >= Self.freeAttempts {
                XCTAssertGreaterThan(lockedUntil, 0, "cycle \(cycle): \(failures) failures on disk but no lockout (after \(op))")
            }
            switch op {
            case .wrongPIN where acknowledged:
                XCTAssertEqual(failures, failuresBefore + 1, "cycle \(cycle): a wrong PIN the app was told about was not counted")
            case .wrongPIN:
                XCTAssertTrue([failuresBefore, failuresBefore + 1].contains(failures), "cycle \(cycle): counter \(failuresBefore) → \(failures)")
            case .enrollPIN, .disablePIN:
                // A new or removed PIN starts its count again. On a locked vault the
                // op asks for the PIN first: killed during that check, it is counted.
                XCTAssertTrue([failuresBefore, failuresBefore + 1, 0].contains(failures),
                              "cycle \(cycle): counter \(failuresBefore) → \(failures) during \(op)")
            default:
                XCTAssertEqual(failures, failuresBefore, "cycle \(cycle): the PIN failure counter moved during \(op)")
            }

            // Restart on the same files and check everything.
            try v.start(waitForReady: false)
            let c = try v.raw()
            defer { c.close() }
            try c.hello(interactive: true)
            let factors = try c.call("factors")
            let pinState = factors.result?["factors"]?.arrayValue?.first { $0["factor"]?.stringValue == "pin" }?["state"]?.stringValue
            let enabledNow = pinState == "enabled" || pinState == "locked_out"
            if acknowledged || ![.enrollPIN, .disablePIN].contains(op) {
                XCTAssertEqual(enabledNow, pinEnrolled, "cycle \(cycle): after \(op) (\(acknowledged ? "acknowledged" : "interrupted")) the PIN is \(pinState ?? "?")")
            }
            pinEnrolled = enabledNow
            if try status(v)["locked"] == true {
                XCTAssertTrue(enabledNow, "cycle \(cycle): locked with no PIN to open it")
                // Half the time the person opens the vault with the PIN (which
                // resets its failure counter), half the time with BankID (which
                // does not), so wrong PINs pile up and "never goes back" bites.
                if rng.next() % 2 == 0 {
                    try waitOutLockout(v)
                    let u = try c.call("unlock", ["factor": "pin"]) { p in p.kind == .secret ? .value(.string(VaultdTestCase.pin)) : .none }
                    XCTAssertTrue(u.isOK, "cycle \(cycle): the PIN keyslot did not open after \(op): \(u.text)")
                } else {
                    guard case .acknowledged(let r) = Self.run(.login, socket: v.socketPath), r.isOK else {
                        XCTFail("cycle \(cycle): a BankID login did not open the vault after \(op)")
                        break
                    }
                    XCTAssertEqual(try failureCounter(v), failures, "cycle \(cycle): a BankID login changed the PIN failure counter")
                }
            }
            lastFailures = try failureCounter(v)
            maxFailures = max(maxFailures, lastFailures)

            let listed = try c.call("sessions").result?["sessions"]?.arrayValue ?? []
            if hasSession { XCTAssertFalse(listed.isEmpty, "cycle \(cycle): the acknowledged session is gone") }
            if !listed.isEmpty { hasSession = true }
            for s in listed {
                let account = s["account"]?.stringValue ?? ""
                let r = try c.call("session", ["account": .string(account)])
                if !r.isOK, op == .strictRefresh, !acknowledged, r.errorCode == "session_expired",
                   let rotated = try bankid.stats()["last_rotation_ns"]?.intValue, UInt64(rotated) >= opStartNs {
                    // The provider rotated during this refresh and vaultd died
                    // before its commit: the only copy of the new token died with
                    // it. The end must be clean: no record left.
                    lostInRotation += 1
                    reuseAllowed += 1
                    XCTAssertTrue(try c.call("sessions").result?["sessions"]?.arrayValue?.isEmpty == true,
                                  "cycle \(cycle): the lost session is still listed")
                    hasSession = false
                    continue
                }
                XCTAssertTrue(r.isOK, "cycle \(cycle): session \(account) unusable after \(op): \(r.text)")
            }
            let stats = try bankid.stats()
            XCTAssertEqual(int(stats["refresh_reuse_detected"]), reuseAllowed, "cycle \(cycle): an old refresh token was replayed after \(op)")
            let grace = int(stats["refresh_grace_used"])
            if grace > graceSeen {
                graceNeeded += 1
                XCTAssertTrue(op == .refresh && !acknowledged,
                              "cycle \(cycle): vaultd fell back on the previous refresh token after an acknowledged \(op)")
            }
            graceSeen = grace
            if op.strict { try bankid.admin("config", ["rotation_grace": true]) }
            if cycle % 100 == 99 {
                print("crash soak: \(cycle + 1) cycles, \(String(format: "%.0f", monotonicNow() - started)) s")
            }
            if testRun?.failureCount ?? 0 > 0 { break }
        }
        let integrity = try copyOfStore(v) { try sqlite3($0, "PRAGMA integrity_check;").out }
        XCTAssertEqual(integrity.trimmingCharacters(in: .whitespacesAndNewlines), "ok")
        let summary = Op.allCases.map { "\($0.rawValue) \(tally[$0]?.acknowledged ?? 0)+\(tally[$0]?.interrupted ?? 0)" }
        print("crash soak: done in \(String(format: "%.0f", monotonicNow() - started)) s; acknowledged+interrupted per op: "
              + summary.joined(separator: ", ") + "; rotation grace needed \(graceNeeded)×; sessions lost in a rotation without grace \(lostInRotation)×"
              + "; SIGTERM during a rotation \(stopsDuringRotation)×, slowest stop \(String(format: "%.2f", slowestStop)) s; PIN failure counter up to \(maxFailures); SOAK_SEED=\(seed)")
    }

    /// Runs one op as an app would, on its own connection.
    static func run(_ op: Op, socket: String) -> Outcome {
        do {
            let c = try RawClient(path: socket)
            defer { c.close() }
            try c.hello(interactive: true)
            let r: JSON
            switch op {
            case .login:
                r = try c.call("login", ["provider": "bankid"], timeout: 30) { prompt in
                    if prompt.kind == .openURL, let url = prompt.extra["url"]?.stringValue {
                        _ = try? runProcess(TestProvider.browser, [url], env: childEnvironment(["TEST_USER": "kari"]), timeout: 30)
                    }
                    return prompt.kind == .confirm ? .value(false) : prompt.kind == .message || prompt.kind == .openURL ? .none : .cancel
                }
            case .refresh, .strictRefresh, .termRefresh:
                r = try c.call("session", ["account": "bankid"])
            case .enrollPIN:
                r = try c.call("enroll", ["factor": "pin"]) { p in p.kind == .secret ? .value(.string(VaultdTestCase.pin)) : .none }
            case .disablePIN:
                // With a PIN a BankID login leaves the vault locked: turning the PIN off asks for it first.
                r = try c.call("disable", ["factor": "pin"]) { p in
                    p.kind == .confirm ? .value(true) : p.kind == .secret ? .value(.string(VaultdTestCase.pin)) : .none
                }
            case .wrongPIN:
                _ = try c.call("lock")
                var asked = false
                r = try c.call("unlock", ["factor": "pin"]) { p in
                    guard p.kind == .secret, !asked else { return p.kind == .message ? .none : .cancel }
                    asked = true
                    return .value(.string(wrongPIN))
                }
            }
            return .acknowledged(r)
        } catch {
            return .interrupted("\(error)")
        }
    }

    /// Runs `body` on a copy of the store's files, leaving the originals as vaultd left them.
    func copyOfStore<T>(_ v: VaultdProcess, _ body: (String) throws -> T) throws -> T {
        let dir = v.root + "/store-copy"
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: v.storePath + suffix) {
            try FileManager.default.copyItem(atPath: v.storePath + suffix, toPath: dir + "/vault.sqlite" + suffix)
        }
        return try body(dir + "/vault.sqlite")
    }

    /// The PIN lockout's end (unix s; 0 = none) as the store holds it.
    func lockoutEnd(_ v: VaultdProcess) throws -> Int { try pinCounterColumn(v, "locked_until") }

    /// Sleeps past a PIN lockout the store holds (they last a second here).
    func waitOutLockout(_ v: VaultdProcess) throws {
        let end = Double(try lockoutEnd(v))
        let now = Date().timeIntervalSince1970
        if end >= now { usleep(UInt32((end - now + 1.05) * 1_000_000)) }
    }

    func failureCounter(_ v: VaultdProcess) throws -> Int { try pinCounterColumn(v, "failures") }

    /// One column of the PIN's failure counter, from a copy of the store (0 when there is none).
    func pinCounterColumn(_ v: VaultdProcess, _ column: String) throws -> Int {
        try copyOfStore(v) { path in
            let r = try sqlite3(path, "SELECT coalesce(max(\(column)), 0) FROM failure_counter WHERE factor = 'pin';")
            guard r.exit == 0, let n = Int(r.out.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw IntegrationError("sqlite3 failed: \(r.err)")
            }
            return n
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the strict provider's `time.monotonic_ns()`.
func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// A small seeded generator, so a failing run can be repeated with its seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

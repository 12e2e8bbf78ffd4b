import Foundation
import VaultTestSupport
import XCTest
import FingerprintFactor
@testable import VaultCore
import VaultFactor
import VaultStore

/// model/unlock.pml and the real broker agree, step by step.
///
/// `Model` below is the part of the Promela model that concerns the unlock
/// machine, written straight from it (each rule names the .pml line it mirrors;
/// `testTheReferenceStillMirrorsThePromela` fails when one of those lines
/// changes, so the two cannot drift apart silently). The test walks every
/// state the model reaches within `depth` actions, breadth first, and for every
/// action enabled there replays the shortest way to that state plus the action
/// against a real Vault (real FingerprintFactor on an in-memory reader, real
/// PINFactor, a fake BankID), comparing after each step: locked or not, the
/// soft unlock there or not, the fingerprint record and its stale mark, the
/// PIN failure count and lockout, and which factor an unlock asks first.
/// docs/reliability.md ("The unlock machine, model-checked") says what it
/// leaves out.
final class UnlockModelReplayTests: XCTestCase {
    enum Action: String, CaseIterable {
        case scanMatch, scanMiss, cancel, timeout, pinRight, pinWrong, login, lock, enrollmentChange, restart
    }

    /// The model's variables that the unlock machine reads and writes.
    struct Model: Hashable {
        var pinSlot: Bool          // pin_slot (dev_slot = !pin_slot)
        var fpRec = true           // fp_rec
        var fpDig = 0              // fp_dig
        var stale = false          // stale
        var count = 0              // count (PIN failures, capped at 3)
        var lockout = false        // lockout
        var reader = 0             // reader (MAXDIG = 1)
        var vk = false             // vk_mem
        var rk = false             // rk_mem
        var softbox = false        // softbox
        var sbDig = 0              // sb_dig
        var fpFails = 0            // fp_fails

        static let free = 2        // #define FREE 2
        static let fpTries = 3     // #define FP_TRIES 3

        /// init → restart(): the model starts right after a start of vaultd.
        static func start(pin: Bool) -> Model {
            var m = Model(pinSlot: pin)
            m.restart()
            return m
        }

        // inline new_softbox(d) { softbox = 1; sb_dig = d; fp_fails = 0; box_misses = 0 }
        mutating func newSoftbox(_ d: Int) { softbox = true; sbDig = d; fpFails = 0 }
        // inline wipe_softbox() { softbox = 0; sb_dig = 0; fp_fails = 0 }
        mutating func wipeSoftbox() { softbox = false; sbDig = 0; fpFails = 0 }
        // :: fp_rec -> new_softbox(fp_dig)
        mutating func fillSoftbox() { if fpRec { newSoftbox(fpDig) } }
        // inline hard_open() { vk_mem = 1; fill_softbox() }
        mutating func hardOpen() { vk = true; fillSoftbox() }

        mutating func restart() {
            // vk_mem = 0; rk_mem = 0; strong_run = 0; fp_fails = 0; working = 0; busy = 0;
            vk = false; rk = false; fpFails = 0
            wipeSoftbox()
            // :: dev_slot && fp_rec -> new_softbox(fp_dig)
            // :: dev_slot && !fp_rec -> vk_mem = 1
            if !pinSlot && fpRec { newSoftbox(fpDig) } else if !pinSlot { vk = true }
        }

        /// The Env's and the Owner's guards (budgets left out: the depth bounds them).
        func enabled(_ a: Action) -> Bool {
            switch a {
            // :: atomic { fp_rec && !vk_mem && softbox -> scan() }
            case .scanMatch, .scanMiss, .timeout: return fpRec && !vk && softbox
            // :: atomic { fp_rec && !vk_mem && softbox -> scan_ends() }, or a request at a locked vault (release_old: skip)
            case .cancel: return !vk
            // budget_ok && pin_slot && !vk_mem && !lockout && !busy ->
            case .pinRight, .pinWrong: return pinSlot && !vk && !lockout
            // :: atomic { !working -> owner_login() }
            case .login: return true
            // locks_left > 0 && (pin_slot || fp_rec) && (vk_mem || rk_mem) ->
            case .lock: return (pinSlot || fpRec) && (vk || rk)
            // :: atomic { reader < MAXDIG -> reader++ }
            case .enrollmentChange: return reader < 1
            case .restart: return true
            }
        }

        mutating func apply(_ a: Action) {
            switch a {
            case .scanMatch:
                if softbox && sbDig == reader {          // :: SOFTBOX_OPENS ->
                    vk = true; fpFails = 0               //    vk_mem = 1; fp_fails = 0; box_misses = 0; W(4)
                } else if fpDig != reader {              // :: !(SOFTBOX_OPENS) && fp_dig != reader ->
                    fpRec = false; fpDig = 0; stale = true; fpFails = 0; wipeSoftbox()
                }                                        // (the FP_ROW_OPENS_VK branches are mutants only)
            case .scanMiss:
                fpFails += 1                             // fp_fails++;
                if fpFails >= Model.fpTries { wipeSoftbox() }   // :: fp_fails >= FP_TRIES -> wipe_softbox(); W(6)
            case .cancel, .timeout:
                break                                    // inline scan_ends() { skip }
            case .pinRight:
                count = min(count + 1, 3); lockout = count >= Model.free   // count_attempt()
                count = 0; lockout = false               // :: e == epoch && ok -> count = 0; lockout = 0; owed = 0;
                hardOpen(); rk = false                   //    hard_open(); rk_mem = 0; W(0)
            case .pinWrong:
                count = min(count + 1, 3)                // if :: count < 3 -> count++ :: else -> skip fi;
                lockout = count >= Model.free            // lockout = (count >= FREE);
            case .login:
                if vk { fillSoftbox() }                  // :: vk_mem -> fill_softbox(); working = 1
                else if pinSlot { rk = true }            // :: !vk_mem && ... && pin_slot -> rk_mem = 1; working = 1; W(2)
                else { hardOpen() }                      // :: !vk_mem && ... && !pin_slot && dev_slot -> hard_open(); working = 1; W(3)
            case .lock:
                vk = false; rk = false                   // locks_left--; vk_mem = 0; rk_mem = 0; working = 0
            case .enrollmentChange:
                reader += 1                              // reader++
            case .restart:
                restart()                                // restart()
            }
        }

        /// Which way in an unlock asks first: the fingerprint while its soft
        /// box lives, else the PIN unless locked out, else the login.
        var firstAsked: String { softbox && fpRec ? "scan" : (pinSlot && !lockout ? "pin" : "login") }
    }

    /// What the real vault shows after a step, in the model's terms.
    struct Seen: Equatable, CustomStringConvertible {
        var locked: Bool, softbox: Bool, fpRec: Bool, stale: Bool, count: Int, lockout: Bool, firstAsked: String?
        var description: String {
            "locked \(locked), soft unlock \(softbox), record \(fpRec), stale \(stale), PIN failures \(count), lockout \(lockout), asked first \(firstAsked ?? "-")"
        }
        init(locked: Bool, softbox: Bool, fpRec: Bool, stale: Bool, count: Int, lockout: Bool, firstAsked: String?) {
            (self.locked, self.softbox, self.fpRec, self.stale, self.count, self.lockout, self.firstAsked) =
                (locked, softbox, fpRec, stale, count, lockout, firstAsked)
        }
        init(_ m: Model, after a: Action) {
            self.init(locked: !m.vk, softbox: m.softbox, fpRec: m.fpRec, stale: m.stale, count: m.count, lockout: m.lockout,
                      firstAsked: nil)
        }
    }

    /// One replay: a fresh vault in the model's start state, driven by `actions`.
    final class Replay {
        let rig: CountRig
        var vault: Vault
        var store: VaultStore

        /// `template`: an enrolled vault's files (the first login, the PIN or not, the fingerprint), copied.
        init(from template: CountRig) throws {
            rig = try CountRig(copying: (template.dir, template.deviceKey))
            (vault, store) = try rig.restarted()   // the model starts after a start of vaultd
        }

        /// Does `a` to the real vault; returns what was asked first, for an unlock.
        func run(_ a: Action) async throws -> String? {
            rig.log.clear()
            let person = rig.person()
            switch a {
            case .scanMatch, .scanMiss, .cancel, .timeout:
                switch a {
                case .scanMatch: rig.reader.queue(.match(finger: "right-index"))
                case .scanMiss: rig.reader.queue(.noMatch)
                case .timeout: rig.reader.queue(.timeout)
                default: break
                }
                _ = await failure { try await self.vault.unlock(factor: nil, conversation: person) }
                return rig.log.events.first
            case .pinRight, .pinWrong:
                let p = rig.person(a == .pinRight ? CountTest.pin : CountTest.wrongPIN)
                _ = await failure { try await self.vault.unlock(factor: .pin, conversation: p) }
                return rig.log.events.first
            case .login:
                _ = try await vault.login(provider: "bankid", conversation: person)
            case .lock:
                await vault.lock(reason: "replay")
            case .enrollmentChange:
                rig.reader.reenrollFinger()
            case .restart:
                (vault, store) = try rig.restarted()
            }
            return nil
        }

        func seen(asked: String?) async throws -> Seen {
            let counter = try store.failureCounter(factor: "pin")
            return Seen(locked: vault.isLocked, softbox: await vault.fingerprintSoftUnlock, fpRec: await vault.fingerprintRecord,
                        stale: await vault.fingerprintStale, count: min(counter.failures, 3),
                        lockout: counter.lockedUntil > Int64(Date().timeIntervalSince1970), firstAsked: asked)
        }

        func cleanup() { rig.cleanup() }
    }

    /// Every state within `depth` actions of the start, each with the shortest way to it.
    func frontier(pin: Bool, depth: Int) -> [(Model, [Action])] {
        let start = Model.start(pin: pin)
        var seen: [Model: [Action]] = [start: []]
        var layer = [start]
        var order: [(Model, [Action])] = [(start, [])]
        for _ in 0..<depth {
            var next: [Model] = []
            for m in layer {
                for a in Action.allCases where m.enabled(a) {
                    var n = m
                    n.apply(a)
                    if seen[n] == nil {
                        let path = (seen[m] ?? []) + [a]
                        seen[n] = path
                        next.append(n)
                        order.append((n, path))
                    }
                }
            }
            layer = next
        }
        return order
    }

    /// Replays the shortest path to every reachable state, then every action
    /// enabled there; returns the first step where the vault and the model differ.
    func replayAll(pin: Bool, depth: Int) async throws -> (paths: Int, mismatch: String?) {
        var paths = 0
        // Enrolled once (Argon2id is the slow part), copied for every replay.
        let template = try CountRig()
        defer { template.cleanup() }
        do {
            _ = try await template.enrolledVault(pin: pin)
        }
        for (_, prefix) in frontier(pin: pin, depth: depth - 1) {
            var end = Model.start(pin: pin)
            for a in prefix { end.apply(a) }
            for a in Action.allCases where end.enabled(a) {
                paths += 1
                let replay = try Replay(from: template)
                defer { replay.cleanup() }
                var model = Model.start(pin: pin)
                if let m = try await compare(model, replay, asked: nil, after: [], expectAsked: nil) { return (paths, m) }
                var done: [Action] = []
                for step in prefix + [a] {
                    let expectAsked: String? = [.scanMatch, .scanMiss, .cancel, .timeout].contains(step) ? model.firstAsked
                        : [.pinRight, .pinWrong].contains(step) ? "pin" : nil
                    model.apply(step)
                    done.append(step)
                    let asked = try await replay.run(step)
                    if let m = try await compare(model, replay, asked: asked, after: done, expectAsked: expectAsked) { return (paths, m) }
                }
            }
        }
        return (paths, nil)
    }

    func compare(_ model: Model, _ replay: Replay, asked: String?, after steps: [Action], expectAsked: String?) async throws -> String? {
        var expected = Seen(model, after: steps.last ?? .restart)
        expected.firstAsked = expectAsked
        let got = try await replay.seen(asked: expectAsked == nil ? nil : asked)
        guard got != expected else { return nil }
        return "after \(steps.map(\.rawValue).joined(separator: ", ")) (PIN: \(model.pinSlot)):\n  model: \(expected)\n  vault: \(got)"
    }

    func testWithAPINTheVaultDoesWhatTheModelAllows() async throws {
        let started = ContinuousClock.now
        let (paths, mismatch) = try await replayAll(pin: true, depth: 5)   // depth 6: 311 paths, 75 s (Argon2id per PIN step)
        XCTAssertNil(mismatch, mismatch ?? "")
        XCTAssertGreaterThan(paths, 50)
        print("replayed \(paths) paths (PIN + fingerprint) in \(ContinuousClock.now - started)")
    }

    func testWithoutAPINTheVaultDoesWhatTheModelAllows() async throws {
        let started = ContinuousClock.now
        let (paths, mismatch) = try await replayAll(pin: false, depth: 6)
        XCTAssertNil(mismatch, mismatch ?? "")
        XCTAssertGreaterThan(paths, 20)
        print("replayed \(paths) paths (device slot + fingerprint) in \(ContinuousClock.now - started)")
    }

    /// The lines of model/unlock.pml that `Model` mirrors: when one changes,
    /// this fails, and the reference (and so the replay) must be updated with it.
    func testTheReferenceStillMirrorsThePromela() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("model/unlock.pml").path
        let pml = try String(contentsOfFile: path, encoding: .utf8)
        let mirrored = [
            "#define FREE      2", "#define FP_TRIES  3", "#define MAXDIG    1",
            "inline new_softbox(d) { softbox = 1; sb_dig = d; fp_fails = 0; box_misses = 0 }",
            "inline wipe_softbox() { softbox = 0; sb_dig = 0; fp_fails = 0 }",
            ":: fp_rec -> new_softbox(fp_dig)",
            "inline hard_open() { vk_mem = 1; fill_softbox() }",
            ":: dev_slot && fp_rec -> new_softbox(fp_dig)", ":: dev_slot && !fp_rec -> vk_mem = 1",
            "vk_mem = 1; fp_fails = 0; box_misses = 0; W(4)",
            "fp_rec = 0; fp_dig = 0; stale = 1; fp_fails = 0; wipe_softbox(); W(5)",
            "fp_fails++;", ":: fp_fails >= FP_TRIES -> wipe_softbox(); W(6)",
            "lockout = (count >= FREE);", "if :: count < 3 -> count++ :: else -> skip fi;",
            "count = 0; lockout = 0; owed = 0;", "hard_open(); rk_mem = 0; W(0)",
            "fill_softbox(); working = 1", "rk_mem = 1; working = 1; W(2)", "hard_open(); working = 1; W(3)",
            "locks_left--; vk_mem = 0; rk_mem = 0; working = 0",
            ":: atomic { fp_rec && !vk_mem && softbox -> scan() }",
            ":: atomic { fp_rec && !vk_mem && softbox -> scan_ends() }",
            "budget_ok && pin_slot && !vk_mem && !lockout && !busy ->",
            ":: atomic { reader < MAXDIG -> reader++ }",
        ]
        for line in mirrored {
            XCTAssertTrue(pml.contains(line), "model/unlock.pml no longer has “\(line)”: update UnlockModelReplayTests.Model")
        }
    }
}

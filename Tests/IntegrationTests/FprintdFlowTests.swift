import Foundation
import Locking
import VaultClient
import VaultProtocol
import VaultTestSupport
import XCTest

/// A real vaultd with `reader = "fprintd"` (or "auto") against the real fprintd
/// 1.94 and libfprint's virtual_device on a private system bus
/// (Tests/fprintd/fprintd-ctl; FprintdFixture). Fingers are enrolled through
/// fprintd's API; a "finger on the reader" is a `SCAN print-<finger>` line sent
/// to the virtual device when vaultd says "Touch the fingerprint reader".
final class FprintdFlowTests: VaultdTestCase {
    var fixture: FprintdFixture!
    var vaultds: [VaultdProcess] = []

    override func setUpWithError() throws {
        try super.setUpWithError()
        fixture = try FprintdFixture()
    }

    override func tearDownWithError() throws {
        // vaultd first: it is a client of the bus the fixture is about to stop.
        for v in vaultds { v.stop() }
        fixture?.down()
        try super.tearDownWithError()
    }

    func start(reader: String = "fprintd", fingers: [String] = ["right-index-finger"], scanTimeout: Int = 10,
               top: String = "") throws -> VaultdProcess {
        if !fingers.isEmpty { try fixture.ctl(["enroll"] + fingers) }
        let config = top + VaultdProcess.fastPINConfig + "[fingerprint]\nreader = \"\(reader)\"\nscan_timeout = \(scanTimeout)\n"
        let v = try makeVaultd(config: config, env: ["DBUS_SYSTEM_BUS_ADDRESS": fixture.address])
        vaultds.append(v)
        try v.start()
        return v
    }

    /// Sends the commands to the virtual device once vaultd has claimed it (off this thread).
    func sendSoon(_ commands: [String]) {
        let fixture = self.fixture!
        Thread.detachNewThread { _ = try? fixture.ctl(["send"] + commands) }
    }

    /// A prompt script that answers each "Touch the fingerprint reader" (and each
    /// "try again") with the next scan in `scans`.
    func touching(_ scans: [String], secrets: [String] = []) -> PromptScript {
        var left = scans
        return PromptScript(secrets: secrets) { [weak self] prompt in
            guard prompt.kind == .message, !left.isEmpty else { return }
            // Every sentence that asks for a finger names the reader.
            let text = prompt.text.lowercased()
            guard text.contains("reader") || text.contains("try again") else { return }
            self?.sendSoon([left.removeFirst()])
        }
    }

    func session(_ v: VaultdProcess, _ script: PromptScript) throws -> JSON {
        let c = try v.raw()
        defer { c.close() }
        try c.hello(interactive: true)
        return try c.call("session", ["account": "kari"], timeout: 60, onPrompt: script.handler)
    }

    func fingerprintLabel(_ v: VaultdProcess) throws -> String? {
        let c = try v.raw()
        defer { c.close() }
        return try c.call("factors").result?["factors"]?.arrayValue?
            .first { $0["factor"]?.stringValue == "fingerprint" }?["label"]?.stringValue
    }

    func hasFingerprintSlot(_ v: VaultdProcess) throws -> Bool {
        let out = try sqlite3(v.storePath, "SELECT id FROM keyslot WHERE id = 'fingerprint';")
        return out.out.contains("fingerprint")
    }

    /// Session, PIN, `vaultctl enroll fingerprint` with the enrolled finger, lock.
    func setUpEnrolled(_ v: VaultdProcess, finger: String = "right-index-finger") throws {
        try importSession(v, account: "kari", accessToken: "AT-fprintd-1", refreshToken: "RT-fprintd-1")
        enrollPIN(v)
        sendSoon(["SCAN print-" + finger])
        let r = v.vaultctl(["enroll", "fingerprint"])
        XCTAssertEqual(r.exit, 0, r.err)
        XCTAssertTrue(r.out.contains("Fingerprint enabled"), r.out)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
    }

    func testMatchReleasesTheSessionAndStatusNamesTheDevice() throws {
        let v = try start()
        try setUpEnrolled(v)
        let script = touching(["SCAN print-right-index-finger"])
        let r = try session(v, script)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(r.result?["access_token"], "AT-fprintd-1")
        XCTAssertEqual(script.secretPrompts, 0, "the fingerprint opened it: no PIN")
        let status = v.vaultctl(["status"])
        XCTAssertTrue(status.out.contains("Fingerprint enabled (Virtual device for debugging — fprintd does not notice a finger deleted and enrolled again"),
                      status.out)
        XCTAssertTrue(v.log.contains("fingerprint reader: fprintd"), "vaultd says which reader it uses")
        try fixture.assertClaimable()
    }

    func testThreeNoMatchesThenPINAndARetryIsNotCounted() throws {
        let v = try start()
        try setUpEnrolled(v)
        let other = "SCAN print-left-thumb"
        let script = touching(["RETRY 1", other, other, other], secrets: [Self.pin])
        let r = try session(v, script)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(script.secretPrompts, 1, "after three failed scans the PIN: \(script.messages)")
        XCTAssertTrue(script.messages.contains { $0.contains("too short") && $0.contains("3 tries left") }, "\(script.messages)")
        XCTAssertTrue(script.messages.contains { $0.contains("last try") }, "\(script.messages)")
        XCTAssertTrue(try hasFingerprintSlot(v), "failed scans are no enrollment change")
        try fixture.assertClaimable()
    }

    func testUnplugMidScanFallsBackWithinASecond() throws {
        let v = try start()
        try setUpEnrolled(v)
        var sent = ContinuousClock.now
        var pinAsked: ContinuousClock.Instant?
        let script = PromptScript(secrets: [Self.pin]) { [weak self] prompt in
            if prompt.kind == .message, prompt.text.contains("Touch") {
                sent = ContinuousClock.now
                self?.sendSoon(["ERROR 5"])
            }
            if prompt.kind == .secret { pinAsked = ContinuousClock.now }
        }
        let r = try session(v, script)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(script.secretPrompts, 1)
        XCTAssertTrue(script.messages.contains { $0.contains("disconnected") }, "\(script.messages)")
        let took = try XCTUnwrap(pinAsked) - sent
        XCTAssertLessThan(took, .seconds(1.5), "the fallback comes at once (the send itself waits for the claim)")
    }

    func testAnEnrollmentChangeInFprintdClearsTheSlot() throws {
        // A reader that cannot identify (as the virtual device) is asked by
        // fprintd to verify one finger for "any" (VerifyFingerSelected): each
        // scan below is that finger's, so every match is a real match.
        try fixture.ctl(["enroll", "right-index-finger"])
        for (what, change) in [("a finger added", ["enroll", "left-index-finger"]), ("a finger removed", ["delete", "left-index-finger"])] {
            let v = try start(fingers: [])
            try setUpEnrolled(v, finger: try selectedFinger())
            XCTAssertTrue(try hasFingerprintSlot(v))
            try fixture.ctl(change)
            let script = touching(["SCAN print-" + (try selectedFinger())], secrets: [Self.pin])
            let r = try session(v, script)
            XCTAssertTrue(r.isOK, "\(what): \(r.text)")
            XCTAssertTrue(script.messages.contains { $0.contains("Your fingerprints on this computer have changed") && $0.contains("BankID or Vipps") },
                          "\(what): \(script.messages)")
            XCTAssertFalse(try hasFingerprintSlot(v), "\(what): the stale slot is gone")
            XCTAssertEqual(try fingerprintLabel(v), "Fingerprint must be set up again (fingerprints changed)", what)
            v.stop()
        }
    }

    func selectedFinger() throws -> String {
        try fixture.ctl(["selected"]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func testAnotherProgramHoldingTheReaderAndFprintdDying() throws {
        let v = try start()
        try setUpEnrolled(v)
        let holder = try fixture.hold()
        let busy = PromptScript(secrets: [Self.pin])
        XCTAssertTrue(try session(v, busy).isOK)
        XCTAssertTrue(busy.messages.contains { $0.contains("Another program is using the fingerprint reader") }, "\(busy.messages)")
        XCTAssertEqual(busy.secretPrompts, 1)
        holder.release()
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)

        let fixture = try XCTUnwrap(self.fixture), root = fixture.root
        let dying = PromptScript(secrets: [Self.pin]) { prompt in
            guard prompt.kind == .message, prompt.text.contains("Touch") else { return }
            Thread.detachNewThread {
                // Killed once vaultd has claimed the device, mid-scan.
                let socket = root + "/vdev.sock"
                unlink(socket)
                for _ in 0..<500 where !FileManager.default.fileExists(atPath: socket) { usleep(10_000) }
                _ = try? fixture.ctl(["kill-fprintd"])
            }
        }
        let started = ContinuousClock.now
        let r = try session(v, dying)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(8), "no hang")
        XCTAssertEqual(dying.secretPrompts, 1)
        XCTAssertTrue(dying.messages.contains { $0.contains("fingerprint service stopped") }, "\(dying.messages)")
        XCTAssertTrue(v.isRunning)
    }

    /// Issue 21's attacker against a real vaultd: while vaultd's scan waits with
    /// no finger on the reader, another client of the system bus sends
    /// `VerifyStatus("verify-match", true)` on the device's path. The session is
    /// not released by it (the scan times out and the PIN is asked), vaultd's
    /// debug log counts the ignored signal, and a real match later still opens.
    func testAForgedMatchOnTheBusDoesNotReleaseTheSession() throws {
        let v = try start(scanTimeout: 4, top: "log_level = \"debug\"\n")
        try setUpEnrolled(v)
        let fixture = try XCTUnwrap(self.fixture), root = fixture.root
        let forged = Locked<[String]>([])
        let script = PromptScript(secrets: [Self.pin]) { prompt in
            guard prompt.kind == .message, prompt.text.contains("Touch") else { return }
            Thread.detachNewThread {
                // Once vaultd has claimed the device: subscribed and waiting.
                let socket = root + "/vdev.sock"
                unlink(socket)
                for _ in 0..<300 where !FileManager.default.fileExists(atPath: socket) { usleep(10_000) }
                if let name = try? fixture.ctl(["forge", "verify-match"]) {
                    forged.withLock { $0.append(name.trimmingCharacters(in: .whitespacesAndNewlines)) }
                }
            }
        }
        let r = try session(v, script)
        let forgers = forged.withLock { $0 }
        XCTAssertEqual(forgers.count, 1, "the forged signal was sent once, mid-scan")
        XCTAssertFalse(r.isOK && script.secretPrompts == 0, "the forged match released the session: \(r.text)")
        XCTAssertEqual(script.secretPrompts, 1, "no finger, so the PIN: \(script.messages)")
        XCTAssertTrue(v.log.contains("ignored 1 signal(s)") && v.log.contains(forgers.first ?? "?"), v.log)
        try fixture.assertClaimable()

        // fprintd's own match still opens it, with nothing ignored.
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let real = touching(["SCAN print-right-index-finger"])
        let again = try session(v, real)
        XCTAssertTrue(again.isOK, again.text)
        XCTAssertEqual(again.result?["access_token"], "AT-fprintd-1")
        XCTAssertEqual(real.secretPrompts, 0)
        XCTAssertEqual(v.log.components(separatedBy: "fprintd scan: ignored ").count - 1, 1, "only the forged signal was ignored")
    }

    /// A sandboxed app asking `factors` in a loop from several connections at
    /// once: each look at the fingerprint opened a system-bus connection and
    /// asked fprintd, which asks polkit (services the login screen and sudo
    /// share), once per request. Now at most once per two seconds, one look at
    /// a time (`FprintdReader.probeCacheTime`), counted at fprintd with dbus-monitor.
    func testAnAppAskingInALoopReachesFprintdOnceInTwoSeconds() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-monitor") else {
            throw cannotRunHere("dbus-monitor is not installed (Debian: dbus-bin, which dbus brings; scripts/setup installs it)")
        }
        let v = try start()
        let monitorLog = v.root + "/monitor.log"
        _ = FileManager.default.createFile(atPath: monitorLog, contents: nil)
        let monitor = Process()
        monitor.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-monitor")
        monitor.arguments = ["--address", fixture.address, "type='method_call',member='ListEnrolledFingers'"]
        monitor.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: monitorLog))
        try monitor.run()
        defer { monitor.terminate(); monitor.waitUntilExit() }
        func heard() -> Int {
            let text = (try? String(contentsOfFile: monitorLog, encoding: .utf8)) ?? ""
            return text.components(separatedBy: "member=ListEnrolledFingers").count - 1
        }
        // The monitor hears fprintd's own list (fprintd-ctl's) before the app asks: it can hear.
        let ready = ContinuousClock.now + .seconds(10)
        while !((try? String(contentsOfFile: monitorLog, encoding: .utf8)) ?? "").contains("NameAcquired"), ContinuousClock.now < ready {
            usleep(20_000)
        }
        try fixture.ctl(["list"])
        while heard() == 0, ContinuousClock.now < ready { usleep(20_000) }
        XCTAssertEqual(heard(), 1, "the monitor does not hear ListEnrolledFingers: it would prove nothing")
        let before = heard()
        // Four connections, 25 `factors` each, all sent before any answer is read; then
        // 50 more one after another, each after the last one's answer (an app polling).
        let asks = """
            import json, socket, sys
            conns = []
            for c in range(4):
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(60)
                s.connect(sys.argv[1])
                s.sendall(b"".join(json.dumps({"id": i, "op": "factors" if i else "hello", "version": 1}).encode() + b"\\n" for i in range(26)))
                conns.append((s, s.makefile("rb")))
            answered = sum(1 for _, f in conns for _ in range(26) if json.loads(f.readline()).get("ok"))
            s, f = conns[0]
            for i in range(50):
                s.sendall(json.dumps({"id": 100 + i, "op": "factors"}).encode() + b"\\n")
                answered += 1 if json.loads(f.readline()).get("ok") else 0
            print(answered)
            """
        let started = ContinuousClock.now
        let r = try runSandboxed(appID: "org.example.Nabo", script: asks, socketPath: v.socketPath, scratch: v.root)
        let took = ContinuousClock.now - started
        XCTAssertEqual(r.out.trimmingCharacters(in: .whitespacesAndNewlines), "154", r.err)
        usleep(300_000)   // the monitor's last lines
        let calls = heard() - before
        let bound = 2 + Int(took / .seconds(2))
        XCTAssertLessThanOrEqual(calls, bound, "fprintd asked \(calls) times for 150 requests in \(took)")
    }

    func testVaultdStoppedMidScanLeavesTheReaderFree() throws {
        let v = try start()
        try setUpEnrolled(v)
        fixture.forgetSocket()
        // A client waiting at the fingerprint prompt, on its own connection and thread.
        let client = WaitingClient(try v.raw())
        try client.raw.hello(interactive: true)
        Thread.detachNewThread {
            _ = try? client.raw.call("session", ["account": "kari"], timeout: 30, onPrompt: PromptScript().handler)
        }
        try fixture.waitUntilClaimed()
        XCTAssertEqual(v.stop()?.exit, 0, "vaultd stops mid-scan")
        try fixture.assertClaimable()
    }

    func testAutoUsesFprintdWhenItHasAReaderAndNothingOtherwise() throws {
        let v = try start(reader: "auto")
        try setUpEnrolled(v)
        XCTAssertTrue(try fingerprintLabel(v)?.hasPrefix("Fingerprint enabled (Virtual device for debugging") == true)
        v.stop()

        // No fprintd on the bus: no fingerprint at all, and no error.
        try fixture.ctl(["kill-fprintd"])
        try v.start()
        XCTAssertNil(try fingerprintLabel(v), "auto without fprintd offers no fingerprint")
        XCTAssertEqual(v.vaultctl(["status"]).exit, 0)
    }
}

/// A client handed to one other thread, which alone uses it from then on.
private final class WaitingClient: @unchecked Sendable {
    let raw: RawClient
    init(_ raw: RawClient) { self.raw = raw }
}

import Foundation
import VaultProtocol
import VaultTestSupport
import XCTest

/// The vault locks with the desktop: logind's `Session.Lock`,
/// `PrepareForSleep(true)` and `SessionRemoved` for our session on a private
/// system bus (python3-dbusmock's logind template), and the ScreenSaver's
/// `ActiveChanged(true)` on a private session bus. vaultd is the real one,
/// started with those two buses; a watcher hears each `locked`.
final class DesktopLockTests: VaultdTestCase {
    var desktop: Desktop?

    override func tearDown() {
        desktop?.down()
        desktop = nil
        super.tearDown()
    }

    /// vaultd on the private desktop, with the PIN set up, and a watcher.
    func start(config: String = VaultdProcess.fastPINConfig, sessionID: String? = "c7", prepare: [String] = [],
               pin: Bool = true) throws -> (VaultdProcess, RawClient) {
        let d = try Desktop()
        desktop = d
        for command in prepare { try d.ctl(command) }
        var env = ["DBUS_SYSTEM_BUS_ADDRESS": d.system, "DBUS_SESSION_BUS_ADDRESS": d.session]
        if let sessionID { env["XDG_SESSION_ID"] = sessionID }
        let v = try startVaultd(config: config, env: env)
        if pin { enrollPIN(v) }
        let watcher = try v.raw()
        try watcher.hello()
        XCTAssertTrue(try watcher.call("watch").isOK)
        return (v, watcher)
    }

    /// Unlocks (when locked) and checks that the watcher heard it.
    func unlockAndHear(_ v: VaultdProcess, _ watcher: RawClient) throws {
        guard try status(v)["locked"] == .bool(true) else { return }
        let (r, _) = try unlock(v, pins: [VaultdTestCase.pin])
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(try watcher.readJSON(timeout: 5)["kind"], "unlocked")
    }

    func testScreenLockSleepLogoutAndTheScreenSaverEachLockTheVault() throws {
        let (v, watcher) = try start()
        XCTAssertTrue(v.log.contains("locking with the desktop"), v.log)
        for (signal, reason) in [("lock", "screen_locked"), ("sleep", "sleep"), ("screensaver", "screen_locked"), ("logout", "session_ended")] {
            try unlockAndHear(v, watcher)
            try desktop?.ctl(signal)
            let event = try watcher.readJSON(timeout: 5)
            XCTAssertEqual(event["kind"], "locked", "\(signal): \(event.text)")
            XCTAssertEqual(event["reason"]?.stringValue, reason, "\(signal): \(event.text)")
            XCTAssertEqual(try status(v)["locked"], .bool(true), "the vault stayed unlocked after \(signal)")
        }
        let audit = try auditEntries(v)
        XCTAssertTrue(audit.contains { $0["event"] == "lock" && $0["detail"]?["reason"] == "sleep" }, "\(audit.map(\.text))")
    }

    /// Issue 21's rule for the desktop's signals: believed only from the unique
    /// name that owns org.freedesktop.login1 (system bus) or
    /// org.freedesktop.ScreenSaver (session bus). Another client of each bus
    /// sends the very signals the mocks send; none locks the vault, each is
    /// logged as ignored, and the mocks' own signals still lock it.
    func testForgedDesktopSignalsFromOtherClientsDoNotLock() throws {
        let (v, watcher) = try start()
        let d = try XCTUnwrap(desktop)
        try unlockAndHear(v, watcher)
        let c7 = "/org/freedesktop/login1/session/c7"
        let forgeries: [(member: String, bus: String, signals: [[String]])] = [
            ("Lock", d.system, [[c7, "org.freedesktop.login1.Session", "Lock", ""]]),
            ("PrepareForSleep", d.system, [["/org/freedesktop/login1", "org.freedesktop.login1.Manager", "PrepareForSleep", "b", "true"]]),
            ("SessionRemoved", d.system, [["/org/freedesktop/login1", "org.freedesktop.login1.Manager", "SessionRemoved", "so", "c7", c7]]),
            ("ActiveChanged", d.session, [["/org/freedesktop/ScreenSaver", "org.freedesktop.ScreenSaver", "ActiveChanged", "b", "true"]]),
            // The bus's own signal forged too, naming the forger logind's new
            // owner, then a Lock from the same connection: still not logind.
            ("Lock", d.system, [["/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged", "sss",
                                 "org.freedesktop.login1", "", "$me"],
                                [c7, "org.freedesktop.login1.Session", "Lock", ""]]),
        ]
        for forgery in forgeries {
            let forger = try forge(forgery.bus, forgery.signals)
            XCTAssertEqual(watcher.readLine(timeout: 1), .timeout, "a forged \(forgery.member) from \(forger) locked the vault")
            XCTAssertEqual(try status(v)["locked"], .bool(false), "a forged \(forgery.member) from \(forger) locked the vault")
            XCTAssertTrue(v.log.contains("ignored \(forgery.member) from \(forger), which does not own"), "\(forgery.member): \(v.log)")
        }
        // The services' own signals, from the names' owners, still lock.
        for (signal, reason) in [("lock", "screen_locked"), ("sleep", "sleep"), ("screensaver", "screen_locked")] {
            try unlockAndHear(v, watcher)
            try d.ctl(signal)
            let event = try watcher.readJSON(timeout: 5)
            XCTAssertEqual(event["kind"], "locked", "\(signal): \(event.text)")
            XCTAssertEqual(event["reason"]?.stringValue, reason, "\(signal): \(event.text)")
        }
    }

    /// Sends `signals` ([path, interface, member, signature, args...]; "$me" is
    /// the sender's own unique name) from one new connection to `bus`, as any
    /// client may; returns that connection's unique name once the bus has routed them.
    func forge(_ bus: String, _ signals: [[String]]) throws -> String {
        let script = """
            import json, sys
            import dbus, dbus.lowlevel
            bus = dbus.bus.BusConnection(sys.argv[1])
            me = bus.get_unique_name()
            for path, interface, member, signature, *args in json.loads(sys.argv[2]):
                message = dbus.lowlevel.SignalMessage(path, interface, member)
                values = [me if a == "$me" else (a == "true") if signature == "b" else a for a in args]
                if signature:
                    message.append(*values, signature=signature)
                bus.send_message(message)
            bus.flush()
            bus.get_name_owner("org.freedesktop.DBus")  # a round trip: the signals were routed
            print(me)
            """
        let json = String(decoding: try JSONSerialization.data(withJSONObject: signals), as: UTF8.self)
        let r = try runCommand([Desktop.python, "-c", script, bus, json], environment: childEnvironment([:]), timeout: 20)
        guard r.status == 0 else { throw IntegrationError("forging \(signals): \(r.stderr)") }
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func testWakingAndAnotherSessionEndingLeaveTheVaultOpen() throws {
        let (v, watcher) = try start()
        try unlockAndHear(v, watcher)
        try desktop?.ctl("wake")
        try desktop?.ctl("logout-other")
        XCTAssertEqual(watcher.readLine(timeout: 0.5), .timeout)
        XCTAssertEqual(try status(v)["locked"], .bool(false))
    }

    func testTheSessionIsFoundByPIDWithoutXDGSessionID() throws {
        let (v, watcher) = try start(sessionID: nil)
        try unlockAndHear(v, watcher)
        try desktop?.ctl("lock")
        XCTAssertEqual(try watcher.readJSON(timeout: 5)["reason"], "screen_locked")
        XCTAssertEqual(try status(v)["locked"], .bool(true))
    }

    func testTheDisplaySessionIsUsedWhenThePIDHasNone() throws {
        let (v, watcher) = try start(sessionID: nil, prepare: ["display-only"])
        try unlockAndHear(v, watcher)
        try desktop?.ctl("lock")
        XCTAssertEqual(try watcher.readJSON(timeout: 5)["reason"], "screen_locked")
        XCTAssertEqual(try status(v)["locked"], .bool(true))
    }

    func testTurnedOffTheVaultStaysUnlocked() throws {
        let (v, watcher) = try start(config: "lock_on_screen_lock = false\n" + VaultdProcess.fastPINConfig)
        try unlockAndHear(v, watcher)
        for signal in ["lock", "sleep", "screensaver", "logout"] { try desktop?.ctl(signal) }
        XCTAssertEqual(watcher.readLine(timeout: 0.5), .timeout)
        XCTAssertEqual(try status(v)["locked"], .bool(false))
    }

    func testAVaultWithoutAnUnlockMethodIsNotLocked() throws {
        // As with the idle lock: only a new login could open it again.
        let (v, watcher) = try start(pin: false)
        try desktop?.ctl("lock")
        XCTAssertEqual(watcher.readLine(timeout: 0.5), .timeout)
        XCTAssertEqual(try status(v)["locked"], .bool(false))
    }

    func testWithoutBusesVaultdRunsAndSaysSo() throws {
        let v = try startVaultd(env: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/system_bus_socket"])
        enrollPIN(v)
        XCTAssertEqual(try status(v)["locked"], .bool(false))
        XCTAssertTrue(v.log.contains("does not lock with logind"), v.log)
        XCTAssertTrue(v.log.contains("does not lock with the ScreenSaver"), v.log)
    }
}

/// Tests/desktop/desktop-bus-ctl's private buses and mocks, for one test.
final class Desktop {
    static let python = "/usr/bin/python3"
    static let script = repositoryRoot + "/Tests/desktop/desktop-bus-ctl"

    let root: String
    var system: String { "unix:path=\(root)/system.sock" }
    var session: String { "unix:path=\(root)/session.sock" }

    init() throws {
        let hasDaemon = FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")
        let hasMock = (try? runCommand([Self.python, "-c", "import dbus, dbusmock"], environment: childEnvironment([:]), timeout: 20))?.status == 0
        guard hasDaemon, hasMock else {
            throw cannotRunHere("the desktop lock tests need dbus-daemon and python3-dbusmock: run scripts/setup (apt: dbus python3-dbusmock)")
        }
        // Short: the bus sockets live in it (108-byte socket paths).
        root = "/tmp/dsk-" + UUID().uuidString.prefix(8).lowercased()
        try ctl("up")
    }

    @discardableResult
    func ctl(_ command: String) throws -> String {
        let r = try runCommand([Self.python, Self.script, root, command], environment: childEnvironment([:]), timeout: 30)
        guard r.status == 0 else { throw IntegrationError("desktop-bus-ctl \(command): \(r.stderr)") }
        return r.stdout
    }

    func down() {
        _ = try? ctl("down")
        try? FileManager.default.removeItem(atPath: root)
    }
}

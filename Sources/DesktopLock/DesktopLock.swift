import CGIO
import Foundation

/// Why the desktop says the vault should lock. The raw value is the reason
/// the audit log and the `locked` event carry.
public enum DesktopLockCause: String, Sendable {
    /// logind's `Session.Lock` for our session, or the session bus's
    /// `org.freedesktop.ScreenSaver.ActiveChanged(true)`.
    case screenLocked = "screen_locked"
    /// logind's `Manager.PrepareForSleep(true)`: the machine is about to suspend.
    case sleep
    /// logind's `Manager.SessionRemoved` for our session: the person logged out.
    case sessionEnded = "session_ended"
}

/// Listens to the desktop for the moments the vault should lock: the screen
/// locks, the machine goes to sleep, the person logs out. Through GIO's
/// GDBus, on one thread of its own that sleeps in a GLib main loop between
/// signals (no polling).
///
/// The buses are found as GIO finds them: `DBUS_SYSTEM_BUS_ADDRESS` (else the
/// standard socket) for logind, `DBUS_SESSION_BUS_ADDRESS` for the
/// ScreenSaver. A bus or service that is not there is logged and skipped,
/// never an error: vaultd runs on machines without a desktop.
///
/// Signals are matched on interface, member and path, not on the sender: any
/// process on the bus could send one, and all it can do is lock the vault,
/// which a process of the user can do anyway (`vaultctl lock`).
public final class DesktopLockWatcher: @unchecked Sendable {
    // @unchecked: after `start` returns, `sessionPath` is read only on the
    // watcher's own thread (the signal callbacks run there).
    static let logind = "org.freedesktop.login1"
    static let managerPath = "/org/freedesktop/login1"
    static let managerInterface = "org.freedesktop.login1.Manager"
    static let sessionInterface = "org.freedesktop.login1.Session"
    static let screenSaverInterface = "org.freedesktop.ScreenSaver"

    let sessionID: String?
    let onLock: @Sendable (DesktopLockCause) -> Void
    let log: @Sendable (String) -> Void
    /// Our logind session's object path, once found.
    var sessionPath: String?

    /// `sessionID`: `XDG_SESSION_ID` when set; otherwise logind is asked
    /// (`findSession`).
    public init(sessionID: String?, onLock: @escaping @Sendable (DesktopLockCause) -> Void,
                log: @escaping @Sendable (String) -> Void) {
        self.sessionID = sessionID
        self.onLock = onLock
        self.log = log
    }

    /// Connects and subscribes, then returns; the signals arrive from then on.
    /// Returns what it listens to (empty when neither bus is there).
    @discardableResult
    public func start() -> [String] {
        let ready = DispatchSemaphore(value: 0)
        let listening = ListeningBox()
        let thread = Thread { [self] in
            let context = g_main_context_new()
            g_main_context_push_thread_default(context)
            listening.value = subscribe()
            ready.signal()
            guard !listening.value.isEmpty else { return }
            // Runs for the life of vaultd: the connections stay open with it.
            let loop = g_main_loop_new(context, gboolean(0))
            g_main_loop_run(loop)
        }
        thread.name = "desktop-lock"
        thread.start()
        ready.wait()
        return listening.value
    }

    /// Opens both buses and subscribes to what each offers.
    func subscribe() -> [String] {
        var out: [String] = []
        let me = Unmanaged.passRetained(self).toOpaque()
        if let system = Self.connect(G_BUS_TYPE_SYSTEM, log: log) {
            sessionPath = findSession(system)
            if let sessionPath {
                listen(system, interface: Self.sessionInterface, member: "Lock", path: sessionPath, userData: me)
                out.append("logind session lock (\(sessionPath))")
            } else {
                log("logind does not know this process's session: screen locks are heard only through the ScreenSaver")
            }
            listen(system, interface: Self.managerInterface, member: "PrepareForSleep", path: Self.managerPath, userData: me)
            listen(system, interface: Self.managerInterface, member: "SessionRemoved", path: Self.managerPath, userData: me)
            out.append("logind sleep and logout")
        } else {
            log("no system bus: the vault does not lock with logind (screen lock, sleep, logout)")
        }
        if Self.hasSessionBus(), let session = Self.connect(G_BUS_TYPE_SESSION, log: log) {
            listen(session, interface: Self.screenSaverInterface, member: "ActiveChanged", path: nil, userData: me)
            out.append("ScreenSaver")
        } else {
            log("no session bus: the vault does not lock with the ScreenSaver")
        }
        if out.isEmpty { Unmanaged<DesktopLockWatcher>.fromOpaque(me).release() }
        return out
    }

    /// A signal, on the watcher's thread.
    func signal(_ member: String, _ parameters: OpaquePointer?) {
        switch member {
        case "Lock":
            onLock(.screenLocked)
        case "ActiveChanged":
            if Self.bool(parameters, 0) == true { onLock(.screenLocked) }
        case "PrepareForSleep":
            if Self.bool(parameters, 0) == true { onLock(.sleep) }
        case "SessionRemoved":
            if let sessionPath, Self.string(parameters, 1) == sessionPath { onLock(.sessionEnded) }
        default:
            break
        }
    }

    /// Our session's object path: `GetSession(XDG_SESSION_ID)`, else
    /// `GetSessionByPID(our pid)`, else the user's display session (logind's
    /// `User.Display`: the graphical session, where vaultd started by the
    /// systemd user manager, in no session of its own, finds it); nil when
    /// logind has none of them.
    func findSession(_ bus: OpaquePointer) -> String? {
        if let sessionID, !sessionID.isEmpty {
            return objectPath(call(bus, "GetSession", Self.tuple([g_variant_new_string(sessionID)])), 0)
        }
        if let path = objectPath(call(bus, "GetSessionByPID", Self.tuple([g_variant_new_uint32(UInt32(getpid()))])), 0) {
            return path
        }
        guard let user = objectPath(call(bus, "GetUser", Self.tuple([g_variant_new_uint32(getuid())])), 0) else { return nil }
        let arguments = Self.tuple([g_variant_new_string("org.freedesktop.login1.User"), g_variant_new_string("Display")])
        let reply = call(bus, "Get", arguments, path: user, interface: "org.freedesktop.DBus.Properties")
        // (v) holding (so): the session's id and path; "/" when the user has no display session.
        let boxed = reply.flatMap { Self.child($0, 0) }
        defer { if let reply { g_variant_unref(reply) }; if let boxed { g_variant_unref(boxed) } }
        guard let boxed, let display = g_variant_get_variant(boxed) else { return nil }
        defer { g_variant_unref(display) }
        let path = Self.string(display, 1)
        return path == "/" ? nil : path
    }

    /// Child `index` of a reply, when it is a string or object path; frees the reply.
    func objectPath(_ reply: OpaquePointer?, _ index: Int) -> String? {
        guard let reply else { return nil }
        defer { g_variant_unref(reply) }
        return Self.string(reply, index)
    }

    func call(_ bus: OpaquePointer, _ method: String, _ arguments: OpaquePointer?, path: String = managerPath,
              interface: String = managerInterface) -> OpaquePointer? {
        var error: UnsafeMutablePointer<GError>?
        // No auto-start: a logind that is not running is not there; the bus
        // trying to start it would only hold vaultd's start.
        let reply = g_dbus_connection_call_sync(bus, Self.logind, path, interface, method, arguments,
                                                nil, G_DBUS_CALL_FLAGS_NO_AUTO_START, 2000, nil, &error)
        if let error {
            log("logind \(method): \(String(cString: error.pointee.message))")
            g_error_free(error)
        }
        return reply
    }

    func listen(_ bus: OpaquePointer, interface: String, member: String, path: String?, userData: UnsafeMutableRawPointer) {
        g_dbus_connection_signal_subscribe(bus, nil, interface, member, path, nil, G_DBUS_SIGNAL_FLAGS_NONE,
                                           { _, _, _, _, member, parameters, userData in
            guard let member, let userData else { return }
            Unmanaged<DesktopLockWatcher>.fromOpaque(userData).takeUnretainedValue().signal(String(cString: member), parameters)
        }, userData, nil)
    }

    /// Whether a session bus is announced. Asked first because without one GIO
    /// would try to autolaunch a bus for an X display.
    static func hasSessionBus() -> Bool {
        if let address = getenv("DBUS_SESSION_BUS_ADDRESS"), address.pointee != 0 { return true }
        guard let runtime = getenv("XDG_RUNTIME_DIR") else { return false }
        return access(String(cString: runtime) + "/bus", F_OK) == 0
    }

    /// A connection of our own to the bus, or nil (logged) when there is none.
    static func connect(_ type: GBusType, log: (String) -> Void) -> OpaquePointer? {
        var error: UnsafeMutablePointer<GError>?
        guard let address = g_dbus_address_get_for_bus_sync(type, nil, &error) else {
            if let error { g_error_free(error) }
            return nil
        }
        defer { g_free(address) }
        let flags = GDBusConnectionFlags(rawValue: G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT.rawValue
                                         | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION.rawValue)
        guard let connection = g_dbus_connection_new_for_address_sync(address, flags, nil, nil, &error) else {
            if let error {
                log("cannot connect to the D-Bus bus: \(String(cString: error.pointee.message))")
                g_error_free(error)
            }
            return nil
        }
        // A bus going away must not end vaultd.
        g_dbus_connection_set_exit_on_close(connection, gboolean(0))
        return connection
    }

    /// A floating tuple of floating values (the call takes it over).
    static func tuple(_ values: [OpaquePointer?]) -> OpaquePointer? {
        var children = values
        return children.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
    }

    /// Child `index` of a tuple, when it is a boolean.
    static func bool(_ tuple: OpaquePointer?, _ index: Int) -> Bool? {
        guard let child = child(tuple, index) else { return nil }
        defer { g_variant_unref(child) }
        guard String(cString: g_variant_get_type_string(child)) == "b" else { return nil }
        return g_variant_get_boolean(child) != 0
    }

    /// Child `index` of a tuple, when it is a string or an object path.
    static func string(_ tuple: OpaquePointer?, _ index: Int) -> String? {
        guard let child = child(tuple, index) else { return nil }
        defer { g_variant_unref(child) }
        let type = String(cString: g_variant_get_type_string(child))
        guard type == "s" || type == "o" else { return nil }
        return String(cString: g_variant_get_string(child, nil))
    }

    static func child(_ tuple: OpaquePointer?, _ index: Int) -> OpaquePointer? {
        guard let tuple, g_variant_is_container(tuple) != 0, index < g_variant_n_children(tuple) else { return nil }
        return g_variant_get_child_value(tuple, gsize(index))
    }
}

/// What `start`'s thread found, handed back across the semaphore.
private final class ListeningBox: @unchecked Sendable {
    // @unchecked: written before the semaphore is signalled, read after it is waited on.
    var value: [String] = []
}

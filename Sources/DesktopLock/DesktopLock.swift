import CGIO
import Dispatch
import FoundationEssentials
import Locking

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
/// Signals are believed only from the service that owns the name: the watcher
/// asks each bus which unique name owns `org.freedesktop.login1` (system bus)
/// and `org.freedesktop.ScreenSaver` (session bus), subscribes with that name as
/// the sender (and checks it again in the callback), and follows
/// `NameOwnerChanged` to the next owner. Any process on either bus can send a
/// `Lock`, `PrepareForSleep` or `ActiveChanged`; one from anyone else is ignored
/// and counted in the log. A forged signal could only have locked the vault
/// (which any process of the user can do with `vaultctl lock`), never opened it,
/// but the rule is the fingerprint reader's: the verdict comes from its source.
public final class DesktopLockWatcher: @unchecked Sendable {
    // @unchecked: after `start` returns, `sessionPath` and `sources` are used
    // only on the watcher's own thread (the signal callbacks run there).
    static let logind = "org.freedesktop.login1"
    static let screenSaver = "org.freedesktop.ScreenSaver"
    static let daemon = "org.freedesktop.DBus"
    static let managerPath = "/org/freedesktop/login1"
    static let managerInterface = "org.freedesktop.login1.Manager"
    static let sessionInterface = "org.freedesktop.login1.Session"
    static let screenSaverInterface = "org.freedesktop.ScreenSaver"

    let sessionID: String?
    let onLock: @Sendable (DesktopLockCause) -> Void
    let log: @Sendable (String) -> Void
    /// Our logind session's object path, once found.
    var sessionPath: String?
    /// logind and the ScreenSaver: whose signals are believed.
    var sources: [Source] = []

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
        runOnNewThread(named: "desktop-lock") { [self] in
            let context = g_main_context_new()
            g_main_context_push_thread_default(context)
            listening.value = subscribe()
            ready.signal()
            guard !listening.value.isEmpty else { return }
            // Runs for the life of vaultd: the connections stay open with it.
            let loop = g_main_loop_new(context, gboolean(0))
            g_main_loop_run(loop)
        }
        ready.wait()
        return listening.value
    }

    /// Opens both buses and subscribes to what each offers.
    func subscribe() -> [String] {
        var out: [String] = []
        let me = Unmanaged.passRetained(self).toOpaque()
        if let system = Self.connect(G_BUS_TYPE_SYSTEM, log: log) {
            sessionPath = findSession(system)
            var signals = [Source.Signal(interface: Self.managerInterface, member: "PrepareForSleep", path: Self.managerPath),
                           Source.Signal(interface: Self.managerInterface, member: "SessionRemoved", path: Self.managerPath)]
            if let sessionPath {
                signals.insert(Source.Signal(interface: Self.sessionInterface, member: "Lock", path: sessionPath), at: 0)
                out.append("logind session lock (\(sessionPath))")
            } else {
                log("logind does not know this process's session: screen locks are heard only through the ScreenSaver")
            }
            watch(Source(name: Self.logind, bus: system, signals: signals), userData: me)
            out.append("logind sleep and logout")
        } else {
            log("no system bus: the vault does not lock with logind (screen lock, sleep, logout)")
        }
        if Self.hasSessionBus(), let session = Self.connect(G_BUS_TYPE_SESSION, log: log) {
            let signals = [Source.Signal(interface: Self.screenSaverInterface, member: "ActiveChanged", path: nil)]
            watch(Source(name: Self.screenSaver, bus: session, signals: signals), userData: me)
            out.append("ScreenSaver")
        } else {
            log("no session bus: the vault does not lock with the ScreenSaver")
        }
        if out.isEmpty { Unmanaged<DesktopLockWatcher>.fromOpaque(me).release() }
        return out
    }

    /// Follows `source`'s owner from now on: `NameOwnerChanged` first, so that no
    /// change after the owner is read goes unheard, then the owner, then every
    /// signal from anyone (only to count the strangers).
    func watch(_ source: Source, userData: UnsafeMutableRawPointer) {
        sources.append(source)
        subscribe(source.bus, sender: Self.daemon, interface: Self.daemon, member: "NameOwnerChanged",
                  path: "/org/freedesktop/DBus", arg0: source.name, route: .owner, userData: userData)
        follow(source, owner: nameOwner(source.bus, source.name), userData: userData)
        for s in source.signals {
            subscribe(source.bus, sender: nil, interface: s.interface, member: s.member, path: s.path, arg0: nil,
                      route: .count, userData: userData)
        }
    }

    /// Hears `source`'s signals from `owner` alone (none while the name has no owner).
    func follow(_ source: Source, owner: String?, userData: UnsafeMutableRawPointer) {
        guard owner != source.owner || (owner != nil && source.subscriptions.isEmpty) else { return }
        for id in source.subscriptions { g_dbus_connection_signal_unsubscribe(source.bus, id) }
        source.subscriptions = []
        source.owner = owner
        guard let owner else { return }
        source.subscriptions = source.signals.map { s in
            subscribe(source.bus, sender: owner, interface: s.interface, member: s.member, path: s.path, arg0: nil,
                      route: .verdict, userData: userData)
        }
    }

    /// The unique name that owns `name` on `bus` now, or nil (no owner, or no answer).
    func nameOwner(_ bus: OpaquePointer, _ name: String) -> String? {
        var error: UnsafeMutablePointer<GError>?
        let reply = g_dbus_connection_call_sync(bus, Self.daemon, "/org/freedesktop/DBus", Self.daemon, "GetNameOwner",
                                                Self.tuple([g_variant_new_string(name)]), nil, G_DBUS_CALL_FLAGS_NONE,
                                                2000, nil, &error)
        // No owner yet (a ScreenSaver that starts after vaultd) is no error: NameOwnerChanged brings it.
        if let error { g_error_free(error) }
        return objectPath(reply, 0)
    }

    /// The source a signal on `bus` with `interface` belongs to.
    func sourceOf(_ bus: OpaquePointer?, interface: String) -> Source? {
        sources.first { $0.bus == bus && $0.signals.contains { $0.interface == interface } }
    }

    /// A subscribed signal, on the watcher's thread.
    func heard(_ route: Route, bus: OpaquePointer?, sender: String, interface: String, member: String, _ parameters: OpaquePointer?,
               userData: UnsafeMutableRawPointer) {
        switch route {
        case .owner:
            guard sender == Self.daemon, let name = Self.string(parameters, 0),
                  let source = sources.first(where: { $0.bus == bus && $0.name == name }) else { return }
            let owner = Self.string(parameters, 2) ?? ""
            follow(source, owner: owner.isEmpty ? nil : owner, userData: userData)
        case .verdict:
            // The match rule names the owner; checked again here all the same.
            guard let source = sourceOf(bus, interface: interface) else { return }
            guard sender == source.owner else { return ignore(source, sender: sender, member: member) }
            signal(member, parameters)
        case .count:
            guard let source = sourceOf(bus, interface: interface), sender != source.owner else { return }
            ignore(source, sender: sender, member: member)
        }
    }

    /// Counts a signal that did not come from `source`'s owner; logs the first
    /// eight, then the 16th, 32nd, …, so that a flood of them cannot flood the log.
    func ignore(_ source: Source, sender: String, member: String) {
        source.ignored += 1
        guard source.ignored <= 8 || source.ignored & (source.ignored - 1) == 0 else { return }
        log("ignored \(member) from \(sender.isEmpty ? "an unnamed sender" : sender), which does not own \(source.name) "
            + "(its owner: \(source.owner ?? "none")); \(source.ignored) ignored so far")
    }

    /// A signal from its source, on the watcher's thread.
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

    /// Where a subscription's signals go (`heard`).
    enum Route {
        /// The bus's `NameOwnerChanged` for a source's name.
        case owner
        /// A source's signals, subscribed with its owner as the sender: acted on.
        case verdict
        /// The same signals from anyone: only the strangers are counted.
        case count
    }

    @discardableResult
    func subscribe(_ bus: OpaquePointer, sender: String?, interface: String, member: String, path: String?, arg0: String?,
                   route: Route, userData: UnsafeMutableRawPointer) -> guint {
        // A C callback captures nothing: one per route.
        let callback: GDBusSignalCallback
        switch route {
        case .owner:
            callback = { bus, sender, _, interface, member, parameters, userData in
                DesktopLockWatcher.dispatch(.owner, bus, sender, interface, member, parameters, userData)
            }
        case .verdict:
            callback = { bus, sender, _, interface, member, parameters, userData in
                DesktopLockWatcher.dispatch(.verdict, bus, sender, interface, member, parameters, userData)
            }
        case .count:
            callback = { bus, sender, _, interface, member, parameters, userData in
                DesktopLockWatcher.dispatch(.count, bus, sender, interface, member, parameters, userData)
            }
        }
        return g_dbus_connection_signal_subscribe(bus, sender, interface, member, path, arg0, G_DBUS_SIGNAL_FLAGS_NONE,
                                                  callback, userData, nil)
    }

    static func dispatch(_ route: Route, _ bus: OpaquePointer?, _ sender: UnsafePointer<gchar>?, _ interface: UnsafePointer<gchar>?,
                         _ member: UnsafePointer<gchar>?, _ parameters: OpaquePointer?, _ userData: UnsafeMutableRawPointer?) {
        guard let interface, let member, let userData else { return }
        Unmanaged<DesktopLockWatcher>.fromOpaque(userData).takeUnretainedValue()
            .heard(route, bus: bus, sender: sender.map { String(cString: $0) } ?? "", interface: String(cString: interface),
                   member: String(cString: member), parameters, userData: userData)
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

/// A service whose signals the watcher believes: its well-known name, the bus,
/// the signals it sends, and the unique name that owns it now.
final class Source {
    struct Signal {
        let interface: String
        let member: String
        let path: String?
    }

    let name: String
    let bus: OpaquePointer
    let signals: [Signal]
    /// The unique name that owns `name` now; nil while nobody does.
    var owner: String?
    /// The `signals`, subscribed with `owner` as the sender.
    var subscriptions: [guint] = []
    /// Signals not from the owner, ignored so far.
    var ignored = 0

    init(name: String, bus: OpaquePointer, signals: [Signal]) {
        self.name = name
        self.bus = bus
        self.signals = signals
    }
}

/// What `start`'s thread found, handed back across the semaphore.
private final class ListeningBox: @unchecked Sendable {
    // @unchecked: written before the semaphore is signalled, read after it is waited on.
    var value: [String] = []
}

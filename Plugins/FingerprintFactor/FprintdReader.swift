import CGIO
import FoundationEssentials
import Locking
import VaultFactor

/// The desktop's fingerprint service, fprintd (D-Bus `net.reactivated.Fprint` on
/// the system bus, over libfprint), through GIO's GDBus.
///
/// Every operation opens its own private connection to the system bus and closes
/// it at the end. fprintd releases a claimed device when its client's connection
/// goes away, so even a scan whose `Release` fails (or a vaultd that is killed)
/// never leaves the reader held. A scan is: `GetDefaultDevice`, `Claim("")`,
/// `VerifyStart("any")`, wait for `VerifyStatus` (or fprintd leaving the bus, the
/// timeout, a cancel), then always `VerifyStop` and `Release`.
///
/// A verdict is believed only from fprintd itself: before `Claim` the scan asks
/// the bus which unique name owns `net.reactivated.Fprint` (`GetNameOwner`), hears
/// the device's signals from that name alone (in the match rule, and checked
/// again in the callback), and follows `NameOwnerChanged`: an owner that goes or
/// changes ends the scan as the service having stopped. Any client of the system
/// bus may send signals (Debian's `system.conf` allows it), so a `VerifyStatus`
/// from anyone else is ignored, and counted in the debug log.
///
/// The bus is found as GIO finds it: `DBUS_SYSTEM_BUS_ADDRESS` first, then the
/// standard system socket. fprintd lists only finger names, so a finger's name is
/// also its template id (see `FingerprintReader`).
public struct FprintdReader: FingerprintReader {
    public static let service = "net.reactivated.Fprint"
    static let managerPath = "/net/reactivated/Fprint/Manager"
    static let managerInterface = "net.reactivated.Fprint.Manager"
    static let deviceInterface = "net.reactivated.Fprint.Device"

    /// How long one method call may take before fprintd counts as not answering.
    public let callTimeout: Duration
    /// How long the clean-up calls (`VerifyStop`, `Release`) may take: short, so
    /// a hung fprintd cannot hold the fallback back.
    public let cleanupTimeout: Duration
    /// vaultd's debug log: what a scan ignored (bus names and counts, nothing else).
    public let log: @Sendable (String) -> Void

    public init(callTimeout: Duration = .seconds(5), cleanupTimeout: Duration = .milliseconds(500),
                log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.callTimeout = callTimeout
        self.cleanupTimeout = cleanupTimeout
        self.log = log
    }

    // MARK: - FingerprintReader

    /// Each look opens a system-bus connection and asks fprintd, which asks
    /// polkit: an app polling `status`, or one asking in a loop from every
    /// connection it may hold, would otherwise reach all three, which the
    /// login screen and sudo share, once per request.
    public var probeCacheTime: Duration { .seconds(2) }

    public func presence() async -> ReaderPresence {
        await Self.blocking { () -> ReaderPresence in
            do {
                let bus = try Bus.open(cancellable: nil)
                _ = try defaultDevice(bus, cancellable: nil)
                return .present
            } catch {
                return .absent
            }
        }
    }

    public func deviceName() async -> String? {
        await Self.blocking { () -> String? in
            do {
                let bus = try Bus.open(cancellable: nil)
                let device = try defaultDevice(bus, cancellable: nil)
                let reply = try bus.call(destination: Self.service, path: device, interface: "org.freedesktop.DBus.Properties",
                                         method: "Get", arguments: [.string(Self.deviceInterface), .string("name")],
                                         timeout: callTimeout, cancellable: nil)
                defer { g_variant_unref(reply) }
                return GV.string(GV.unboxed(GV.child(reply, 0)))
            } catch {
                return nil
            }
        }
    }

    public func enrolledFingers() async throws(ReaderError) -> [EnrolledFinger] {
        let result = await Self.blocking { () -> Result<[EnrolledFinger], ReaderError> in
            do throws(BusError) {
                let bus = try Bus.open(cancellable: nil)
                let device = try defaultDevice(bus, cancellable: nil)
                let reply = try bus.call(destination: Self.service, path: device, interface: Self.deviceInterface,
                                         method: "ListEnrolledFingers", arguments: [.string("")],
                                         timeout: callTimeout, cancellable: nil)
                defer { g_variant_unref(reply) }
                let names = GV.strings(GV.child(reply, 0)).sorted()
                return .success(names.map { EnrolledFinger(name: $0, templateID: $0) })
            } catch .remote(FprintdError.noEnrolledPrints, _) {
                return .success([])
            } catch {
                return .failure(Self.readerError(error))
            }
        }
        return try result.get()
    }

    public func scan(timeout: Duration) async -> ScanOutcome {
        if Task.isCancelled { return .cancelled }
        let cancel = Cancellable()
        return await withTaskCancellationHandler {
            await Self.blocking { () -> ScanOutcome in
                Scan(reader: self, cancel: cancel, timeout: timeout).run()
            }
        } onCancel: {
            cancel.cancel()
        }
    }

    // MARK: - Helpers

    /// The unique name (":1.42") that owns fprintd's well-known name now.
    func nameOwner(_ bus: Bus, cancellable: Cancellable?) throws(BusError) -> String {
        let reply = try bus.call(destination: Bus.daemon, path: "/org/freedesktop/DBus", interface: Bus.daemon,
                                 method: "GetNameOwner", arguments: [.string(Self.service)], timeout: callTimeout,
                                 cancellable: cancellable)
        defer { g_variant_unref(reply) }
        guard let owner = GV.string(GV.child(reply, 0)), owner.hasPrefix(":") else { throw .other("GetNameOwner: unexpected reply") }
        return owner
    }

    func defaultDevice(_ bus: Bus, cancellable: Cancellable?) throws(BusError) -> String {
        let reply = try bus.call(destination: Self.service, path: Self.managerPath, interface: Self.managerInterface,
                                 method: "GetDefaultDevice", arguments: [], timeout: callTimeout, cancellable: cancellable)
        defer { g_variant_unref(reply) }
        guard let path = GV.string(GV.child(reply, 0)) else { throw .other("GetDefaultDevice: unexpected reply") }
        return path
    }

    static func readerError(_ error: BusError) -> ReaderError {
        if let refusal = refusal(error) {
            return refusal == .noDevice || refusal == .serviceStopped ? .absent : .refused(refusal)
        }
        return .failed("\(error)")
    }

    /// The fprintd (and bus) errors a person can act on.
    static func refusal(_ error: BusError) -> ReaderRefusal? {
        guard case .remote(let name, _) = error else {
            return error == .noBus ? .serviceStopped : nil
        }
        switch name {
        case FprintdError.alreadyInUse: return .inUse
        case FprintdError.noSuchDevice: return .noDevice
        case FprintdError.permissionDenied: return .permissionDenied
        case FprintdError.noEnrolledPrints: return .noEnrolledPrints
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner",
             "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Disconnected":
            return .serviceStopped
        default: return nil
        }
    }

    /// Runs blocking GLib work on its own thread, off the cooperative pool.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await onNewThread(named: "fprintd", body)
    }
}

/// fprintd's D-Bus error names.
enum FprintdError {
    static let alreadyInUse = "net.reactivated.Fprint.Error.AlreadyInUse"
    static let noSuchDevice = "net.reactivated.Fprint.Error.NoSuchDevice"
    static let permissionDenied = "net.reactivated.Fprint.Error.PermissionDenied"
    static let noEnrolledPrints = "net.reactivated.Fprint.Error.NoEnrolledPrints"
}

/// One verify, from `Claim` to `Release`, on one thread with its own GLib main
/// context (where the signal callbacks run).
final class Scan {
    let reader: FprintdReader
    let cancel: Cancellable
    let timeout: Duration
    /// Set by the signal callbacks; read by the loop (same thread).
    var outcome: ScanOutcome?
    var selectedFinger = "any"
    /// The unique name that owned `net.reactivated.Fprint` before `Claim`: the
    /// only sender whose device signals count.
    var owner = ""
    /// Device signals from any other sender: ignored, counted for the debug log.
    var ignored = 0
    var ignoredSenders: Set<String> = []

    init(reader: FprintdReader, cancel: Cancellable, timeout: Duration) {
        self.reader = reader
        self.cancel = cancel
        self.timeout = timeout
    }

    func run() -> ScanOutcome {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        let context = g_main_context_new()
        g_main_context_push_thread_default(context)
        defer {
            g_main_context_pop_thread_default(context)
            g_main_context_unref(context)
        }
        let bus: Bus
        do {
            bus = try Bus.open(cancellable: cancel)
        } catch {
            return Self.outcome(error, cancel: cancel)
        }
        let me = Unmanaged.passUnretained(self).toOpaque()
        // Ownership first, so that no change after the owner is read goes unheard.
        var subscriptions = [
            bus.subscribe(sender: Bus.daemon, interface: Bus.daemon, member: "NameOwnerChanged", path: "/org/freedesktop/DBus",
                          arg0: FprintdReader.service, route: .verdict, userData: me),
        ]
        defer { for id in subscriptions where id != 0 { bus.unsubscribe(id) } }
        let device: String
        do {
            // GetDefaultDevice may start fprintd (bus activation): its owner is read after.
            device = try reader.defaultDevice(bus, cancellable: cancel)
            owner = try reader.nameOwner(bus, cancellable: cancel)
        } catch {
            return Self.outcome(error, cancel: cancel)
        }
        defer {
            if ignored > 0 {
                reader.log("fprintd scan: ignored \(ignored) signal(s) on \(device) from \(ignoredSenders.sorted().joined(separator: ", ")), "
                           + "not from \(FprintdReader.service)'s owner \(owner)")
            }
        }
        // Subscribed before VerifyStart, so no status can arrive unheard: from the
        // owner, the verdicts; from anyone, only to count what is not the owner's.
        subscriptions += [
            bus.subscribe(sender: owner, interface: FprintdReader.deviceInterface, member: nil, path: device, arg0: nil,
                          route: .verdict, userData: me),
            bus.subscribe(sender: nil, interface: FprintdReader.deviceInterface, member: nil, path: device, arg0: nil,
                          route: .count, userData: me),
        ]

        do {
            try callDevice(bus, device, "Claim", [.string("")], cancellable: cancel)
        } catch {
            return Self.outcome(error, cancel: cancel)
        }
        // From here on the device is ours: every way out releases it (with no
        // cancellable, since a cancel is one of the ways out).
        defer {
            try? callDevice(bus, device, "Release", [], timeout: reader.cleanupTimeout, cancellable: nil)
        }
        do {
            try callDevice(bus, device, "VerifyStart", [.string("any")], cancellable: cancel)
        } catch {
            return Self.outcome(error, cancel: cancel)
        }
        defer {
            try? callDevice(bus, device, "VerifyStop", [], timeout: reader.cleanupTimeout, cancellable: nil)
        }
        // Wakes the loop a few times a second to look at the deadline and the cancel.
        let tick = g_timeout_source_new(50)
        g_source_set_callback(tick, { _ in gboolean(1) }, nil, nil)
        g_source_attach(tick, g_main_context_get_thread_default())
        defer {
            g_source_destroy(tick)
            g_source_unref(tick)
        }
        while outcome == nil {
            if cancel.isCancelled { return .cancelled }
            if ContinuousClock.now >= deadline { return .timeout }
            g_main_context_iteration(g_main_context_get_thread_default(), gboolean(1))
        }
        return outcome ?? .hardwareError
    }

    private func callDevice(_ bus: Bus, _ device: String, _ method: String, _ arguments: [GV.Argument],
                            timeout: Duration? = nil, cancellable: Cancellable?) throws(BusError) {
        let reply = try bus.call(destination: FprintdReader.service, path: device, interface: FprintdReader.deviceInterface,
                                 method: method, arguments: arguments, timeout: timeout ?? reader.callTimeout,
                                 cancellable: cancellable)
        g_variant_unref(reply)
    }

    static func outcome(_ error: BusError, cancel: Cancellable) -> ScanOutcome {
        if cancel.isCancelled || error == .cancelled { return .cancelled }
        return FprintdReader.refusal(error).map { .refused($0) } ?? .hardwareError
    }

    /// A signal from the device's owner or the bus (the `.verdict` subscriptions),
    /// on this scan's thread. The sender is checked again here: only fprintd's
    /// unique name speaks for the device, only the bus for its names.
    func signal(from sender: String, _ member: String, _ parameters: OpaquePointer?) {
        if member == "NameOwnerChanged" {
            guard sender == Bus.daemon, GV.string(GV.child(parameters, 0)) == FprintdReader.service else { return }
            // fprintd left the bus (stopped, crashed, restarting) or the name went to
            // another process: nothing this scan trusts will answer it.
            if GV.string(GV.child(parameters, 2)) != owner { outcome = outcome ?? .refused(.serviceStopped) }
            return
        }
        guard sender == owner else { return ignore(sender) }
        switch member {
        case "VerifyFingerSelected":
            if let name = GV.string(GV.child(parameters, 0)) { selectedFinger = name }
        case "VerifyStatus":
            guard outcome == nil, let result = GV.string(GV.child(parameters, 0)) else { return }
            outcome = Self.verifyOutcome(result, finger: selectedFinger)
        default:
            break
        }
    }

    /// Any signal on the device's path (the `.count` subscription): one not from
    /// the owner is counted; none of them is acted on here.
    func heard(from sender: String) {
        if sender != owner { ignore(sender) }
    }

    private func ignore(_ sender: String) {
        ignored += 1
        ignoredSenders.insert(sender)
    }

    /// fprintd's `VerifyStatus` results.
    static func verifyOutcome(_ result: String, finger: String) -> ScanOutcome {
        switch result {
        case "verify-match": return .match(finger: finger)
        case "verify-no-match": return .noMatch
        case "verify-retry-scan": return .retry
        case "verify-swipe-too-short": return .unclear(.tooShort)
        case "verify-finger-not-centered": return .unclear(.notCentered)
        case "verify-remove-and-retry": return .unclear(.removeAndRetry)
        case "verify-disconnected": return .disconnected
        default: return .hardwareError  // verify-unknown-error, and any result newer than this code
        }
    }
}

/// A `GCancellable`, which GLib lets any thread cancel.
final class Cancellable: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<GCancellable>

    init() { pointer = g_cancellable_new() }
    deinit { g_object_unref(pointer) }

    func cancel() { g_cancellable_cancel(pointer) }
    var isCancelled: Bool { g_cancellable_is_cancelled(pointer) != 0 }
}

/// How a bus call failed.
enum BusError: Error, Equatable, CustomStringConvertible {
    /// No system bus to connect to.
    case noBus
    /// The peer answered with a D-Bus error.
    case remote(name: String, message: String)
    case timeout
    case cancelled
    case other(String)

    var description: String {
        switch self {
        case .noBus: return "no system bus"
        case .remote(let name, let message): return "\(name): \(message)"
        case .timeout: return "timed out"
        case .cancelled: return "cancelled"
        case .other(let detail): return detail
        }
    }

    /// Takes (and frees) a GError.
    init(_ error: UnsafeMutablePointer<GError>?) {
        guard let error else {
            self = .other("unknown error")
            return
        }
        defer { g_error_free(error) }
        if let remote = g_dbus_error_get_remote_error(error) {
            defer { g_free(remote) }
            g_dbus_error_strip_remote_error(error)
            self = .remote(name: String(cString: remote), message: String(cString: error.pointee.message))
        } else if error.pointee.domain == g_io_error_quark() && error.pointee.code == Int32(G_IO_ERROR_CANCELLED.rawValue) {
            self = .cancelled
        } else if error.pointee.domain == g_io_error_quark() && error.pointee.code == Int32(G_IO_ERROR_TIMED_OUT.rawValue) {
            self = .timeout
        } else {
            self = .other(String(cString: error.pointee.message))
        }
    }
}

/// One private connection to the system bus, used from one thread, closed on deinit.
final class Bus {
    /// The bus itself: its name, interface and the sender of its signals.
    static let daemon = "org.freedesktop.DBus"
    let connection: OpaquePointer

    private init(_ connection: OpaquePointer) { self.connection = connection }

    deinit {
        g_dbus_connection_close_sync(connection, nil, nil)
        g_object_unref(UnsafeMutableRawPointer(connection))
    }

    /// GIO's system bus address (`DBUS_SYSTEM_BUS_ADDRESS`, else the standard
    /// socket), as a connection of our own.
    static func open(cancellable: Cancellable?) throws(BusError) -> Bus {
        var error: UnsafeMutablePointer<GError>?
        guard let address = g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SYSTEM, cancellable?.pointer, &error) else {
            _ = BusError(error)
            throw .noBus
        }
        defer { g_free(address) }
        let flags = GDBusConnectionFlags(rawValue: G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT.rawValue
                                         | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION.rawValue)
        guard let connection = g_dbus_connection_new_for_address_sync(address, flags, nil, cancellable?.pointer, &error) else {
            let failure = BusError(error)
            throw failure == .cancelled ? .cancelled : .noBus
        }
        // We close it ourselves; a peer hanging up must not end vaultd.
        g_dbus_connection_set_exit_on_close(connection, gboolean(0))
        return Bus(connection)
    }

    /// A method call; returns the reply tuple (the caller unrefs it).
    func call(destination: String, path: String, interface: String, method: String, arguments: [GV.Argument],
              timeout: Duration, cancellable: Cancellable?) throws(BusError) -> OpaquePointer {
        var error: UnsafeMutablePointer<GError>?
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let reply = g_dbus_connection_call_sync(connection, destination, path, interface, method, GV.tuple(arguments), nil,
                                                G_DBUS_CALL_FLAGS_NONE, max(1, milliseconds), cancellable?.pointer, &error)
        guard let reply else { throw BusError(error) }
        return reply
    }

    /// Where a subscription's signals go, on the thread-default main context of the caller.
    enum Route {
        /// `Scan.signal`, which acts on them (after checking the sender again).
        case verdict
        /// `Scan.heard`, which only counts the ones from a stranger.
        case count
    }

    func subscribe(sender: String?, interface: String, member: String?, path: String, arg0: String?, route: Route,
                   userData: UnsafeMutableRawPointer) -> guint {
        let callback: GDBusSignalCallback
        switch route {
        case .verdict:
            callback = { _, sender, _, _, member, parameters, userData in
                guard let sender, let member, let userData else { return }
                Unmanaged<Scan>.fromOpaque(userData).takeUnretainedValue()
                    .signal(from: String(cString: sender), String(cString: member), parameters)
            }
        case .count:
            callback = { _, sender, _, _, _, _, userData in
                guard let userData else { return }
                Unmanaged<Scan>.fromOpaque(userData).takeUnretainedValue().heard(from: sender.map { String(cString: $0) } ?? "")
            }
        }
        return g_dbus_connection_signal_subscribe(connection, sender, interface, member, path, arg0, G_DBUS_SIGNAL_FLAGS_NONE,
                                                  callback, userData, nil)
    }

    func unsubscribe(_ id: guint) {
        g_dbus_connection_signal_unsubscribe(connection, id)
    }
}

/// The few GVariant shapes fprintd's calls use.
enum GV {
    enum Argument {
        case string(String)
    }

    /// A floating tuple of the arguments (the call takes it over).
    static func tuple(_ arguments: [Argument]) -> OpaquePointer? {
        var children: [OpaquePointer?] = arguments.map { argument in
            switch argument {
            case .string(let s): return g_variant_new_string(s)
            }
        }
        return children.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
    }

    /// Child `index` of a tuple (a new reference, or nil).
    static func child(_ value: OpaquePointer?, _ index: Int) -> OpaquePointer? {
        guard let value, g_variant_is_container(value) != 0, index < g_variant_n_children(value) else { return nil }
        return g_variant_get_child_value(value, gsize(index))
    }

    /// The value inside a `v` (takes over `value`'s reference; returns a new one).
    static func unboxed(_ value: OpaquePointer?) -> OpaquePointer? {
        guard let value else { return nil }
        defer { g_variant_unref(value) }
        guard String(cString: g_variant_get_type_string(value)) == "v" else { return nil }
        return g_variant_get_variant(value)
    }

    /// A string or object path (takes over `value`'s reference).
    static func string(_ value: OpaquePointer?) -> String? {
        guard let value else { return nil }
        defer { g_variant_unref(value) }
        let type = String(cString: g_variant_get_type_string(value))
        guard type == "s" || type == "o" else { return nil }
        return String(cString: g_variant_get_string(value, nil))
    }

    /// An array of strings (takes over `value`'s reference).
    static func strings(_ value: OpaquePointer?) -> [String] {
        guard let value else { return [] }
        defer { g_variant_unref(value) }
        guard String(cString: g_variant_get_type_string(value)) == "as" else { return [] }
        return (0..<g_variant_n_children(value)).compactMap { string(g_variant_get_child_value(value, $0)) }
    }
}

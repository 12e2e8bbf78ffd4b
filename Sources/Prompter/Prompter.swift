import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Locking
import Logging
import VaultProtocol

/// vaultd's own dialogs through pinentry, the program gpg-agent uses for the
/// same purpose: one dialog on screen at a time, for every client that said
/// `"prompter": "vault"` in its hello.
public final class Prompter: Sendable {
    /// The pinentry to run; nil when none was found (every dialog then fails
    /// with a sentence saying how to install one).
    public let program: String?
    /// vaultd's environment, which pinentry inherits (the systemd user unit
    /// imports the graphical session's DISPLAY and WAYLAND_DISPLAY).
    let baseEnvironment: [String: String]
    /// Seconds a dialog may stay open (`prompt_timeout`).
    public let timeout: Int
    /// Seconds pinentry has to greet and take the settings before it counts as hung.
    let setupTimeout: Double
    let queue = DialogQueue()
    let logger: Logger

    public init(configured: String?, environment: [String: String] = ProcessInfo.processInfo.environment,
                timeout: Int, setupTimeout: Double = 10, logger: Logger = Logger(label: "sessionvault.prompter")) {
        self.setupTimeout = setupTimeout
        self.program = Prompter.findProgram(configured: configured, environment: environment)
        self.baseEnvironment = environment
        self.timeout = max(1, timeout)
        self.logger = logger
    }

    /// Which pinentry: `pinentry = PATH` in config.toml, then
    /// `SESSIONVAULT_PINENTRY`, then SessionVault's own dialog where the
    /// package installs it beside vaultd (`ownDialog`), then `pinentry` on
    /// PATH (Debian's alternative, which points at the desktop's flavour). A
    /// name without a slash is looked up in PATH.
    public static func findProgram(configured: String?, environment: [String: String],
                                   ownDialog: String? = Prompter.ownDialog()) -> String? {
        let own = ownDialog.flatMap { access($0, X_OK) == 0 ? $0 : nil }
        for candidate in [configured, environment["SESSIONVAULT_PINENTRY"], own, "pinentry"] {
            guard let candidate, !candidate.isEmpty else { continue }
            if let found = resolve(candidate, path: environment["PATH"]) { return found }
            // A configured program that is not there is a mistake to report, not to paper over.
            if candidate == configured { return nil }
        }
        return nil
    }

    /// SessionVault's own dialog (clients/dialog: a pinentry drawn with GTK 4
    /// and libadwaita, for screen readers and the keyboard, issue 22), where
    /// the package puts it: `../lib/sessionvault/` from vaultd's directory
    /// (/usr/bin/vaultd → /usr/lib/sessionvault/sessionvault-pinentry). Where
    /// it cannot draw it hands over to the system's pinentry itself.
    public static func ownDialog(executable: String? = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        -> String? {
        guard let executable, executable.hasPrefix("/") else { return nil }
        // /usr/bin/vaultd → /usr → /usr/lib/sessionvault/…
        let prefix = executable.split(separator: "/").dropLast(2).map { "/" + $0 }.joined()
        return prefix + "/lib/sessionvault/sessionvault-pinentry"
    }

    static func resolve(_ name: String, path: String?) -> String? {
        if name.contains("/") { return access(name, X_OK) == 0 ? name : nil }
        for dir in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") {
            let full = "\(dir)/\(name)"
            if access(full, X_OK) == 0 { return full }
        }
        return nil
    }

    /// Shows `dialog` once it is its turn. A preemptible dialog (a message
    /// nobody has to answer) is closed as soon as another dialog is waiting.
    /// `closer` ends it from outside, waiting or on screen: it then fails
    /// with `.cancelled`.
    func show(_ dialog: Dialog, on display: PromptDisplay, preemptible: Bool = false,
              closer: DialogCloser = DialogCloser()) async throws(DialogFailure) -> DialogAnswer {
        guard let program else { throw .missing }
        guard await queue.acquire(closer) else { throw .cancelled }
        let env = display.environment(over: baseEnvironment)
        let args = display.arguments(environment: env)
        let queue = self.queue
        let setup = setupTimeout
        let result: Result<DialogAnswer, DialogFailure> = await Prompter.onThread {
            let started = Result { () throws(DialogFailure) in
                try PinentryProcess.start(program: program, arguments: args, environment: env)
            }
            guard case .success(let process) = started else {
                if case .failure(let error) = started { return .failure(error) }
                return .failure(.missing)
            }
            // Recorded before it can show anything: `closeAll` and `closer` reach it from here on.
            guard queue.showing(process, preemptible: preemptible), closer.attach(process) else {
                process.finish(polite: false)
                queue.gone(process)
                return .failure(.cancelled)
            }
            let answer = Result { () throws(DialogFailure) in try dialog.run(on: process, tty: display.tty, setupSeconds: setup) }
            let closed = process.wasClosed
            process.finish(polite: !closed && (try? answer.get()) != nil)
            queue.gone(process)
            // Ended by vaultd: whatever the dialog said last is not an answer.
            if closed, case .failure = answer { return .failure(.cancelled) }
            return answer
        }
        queue.release()
        if case .failure(.broken(let why)) = result {
            logger.warning("the pinentry dialog failed", metadata: ["program": "\(program)", "reason": "\(why)"])
        }
        return try result.get()
    }

    /// vaultd stops: every pinentry is ended and reaped (bounded by
    /// `within` seconds), dialogs waiting their turn fail, and no new one
    /// starts. Without this a dialog on screen would outlive vaultd.
    public func closeAll(within seconds: Double = 3) {
        queue.shutDown()
        let deadline = monotonicSeconds() + seconds
        while queue.liveCount > 0 && monotonicSeconds() < deadline {
            usleep(10_000)
        }
    }

    /// Runs blocking pinentry I/O on its own thread: a dialog may stay open
    /// for minutes, which must not hold a thread of the cooperative pool.
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await onNewThread(named: "pinentry", body)
    }
}

/// One dialog on screen at a time, first come first served across every
/// connection. Only dialogs wait here: a release that needs no prompt never
/// comes near it. It also knows every pinentry that runs, so that vaultd can
/// end them all when it stops.
final class DialogQueue: Sendable {
    struct State {
        var busy = false
        var nextTicket = 0
        var waiters: [(ticket: Int, c: CheckedContinuation<Bool, Never>)] = []
        var current: PinentryProcess?
        var preemptible = false
        /// Every pinentry started and not yet reaped (a preempted message may
        /// still be leaving while the next dialog starts).
        var live: [ObjectIdentifier: PinentryProcess] = [:]
        var stopped = false
    }
    let state = Locked(State())

    /// Waits for this dialog's turn; false when `closer` closed it first or vaultd stops.
    func acquire(_ closer: DialogCloser) async -> Bool {
        guard !closer.isClosed else { return false }
        let ticket = state.withLock { s -> Int in
            s.nextTicket += 1
            return s.nextTicket
        }
        let granted = await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            let (answer, preempt) = state.withLock { s -> (Bool?, PinentryProcess?) in
                if s.stopped { return (false, nil) }
                if !s.busy {
                    s.busy = true
                    return (true, nil)
                }
                s.waiters.append((ticket, c))
                return (nil, s.preemptible ? s.current : nil)
            }
            if let answer {
                c.resume(returning: answer)
                return
            }
            // Closed while in line (its scan ended, its client went): out of the line.
            if !closer.whileWaiting({ [self] in self.cancel(ticket: ticket) }) { cancel(ticket: ticket) }
            // A message on screen gives way to a question.
            preempt?.close()
        }
        return granted
    }

    /// Takes a waiting dialog out of the line (its closer closed it).
    func cancel(ticket: Int) {
        let c = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            guard let i = s.waiters.firstIndex(where: { $0.ticket == ticket }) else { return nil }
            return s.waiters.remove(at: i).c
        }
        c?.resume(returning: false)
    }

    /// Records the dialog now on screen; false when it is a preemptible one
    /// and a question is already waiting (it is then not shown at all), or
    /// when vaultd stops.
    func showing(_ p: PinentryProcess, preemptible: Bool) -> Bool {
        state.withLock { s in
            s.live[ObjectIdentifier(p)] = p
            if s.stopped || preemptible && !s.waiters.isEmpty { return false }
            s.current = p
            s.preemptible = preemptible
            return true
        }
    }

    /// `p` has been reaped.
    func gone(_ p: PinentryProcess) {
        _ = state.withLock { $0.live.removeValue(forKey: ObjectIdentifier(p)) }
    }

    var liveCount: Int { state.withLock { $0.live.count } }

    func release() {
        let next = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            s.current = nil
            s.preemptible = false
            if s.waiters.isEmpty {
                s.busy = false
                return nil
            }
            return s.waiters.removeFirst().c
        }
        next?.resume(returning: true)
    }

    /// vaultd stops: waiting dialogs fail, running ones are ended.
    func shutDown() {
        let (waiting, running) = state.withLock { s -> ([CheckedContinuation<Bool, Never>], [PinentryProcess]) in
            s.stopped = true
            defer { s.waiters.removeAll() }
            return (s.waiters.map(\.c), Array(s.live.values))
        }
        for c in waiting { c.resume(returning: false) }
        for p in running { p.close() }
    }
}

/// Ends one dialog from outside, whether it is still waiting its turn or
/// already on screen (its scan ended, or its client went away).
final class DialogCloser: Sendable {
    private struct State {
        var closed = false
        var process: PinentryProcess?
        var dequeue: (@Sendable () -> Void)?
    }
    private let state = Locked(State())

    init() {}

    var isClosed: Bool { state.withLock { $0.closed } }

    func close() {
        let (process, dequeue) = state.withLock { s -> (PinentryProcess?, (@Sendable () -> Void)?) in
            s.closed = true
            defer { s.dequeue = nil }
            return (s.process, s.dequeue)
        }
        dequeue?()
        process?.close()
    }

    /// The dialog is waiting in line: closing it takes it out. False when it is closed already.
    func whileWaiting(_ dequeue: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { s in
            guard !s.closed else { return false }
            s.dequeue = dequeue
            return true
        }
    }

    /// The dialog is on screen in `p`. False when it was closed before it got there.
    func attach(_ p: PinentryProcess) -> Bool {
        state.withLock { s in
            s.dequeue = nil
            guard !s.closed else { return false }
            s.process = p
            return true
        }
    }
}

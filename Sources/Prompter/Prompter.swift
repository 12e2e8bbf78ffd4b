import Foundation
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
    /// `SESSIONVAULT_PINENTRY`, then `pinentry` on PATH (Debian's alternative,
    /// which points at the desktop's flavour). A name without a slash is
    /// looked up in PATH.
    public static func findProgram(configured: String?, environment: [String: String]) -> String? {
        for candidate in [configured, environment["SESSIONVAULT_PINENTRY"], "pinentry"] {
            guard let candidate, !candidate.isEmpty else { continue }
            if let found = resolve(candidate, path: environment["PATH"]) { return found }
            // A configured program that is not there is a mistake to report, not to paper over.
            if candidate == configured { return nil }
        }
        return nil
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
    func show(_ dialog: Dialog, on display: PromptDisplay, preemptible: Bool = false) async throws(DialogFailure) -> DialogAnswer {
        guard let program else { throw .missing }
        await queue.acquire()
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
            guard queue.showing(process, preemptible: preemptible) else {
                process.finish(polite: false)
                return .failure(.cancelled)
            }
            let answer = Result { () throws(DialogFailure) in try dialog.run(on: process, tty: display.tty, setupSeconds: setup) }
            process.finish(polite: (try? answer.get()) != nil)
            return answer
        }
        queue.release()
        if case .failure(.broken(let why)) = result {
            logger.warning("the pinentry dialog failed", metadata: ["program": "\(program)", "reason": "\(why)"])
        }
        return try result.get()
    }

    /// Runs blocking pinentry I/O on its own thread: a dialog may stay open
    /// for minutes, which must not hold a thread of the cooperative pool.
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { c in
            let thread = Thread { c.resume(returning: body()) }
            thread.name = "pinentry"
            thread.start()
        }
    }
}

/// One dialog on screen at a time, first come first served across every
/// connection. Only dialogs wait here: a release that needs no prompt never
/// comes near it.
final class DialogQueue: Sendable {
    struct State {
        var busy = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        var current: PinentryProcess?
        var preemptible = false
    }
    let state = Locked(State())

    func acquire() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let (granted, preempt) = state.withLock { s -> (Bool, PinentryProcess?) in
                if !s.busy {
                    s.busy = true
                    return (true, nil)
                }
                s.waiters.append(c)
                return (false, s.preemptible ? s.current : nil)
            }
            if granted { c.resume() }
            // A message on screen gives way to a question.
            preempt?.terminate()
        }
    }

    /// Records the dialog now on screen; false when it is a preemptible one
    /// and a question is already waiting (it is then not shown at all).
    func showing(_ p: PinentryProcess, preemptible: Bool) -> Bool {
        state.withLock { s in
            if preemptible && !s.waiters.isEmpty { return false }
            s.current = p
            s.preemptible = preemptible
            return true
        }
    }

    func release() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.current = nil
            s.preemptible = false
            if s.waiters.isEmpty {
                s.busy = false
                return nil
            }
            return s.waiters.removeFirst()
        }
        next?.resume()
    }
}

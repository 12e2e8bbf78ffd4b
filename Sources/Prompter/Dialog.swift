import SodiumKit

/// One pinentry dialog: what it says and which question it asks.
struct Dialog: Sendable {
    enum Kind: Sendable, Equatable {
        /// `GETPIN`: a secret typed without echo.
        case pin
        /// `GETPIN` with `SETREPEAT`: a new secret, typed twice.
        case newPIN(again: String, mismatch: String)
        /// `CONFIRM`: OK, the SETNOTOK button, or Cancel.
        case confirm
        /// `MESSAGE`: a text with one button.
        case message
    }

    var kind: Kind
    var title: String
    var description: String
    var prompt: String?
    var ok: String?
    var notOK: String?
    var cancel: String?
    /// Shown in the dialog's error line (`SETERROR`): why it is asked again.
    var error: String?
    /// Seconds before pinentry closes the dialog itself (`SETTIMEOUT`).
    var timeout: Int
    /// `CONFIRM --one-button`: only the OK button (labelled by `ok`).
    var oneButton = false
    /// A `CONFIRM` whose OK loses something for good: SessionVault's own
    /// dialog makes the No button its default and focus, and marks OK as
    /// destructive (`OPTION sessionvault-keeps-no`; other pinentries ignore it).
    var keepsNo = false
    /// A `CONFIRM` whose Yes gives an app something (the grant): a Yes that
    /// comes sooner than `readingTime` after the question went out was a key
    /// or a click meant for the window the person was using when the dialog
    /// took the keyboard, so it is answered `.tooSoon` (any pinentry; the own
    /// dialog, told by `OPTION sessionvault-read-first`, lets no key through
    /// for that long itself).
    var readFirst = false
}

extension Dialog {
    static let keepsNoOption = "sessionvault-keeps-no"
    static let readFirstOption = "sessionvault-read-first"
    /// Seconds from the question to a Yes that can have been read: a dialog
    /// appears within 0.2 s (docs/benchmarks.md), and Firefox keeps an install
    /// prompt's buttons off for 1 s for the same reason.
    static let readingTime = 1.0
}

/// How a dialog was answered.
enum DialogAnswer: Sendable {
    /// `repeated`: pinentry had it typed twice and both matched (`S PIN_REPEATED`).
    case pin(SecureBytes, repeated: Bool)
    case ok
    case notOK
    /// OK or not-OK to a `readFirst` question within `readingTime`: not taken.
    case tooSoon
}

/// Where pinentry shows its window: the asking client's display (from its
/// `hello`), else vaultd's own.
public struct PromptDisplay: Sendable, Equatable {
    public var display: String?
    public var waylandDisplay: String?
    public var tty: String?
    /// The terminal type for a tty dialog (pinentry-curses).
    public var term: String?

    public init(display: String? = nil, waylandDisplay: String? = nil, tty: String? = nil, term: String? = nil) {
        self.display = display
        self.waylandDisplay = waylandDisplay
        self.tty = tty
        self.term = term
    }

    public var isEmpty: Bool { display == nil && waylandDisplay == nil && tty == nil }

    /// pinentry's environment: vaultd's, with the client's display when it
    /// named one (then only the client's: a display it did not name is not its own).
    func environment(over base: [String: String]) -> [String: String] {
        var env = base
        guard !isEmpty else { return env }
        env["DISPLAY"] = display
        env["WAYLAND_DISPLAY"] = waylandDisplay
        if let term { env["TERM"] = term }
        return env
    }

    /// gpg-agent passes the same to pinentry on its command line.
    func arguments(environment env: [String: String]) -> [String] {
        var args: [String] = []
        if let d = env["DISPLAY"] { args += ["--display", d] }
        if let t = tty { args += ["--ttyname", t] }
        // curses cannot draw without a terminal type; xterm's suits most terminals.
        if tty != nil { args += ["--ttytype", env["TERM"] ?? "xterm-256color"] }
        return args
    }
}

extension Dialog {
    /// Runs the dialog on a started pinentry: the greeting, the settings, the
    /// question. Settings must be answered within `setupSeconds`; the
    /// question within the dialog's timeout (plus a little for pinentry's own
    /// timer to fire first).
    func run(on p: PinentryProcess, tty: String?, setupSeconds: Double) throws(DialogFailure) -> DialogAnswer {
        let hung = DialogFailure.broken("pinentry did not answer")
        var deadline = monotonicSeconds() + setupSeconds
        try expectOK(p, deadline: deadline, hung: hung)
        var commands: [(String, String?)] = []
        if let tty {
            commands.append(("OPTION", "ttyname=\(tty)"))
            // Curses draws the UTF-8 of “PIN-koden” and «» correctly only in a UTF-8 locale.
            commands.append(("OPTION", "lc-ctype=C.UTF-8"))
        }
        if keepsNo { commands.append(("OPTION", Dialog.keepsNoOption)) }
        if readFirst { commands.append(("OPTION", Dialog.readFirstOption)) }
        commands.append(("SETTITLE", title))
        commands.append(("SETDESC", description))
        if let prompt { commands.append(("SETPROMPT", prompt)) }
        if let ok { commands.append(("SETOK", ok)) }
        if let notOK { commands.append(("SETNOTOK", notOK)) }
        if let cancel { commands.append(("SETCANCEL", cancel)) }
        if let error { commands.append(("SETERROR", error)) }
        if case .newPIN(let again, let mismatch) = kind {
            commands.append(("SETREPEAT", again))
            commands.append(("SETREPEATERROR", mismatch))
        }
        commands.append(("SETTIMEOUT", String(timeout)))
        for (command, argument) in commands {
            try p.send(Assuan.line(command, argument))
            // An OPTION a flavour does not know is not fatal (gpg-agent ignores it too).
            try expectOK(p, deadline: deadline, hung: hung, tolerateError: command == "OPTION")
        }
        // The person has the dialog's timeout; ours fires a little after pinentry's.
        deadline = monotonicSeconds() + Double(timeout) + 2
        switch kind {
        case .pin, .newPIN:
            try p.send(Assuan.line("GETPIN"))
            return try readPIN(p, deadline: deadline)
        case .confirm:
            let asked = monotonicSeconds()
            try p.send(Assuan.line(oneButton ? "CONFIRM --one-button" : "CONFIRM"))
            let answer = try readConfirm(p, deadline: deadline)
            return readFirst && monotonicSeconds() - asked < Dialog.readingTime ? .tooSoon : answer
        case .message:
            try p.send(Assuan.line("MESSAGE"))
            return try readConfirm(p, deadline: deadline)
        }
    }

    enum Reply {
        case ok
        case err(Assuan.Failure)
        /// Status (`S`), comment (`#`) and other lines a client skips.
        case skip
        case data
        /// `S PIN_REPEATED`: the SETREPEAT check passed.
        case repeated
        case garbage
    }

    static func classify(_ line: UnsafeRawBufferPointer) -> Reply {
        func starts(_ prefix: String) -> Bool {
            let p = Array(prefix.utf8)
            return line.count >= p.count && zip(line, p).allSatisfy { $0 == $1 }
        }
        if line.count == 2 && starts("OK") || starts("OK ") { return .ok }
        if starts("ERR ") { return .err(Assuan.Failure(line: line)) }
        if starts("D ") { return .data }
        if starts("S PIN_REPEATED") { return .repeated }
        if line.isEmpty || starts("S ") || starts("#") || line.count == 1 && starts("S") { return .skip }
        return .garbage
    }

    func expectOK(_ p: PinentryProcess, deadline: Double, hung: DialogFailure, tolerateError: Bool = false) throws(DialogFailure) {
        while true {
            let reply = try p.readLine(deadline: deadline, timeoutIsFailure: hung) { line in Dialog.classify(line) }
            switch reply {
            case .ok: return
            case .skip, .repeated: continue
            case .err(let failure):
                if tolerateError { return }
                throw .broken("pinentry refused a setting (\(failure))")
            case .data, .garbage:
                throw .broken("pinentry answered something that is not Assuan")
            }
        }
    }

    func readPIN(_ p: PinentryProcess, deadline: Double) throws(DialogFailure) -> DialogAnswer {
        var pin: SecureBytes?
        var repeated = false
        while true {
            // The D line is decoded straight into secure memory; the read buffer is wiped after.
            let reply = try p.readLine(deadline: deadline, timeoutIsFailure: .timeout) { line throws(DialogFailure) -> Reply in
                let reply = Dialog.classify(line)
                guard case .data = reply else { return reply }
                let payload = UnsafeRawBufferPointer(rebasing: line[2...])
                var length = 0
                do {
                    let decoded = try SecureBytes(count: payload.count) { out in
                        guard let n = Assuan.unescape(payload, into: out) else { throw DialogFailure.broken("bad escape") }
                        length = n
                    }
                    // Escapes make the text shorter: keep exactly the decoded bytes.
                    pin = length == decoded.count ? decoded : try SecureBytes(count: length) { out in
                        decoded.withUnsafeBytes { out.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
                    }
                } catch {
                    throw .broken("pinentry sent a malformed PIN line")
                }
                return .data
            }
            switch reply {
            case .ok:
                // OK without data: an empty PIN.
                if let pin { return .pin(pin, repeated: repeated) }
                do { return .pin(try SecureBytes(count: 0) { _ in }, repeated: repeated) } catch { throw .broken("no secure memory") }
            case .repeated: repeated = true
            case .data, .skip: continue
            case .err(let failure): throw Dialog.failure(failure)
            case .garbage: throw .broken("pinentry answered something that is not Assuan")
            }
        }
    }

    func readConfirm(_ p: PinentryProcess, deadline: Double) throws(DialogFailure) -> DialogAnswer {
        while true {
            let reply = try p.readLine(deadline: deadline, timeoutIsFailure: .timeout) { line in Dialog.classify(line) }
            switch reply {
            case .ok: return .ok
            case .skip, .repeated: continue
            case .err(.notConfirmed): return .notOK
            case .err(let failure): throw Dialog.failure(failure)
            case .data, .garbage: throw .broken("pinentry answered something that is not Assuan")
            }
        }
    }

    static func failure(_ f: Assuan.Failure) -> DialogFailure {
        switch f {
        case .cancelled: return .cancelled
        case .timeout: return .timeout
        case .notConfirmed: return .cancelled
        case .other(let code): return .broken("pinentry failed with error \(code)")
        }
    }
}

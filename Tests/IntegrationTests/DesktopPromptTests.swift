import Foundation
import VaultProtocol
import VaultTestSupport
import VaultWire
import XCTest

/// The real pinentry-gtk2 on a real (virtual) X display: a locked vault, an
/// app that said `"prompter": "vault"`, and xdotool typing the PIN into the
/// window as a person would. The app gets its session and never sees the PIN.
final class DesktopPromptTests: VaultdTestCase {
    static let pinentry = "/usr/bin/pinentry-gtk-2"
    static let tools = ["/usr/bin/Xvfb", "/usr/bin/xdotool", pinentry]

    /// A private X server; stopped at teardown.
    func startXvfb() throws -> String {
        for tool in Self.tools where !FileManager.default.isExecutableFile(atPath: tool) {
            throw cannotRunHere("\(tool) is not installed (Debian: xvfb, xdotool, pinentry-gtk2; scripts/setup installs them)")
        }
        let number = 60 + Int(getpid() % 200)
        try startServer("/usr/bin/Xvfb", [":\(number)", "-screen", "0", "1024x768x24", "-nolisten", "tcp"])
        let display = ":\(number)"
        guard waitUntil(timeout: 15, { FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)") }) else {
            throw IntegrationError("Xvfb \(display) did not start")
        }
        return display
    }

    /// `dbus-run-session`'s arguments for a desktop test's own session bus: the
    /// machine's services but the desktop portal's. On a fresh bus with no session
    /// manager, GtkApplication's start asks the portal for Inhibit, and
    /// xdg-desktop-portal (installed with GTK's Recommends), with no keyring or
    /// PipeWire on that bus, kept each GTK 4 program waiting 25 s. On a desktop
    /// the portal runs already.
    func ownSessionBus() throws -> [String] {
        let dir = NSTemporaryDirectory() + "svbus-\(getpid())-\(UUID().uuidString.prefix(8))"
        let services = dir + "/services", system = "/usr/share/dbus-1/services"
        try FileManager.default.createDirectory(atPath: services, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        for name in try FileManager.default.contentsOfDirectory(atPath: system) where !name.contains(".portal.") {
            try FileManager.default.createSymbolicLink(atPath: services + "/" + name, withDestinationPath: system + "/" + name)
        }
        try sessionBusConfig(listen: "unix:dir=\(dir)", servicedir: services)
            .write(toFile: dir + "/bus.conf", atomically: true, encoding: .utf8)
        return ["--config-file=" + dir + "/bus.conf", "--"]
    }

    /// Starts a display server for this test, quiet; stopped at teardown (then `cleanup`).
    func startServer(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                     cleanup: @escaping @Sendable () -> Void = {}) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        if let environment { p.environment = environment }
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        addTeardownBlock {
            p.terminate()
            p.waitUntilExit()
            cleanup()
        }
    }

    func xdotool(_ display: String, _ args: [String]) throws -> ProcessOutcome {
        try runProcess("/usr/bin/xdotool", args, env: childEnvironment(["DISPLAY": display]), timeout: 20)
    }

    /// The id of the window titled `title`, once it is mapped.
    func window(_ display: String, titled title: String, timeout: Double = 30) throws -> String? {
        var id: String?
        _ = try waitUntil(timeout: timeout, interval: 0.3) {
            let r = try xdotool(display, ["search", "--onlyvisible", "--name", title])
            id = r.out.split(separator: "\n").first.map(String.init)
            return id != nil
        }
        return id
    }

    /// A locked vault whose dialogs use pinentry-gtk2, and an app (prompter
    /// vault, on `display`) whose `session` request `id` is now waiting for the person.
    func askWithPinentryGtk2(display: String, lang: String, id: Int64) throws -> (VaultdProcess, RawClient) {
        let v = try startVaultd(config: "pinentry = \"\(Self.pinentry)\"\n" + VaultdProcess.fastPINConfig)
        enrollPIN(v)
        try importSession(v, account: "kari", accessToken: "at-desktop", refreshToken: nil)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let app = try v.raw()
        let hello = try app.call("hello", ["version": 1, "client": "aktivitetslogg", "lang": .string(lang), "prompter": "vault",
                                           "display": .string(display)])
        XCTAssertEqual(hello.result?["prompter"], "vault", hello.text)
        XCTAssertTrue(app.send(Request(id: .int(id), op: "session", fields: ["account": "kari"])))
        return (v, app)
    }

    func testAppWithVaultPrompterGetsItsSessionThroughTheRealPinentryGtk2() throws {
        let display = try startXvfb()
        let (v, app) = try askWithPinentryGtk2(display: display, lang: "nb", id: 7)

        guard let win = try window(display, titled: "SessionVault") else {
            XCTFail("no pinentry window appeared on \(display). vaultd log:\n\(v.log)")
            return
        }
        // pinentry-gtk2 grabs the keyboard: what xdotool types goes into its PIN field.
        XCTAssertEqual(try xdotool(display, ["type", "--delay", "50", Self.pin]).exit, 0)
        XCTAssertEqual(try xdotool(display, ["key", "Return"]).exit, 0)

        let answer = try app.readJSON(timeout: 30)
        XCTAssertEqual(answer["id"], 7, answer.text)
        XCTAssertTrue(answer.isOK, answer.text)
        XCTAssertEqual(answer.result?["access_token"], "at-desktop")
        XCTAssertFalse(String(decoding: app.received, as: UTF8.self).contains(Self.pin))
        XCTAssertTrue(waitUntil(timeout: 10) {
            (try? xdotool(display, ["search", "--onlyvisible", "--name", "SessionVault"]).out.isEmpty) ?? false
        }, "the dialog \(win) closed after the answer")
        XCTAssertEqual(try status(v)["locked"], false)
    }

    func testCancelInTheRealDialogIsCancelled() throws {
        let display = try startXvfb()
        let (v, app) = try askWithPinentryGtk2(display: display, lang: "en", id: 8)
        guard try window(display, titled: "SessionVault") != nil else {
            XCTFail("no pinentry window appeared on \(display). vaultd log:\n\(v.log)")
            return
        }
        XCTAssertEqual(try xdotool(display, ["key", "Escape"]).exit, 0)
        let answer = try app.readJSON(timeout: 30)
        XCTAssertEqual(answer.errorCode, "cancelled", answer.text)
    }

    /// A terminal-only session: the real pinentry-curses draws in a tmux pane
    /// (the tty the app names in its hello), and tmux types the PIN there.
    func testTerminalOnlySessionWithTheRealPinentryCursesInTmux() throws {
        for tool in ["/usr/bin/tmux", "/usr/bin/pinentry-curses"] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw cannotRunHere("\(tool) is not installed (Debian: tmux, pinentry-curses; scripts/setup installs them)")
        }
        let socket = NSTemporaryDirectory() + "svtmux-\(getpid())-\(UUID().uuidString.prefix(8))"
        func tmux(_ args: [String]) throws -> ProcessOutcome {
            try runProcess("/usr/bin/tmux", ["-S", socket] + args, env: childEnvironment(["TERM": "xterm-256color"]), timeout: 20)
        }
        // Foundation's Process learns that a child ended when a socket it hands the
        // child is closed by every holder; the tmux server that `new-session` leaves
        // behind would keep it open (and the call would wait until the server ends),
        // so the server is started with every descriptor past stderr closed.
        // (bash, not sh: dash cannot name descriptors past 9.)
        let closeInherited = "for fd in $(ls /proc/$$/fd); do [ \"$fd\" -gt 2 ] && eval \"exec $fd>&-\"; done; exec \"$@\""
        let started = try runProcess("/bin/bash", ["-c", closeInherited, "bash", "/usr/bin/tmux", "-S", socket,
                                                 "new-session", "-d", "-s", "vault", "-x", "100", "-y", "30", "sleep 120"],
                                     env: childEnvironment(["TERM": "xterm-256color"]), timeout: 20)
        XCTAssertEqual(started.exit, 0, started.err)
        XCTAssertFalse(started.timedOut, "tmux new-session did not return")
        addTeardownBlock {
            _ = try? tmux(["kill-server"])
            try? FileManager.default.removeItem(atPath: socket)
        }
        let tty = try tmux(["display-message", "-p", "-t", "vault", "#{pane_tty}"]).out.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(tty.hasPrefix("/dev/"), tty)

        let v = try startVaultd(config: "pinentry = \"/usr/bin/pinentry-curses\"\n" + VaultdProcess.fastPINConfig)
        enrollPIN(v)
        try importSession(v, account: "kari", accessToken: "at-terminal", refreshToken: nil)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let app = try v.raw()
        let hello = try app.call("hello", ["version": 1, "client": "aktivitetslogg", "lang": "nb", "prompter": "vault",
                                           "tty": .string(tty), "term": "tmux-256color"])
        XCTAssertEqual(hello.result?["prompter"], "vault", hello.text)
        XCTAssertTrue(app.send(Request(id: 9, op: "session", fields: ["account": "kari"])))

        var screen = ""
        let drawn = try waitUntil(timeout: 30, interval: 0.3) {
            screen = try tmux(["capture-pane", "-p", "-t", "vault"]).out
            return screen.contains("Skriv inn PIN-koden")
        }
        XCTAssertTrue(drawn, "pinentry-curses did not draw its dialog in the pane:\n\(screen)\nvaultd log:\n\(v.log)")
        XCTAssertTrue(screen.contains("vil bruke innloggingen din"), screen)
        // The field's label and both buttons in bokmål (curses draws them as <OK> <Avbryt>).
        XCTAssertTrue(screen.contains("PIN-kode:") && screen.contains("<Avbryt>") && screen.contains("<OK>"), screen)
        XCTAssertEqual(try tmux(["send-keys", "-t", "vault", Self.pin, "Enter"]).exit, 0)
        let answer = try app.readJSON(timeout: 30)
        XCTAssertTrue(answer.isOK, answer.text)
        XCTAssertEqual(answer.result?["access_token"], "at-terminal")
        XCTAssertFalse(String(decoding: app.received, as: UTF8.self).contains(Self.pin))
    }

    /// The GTK example app (clients/python/example_gtk.py, Debian's python3-gi) against a
    /// real vaultd with the real pinentry-gtk2 on Xvfb, as scripts/demo --desktop runs it:
    /// a Demo Vipps login by vaultctl, the app allowed in vaultd's own dialog, the PIN typed into the dialog (a wrong one first), the app's
    /// role-based home in bokmål and English; then both dialogs closed and the app shows
    /// the vault's sentence; a first login from the app (which login, the browser, the offer
    /// of fingerprint login, its scan); last, the fingerprint dialog (stub reader), closed by
    /// vaultd on the match. What the app showed is read from its output.
    func testTheGTKExampleAppShowsItsHomeAfterThePINDialog() throws {
        for tool in Self.tools + ["/usr/bin/import", "/usr/bin/xsettingsd"] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw cannotRunHere("\(tool) is not installed (Debian: xvfb, xdotool, pinentry-gtk2, imagemagick, xsettingsd)")
        }
        let probe = try runProcess("/usr/bin/python3", ["-c", "import gi; gi.require_version('Gtk', '3.0'); gi.require_version('Adw', '1')"],
                                   env: childEnvironment([:]), timeout: 20)
        if probe.exit != 0 { throw cannotRunHere("GTK 3, GTK 4 or libadwaita for Python is not installed (Debian: python3-gi, gir1.2-gtk-3.0, gir1.2-adw-1)") }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let shots = try makeTemporaryDirectory("sv-shots", in: "/tmp")
        addTeardownBlock { try? FileManager.default.removeItem(atPath: shots) }
        // On a session bus of its own on which nothing starts on demand (scripts/with-keyring's,
        // as `scripts/demo` gives it): with none, GDBus would start one for the X display on
        // which a GTK 4 app waits 25 s for the desktop portals, where Debian installs them.
        let r = try runProcess(root.appendingPathComponent("scripts/with-keyring").path,
                               [root.appendingPathComponent("scripts/demo-desktop").path],
                               env: childEnvironment(["VAULTD": Binaries.vaultd, "VAULTCTL": Binaries.vaultctl, "SCREENSHOTS": shots]),
                               timeout: 240)
        // Which step failed first: a CI report may show only a message's first line.
        let failedStep = r.err.split(separator: "\n").filter { $0.hasPrefix("demo --desktop:") }
        XCTAssertEqual(r.exit, 0, "\(failedStep.joined(separator: " / "))\nout:\n\(r.out)\nerr:\n\(r.err)")
        XCTAssertTrue(r.out.contains("the app: Hei, Kari Nordmann — Mentorhuset Oslo, likeperson"), r.out)
        XCTAssertTrue(r.out.contains("the app: Hello, Kari Nordmann — Mentorhuset Oslo, peer mentor"), r.out)
        XCTAssertTrue(r.out.contains("the app: Avbrutt. Du kan velge en annen måte å logge inn på."), r.out)
        XCTAssertTrue(r.out.contains("the app: Cancelled. You can choose another way to log in."), r.out)
        XCTAssertTrue(r.out.contains("offers fingerprint login\n  screenshot: \(shots)/login-choice-nb.png\n  screenshot: \(shots)/offer-fingerprint-nb.png\n  screenshot: \(shots)/enroll-fingerprint-nb.png\n  the app: Hei, Kari Nordmann"), r.out)
        XCTAssertTrue(r.out.contains("vaultd asks for a fingerprint, and closes its dialog on the match\n  screenshot: \(shots)/fingerprint-dialog-nb.png\n  the app: Hei, Kari Nordmann"), r.out)
        for name in ["login-choice-nb", "offer-fingerprint-nb", "enroll-fingerprint-nb", "offer-fingerprint-en", "fingerprint-dialog-nb", "fingerprint-dialog-en", "grant-dialog-nb", "grant-dialog-en", "pin-dialog-nb", "pin-dialog-wrong-nb", "pin-dialog-en", "provider-choice-nb", "example-home-nb", "settings-nb", "settings-en", "pin-dialog-large-nb", "pin-dialog-large-en", "pin-dialog-contrast-nb", "pin-dialog-contrast-en"] {
            let size = (try? FileManager.default.attributesOfItem(atPath: "\(shots)/\(name).png")[.size] as? Int) ?? 0
            XCTAssertGreaterThan(size, 500, "\(name).png was not taken")
        }
        // The dialog follows the desktop's text scaling: at 2× it is well over 1.4× as tall.
        for lang in ["nb", "en"] {
            let normal = pngSize("\(shots)/pin-dialog-\(lang).png"), large = pngSize("\(shots)/pin-dialog-large-\(lang).png")
            XCTAssertGreaterThan(Double(large.height), 1.4 * Double(normal.height), "\(lang): \(normal) at 1×, \(large) at 2×")
        }
        // The dialog follows the desktop's high-contrast switch: its outline and the lines
        // between its buttons reach WCAG 2.2's 3:1 for non-text contrast against the dialog
        // (SC 1.4.11), where without the switch they are a faint grey (about 1.6:1).
        for lang in ["nb", "en"] {
            let normal = try outlineContrast("\(shots)/pin-dialog-\(lang).png")
            let high = try outlineContrast("\(shots)/pin-dialog-contrast-\(lang).png")
            XCTAssertGreaterThanOrEqual(high, 3.0, "\(lang): in high contrast the outline is \(high):1")
            XCTAssertLessThan(normal, 3.0, "\(lang): without it \(normal):1 (else the check above shows nothing)")
        }
    }

    /// The contrast ratio (WCAG 2.2) between the darkest pixel of a dialog
    /// screenshot's left edge — its outline — and its lightest pixel, the dialog's
    /// background: read with ImageMagick, as grey levels in sRGB.
    func outlineContrast(_ png: String) throws -> Double {
        /// The darkest and the lightest grey (0…1) of the image cut by `args`.
        func greys(_ args: [String]) throws -> (darkest: Double, lightest: Double) {
            let r = try runProcess("/usr/bin/convert", [png] + args + ["-colorspace", "Gray", "-format", "%[fx:minima.intensity] %[fx:maxima.intensity]", "info:"],
                                   env: childEnvironment([:]), timeout: 20)
            let values = r.out.split(separator: " ").compactMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            guard r.exit == 0, values.count == 2 else { throw IntegrationError("convert \(png): \(r.err)") }
            return (values[0], values[1])
        }
        func luminance(_ v: Double) -> Double { v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4) }
        let outline = try greys(["-crop", "2x100%+0+0", "+repage"]).darkest
        let background = try greys([]).lightest
        return (luminance(background) + 0.05) / (luminance(outline) + 0.05)
    }

    /// A PNG's width and height, from its IHDR chunk (zero when it cannot be read).
    func pngSize(_ path: String) -> (width: Int, height: Int) {
        guard let data = FileManager.default.contents(atPath: path), data.count >= 24 else { return (0, 0) }
        let bytes = [UInt8](data.prefix(24))
        func be32(_ at: Int) -> Int { bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
        return (be32(16), be32(20))
    }

    /// The example app itself as a screen reader reads it (Tests/desktop/example_a11y.py):
    /// the window, the sentence in bokmål and the button that asks again have names.
    func testTheGTKExampleAppAsAScreenReaderReadsIt() throws {
        let r = try runA11yScript("example_a11y.py", probe: "import pyatspi, gi; gi.require_version('Gtk', '3.0')",
                                  missing: "pyatspi or GTK 3 for Python is missing (Debian: python3-pyatspi, python3-gi, gir1.2-gtk-3.0)",
                                  env: [:], timeout: 60)
        XCTAssertEqual(r.exit, 0, "out:\n\(r.out)\nerr:\n\(r.err)")
        XCTAssertTrue(r.out.contains("app-a11y: 0 failed"), r.out)
    }

    /// The settings app (clients/settings, issue 22) used only through its accessible
    /// tree, as a person with a screen reader would, in bokmål (Tests/desktop/settings_a11y.py):
    /// a PIN set and fingerprint login turned on in vaultd's own dialogs, Remove PIN
    /// answered No (the window says nothing was changed), an app's grant removed, an
    /// account logged out; the window and vaultd agree after each.
    /// Then a member of two organizations (the demo's Ola): the row "Organisasjon"
    /// reached with Tab, opened with Enter, another organization chosen with the
    /// arrow keys, and the apps get it.
    func testTheSettingsAppAsAScreenReaderUsesIt() throws {
        let r = try runA11yScript("settings_a11y.py", probe: Self.gtk4Probe, missing: Self.gtk4Missing,
                                  env: ["VAULTD": Binaries.vaultd, "VAULTCTL": Binaries.vaultctl, "VAULT_FPSTUB": Binaries.fpstub],
                                  timeout: 240)
        XCTAssertEqual(r.exit, 0, "out:\n\(r.out)\nerr:\n\(r.err)")
        XCTAssertTrue(r.out.contains("settings-a11y: 0 failed"), r.out)
        XCTAssertFalse(r.out.contains("CHECK FAIL"), r.out)
    }

    /// Runs Tests/desktop/`name` in a private session bus on `display` (the
    /// variables that name it; a new virtual X display when nil), after
    /// checking for the accessibility stack and for what `probe` imports (a
    /// missing one is `cannotRunHere`: a failure under CI=true).
    /// GTK 4 and libadwaita for Python, which the own dialog, the settings app and pyatspi need.
    static let gtk4Probe = "import pyatspi, gi; gi.require_version('Gtk', '4.0'); gi.require_version('Adw', '1')"
    static let gtk4Missing = "pyatspi, GTK 4 or libadwaita for Python is missing (Debian: python3-pyatspi, gir1.2-gtk-4.0, gir1.2-adw-1)"

    /// dialog_a11y.py with SessionVault's own dialog as vaultd's pinentry, on `display`.
    func runOwnDialogScript(on display: [String: String], timeout: Double) throws -> ProcessOutcome {
        let own = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("clients/dialog/sessionvault-pinentry").path
        return try runA11yScript("dialog_a11y.py", probe: Self.gtk4Probe, missing: Self.gtk4Missing,
                                 env: ["VAULTD": Binaries.vaultd, "VAULTCTL": Binaries.vaultctl, "VAULT_FPSTUB": Binaries.fpstub, "PINENTRY": own],
                                 timeout: timeout, display: display)
    }

    func runA11yScript(_ name: String, probe: String, missing: String, env: [String: String],
                       timeout: Double, display: [String: String]? = nil) throws -> ProcessOutcome {
        let display = try display ?? ["DISPLAY": startXvfb()]
        for tool in ["/usr/bin/dbus-run-session", "/usr/libexec/at-spi-bus-launcher"] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw cannotRunHere("\(tool) is not installed (Debian: dbus, at-spi2-core)")
        }
        let probed = try runProcess("/usr/bin/python3", ["-c", probe], env: childEnvironment([:]), timeout: 20)
        if probed.exit != 0 { throw cannotRunHere(missing) }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("desktop/" + name).path
        return try runProcess("/usr/bin/dbus-run-session", try ownSessionBus() + ["/usr/bin/python3", script],
                              env: childEnvironment(env.merging(display) { $1 }), timeout: timeout)
    }

    /// Orca itself (Debian's orca 43) listening to SessionVault's own dialog and settings
    /// app, and what it says checked (Tests/desktop/orca_speech.py): headless, on the
    /// test's own buses, its speech through speech-dispatcher's dummy module and read from
    /// Orca's speech log. In English and in bokmål (Orca too in bokmål), every dialog kind:
    /// when the PIN dialog appears Orca says its title, who asks and what to type, and the
    /// focused field by its label ("PIN: password text" / "PIN-kode: passordtekst"); Tab
    /// says each button; after a wrong PIN (bokmål) it says why; the PIN gets the app its
    /// session and is never spoken, whole or a digit at a time. The app-grant dialog (Allow
    /// focused, Tab to Deny and Only this time, Alt+O / Alt+A), the choice of login (the
    /// first provider focused, Tab to Cancel and the other, Escape), the offer of fingerprint
    /// login after a login (Turn on, Tab to Cancel and Not now, Alt+N / Alt+I), a new PIN
    /// typed twice (both fields by their labels, two PINs that differ said so with the first
    /// field) and the message after it ("PIN is set up.", Close), Start over's yes/no
    /// question (No first, Tab to Cancel and Yes, Alt+N) and the fingerprint's wait are
    /// announced the same way. The settings app: Tab says the Lock button, each unlock
    /// method's state ("Fingerprint enabled" / "Fingeravtrykk er slått på") and its
    /// buttons, and no row "not selected" (opened with mutter as the X window manager,
    /// as GNOME on Xorg); Orca+KP_Enter names the window.
    func testOrcaSpeaksTheDialog() throws {
        let r = try runOrcaScript(on: nil, timeout: 240)
        assertOrcaHeardEveryDialog(r, onWayland: false)
    }

    /// What each language's Orca and dialogs say, as orca_speech.py checks it.
    struct OrcaWords {
        let lang, button, password, field, cancel, type, again, againKey, grantOthers, grantKey: String
        let login, provider, otherProvider, offer, turnOn, notNow, offerKey, currentPIN, choose, mismatch: String
        let pinSet, close, startOver, no, yes, touch, usePIN, lock, unlock, fingerprintOn, pinOn, listBox, notSelected, frame: String
        let fingerprintButtons, pinButtons: [String]
    }

    static let orcaWords = [
        OrcaWords(lang: "en", button: "push button", password: "password text", field: "PIN:", cancel: "Cancel",
                  type: "Enter your PIN:", again: "Type the same PIN again:", againKey: "alt+t",
                  grantOthers: "'Deny' and 'Only this time'", grantKey: "alt+o",
                  login: "Log in with Demo BankID / Demo Vipps", provider: "Use Demo BankID", otherProvider: "Use Demo Vipps",
                  offer: "Turn on fingerprint login?", turnOn: "Turn on", notNow: "Not now", offerKey: "alt+n",
                  currentPIN: "first enter the PIN you use now", choose: "Choose a PIN",
                  mismatch: "The two PINs were not the same. Let's start again.", pinSet: "PIN is set up.", close: "Close",
                  startOver: "Start over?", no: "No", yes: "Yes", touch: "Touch the fingerprint reader", usePIN: "Use PIN instead",
                  lock: "Lock", unlock: "Unlock methods", fingerprintOn: "Fingerprint enabled", pinOn: "PIN enabled",
                  listBox: "list box", notSelected: "not selected", frame: "frame",
                  fingerprintButtons: ["Set up again", "Turn off"], pinButtons: ["Change PIN", "Remove PIN"]),
        OrcaWords(lang: "nb", button: "trykknapp", password: "passordtekst", field: "PIN-kode:", cancel: "Avbryt",
                  type: "Skriv inn PIN-koden:", again: "Skriv den samme PIN-koden en gang til:", againKey: "alt+s",
                  grantOthers: "'Avslå' and 'Bare denne gangen'", grantKey: "alt+a",
                  login: "Logg inn med Demo BankID / Demo Vipps", provider: "Bruk Demo BankID", otherProvider: "Bruk Demo Vipps",
                  offer: "Slå på innlogging med fingeravtrykk?", turnOn: "Slå på", notNow: "Ikke nå", offerKey: "alt+i",
                  currentPIN: "skriv først inn PIN-koden du bruker nå", choose: "Velg en PIN-kode",
                  mismatch: "De to PIN-kodene var ikke like. Vi begynner på nytt.", pinSet: "PIN-kode er satt opp.", close: "Lukk",
                  startOver: "Begynne på nytt?", no: "Nei", yes: "Ja", touch: "Berør fingeravtrykkleseren",
                  usePIN: "Bruk PIN-kode i stedet", lock: "Lås", unlock: "Opplåsing", fingerprintOn: "Fingeravtrykk er slått på",
                  pinOn: "PIN-kode er slått på", listBox: "listeboks", notSelected: "ikke valgt", frame: "ramme", fingerprintButtons: ["Sett opp på nytt", "Slå av"],
                  pinButtons: ["Bytt PIN-kode", "Fjern PIN-kode"]),
    ]

    /// orca_speech.py passed on X (`onWayland` false) or on mutter: each of its checks,
    /// in each language, said "CHECK ok", and what Orca said word for word where it
    /// matters (each focused button and field, a mismatch's reason, the message).
    func assertOrcaHeardEveryDialog(_ r: ProcessOutcome, onWayland: Bool) {
        XCTAssertEqual(r.exit, 0, "out:\n\(r.out)\nerr:\n\(r.err)")
        XCTAssertTrue(r.out.contains("orca: 0 failed"), r.out)
        XCTAssertFalse(r.out.contains("CHECK FAIL"), r.out)
        var checks = ["the accessibility registry answers", "speech-dispatcher runs with its dummy module",
                      "the nb_NO.UTF-8 locale for Orca in bokmål", "PIN enrolled", "fingerprint: turned off again",
                      "nb: after a wrong PIN Orca says why ('Det stemte ikke')",
                      "the PIN is never spoken, whole or a digit at a time"]
        checks.append(onWayland ? "Wayland: mutter's RemoteDesktop takes keys" : "X: mutter manages the display's windows")
        var said: [String] = []
        for w in Self.orcaWords {
            let (l, b) = (w.lang, w.button)
            checks += ["\(l): Orca started and spoke", "\(l): when the dialog appears, Orca names it by its title ('SessionVault dialog')",
                       "\(l): and says who asks and what to type ('\(w.type)')",
                       "\(l): and the focused PIN field by its label ('\(w.field) \(w.password)')",
                       "\(l): Tab: Orca says '\(w.cancel) \(b)'", "\(l): Tab: Orca says 'OK \(b)'",
                       "\(l): Tab again: back in the PIN field", "\(l): the PIN typed, Enter: the app got its session",
                       "\(l): grant: when it appears, Orca names the dialog and says what it asks",
                       "\(l): grant: and the focused button", "\(l): grant: Tab, Tab: Orca says \(w.grantOthers), each a \(b)",
                       "\(l): grant: \(w.grantKey) answered",
                       "\(l): login: when it appears, Orca names the dialog and says what it asks ('\(w.login)')",
                       "\(l): login: and the focused button ('\(w.provider) \(b)')",
                       "\(l): login: Tab, Tab: Orca says '\(w.cancel)' and '\(w.otherProvider)', each a \(b)",
                       "\(l): login: Escape cancels it ('cancelled')",
                       "\(l): offer: when it appears, Orca names the dialog and says what it asks ('\(w.offer)')",
                       "\(l): offer: and the focused button ('\(w.turnOn) \(b)')",
                       "\(l): offer: Tab, Tab: Orca says '\(w.cancel)' and '\(w.notNow)', each a \(b)",
                       "\(l): offer: \(w.offerKey) answered '\(w.notNow)' and the app has its session, at once",
                       "\(l): new PIN: Orca says to enter the PIN in use first ('\(w.currentPIN)')",
                       "\(l): new PIN: then Orca says what to do and the first field by its label ('\(w.choose)')",
                       "\(l): new PIN: \(w.againKey): Orca says the second field by its label ('\(w.again) \(w.password)')",
                       "\(l): new PIN: two different PINs: Orca says the first field and why",
                       "\(l): new PIN: typed twice alike, Enter: it is set",
                       "\(l): message: when it appears, Orca names the dialog and says it ('\(w.pinSet)')",
                       "\(l): message: and its one button, focused ('\(w.close) \(b)')",
                       "\(l): message: Enter answers it, and the dialog ends",
                       "\(l): confirm: when it appears, Orca names the dialog and says what it asks ('\(w.startOver)')",
                       "\(l): confirm: and the focused button ('\(w.no) \(b)')",
                       "\(l): confirm: Tab, Tab: Orca says '\(w.cancel)' and '\(w.yes)', each a \(b)",
                       "\(l): confirm: Alt+N answered \(w.no), nothing deleted",
                       "\(l): fingerprint: turned on with one scan",
                       "\(l): fingerprint: when the wait appears, Orca names the dialog and says what to do ('\(w.touch)')",
                       "\(l): fingerprint: and the focused way out ('\(w.usePIN) \(b)')",
                       "\(l): fingerprint: a scan ended the wait and the app got its session",
                       "\(l): settings: as the window opens, Orca says its name 'SessionVault \(w.frame).'",
                       "\(l): settings: as the window opens, Orca says where the focus is: the Lock button",
                       "\(l): settings: the window's name comes before the focus",
                       "\(l): settings: Tab on: Orca says the Lock button ('\(w.lock) \(b)')",
                       "\(l): settings: Tab on: Orca says the fingerprint's state, with its heading ('\(w.unlock)' '\(w.fingerprintOn)')",
                       "\(l): settings: Tab on: Orca says the fingerprint's buttons ("
                           + w.fingerprintButtons.map { "'\($0) \(b)'" }.joined(separator: " ") + ")",
                       "\(l): settings: Tab on: Orca says the PIN's state ('\(w.pinOn)')",
                       "\(l): settings: Tab on: Orca says the PIN's buttons ("
                           + w.pinButtons.map { "'\($0) \(b)'" }.joined(separator: " ") + ")",
                       "\(l): settings: no row is said to be '\(w.notSelected)' (heard 0 times)"]
            // Orca 43 hears no key of a GTK 4 window on Wayland: no Orca command there.
            if !onWayland { checks.append("\(l): settings: Orca+KP_Enter: Orca names the window ('SessionVault')") }
            said += ["\(w.field) \(w.password).", "\(w.cancel) \(b).", "OK \(b).", "\(w.provider) \(b).", "\(w.turnOn) \(b).",
                     "\(w.notNow) \(b).", "\(w.again) \(w.password).", w.mismatch, "\(w.close) \(b).", "\(w.no) \(b).",
                     "\(w.yes) \(b).", "\(w.usePIN) \(b).", "SessionVault \(w.frame).", "\(w.lock) \(b).", "\(w.unlock) \(w.listBox)", "\(w.fingerprintOn).",
                     "\(w.pinOn)."]
                .map { "\(l) SPEECH OUTPUT: '\($0)'" }
            said.append("\(l) SPEECH OUTPUT: 'SessionVault dialog \(l == "en" ? "‘python3.11’ wants to use your login." : "«python3.11» vil bruke innloggingen din.")  \(w.pinSet)'")
            if !onWayland { said.append("\(l) SPEECH OUTPUT: 'SessionVault'") }
        }
        said += ["en SPEECH OUTPUT: 'Allow push button.'", "nb SPEECH OUTPUT: 'Tillat trykknapp.'"]
        let lines = r.out.split(separator: "\n")
        for check in checks {
            XCTAssertTrue(lines.contains { $0.hasPrefix("CHECK ok \(check)") }, "\(check): \(r.out)")
        }
        // What Orca said, word for word, as the log shows it.
        for line in said {
            XCTAssertTrue(lines.contains { $0 == line }, "\(line): \(r.out)")
        }
        XCTAssertFalse(r.out.contains("582946") || r.err.contains("582946"), "orca_speech.py's PIN was printed")
    }

    /// Tests/desktop/orca_speech.py with SessionVault's own dialog, on `display` (a new
    /// virtual X display when nil), after checking for Orca, speech-dispatcher, the
    /// bokmål locale's sources and what the script imports (a missing one is
    /// `cannotRunHere`: a failure under CI=true).
    func runOrcaScript(on display: [String: String]?, timeout: Double) throws -> ProcessOutcome {
        for tool in ["/usr/bin/orca", "/usr/bin/speech-dispatcher", "/usr/lib/speech-dispatcher-modules/sd_dummy",
                     "/usr/bin/localedef", "/usr/bin/mutter", "/usr/bin/xprop"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            throw cannotRunHere("\(tool) is not installed (Debian: orca, speech-dispatcher, libc-bin, mutter, x11-utils; scripts/setup installs them)")
        }
        // Orca runs in bokmål from a locale built for the test (localedef), from the locales package's sources.
        guard FileManager.default.fileExists(atPath: "/usr/share/i18n/locales/nb_NO") else {
            throw cannotRunHere("/usr/share/i18n/locales/nb_NO is missing (Debian: locales; scripts/setup installs it)")
        }
        let own = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("clients/dialog/sessionvault-pinentry").path
        return try runA11yScript("orca_speech.py",
                                 probe: "import pyatspi, speechd, gi; gi.require_version('Gtk', '4.0'); gi.require_version('Adw', '1')",
                                 missing: "pyatspi, speechd, GTK 4 or libadwaita for Python is missing (Debian: python3-pyatspi, python3-speechd, gir1.2-gtk-4.0, gir1.2-adw-1)",
                                 env: ["VAULTD": Binaries.vaultd, "VAULTCTL": Binaries.vaultctl, "VAULT_FPSTUB": Binaries.fpstub, "PINENTRY": own],
                                 timeout: timeout, display: display)
    }

    /// Orca itself with the dialog and the settings app on GNOME's Wayland: mutter
    /// headless (startMutter), both GTK on Wayland (no DISPLAY), the keys typed through
    /// mutter's RemoteDesktop (wayland_keys.py), Orca 43 with no X display at all: every
    /// check of testOrcaSpeaksTheDialog, in both languages, but Orca+KP_Enter (Orca 43
    /// hears no key of a GTK 4 window on Wayland, with or without Xwayland: orca_speech.py
    /// says why).
    func testOrcaSpeaksTheDialogOnGNOMEsCompositor() throws {
        let wayland = try startMutter()
        let r = try runOrcaScript(on: wayland, timeout: 240)
        assertOrcaHeardEveryDialog(r, onWayland: true)
        // No X tool: nothing of Orca's key echo, which only X gives it.
        XCTAssertFalse(r.out.contains("SPEECH OUTPUT: 'tab '"), r.out)
    }

    /// A private Wayland compositor: weston 10's headless backend, its socket
    /// in a fresh runtime directory; stopped at teardown. Returns the
    /// variables a Wayland client needs.
    func startWeston() throws -> [String: String] {
        let weston = "/usr/bin/weston"
        guard FileManager.default.isExecutableFile(atPath: weston) else {
            throw cannotRunHere("\(weston) is not installed (Debian: weston; scripts/setup installs it)")
        }
        let runtime = try makeTemporaryDirectory("sv-wayland", in: "/tmp")
        chmod(runtime, 0o700)
        try startServer(weston, ["--backend=headless-backend.so", "--socket=sv-wayland", "--idle-time=0"],
                        environment: childEnvironment(["XDG_RUNTIME_DIR": runtime])) {
            try? FileManager.default.removeItem(atPath: runtime)
        }
        guard waitUntil(timeout: 15, { FileManager.default.fileExists(atPath: runtime + "/sv-wayland") }) else {
            throw IntegrationError("weston's headless compositor did not start")
        }
        return ["WAYLAND_DISPLAY": "sv-wayland", "XDG_RUNTIME_DIR": runtime]
    }

    /// Most GNOME desktops run Wayland: SessionVault's own dialog (read through
    /// AT-SPI: named, its field named, focus in it; weston 10 offers no virtual
    /// keyboard, so nothing can type and each dialog times out) and the settings
    /// app (used through AT-SPI alone, every step as on X) under weston's headless
    /// backend. GNOME's mutter, where they are typed into, is the test below.
    func testTheOwnDialogAndTheSettingsAppOnAHeadlessWaylandCompositor() throws {
        let wayland = try startWeston()
        let dialog = try runOwnDialogScript(on: wayland, timeout: 240)
        XCTAssertEqual(dialog.exit, 0, "out:\n\(dialog.out)\nerr:\n\(dialog.err)")
        XCTAssertTrue(dialog.out.contains("a11y: 0 failed"), dialog.out)
        for lang in ["en", "nb"] {
            XCTAssertTrue(dialog.out.contains("VERDICT \(lang) title=True buttons_named=True field_named=True"), dialog.out)
            XCTAssertTrue(dialog.out.contains("CHECK ok \(lang): focus starts in the PIN field"), dialog.out)
            XCTAssertTrue(dialog.out.contains("CHECK ok \(lang): left alone, the dialog timed out"), dialog.out)
        }
        let settings = try runA11yScript("settings_a11y.py", probe: Self.gtk4Probe, missing: Self.gtk4Missing,
                                         env: ["VAULTD": Binaries.vaultd, "VAULTCTL": Binaries.vaultctl, "VAULT_FPSTUB": Binaries.fpstub],
                                         timeout: 240, display: wayland)
        XCTAssertEqual(settings.exit, 0, "out:\n\(settings.out)\nerr:\n\(settings.err)")
        XCTAssertTrue(settings.out.contains("settings-a11y: 0 failed"), settings.out)
        XCTAssertFalse(settings.out.contains("CHECK FAIL"), settings.out)
    }

    /// GNOME's own compositor, headless: mutter (Debian 12: 43) with one virtual
    /// monitor and no Xwayland, on a session bus of its own (where it offers
    /// org.gnome.Mutter.RemoteDesktop, through which the scripts type); both in a
    /// fresh runtime directory, stopped at teardown. Returns the variables a
    /// Wayland client needs, and REMOTE_DESKTOP_BUS (the bus's address) for
    /// Tests/desktop/wayland_keys.py.
    func startMutter() throws -> [String: String] {
        for tool in ["/usr/bin/mutter", "/usr/bin/dbus-daemon", "/usr/bin/wl-copy", "/usr/bin/wl-paste"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            throw cannotRunHere("\(tool) is not installed (Debian: mutter, dbus, wl-clipboard; scripts/setup installs them)")
        }
        let runtime = try makeTemporaryDirectory("sv-mutter", in: "/tmp")
        chmod(runtime, 0o700)
        // A bus of its own: mutter serves both scripts, and each script runs in a
        // dbus-run-session of its own (so is given this bus's address to type through).
        let bus = "unix:path=\(runtime)/bus"
        try startServer("/usr/bin/dbus-daemon", ["--session", "--nofork", "--nopidfile", "--address=\(bus)"]) {
            try? FileManager.default.removeItem(atPath: runtime)
        }
        guard waitUntil(timeout: 15, { FileManager.default.fileExists(atPath: runtime + "/bus") }) else {
            throw IntegrationError("the session bus for mutter did not start")
        }
        // Stopped before the bus (teardown blocks run last-added first).
        try startServer("/usr/bin/mutter", ["--headless", "--wayland", "--no-x11", "--virtual-monitor", "1280x1024",
                                            "--wayland-display=sv-mutter"],
                        environment: childEnvironment(["XDG_RUNTIME_DIR": runtime, "DBUS_SESSION_BUS_ADDRESS": bus]))
        guard waitUntil(timeout: 30, { FileManager.default.fileExists(atPath: runtime + "/sv-mutter") }) else {
            throw IntegrationError("mutter's headless compositor did not start")
        }
        return ["WAYLAND_DISPLAY": "sv-mutter", "XDG_RUNTIME_DIR": runtime, "REMOTE_DESKTOP_BUS": bus]
    }

    /// GNOME's Wayland, as most of SessionVault's people have it: SessionVault's own
    /// dialog and the settings app on mutter itself (headless), walked with the
    /// same keys as on X, typed through mutter's RemoteDesktop interface
    /// (Tests/desktop/wayland_keys.py): the PIN typed and accepted (a wrong one
    /// first, said in an alert), Alt+C, the grant dialog's Alt+O and Alt+D, Alt+N,
    /// the first login and a new PIN; the dialog opening over the asking app's
    /// window takes the keyboard (the PIN goes into the dialog, none into the app)
    /// and gives it back; the PIN put on the clipboard by wl-copy and pasted with
    /// Ctrl+V; the settings app's organization chosen with Tab, Enter and the arrow keys.
    func testTheOwnDialogAndTheSettingsAppOnGNOMEsCompositor() throws {
        let wayland = try startMutter()
        /// Whether `output` has a "CHECK ok" line saying `check`.
        func passed(_ check: String, in output: String) -> Bool {
            output.split(separator: "\n").contains { $0.hasPrefix("CHECK ok") && $0.contains(check) }
        }
        let dialog = try runOwnDialogScript(on: wayland, timeout: 120)
        XCTAssertEqual(dialog.exit, 0, "out:\n\(dialog.out)\nerr:\n\(dialog.err)")
        XCTAssertTrue(dialog.out.contains("a11y: 0 failed"), dialog.out)
        XCTAssertFalse(dialog.out.contains("CHECK FAIL"), dialog.out)
        // Typed, not timed out: a dialog left alone would be the weston test's outcome.
        XCTAssertFalse(dialog.out.contains("timed out"), dialog.out)
        for lang in ["en", "nb"] {
            XCTAssertTrue(dialog.out.contains("VERDICT \(lang) title=True buttons_named=True field_named=True"), dialog.out)
        }
        for check in ["Wayland: mutter's RemoteDesktop takes keys",
                      "en: focus starts in the PIN field", "en: the app got its session (the PIN typed through mutter)",
                      "nb: a wrong PIN is said in an alert", "nb: the app got its session (the PIN typed through mutter)",
                      "over an app: the app's window has the keyboard first", "over an app: the app's window gave up the keyboard",
                      "over an app: the PIN typed went into the dialog, and the app got its session",
                      "over an app: the app's window has the keyboard again once the dialog closed",
                      "over an app: none of the keys reached the app's field",
                      "paste: the PIN is on the clipboard", "paste: the app got its session (the PIN pasted on Wayland)",
                      "Alt+C pressed Cancel", "grant: focus starts on Allow", "grant: alt+o answered", "grant: alt+d answered",
                      "grant: neither answer left a standing grant", "confirm: Start over deletes everything, so focus starts on No",
                      "confirm: alt+n answered No",
                      "login: Enter chose Demo BankID", "login: Alt+C ended the wait at once", "login: Escape on the choice cancels the login",
                      "offer: Alt+N answered Not now and the app has its session",
                      "fingerprint: Enter took it to the choice of login", "fingerprint: Escape there ended it without a scan",
                      "new PIN: typed, Alt+T, typed again, Enter: it is set", "new PIN: vaultd agrees"] {
            XCTAssertTrue(passed(check, in: dialog.out), "dialog: \(check): \(dialog.out)")
        }
        let settings = try runA11yScript("settings_a11y.py", probe: Self.gtk4Probe, missing: Self.gtk4Missing,
                                         env: ["VAULTD": Binaries.vaultd, "VAULTCTL": Binaries.vaultctl, "VAULT_FPSTUB": Binaries.fpstub],
                                         timeout: 120, display: wayland)
        XCTAssertEqual(settings.exit, 0, "out:\n\(settings.out)\nerr:\n\(settings.err)")
        XCTAssertTrue(settings.out.contains("settings-a11y: 0 failed"), settings.out)
        XCTAssertFalse(settings.out.contains("CHECK FAIL"), settings.out)
        for check in ["Wayland: mutter's RemoteDesktop takes keys", "organization: the window has the keyboard when it opens",
                      "organization: Tab alone reaches it", "organization: Enter opens it, and both organizations are read",
                      "organization: Down, Down, Enter chose Mentorhuset Oslo"] {
            XCTAssertTrue(passed(check, in: settings.out), "settings: \(check): \(settings.out)")
        }
    }

    /// The same dialog read through AT-SPI, as Orca would (Tests/desktop/dialog_a11y.py):
    /// the title, the description (naming the app and saying what to type), every
    /// button and the PIN field's label, in English and bokmål.
    ///
    /// Run for each flavour that reads the same (docs/operations.md compares them); the
    /// verdict line holds each to what was found: the title and every button named, and
    /// the PIN field itself unnamed (so the description must say what to type).
    /// pinentry-gnome3 is read as GNOME's own prompter (gcr-prompter, started on the
    /// session bus); pinentry-qt is not here: its tree reached AT-SPI only now and then under Xvfb.
    /// SessionVault's own dialog (clients/dialog/sessionvault-pinentry) is held to more:
    /// its PIN field named, focus in it, the PIN pasted, Alt+C for Cancel; and the
    /// app-grant dialog walked with the keyboard alone (named choices, focus on
    /// Allow, Alt+O for "Only this time", Alt+D for "Deny"), a yes/no question
    /// (Start over) answered No with Alt+N, and a first login on the demo providers
    /// (the choice of provider, Enter for the first, the browser's wait with Cancel
    /// focused, Alt+C: "… login was cancelled" and the choice again, Escape), then a
    /// login done in a scripted browser and the offer of fingerprint login after it
    /// (Turn on focused, Alt+N for Not now, the app served, the fingerprint left off), and
    /// the fingerprint's wait once it is on (the way to the logins named and focused, Enter
    /// to the choice of login, Escape), and a new PIN typed twice (both fields named,
    /// Alt+T to the second).
    func testTheDialogAsAScreenReaderReadsIt() throws {
        let display = try startXvfb()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let own = root.appendingPathComponent("clients/dialog/sessionvault-pinentry").path
        let flavours = ["/usr/bin/pinentry-gtk-2", "/usr/bin/pinentry-gnome3", own]
        for tool in ["/usr/bin/dbus-run-session", "/usr/libexec/at-spi-bus-launcher", "/usr/libexec/gcr-prompter", "/usr/bin/xclip"] + flavours
        where !FileManager.default.isExecutableFile(atPath: tool) {
            throw cannotRunHere("\(tool) is not installed (Debian: dbus, at-spi2-core, gcr, xclip, pinentry-gtk2, pinentry-gnome3)")
        }
        let probe = try runProcess("/usr/bin/python3", ["-c", "import pyatspi, gi; gi.require_version('Gtk', '4.0'); gi.require_version('Adw', '1')"],
                                   env: childEnvironment([:]), timeout: 20)
        if probe.exit != 0 { throw cannotRunHere("pyatspi, GTK 4 or libadwaita for Python is missing (Debian: python3-pyatspi, gir1.2-gtk-4.0, gir1.2-adw-1)") }
        let script = root.appendingPathComponent("Tests/desktop/dialog_a11y.py").path
        for pinentry in flavours {
            let r = try runProcess("/usr/bin/dbus-run-session", try ownSessionBus() + ["/usr/bin/python3", script],
                                   env: childEnvironment(["DISPLAY": display, "VAULTD": Binaries.vaultd, "VAULTCTL": Binaries.vaultctl,
                                                          "VAULT_FPSTUB": Binaries.fpstub, "PINENTRY": pinentry]),
                                   timeout: 240)
            XCTAssertEqual(r.exit, 0, "\(pinentry) out:\n\(r.out)\nerr:\n\(r.err)")
            XCTAssertTrue(r.out.contains("a11y: 0 failed"), "\(pinentry): \(r.out)")
            XCTAssertFalse(r.out.contains("CHECK FAIL"), "\(pinentry): \(r.out)")
            let fieldNamed = pinentry == own ? "True" : "False"
            for lang in ["en", "nb"] {
                XCTAssertTrue(r.out.contains("VERDICT \(lang) title=True buttons_named=True field_named=\(fieldNamed)"), "\(pinentry): \(r.out)")
            }
            if pinentry == own {
                for check in ["focus starts in the PIN field", "the PIN pasted", "Alt+C pressed Cancel", "a wrong PIN is said in an alert",
                              "grant: its three choices are named buttons", "grant: focus starts on Allow",
                              "grant: alt+o answered", "grant: alt+d answered", "grant: neither answer left a standing grant",
                              "confirm: its choices are named buttons", "confirm: Start over deletes everything, so focus starts on No",
                              "confirm: alt+n answered No",
                              "confirm: after No, Kari's session is still there",
                              "login: each provider is a named button", "login: focus starts on the first provider",
                              "login: Enter chose Demo BankID", "login: the wait's one button, Cancel, is named and focused",
                              "login: Alt+C ended the wait at once", "login: and offers the providers again",
                              "login: Escape on the choice cancels the login",
                              "offer: its answers are named buttons", "offer: focus starts on Turn on",
                              "offer: Alt+N answered Not now and the app has its session", "offer: fingerprint login stays off",
                              "fingerprint: Cancel and the way to the logins are named buttons",
                              "fingerprint: focus starts on the way to the logins", "fingerprint: Enter took it to the choice of login",
                              "fingerprint: Escape there ended it without a scan",
                              "new PIN: two fields, each named by its label", "new PIN: focus starts in the first field",
                              "new PIN: typed, Alt+T, typed again, Enter: it is set", "new PIN: vaultd agrees"] {
                    let passed = r.out.split(separator: "\n").contains { $0.hasPrefix("CHECK ok") && $0.contains(check) }
                    XCTAssertTrue(passed, "\(pinentry): \(check): \(r.out)")
                }
            }
        }
    }
}

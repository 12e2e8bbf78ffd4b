import Foundation
import SodiumKit
@testable import VaultCore
import VaultFactor
import XCTest
@testable import Prompter

/// The prompter against a scripted pinentry (Tests/pinentry/fake-pinentry),
/// which records every Assuan command it receives.
final class PrompterTests: XCTestCase {
    static let fake = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("pinentry/fake-pinentry").path

    var dir = ""
    var logPath: String { dir + "/log" }
    var scriptPath: String { dir + "/script" }

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "prompter-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    func prompter(script: [String], timeout: Int = 20, program: String? = PrompterTests.fake) throws -> Prompter {
        try script.map { $0 + "\n" }.joined().write(toFile: scriptPath, atomically: true, encoding: .utf8)
        let env = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
                   "FAKE_PINENTRY_LOG": logPath, "FAKE_PINENTRY_SCRIPT": scriptPath, "DISPLAY": ":99"]
        return Prompter(configured: program, environment: env, timeout: timeout, setupTimeout: 2)
    }

    func conversation(_ p: Prompter, language: Language = .en, display: PromptDisplay = PromptDisplay(),
                      requester: Requester = Requester(pid: 4242, uid: 1000, executable: "/usr/bin/aktivitetslogg")) -> PinentryConversation {
        PinentryConversation(prompter: p, language: language, requester: requester, display: display)
    }

    var log: [String] {
        ((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    func text(_ b: SecureBytes) -> String { b.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }

    func expectError(_ expected: FactorError, file: StaticString = #filePath, line: UInt = #line,
                     _ body: () async throws -> Void) async {
        // Untyped: typed-throws async closures crash this compiler (6.3.1) in a SIL pass.
        do {
            try await body()
            XCTFail("no error; expected \(expected)", file: file, line: line)
        } catch {
            XCTAssertEqual(error as? FactorError, expected, file: file, line: line)
        }
    }

    func testPINDialogNamesTheAppAndReturnsThePIN() async throws {
        let c = conversation(try prompter(script: ["pin 48%29 15"]))
        let pin = try await c.askSecret(LocalizedText(en: "Enter your PIN:", nb: "Skriv inn PIN-koden:"))
        XCTAssertEqual(text(pin), "48%29 15", "percent-escaping on the D line is undone")
        let log = self.log
        XCTAssertTrue(log.contains("SETTITLE SessionVault"), "\(log)")
        XCTAssertTrue(log.contains("SETDESC ‘aktivitetslogg’ wants to use your login.%0A%0AEnter your PIN:"), "\(log)")
        XCTAssertTrue(log.contains("SETPROMPT PIN:"), "\(log)")
        XCTAssertTrue(log.contains("SETOK OK"), "\(log)")
        XCTAssertTrue(log.contains("SETCANCEL Cancel"), "\(log)")
        XCTAssertTrue(log.contains("SETTIMEOUT 20"), "\(log)")
        XCTAssertEqual(log.filter { $0 == "GETPIN" }.count, 1)
        XCTAssertEqual(log.last, "BYE")
        XCTAssertFalse(log.contains { $0.hasPrefix("SETERROR") }, "no error on a first ask")
    }

    func testBokmalDialog() async throws {
        let c = conversation(try prompter(script: ["pin 482915"]), language: .nb)
        _ = try await c.askSecret(LocalizedText(en: "Enter your PIN:", nb: "Skriv inn PIN-koden:"))
        XCTAssertTrue(log.contains("SETDESC «aktivitetslogg» vil bruke innloggingen din.%0A%0ASkriv inn PIN-koden:"), "\(log)")
        XCTAssertTrue(log.contains("SETPROMPT PIN-kode:"), "\(log)")
        XCTAssertTrue(log.contains("SETCANCEL Avbryt"), "\(log)")
    }

    func testWrongPINIsSaidWithSETERRORInTheNextDialog() async throws {
        let c = conversation(try prompter(script: ["pin 000000", "pin 482915"]))
        _ = try await c.askSecret(LocalizedText(en: "Enter your PIN:", nb: "Skriv inn PIN-koden:"))
        await c.show(Messages.noMatch(attemptsLeft: 4))
        _ = try await c.askSecret(LocalizedText(en: "Enter your PIN:", nb: "Skriv inn PIN-koden:"))
        let errors = log.filter { $0.hasPrefix("SETERROR") }
        XCTAssertEqual(errors, ["SETERROR " + Messages.noMatch(attemptsLeft: 4).en], "\(log)")
        // Said in the PIN dialog, not in a message dialog of its own.
        try await Task.sleep(for: .milliseconds(600))
        XCTAssertFalse(log.contains("MESSAGE"), "\(log)")
    }

    func testAMessageWithNoQuestionAfterItIsShownOnItsOwn() async throws {
        let c = conversation(try prompter(script: []))
        await c.show(LocalizedText(en: "Logged in.", nb: "Logget inn."))
        XCTAssertTrue(waitFor { self.log.contains("MESSAGE") }, "\(log)")
        XCTAssertTrue(log.contains("SETDESC ‘aktivitetslogg’ wants to use your login.%0A%0ALogged in."), "\(log)")
        XCTAssertTrue(log.contains("SETOK Close"), "\(log)")
    }

    /// The login page is opened by vaultd (`xdg-open`) and said in a message
    /// dialog; a question after it (the offer of fingerprint login) means the
    /// login is over, so the message is not put on top of that question.
    func testTheBrowserMessageIsShownAloneAndNeverOnTheQuestionAfterIt() async throws {
        let bin = dir + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try "#!/bin/sh\necho \"$1\" > \"\(dir)/opened\"\n".write(toFile: bin + "/xdg-open", atomically: true, encoding: .utf8)
        chmod(bin + "/xdg-open", 0o755)
        try ["ok"].map { $0 + "\n" }.joined().write(toFile: scriptPath, atomically: true, encoding: .utf8)
        let p = Prompter(configured: Self.fake, environment: ["PATH": bin + ":/usr/bin:/bin", "FAKE_PINENTRY_LOG": logPath,
                                                             "FAKE_PINENTRY_SCRIPT": scriptPath, "DISPLAY": ":99"],
                         timeout: 20, setupTimeout: 2)
        let c = conversation(p)
        let url = "https://idp.example.test/authorize?state=s1"
        let browser = LocalizedText(en: "Log in with Vipps in your browser.", nb: "Logg inn med Vipps i nettleseren.")
        // A login that ends at once (the provider remembered the person): the question comes next.
        try await c.openURL(url, browser)
        let yes = try await c.confirm(LocalizedText(en: "Turn on fingerprint login?", nb: "Slå på innlogging med fingeravtrykk?"),
                                      yes: Messages.dialogTurnOn, no: Messages.dialogNotNow)
        XCTAssertTrue(yes)
        XCTAssertTrue(waitFor { (try? String(contentsOfFile: self.dir + "/opened", encoding: .utf8)) == url + "\n" }, "xdg-open got the URL")
        try await Task.sleep(for: .milliseconds(600))
        XCTAssertEqual(log.filter { $0.hasPrefix("SETDESC") },
                       ["SETDESC ‘aktivitetslogg’ wants to use your login.%0A%0ATurn on fingerprint login?"], "\(log)")
        XCTAssertFalse(log.contains("MESSAGE"), "\(log)")

        // A login that takes a while: the message has a dialog of its own.
        try await c.openURL(url, browser)
        XCTAssertTrue(waitFor { self.log.contains("MESSAGE") }, "\(log)")
        XCTAssertTrue(log.contains("SETDESC ‘aktivitetslogg’ wants to use your login.%0A%0ALog in with Vipps in your browser."), "\(log)")
    }

    func testNewPINIsTypedTwiceInOneDialogWithSETREPEAT() async throws {
        let c = conversation(try prompter(script: ["pin 730641"]))
        let again = LocalizedText(en: "Type the same PIN again:", nb: "Skriv den samme PIN-koden en gang til:")
        let mismatch = LocalizedText(en: "The two PINs were not the same.", nb: "De to PIN-kodene var ikke like.")
        let pin = try await c.askNewSecret(LocalizedText(en: "Choose a PIN:", nb: "Velg en PIN-kode:"), again: again, mismatch: mismatch)
        XCTAssertEqual(pin.map(text), "730641")
        XCTAssertTrue(log.contains("SETREPEAT Type the same PIN again:"), "\(log)")
        XCTAssertTrue(log.contains("SETREPEATERROR The two PINs were not the same."), "\(log)")
        XCTAssertEqual(log.filter { $0 == "GETPIN" }.count, 1, "one dialog, typed twice in it")
    }

    func testConfirmWithNamedButtons() async throws {
        let c = conversation(try prompter(script: ["ok", "notok"]))
        let offer = LocalizedText(en: "Turn on fingerprint login?", nb: "Slå på innlogging med fingeravtrykk?")
        let yes = try await c.confirm(offer, yes: Messages.dialogTurnOn, no: Messages.dialogNotNow)
        let no = try await c.confirm(offer, yes: Messages.dialogTurnOn, no: Messages.dialogNotNow)
        XCTAssertTrue(yes)
        XCTAssertFalse(no)
        XCTAssertEqual(log.filter { $0 == "CONFIRM" }.count, 2)
        XCTAssertTrue(log.contains("SETOK Turn on"), "\(log)")
        XCTAssertTrue(log.contains("SETNOTOK Not now"), "\(log)")
    }

    /// The attacker: an app raises the grant dialog while the person is
    /// typing in another window, and the dialog, which takes the keyboard as
    /// it appears, gets their Enter (`ok-at-once`). Not taken: asked again
    /// saying why, closed (a No) after three; a Yes after reading is taken.
    func testAGrantAnsweredBeforeItCouldBeReadIsAskedAgain() async throws {
        let question = GrantQuestion(app: AppIdentity(kind: .flatpak, name: "org.example.Chat"), account: "kari",
                                     provider: "BankID", allowed: [], othersAllowed: [])
        let typing = conversation(try prompter(script: ["ok-at-once", "notok-at-once", "ok-at-once"]))
        await expectError(.cancelled) { _ = try await typing.askGrant(question) }
        XCTAssertEqual(log.filter { $0 == "CONFIRM" }.count, 3)
        XCTAssertEqual(log.filter { $0 == "OPTION sessionvault-read-first" }.count, 3)
        let asked = log.filter { $0.hasPrefix("SETDESC ") }
        XCTAssertFalse(asked[0].contains("A key was pressed"), "\(asked[0])")
        XCTAssertTrue(asked[1].hasPrefix("SETDESC A key was pressed just as this question appeared"), "\(asked[1])")

        try FileManager.default.removeItem(atPath: logPath)
        let read = conversation(try prompter(script: ["ok-at-once", "ok"]))
        let answer = try await read.askGrant(question)
        XCTAssertEqual(answer, .allow)
        XCTAssertEqual(log.filter { $0 == "CONFIRM" }.count, 2)
        // A No (Deny, which vaultd hears as the dialog closed) is taken however soon it comes: it gives nothing away.
        try FileManager.default.removeItem(atPath: logPath)
        let no = conversation(try prompter(script: ["cancel"]))
        await expectError(.cancelled) { _ = try await no.askGrant(question) }
        XCTAssertEqual(log.filter { $0 == "CONFIRM" }.count, 1)
    }

    func testProviderChoiceWithMoreProvidersThanButtons() async throws {
        let c = conversation(try prompter(script: ["notok", "notok"]))
        let options = ["BankID", "Vipps", "ID-porten"].map {
            ChoiceOption(value: $0.lowercased(), label: LocalizedText(en: "Use \($0)", nb: "Bruk \($0)"))
        } + [ChoiceOption(value: "cancel", label: LocalizedText(en: "Cancel", nb: "Avbryt"))]
        let chosen = try await c.choose(LocalizedText(en: "Log in to continue.", nb: "Logg inn for å fortsette."), options: options)
        XCTAssertEqual(chosen, "id-porten")
        let buttons = log.filter { $0.hasPrefix("SETOK") || $0.hasPrefix("SETNOTOK") }
        XCTAssertEqual(buttons, ["SETOK Use BankID", "SETNOTOK Other choices …", "SETOK Use Vipps", "SETNOTOK Use ID-porten"])

        let two = conversation(try prompter(script: ["ok"]))
        let first = try await two.choose(LocalizedText(en: "Log in.", nb: "Logg inn."), options: Array(options[0..<2]))
        XCTAssertEqual(first, "bankid")
    }

    func testCancelTimeoutCrashGarbageAndHang() async throws {
        let ask = LocalizedText(en: "Enter your PIN:", nb: "Skriv inn PIN-koden:")
        let cases: [(String, FactorError)] = [
            ("cancel", .cancelled), ("timeout", .timeout),
            ("crash", .unavailable(Messages.pinentryFailed)), ("garbage", .unavailable(Messages.pinentryFailed)),
            // A pinentry that dies, babbles or hangs before its greeting.
            ("greet-crash", .unavailable(Messages.pinentryFailed)), ("greet-garbage", .unavailable(Messages.pinentryFailed)),
            ("greet-hang", .unavailable(Messages.pinentryFailed)),
        ]
        for (action, expected) in cases {
            let c = conversation(try prompter(script: [action]))
            let began = Date()
            await expectError(expected) { _ = try await c.askSecret(ask) }
            XCTAssertLessThan(Date().timeIntervalSince(began), 5, "\(action): never a hung request")
        }
        // Open past prompt_timeout: closed, and the request fails with `timeout`.
        let c = conversation(try prompter(script: ["hang"], timeout: 1))
        let began = Date()
        await expectError(.timeout) { _ = try await c.askSecret(ask) }
        XCTAssertLessThan(Date().timeIntervalSince(began), 6)
    }

    func testMissingPinentrySaysHowToInstallOne() async throws {
        let p = try prompter(script: [], program: dir + "/no-such-pinentry")
        XCTAssertNil(p.program)
        let c = conversation(p)
        await expectError(.unavailable(Messages.pinentryMissing)) { _ = try await c.askSecret(LocalizedText(en: "PIN:", nb: "PIN:")) }
    }

    func testOneDialogAtATimeAcrossConversations() async throws {
        let p = try prompter(script: (1...4).map { "pin 11111\($0)" })
        let ask = LocalizedText(en: "Enter your PIN:", nb: "Skriv inn PIN-koden:")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for pid in 1...4 {
                let c = conversation(p, requester: Requester(pid: Int32(pid), uid: 1000, executable: "/usr/bin/app\(pid)"))
                group.addTask { _ = try await c.askSecret(ask) }
            }
            try await group.waitForAll()
        }
        // Every dialog ends (BYE) before the next one starts.
        let marks = log.filter { $0.hasPrefix("START") || $0 == "BYE" }.map { $0 == "BYE" ? "BYE" : "START" }
        XCTAssertEqual(marks, Array(repeating: ["START", "BYE"], count: 4).flatMap { $0 }, "\(log)")
    }

    func testTheClientsDisplayIsUsedElseVaultdsOwn() async throws {
        let p = try prompter(script: ["pin 482915", "pin 482915"])
        _ = try await conversation(p, display: PromptDisplay(display: ":7")).askSecret(LocalizedText(en: "PIN", nb: "PIN"))
        _ = try await conversation(p).askSecret(LocalizedText(en: "PIN", nb: "PIN"))
        let starts = log.filter { $0.hasPrefix("START") }
        XCTAssertEqual(starts.count, 2)
        XCTAssertTrue(starts[0].contains("DISPLAY=:7 ") && starts[0].contains("ARGS=--display :7"), starts[0])
        XCTAssertTrue(starts[1].contains("DISPLAY=:99 "), starts[1])
    }

    func testProgramChoice() throws {
        let path = "/usr/bin:/bin"
        XCTAssertEqual(Prompter.findProgram(configured: Self.fake, environment: ["SESSIONVAULT_PINENTRY": "/bin/false", "PATH": path]), Self.fake)
        XCTAssertNil(Prompter.findProgram(configured: "/nonexistent/pinentry", environment: ["PATH": path]),
                     "a configured program that is missing is not replaced by another")
        XCTAssertEqual(Prompter.findProgram(configured: nil, environment: ["SESSIONVAULT_PINENTRY": Self.fake, "PATH": path]), Self.fake)
        XCTAssertEqual(Prompter.findProgram(configured: nil, environment: ["PATH": dir]), nil)
        try FileManager.default.copyItem(atPath: Self.fake, toPath: dir + "/pinentry")
        XCTAssertEqual(Prompter.findProgram(configured: nil, environment: ["PATH": "/nonexistent:" + dir]), dir + "/pinentry")

        // SessionVault's own dialog, where the package puts it beside vaultd, comes before `pinentry` on PATH.
        XCTAssertEqual(Prompter.ownDialog(executable: "/usr/bin/vaultd"), "/usr/lib/sessionvault/sessionvault-pinentry")
        XCTAssertNil(Prompter.ownDialog(executable: nil))
        let own = dir + "/lib/sessionvault/sessionvault-pinentry"
        XCTAssertEqual(Prompter.findProgram(configured: nil, environment: ["PATH": dir], ownDialog: own), dir + "/pinentry",
                       "not installed: the system's pinentry")
        try FileManager.default.createDirectory(atPath: dir + "/lib/sessionvault", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Self.fake, toPath: own)
        XCTAssertEqual(Prompter.findProgram(configured: nil, environment: ["PATH": dir], ownDialog: own), own)
        XCTAssertEqual(Prompter.findProgram(configured: nil, environment: ["PATH": dir, "SESSIONVAULT_PINENTRY": Self.fake], ownDialog: own),
                       Self.fake, "the person's choice first")
        XCTAssertEqual(Prompter.findProgram(configured: dir + "/pinentry", environment: ["PATH": dir], ownDialog: own), dir + "/pinentry")
    }

    func testAppNameFromFlatpakInfoElseExecutable() throws {
        try FileManager.default.createDirectory(atPath: dir + "/77/root", withIntermediateDirectories: true)
        try "[Application]\nname=no.likeperson.Aktivitetslogg\nruntime=runtime/org.gnome.Platform\n"
            .write(toFile: dir + "/77/root/.flatpak-info", atomically: true, encoding: .utf8)
        let none = DesktopEntryName(directories: [dir + "/nothing"])
        XCTAssertEqual(AppName.of(Requester(pid: 77, uid: 1, executable: "/usr/bin/python3.11"), language: .en, procRoot: dir, entries: none),
                       "no.likeperson.Aktivitetslogg")
        XCTAssertEqual(AppName.of(Requester(pid: 78, uid: 1, executable: "/opt/app/aktivitetslogg (deleted)"), language: .en, procRoot: dir, entries: none),
                       "aktivitetslogg")
        XCTAssertNil(AppIdentity.flatpakAppID("[Application]\nname=evil%0Aname\n"))
    }

    /// Issue 22: a dialog names an app as the desktop does, from its `.desktop`
    /// entry, in the person's language; never for an app known by its program alone.
    func testAppNameFromItsDesktopEntry() throws {
        let exports = dir + "/home/flatpak/exports/share/applications"
        let usr = dir + "/usr/applications"
        for d in [exports, usr] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true) }
        try """
            [Desktop Entry]
            Type=Application
            Name=Activity log
            Name[nb]=Aktivitetslogg
            Exec=aktivitetslogg

            [Desktop Action new]
            Name[nb]=Ny oppføring
            """.write(toFile: exports + "/no.likeperson.Aktivitetslogg.desktop", atomically: true, encoding: .utf8)
        try "[Desktop Entry]\nName=Text Editor\nName[nb_NO]=Tekstbehandler\n".write(toFile: usr + "/org.gnome.TextEditor.desktop", atomically: true, encoding: .utf8)
        try "[Desktop Entry]\nName=Gone\nHidden=true\n".write(toFile: usr + "/org.example.Gone.desktop", atomically: true, encoding: .utf8)
        try "[Desktop Entry]\nName=Mentor\n".write(toFile: usr + "/mentor_mentor.desktop", atomically: true, encoding: .utf8)
        try "[Desktop Entry]\nName=Python\n".write(toFile: usr + "/python3.11.desktop", atomically: true, encoding: .utf8)

        let entries = DesktopEntryName(environment: ["HOME": "/nonexistent", "XDG_DATA_HOME": dir + "/home", "XDG_DATA_DIRS": dir + "/usr"])
        XCTAssertEqual(entries.directories.first, exports)
        XCTAssertTrue(entries.directories.contains("/var/lib/flatpak/exports/share/applications"))
        XCTAssertEqual(entries.directories.last, usr)
        let flatpak = AppIdentity(kind: .flatpak, name: "no.likeperson.Aktivitetslogg")
        XCTAssertEqual(entries.name(of: flatpak, language: .nb), "Aktivitetslogg")
        XCTAssertEqual(entries.name(of: flatpak, language: .en), "Activity log", "an action's Name is not the app's")
        let desktop = AppIdentity(kind: .desktop, name: "org.gnome.TextEditor")
        XCTAssertEqual(entries.name(of: desktop, language: .nb), "Tekstbehandler")
        XCTAssertEqual(AppName.display(desktop, language: .en, entries: entries), "Text Editor")
        XCTAssertEqual(entries.name(of: AppIdentity(kind: .snap, name: "mentor"), language: .en), "Mentor")
        XCTAssertNil(entries.name(of: AppIdentity(kind: .desktop, name: "org.example.Gone"), language: .en), "Hidden=true is a deleted entry")
        let program = AppIdentity(kind: .executable, name: "/usr/bin/python3.11")
        XCTAssertNil(entries.name(of: program, language: .en), "a program's own claim names nothing")
        XCTAssertEqual(AppName.display(program, language: .en, entries: entries), "python3.11")
        XCTAssertEqual(AppName.display(AppIdentity(kind: .flatpak, name: "org.example.Unknown"), language: .en, entries: entries),
                       "org.example.Unknown", "no entry: the id")
        XCTAssertEqual(AppName.of(Requester(pid: 1, uid: 1, executable: nil, app: flatpak), language: .nb, entries: entries), "Aktivitetslogg")
    }

    func testAssuanEscaping() {
        XCTAssertEqual(Assuan.line("SETDESC", "50% off\nnow"), Array("SETDESC 50%25 off%0Anow\n".utf8))
        let long = String(repeating: "ø", count: 2000)
        let line = Assuan.line("SETDESC", long)
        XCTAssertLessThanOrEqual(line.count, Assuan.maxLine)
        XCTAssertNotNil(String(validating: line, as: UTF8.self), "cut at a character boundary")
        XCTAssertEqual(Assuan.Failure(line: Array("ERR 83886179 Operation cancelled <Pinentry>".utf8)), .cancelled)
        XCTAssertEqual(Assuan.Failure(line: Array("ERR 83886142 Timeout <Pinentry>".utf8)), .timeout)
        XCTAssertEqual(Assuan.Failure(line: Array("ERR 83886194 Not confirmed".utf8)), .notConfirmed)
        var out = [UInt8](repeating: 0, count: 8)
        let n = Array("a%25b%0".utf8).withUnsafeBytes { src in out.withUnsafeMutableBytes { Assuan.unescape(src, into: $0) } }
        XCTAssertNil(n, "a cut-off escape is malformed")
    }

    func waitFor(_ timeout: Double = 5, _ condition: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            if condition() { return true }
            usleep(50_000)
        }
        return condition()
    }
}

/// The fingerprint dialog (a wait with buttons that vaultd closes itself) and
/// dialogs ended from outside: the client went away, vaultd stops.
extension PrompterTests {
    var touch: LocalizedText { LocalizedText(en: "Touch the fingerprint reader to unlock.", nb: "Berør fingeravtrykkleseren for å låse opp.") }
    var ways: [ChoiceOption] { [ChoiceOption(value: "pin", label: LocalizedText(en: "Use PIN instead", nb: "Bruk PIN-kode i stedet")),
                ChoiceOption(value: ":login", label: LocalizedText(en: "Use BankID or Vipps", nb: "Bruk BankID eller Vipps"))] }

    /// The pids of every pinentry started so far (from the fake's START lines).
    var pids: [Int32] {
        log.filter { $0.hasPrefix("START pid=") }.compactMap { line in
            line.dropFirst("START pid=".count).split(separator: " ").first.flatMap { Int32($0) }
        }
    }

    /// No pinentry this test started still runs (each was reaped, not left a zombie).
    func assertNoPinentryLeft(file: StaticString = #filePath, line: UInt = #line) {
        for pid in pids {
            XCTAssertTrue(kill(pid, 0) != 0 && errno == ESRCH, "pinentry \(pid) is still there", file: file, line: line)
        }
    }

    /// Work that ends when the dialog is on screen (or, cancelled, at once).
    func untilDialog(_ marker: String = "CONFIRM", then value: String = "scanned") -> @Sendable () async -> String {
        let logPath = self.logPath
        return {
            while !Task.isCancelled {
                let log = ((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "").split(separator: "\n")
                if log.contains(where: { $0.hasPrefix(marker) }) { return value }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return "cancelled"
        }
    }

    func testTheFingerprintDialogHasTheOtherWaysInAndClosesWhenTheScanEnds() async throws {
        let c = conversation(try prompter(script: ["wait"]), language: .en)
        let began = Date()
        let result = await c.showWhile(touch, offering: ways, untilDialog())
        guard case .done(let value) = result else { return XCTFail("\(result)") }
        XCTAssertEqual(value, "scanned")
        XCTAssertLessThan(Date().timeIntervalSince(began), 3)
        let log = log
        XCTAssertTrue(log.contains("SETDESC ‘aktivitetslogg’ wants to use your login.%0A%0ATouch the fingerprint reader to unlock."), "\(log)")
        XCTAssertTrue(log.contains("SETOK Use PIN instead"), "\(log)")
        XCTAssertTrue(log.contains("SETNOTOK Use BankID or Vipps"), "\(log)")
        XCTAssertTrue(log.contains("SETCANCEL Cancel"), "\(log)")
        // vaultd ended it itself: the pinentry waiting in CONFIRM was sent SIGTERM and reaped.
        XCTAssertTrue(log.contains { $0.hasPrefix("KILLED") && $0.hasSuffix("SIGTERM") }, "\(log)")
        XCTAssertFalse(log.contains("BYE"), "no BYE mid-command: \(log)")
        assertNoPinentryLeft()
    }

    func testABokmalFingerprintDialogWithOnlyCancel() async throws {
        let c = conversation(try prompter(script: ["wait"]), language: .nb)
        let value = try await c.showWhile(touch, untilDialog())
        XCTAssertEqual(value, "scanned")
        XCTAssertTrue(log.contains("CONFIRM --one-button"), "\(log)")
        XCTAssertTrue(log.contains("SETOK Avbryt"), "\(log)")
        XCTAssertTrue(log.contains { $0.hasSuffix("%0A%0ABerør fingeravtrykkleseren for å låse opp.") }, "\(log)")
    }

    func testAButtonCancelsTheScanAndSaysWhichWay() async throws {
        for (action, expected) in [("ok", "pin"), ("notok", ":login"), ("cancel", nil)] as [(String, String?)] {
            let c = conversation(try prompter(script: [action]))
            let scan: @Sendable () async -> String = {
                // A scan that never ends by itself: only the button ends it.
                try? await Task.sleep(for: .seconds(30))
                return Task.isCancelled ? "cancelled" : "timed out"
            }
            let began = Date()
            let result = await c.showWhile(touch, offering: ways, scan)
            XCTAssertLessThan(Date().timeIntervalSince(began), 5, action)
            switch (result, expected) {
            case (.chose(let value), let expected?): XCTAssertEqual(value, expected, action)
            case (.cancelled, nil): break
            default: XCTFail("\(action): \(result)")
            }
        }
        assertNoPinentryLeft()
    }

    func testABrokenOrMissingDialogLeavesTheScanRunning() async throws {
        let c = conversation(try prompter(script: ["crash"]))
        let result = await c.showWhile(touch, offering: ways) {
            try? await Task.sleep(for: .milliseconds(500))
            return "scanned"
        }
        guard case .done("scanned") = result else { return XCTFail("\(result)") }
        let missing = conversation(try prompter(script: [], program: dir + "/none"))
        guard case .done("scanned") = await missing.showWhile(touch, offering: ways, { "scanned" }) else { return XCTFail() }
    }

    func testAClientThatGoesAwayHasItsDialogClosedAndTheNextAppsDialogShows() async throws {
        let p = try prompter(script: ["wait", "pin 482915"])
        let hangup = Hangup()
        let a = PinentryConversation(prompter: p, language: .en, requester: Requester(pid: 1, uid: 1000, executable: "/usr/bin/app-a"),
                                     display: PromptDisplay(), hangup: hangup)
        let b = conversation(p, requester: Requester(pid: 2, uid: 1000, executable: "/usr/bin/app-b"))
        let ask = LocalizedText(en: "Enter your PIN:", nb: "Skriv inn PIN-koden:")
        let first = Task { () -> FactorError? in
            do { _ = try await a.askSecret(ask); return nil } catch { return error as? FactorError }
        }
        XCTAssertTrue(waitFor { self.log.contains("GETPIN") })
        let second = Task { try await b.askSecret(ask) }
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(log.filter { $0.hasPrefix("START") }.count, 1, "app-b waits its turn")
        let began = Date()
        hangup.fire()
        let failure = await first.value
        XCTAssertEqual(failure, .cancelled)
        let pin = try await second.value
        XCTAssertEqual(text(pin), "482915")
        XCTAssertLessThan(Date().timeIntervalSince(began), 3)
        XCTAssertTrue(log.contains { $0.hasPrefix("KILLED") }, "\(log)")
        XCTAssertTrue(log.contains { $0.contains("app-b") }, "the next app's dialog: \(log)")
        assertNoPinentryLeft()
        // Gone for good: a later dialog of that client is not shown at all.
        let starts = pids.count
        do {
            _ = try await a.askSecret(ask)
            XCTFail("shown after the client went away")
        } catch {}
        XCTAssertEqual(pids.count, starts)
    }

    func testAClientThatGoesAwayWhileItsDialogWaitsInLineIsTakenOutOfTheLine() async throws {
        let p = try prompter(script: ["wait"])
        let hangup = Hangup()
        let a = conversation(p)
        let b = PinentryConversation(prompter: p, language: .en, requester: Requester(pid: 2, uid: 1000, executable: "/usr/bin/app-b"),
                                     display: PromptDisplay(), hangup: hangup)
        let ask = LocalizedText(en: "PIN:", nb: "PIN:")
        let first = Task { try? await a.askSecret(ask) }
        XCTAssertTrue(waitFor { self.log.contains("GETPIN") })
        let second = Task { () -> FactorError? in
            do { _ = try await b.askSecret(ask); return nil } catch { return error as? FactorError }
        }
        try await Task.sleep(for: .milliseconds(100))
        hangup.fire()
        let failure = await second.value
        XCTAssertEqual(failure, .cancelled)
        XCTAssertEqual(pids.count, 1, "app-b's dialog never started")
        p.closeAll()
        _ = await first.value
        assertNoPinentryLeft()
    }

    func testCloseAllEndsEveryDialogAndStartsNoNewOne() async throws {
        let p = try prompter(script: ["wait", "pin 1"])
        let c = conversation(p)
        let ask = LocalizedText(en: "PIN:", nb: "PIN:")
        let open = Task { () -> FactorError? in
            do { _ = try await c.askSecret(ask); return nil } catch { return error as? FactorError }
        }
        let other = conversation(p)
        let queued = Task { () -> FactorError? in
            try? await Task.sleep(for: .milliseconds(100))
            do { _ = try await other.askSecret(ask); return nil } catch { return error as? FactorError }
        }
        XCTAssertTrue(waitFor { self.log.contains("GETPIN") })
        try await Task.sleep(for: .milliseconds(200))
        let began = Date()
        p.closeAll()
        XCTAssertLessThan(Date().timeIntervalSince(began), 2)
        assertNoPinentryLeft()
        let openFailure = await open.value
        let queuedFailure = await queued.value
        XCTAssertEqual(openFailure, .cancelled)
        XCTAssertEqual(queuedFailure, .cancelled)
        XCTAssertTrue(log.contains { $0.hasPrefix("KILLED") }, "\(log)")
        do {
            _ = try await c.askSecret(ask)
            XCTFail("a dialog after closeAll")
        } catch {}
        XCTAssertEqual(pids.count, 1)
    }
}

import Foundation
import VaultProtocol
import VaultTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The person's browser is a real one: every other login test scripts it. Here
/// Chromium and Firefox ESR (headless) are what vaultctl starts at the login's
/// one-time launch page. Each must ask for that page exactly once (a second
/// request would end the login as "opened twice"), follow its redirect to the
/// provider, where it is signed in already (the strict provider's
/// `signed_in_as`, as after an earlier login: nothing to click on), come back
/// to vaultd's port and show vaultd's page.
final class RealBrowserTests: OIDCTestCase {
    func installed(_ name: String, _ paths: [String]) throws -> String {
        for path in paths where FileManager.default.isExecutableFile(atPath: path) { return path }
        throw cannotRunHere("\(name) is not installed (scripts/setup installs it)")
    }

    /// Logs in with `browser` (a shell script's lines, `$1` the address) as what
    /// vaultctl starts, then checks what vaultd and the provider saw.
    func logIn(with browser: String, _ v: VaultdProcess, _ provider: TestProvider,
               file: StaticString = #filePath, line: UInt = #line) throws {
        let script = v.root + "/browser"
        try ("#!/bin/sh\n" + browser + "\n").write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        let r = ctl(v, ["login", provider.profile, "--browser", script, "--json"], stdin: "n\n", timeout: 90)
        XCTAssertEqual(r.exit, 0, "the browser logged in through the launch page: \(r)", file: file, line: line)
        XCTAssertEqual(r.json?["claims"]?["name"], "Kari Nordmann", "\(r)", file: file, line: line)
        XCTAssertFalse(v.log.contains("opened twice"), "the browser asked for the launch page more than once: \(v.log)",
                       file: file, line: line)
        let stats = try provider.stats()
        XCTAssertEqual(int(stats["requests"]?["login_page"]), 0, "signed in at the provider: no page to click on",
                       file: file, line: line)
        XCTAssertEqual(int(stats["requests"]?["token"]), 1, "one code exchanged", file: file, line: line)
    }

    /// A directory for a browser's profile, removed after the test: not under
    /// vaultd's root, which the secrets scan reads (a browser keeps what it
    /// visited, the used code in the redirect's address among it; its LevelDB
    /// logs' microsecond times can read as a test PIN).
    func browserProfile(_ name: String) throws -> String {
        let dir = try makeTemporaryDirectory(name)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        return dir
    }

    /// Chromium loading `$1` and saving the page it ends at to `page`.
    func chromiumScript(_ chromium: String, page: String, profile: String) -> String {
        // As root (the tests here), Chromium starts only without its own sandbox.
        let sandbox = getuid() == 0 ? " --no-sandbox" : ""
        return """
            \(chromium) --headless\(sandbox) --disable-gpu --no-first-run --user-data-dir=\(profile) \
              --dump-dom "$1" > \(page).tmp 2>/dev/null
            mv \(page).tmp \(page)
            """
    }

    /// What the browser saved of the page it ended at (waits for it).
    func savedPage(_ page: String) -> String {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, !FileManager.default.fileExists(atPath: page) { usleep(100_000) }
        return (try? String(contentsOfFile: page, encoding: .utf8)) ?? ""
    }

    /// A provider `name` where the browser is signed in as Kari, and vaultd with it.
    func signedIn(_ name: String) throws -> (TestProvider, VaultdProcess) {
        let provider = try startProvider(name)
        try provider.behave(["signed_in_as": "kari"])
        return (provider, try startVaultd(providers: [provider]))
    }

    func chromium() throws -> String { try installed("Chromium", ["/usr/bin/chromium", "/usr/bin/chromium-browser"]) }

    func testChromiumLogsInThroughTheLaunchPage() throws {
        let chromium = try chromium()
        let (bankid, v) = try signedIn("bankid")
        let page = v.root + "/chromium-page.html"
        try logIn(with: chromiumScript(chromium, page: page, profile: try browserProfile("chromium")), v, bankid)
        let shown = savedPage(page)
        XCTAssertTrue(shown.contains("You are logged in with BankID"), "the page Chromium showed: \(shown)")
    }

    /// Another program of the person's opened the launch page first: Chromium,
    /// coming second, shows why the login ended, in words, and the login ends
    /// with the same sentence.
    func testChromiumSecondAtTheLaunchPageSaysWhyTheLoginEnded() throws {
        let chromium = try chromium()
        let (bankid, v) = try signedIn("bankid")
        let page = v.root + "/chromium-page.html"
        let first = #"import http.client, sys, urllib.parse; u = urllib.parse.urlsplit(sys.argv[1]); "#
            + #"c = http.client.HTTPConnection(u.hostname, u.port, timeout=10); c.request("GET", u.path); "#
            + #"print(c.getresponse().status)"#
        let script = v.root + "/browser"
        try ("#!/bin/sh\n/usr/bin/python3 -c '\(first)' \"$1\" > \(v.root)/first.txt\n"
             + chromiumScript(chromium, page: page, profile: try browserProfile("chromium")) + "\n")
            .write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        let r = ctl(v, ["login", bankid.profile, "--browser", script, "--json"], stdin: "n\n", timeout: 90)
        assertLoginFails(r, code: "login_failed", message: Messages.loginPageOpenedTwice.en)
        let shown = savedPage(page)
        XCTAssertTrue(shown.contains("The login page was opened twice"), "the page Chromium showed: \(shown)")
        XCTAssertEqual(try String(contentsOfFile: v.root + "/first.txt", encoding: .utf8), "302\n",
                       "the other program was sent on to the provider")
        try assertNothingStored(v)
        XCTAssertEqual(int(try bankid.stats()["requests"]?["token"]), 0, "no code exchanged")
    }

    /// Debian's own default browser. `--screenshot` loads the page as a window
    /// would and saves a picture of it.
    func testFirefoxLogsInThroughTheLaunchPage() throws {
        let firefox = try installed("Firefox ESR", ["/usr/bin/firefox-esr", "/usr/bin/firefox"])
        let (vipps, v) = try signedIn("vipps")
        let shot = v.root + "/firefox.png"
        let home = try browserProfile("firefox")
        try logIn(with: """
            mkdir -p \(home)/profile
            HOME=\(home) exec \(firefox) --headless --no-remote --profile \(home)/profile \
              --screenshot \(shot) "$1" >/dev/null 2>&1
            """, v, vipps)
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, !FileManager.default.fileExists(atPath: shot) { usleep(100_000) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: shot), "Firefox showed vaultd's page and saved it")
    }

    /// The whole chain as a person on GNOME has it: an app lets vaultd ask, vaultd
    /// opens the launch page with the real `xdg-open`, which on GNOME hands it to
    /// `gio open`, which starts the person's default browser (here Chromium, as
    /// its `.desktop` file and `mimeapps.list` name it) with the address as it
    /// is, fetching nothing itself; vaultd's own wait dialog (the scripted
    /// pinentry) waits beside it.
    func testOnGNOMEVaultdOpensTheLaunchPageWithXdgOpenAndTheDefaultBrowserLogsIn() throws {
        let chromium = try chromium()
        _ = try installed("xdg-open", ["/usr/bin/xdg-open"])
        _ = try installed("gio", ["/usr/bin/gio"])
        let bankid = try startProvider("bankid")
        try bankid.behave(["signed_in_as": "kari"])
        let dir = try makeTemporaryDirectory("real-xdg-open")
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        let fake = VaultPrompterTests.Fake(log: dir + "/log", script: dir + "/script")
        try fake.set(["wait"])
        let page = dir + "/page.html"
        try ("#!/bin/sh\n" + chromiumScript(chromium, page: page, profile: try browserProfile("chromium")) + "\n")
            .write(toFile: dir + "/browser", atomically: true, encoding: .utf8)
        chmod(dir + "/browser", 0o755)
        try FileManager.default.createDirectory(atPath: dir + "/data/applications", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir + "/config", withIntermediateDirectories: true)
        try """
            [Desktop Entry]
            Type=Application
            Name=Test browser
            Exec=\(dir)/browser %u
            MimeType=x-scheme-handler/http;x-scheme-handler/https;text/html;

            """.write(toFile: dir + "/data/applications/test-browser.desktop", atomically: true, encoding: .utf8)
        try "[Default Applications]\nx-scheme-handler/http=test-browser.desktop\nx-scheme-handler/https=test-browser.desktop\n"
            .write(toFile: dir + "/config/mimeapps.list", atomically: true, encoding: .utf8)
        var env = fake.env
        env["XDG_CURRENT_DESKTOP"] = "GNOME"
        env["XDG_DATA_HOME"] = dir + "/data"
        env["XDG_DATA_DIRS"] = dir + "/data:/usr/share"
        env["XDG_CONFIG_HOME"] = dir + "/config"
        env["BROWSER"] = nil
        let v = try startVaultd(config: config([bankid.configTable()]), env: env)
        let c = try v.raw()
        defer { c.close() }
        let hello = try c.call("hello", ["version": 1, "client": "aktivitetslogg", "lang": "en", "prompter": "vault",
                                         "display": ":42"])
        XCTAssertEqual(hello.result?["prompter"], "vault", hello.text)
        let r = try c.call("login", ["provider": "bankid"], timeout: 90)
        XCTAssertTrue(r.isOK, "the default browser logged in through the launch page: \(r.text) \(v.log)")
        let shown = savedPage(page)
        XCTAssertTrue(shown.contains("You are logged in with BankID"), "the page the browser showed: \(shown)")
        XCTAssertFalse(v.log.contains("opened twice"), "the launch page was asked for more than once: \(v.log)")
        XCTAssertEqual(int(try bankid.stats()["requests"]?["token"]), 1, "one code exchanged")
    }
}

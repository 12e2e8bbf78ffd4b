import Foundation
import VaultProtocol
import VaultTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The person's browser is a real one: every other login test scripts it. Here
/// Chromium (headless) is what vaultctl starts at the login's one-time launch
/// page. It must ask for that page exactly once (a second request would end
/// the login as "opened twice"), follow its redirect to the provider, where it
/// is signed in already (the strict provider's `signed_in_as`, as after an
/// earlier login: nothing to click on), come back to vaultd's port and show
/// vaultd's page.
final class RealBrowserTests: OIDCTestCase {
    func chromium() throws -> String {
        for path in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] where FileManager.default.isExecutableFile(atPath: path) {
            return path
        }
        throw cannotRunHere("Chromium is not installed (scripts/setup installs it)")
    }

    func testChromiumLogsInThroughTheLaunchPage() throws {
        let chromium = try chromium()
        let bankid = try startProvider("bankid")
        try bankid.behave(["signed_in_as": "kari"])
        let v = try startVaultd(providers: [bankid])
        let page = v.root + "/chromium-page.html"
        let browser = v.root + "/chromium"
        // As root (the tests here), Chromium starts only without its own sandbox.
        let sandbox = getuid() == 0 ? " --no-sandbox" : ""
        try """
            #!/bin/sh
            \(chromium) --headless\(sandbox) --disable-gpu --no-first-run --user-data-dir=\(v.root)/chromium-profile \
              --dump-dom "$1" > \(page).tmp 2>/dev/null
            mv \(page).tmp \(page)

            """.write(toFile: browser, atomically: true, encoding: .utf8)
        chmod(browser, 0o755)
        let r = ctl(v, ["login", bankid.profile, "--browser", browser, "--json"], stdin: "n\n", timeout: 90)
        XCTAssertEqual(r.exit, 0, "Chromium logged in through the launch page: \(r)")
        XCTAssertEqual(r.json?["claims"]?["name"], "Kari Nordmann", "\(r)")
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, !FileManager.default.fileExists(atPath: page) { usleep(100_000) }
        let shown = (try? String(contentsOfFile: page, encoding: .utf8)) ?? ""
        XCTAssertTrue(shown.contains("You are logged in with BankID"), "the page Chromium showed: \(shown)")
        XCTAssertFalse(v.log.contains("opened twice"), "Chromium asked for the launch page more than once: \(v.log)")
        let stats = try bankid.stats()
        XCTAssertEqual(int(stats["requests"]?["login_page"]), 0, "signed in at the provider: no page to click on")
        XCTAssertEqual(int(stats["requests"]?["token"]), 1, "one code exchanged")
    }
}

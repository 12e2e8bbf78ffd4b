import Foundation
import XCTest
@testable import VaultCore

/// App identity from /proc-like fixture directories (each case a pid
/// directory with the files the kernel would show), and from this very process.
final class AppIdentityTests: XCTestCase {
    var root = ""

    override func setUpWithError() throws {
        root = NSTemporaryDirectory() + "proc-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// A fake /proc/PID: `exe` a link to `exe`, `cgroup` and `root/.flatpak-info` when given.
    func process(_ pid: Int32, exe: String? = "/usr/bin/python3.11", cgroup: String? = nil, flatpakInfo: String? = nil) throws {
        let dir = "\(root)/\(pid)"
        try FileManager.default.createDirectory(atPath: dir + "/root", withIntermediateDirectories: true)
        if let exe { try FileManager.default.createSymbolicLink(atPath: dir + "/exe", withDestinationPath: exe) }
        if let cgroup { try cgroup.write(toFile: dir + "/cgroup", atomically: true, encoding: .utf8) }
        if let flatpakInfo { try flatpakInfo.write(toFile: dir + "/root/.flatpak-info", atomically: true, encoding: .utf8) }
    }

    func identity(_ pid: Int32) -> AppIdentity? { AppIdentity.of(pid: pid, procRoot: root) }

    func testFlatpakInfoNamesTheAppAndWinsOverEverythingElse() throws {
        try process(10, cgroup: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.example.Aktivitetslogg-4242.scope\n",
                    flatpakInfo: "[Application]\nname=org.example.Aktivitetslogg\nruntime=runtime/org.gnome.Platform/x86_64/46\n\n[Instance]\ninstance-id=1\n")
        XCTAssertEqual(identity(10), AppIdentity(kind: .flatpak, name: "org.example.Aktivitetslogg"))
        XCTAssertTrue(identity(10)?.verified == true)
        // A name= in another group, or a hostile name, is not an app id.
        try process(11, flatpakInfo: "[Instance]\nname=org.evil.App\n")
        XCTAssertEqual(identity(11), AppIdentity(kind: .executable, name: "/usr/bin/python3.11"))
        try process(12, flatpakInfo: "[Application]\nname=evil\"app\n")
        XCTAssertEqual(identity(12)?.kind, .executable)
    }

    func testSnapCgroup() throws {
        try process(20, cgroup: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/snap.aktivitetslogg.aktivitetslogg-6c7d5a1e.scope\n")
        XCTAssertEqual(identity(20), AppIdentity(kind: .snap, name: "aktivitetslogg"))
    }

    func testDesktopScopesAndServices() throws {
        let base = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/"
        let cases: [(String, String?)] = [
            ("app-gnome-firefox-2841.scope", "firefox"),
            ("app-gnome-google\\x2dchrome-3012.scope", "google-chrome"),
            ("app-flatpak-org.example.Aktivitetslogg-17.scope", "org.example.Aktivitetslogg"),
            ("app-org.kde.konsole@0f3a7c.service", "org.kde.konsole"),
            ("app-KDE-org.kde.dolphin@12ab.service", "org.kde.dolphin"),
            ("app-org.gnome.Terminal.slice/vte-spawn-5d2c.scope", nil),   // a terminal's shell: the terminal's slice is no app
            ("app-a-b-c-1.scope", nil),                                     // unescaped dashes: ambiguous, not trusted
        ]
        for (i, (unit, name)) in cases.enumerated() {
            let pid = Int32(30 + i)
            try process(pid, cgroup: base + unit + "\n")
            if let name {
                XCTAssertEqual(identity(pid), AppIdentity(kind: .desktop, name: name), unit)
            } else {
                XCTAssertEqual(identity(pid)?.kind, .executable, unit)
            }
        }
        // cgroup v1: systemd's named hierarchy.
        try process(50, cgroup: "12:pids:/\n1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-evolution-99.scope\n0::/\n")
        XCTAssertEqual(identity(50), AppIdentity(kind: .desktop, name: "evolution"))
    }

    func testOtherwiseTheExecutableUnverified() throws {
        try process(60, exe: "/opt/aktivitetslogg/bin/aktivitetslogg (deleted)", cgroup: "0::/\n")
        let app = try XCTUnwrap(identity(60))
        XCTAssertEqual(app.kind, .executable)
        XCTAssertFalse(app.verified)
        XCTAssertEqual(app.shortName, "aktivitetslogg")
        XCTAssertEqual(app.key, "executable:/opt/aktivitetslogg/bin/aktivitetslogg (deleted)")
        // Gone: nothing at all.
        XCTAssertNil(identity(61))
        XCTAssertNil(AppIdentity.of(pid: 0, procRoot: root))
    }

    /// The real /proc: this test process is what the kernel says it is.
    func testThisProcessFromTheRealProc() throws {
        let app = try XCTUnwrap(AppIdentity.of(pid: getpid()))
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let cgroup = (try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8)) ?? ""
        if FileManager.default.fileExists(atPath: "/.flatpak-info") {
            XCTAssertEqual(app.kind, .flatpak)
        } else if let fromCgroup = AppIdentity.fromCgroup(cgroup) {
            XCTAssertEqual(app, fromCgroup)
        } else {
            XCTAssertEqual(app, AppIdentity(kind: .executable, name: exe))
        }
    }
}

import Foundation
import VaultProtocol
import VaultTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Desktop integration: socket activation, readiness notification, no core dumps.
final class SystemdTests: VaultdTestCase {
    func testSocketActivationWithSystemdSocketActivate() throws {
        let (v, p) = try startSocketActivated()
        defer {
            if p.isRunning { p.terminate() }
            p.waitUntilExit()
        }
        let c = try v.raw()
        defer { c.close() }
        let r = try c.hello(interactive: false, timeout: 20)
        XCTAssertTrue(r.isOK, r.text)
        XCTAssertEqual(try c.call("status").result?["locked"], false)
        XCTAssertTrue(v.log.contains("activated=true"), v.log)
    }

    func testReadyAndStoppingAreNotified() throws {
        let v = try makeVaultd()
        let path = v.root + "/notify.sock"
        let fd = try boundUnixSocket(at: path, kind: Int32(SOCK_DGRAM.rawValue))
        defer { close(fd) }
        func receive() -> String? {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 10_000) > 0 else { return nil }
            var buf = [UInt8](repeating: 0, count: 512)
            let n = recv(fd, &buf, buf.count, 0)
            return n > 0 ? String(decoding: buf[0..<n], as: UTF8.self) : nil
        }
        try v.start(env: ["NOTIFY_SOCKET": path])
        XCTAssertTrue(receive()?.hasPrefix("READY=1") ?? false)
        v.stop()
        XCTAssertEqual(receive(), "STOPPING=1")
    }

    func testNoCoreDumps() throws {
        let v = try startVaultd()
        let limits = try String(contentsOfFile: "/proc/\(v.pid)/limits", encoding: .utf8)
        let core = limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") } ?? ""
        let numbers = core.split(separator: " ").filter { Int($0) != nil }
        XCTAssertEqual(numbers, ["0", "0"], "RLIMIT_CORE soft and hard are 0: \(core)")
    }

    func testUnitFilesDeclareWhatTheDaemonDoes() throws {
        let root = repositoryRoot + "/dist/systemd/"
        let service = try String(contentsOfFile: root + "vaultd.service", encoding: .utf8)
        let socket = try String(contentsOfFile: root + "vaultd.socket", encoding: .utf8)
        for line in ["Type=notify", "LimitCORE=0", "NoNewPrivileges=yes", "MemoryDenyWriteExecute=yes"] {
            XCTAssertTrue(service.contains(line), line)
        }
        for line in ["ListenStream=%t/sessionvault/vault.sock", "SocketMode=0600", "DirectoryMode=0700"] {
            XCTAssertTrue(socket.contains(line), line)
        }
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") {
            let out = try runProcess("/usr/bin/systemd-analyze", ["verify", "--user", root + "vaultd.socket"], env: childEnvironment([:]), timeout: 30)
            XCTAssertFalse(out.err.contains("Unknown key"), out.err)
            XCTAssertFalse(out.err.contains("Unknown section"), out.err)
        }
    }
}

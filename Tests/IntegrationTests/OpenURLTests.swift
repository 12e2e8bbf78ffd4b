import Foundation
import VaultProtocol
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// vaultctl opens a browser only at an http(s) URL whose origin is one of the
/// `origins` vaultd sends with an `open_url` prompt (the launch pages of its
/// logins waiting now); anything else is printed with a warning.
final class OpenURLTests: VaultdTestCase {
    /// A stand-in vaultd (same uid): answers `hello`, and answers `login` with
    /// one `open_url` prompt for argv[2] with the origins in argv[3] (JSON),
    /// then `cancelled`.
    static let fakeVaultd = """
        import json, os, socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(sys.argv[1]); s.listen(4)
        print("ready", flush=True)
        while True:
            conn, _ = s.accept()
            f = conn.makefile("rwb")
            for line in f:
                req = json.loads(line)
                if req["op"] == "hello":
                    out = [{"id": req["id"], "ok": True, "result": {"version": 1, "server": "fake", "locked": False}}]
                else:
                    prompt = {"pid": "p1", "kind": "open_url", "text": "Log in in your browser.", "url": sys.argv[2],
                              "origins": json.loads(sys.argv[3])}
                    out = [{"id": req["id"], "event": "prompt", "prompt": prompt},
                           {"id": req["id"], "ok": False, "error": {"code": "cancelled", "message": "Cancelled."}}]
                for o in out:
                    f.write(json.dumps(o).encode() + b"\\n")
                f.flush()
            conn.close()
        """

    /// Runs `vaultctl login bankid` against the fake vaultd with a browser that
    /// records what it was asked to open; returns vaultctl's stderr and the
    /// URL the browser got (nil: not started within `wait` seconds; the
    /// positive test shows one starts well within that).
    func login(url: String, origins: [String], wait: Double = 1) throws -> (err: String, opened: String?) {
        let v = try makeVaultd()  // for its temp dir
        XCTAssertEqual(mkdir(v.runDir, 0o700), 0)
        let record = v.root + "/opened.txt"
        let browser = v.root + "/browser"
        try "#!/bin/sh\nprintf '%s' \"$1\" > \(record).tmp && mv \(record).tmp \(record)\n"
            .write(toFile: browser, atomically: true, encoding: .utf8)
        chmod(browser, 0o755)
        let originsJSON = JSON.array(origins.map { .string($0) }).text
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["python3", "-c", Self.fakeVaultd, v.socketPath, url, originsJSON]
        let out = Pipe()
        server.standardOutput = out
        try server.run()
        defer { server.terminate(); server.waitUntilExit() }
        var ready = Data()
        while !ready.contains(0x0A) {
            let chunk = out.fileHandleForReading.availableData
            guard !chunk.isEmpty else { break }
            ready.append(chunk)
        }
        XCTAssertEqual(String(decoding: ready, as: UTF8.self), "ready\n")
        let r = v.vaultctl(["login", "bankid", "--browser", browser])
        XCTAssertNotEqual(r.exit, 0, "the fake vaultd cancels every login")
        let deadline = Date().addingTimeInterval(wait)
        while Date() < deadline, !FileManager.default.fileExists(atPath: record) { usleep(50_000) }
        return (r.err, try? String(contentsOfFile: record, encoding: .utf8))
    }

    func testProviderLoginPageIsOpened() throws {
        let url = "http://127.0.0.1:8443/authorize?client_id=x&state=s"
        let r = try login(url: url, origins: ["https://login.example.org:443", "http://127.0.0.1:8443"], wait: 10)
        XCTAssertEqual(r.opened, url, r.err)
        XCTAssertFalse(r.err.contains("was not opened"), r.err)
    }

    func testOtherURLsAreOnlyPrinted() throws {
        let origins = ["http://127.0.0.1:8443"]
        for url in ["file:///etc/passwd", "http://127.0.0.1:1/x", "https://127.0.0.1:8443/authorize",
                    "http://127.0.0.1:8443@evil.example/authorize", "http://evil.example\\@127.0.0.1:8443/",
                    "javascript:alert(1)"] {
            let r = try login(url: url, origins: origins)
            XCTAssertNil(r.opened, "\(url) was opened")
            XCTAssertTrue(r.err.contains("This address is not the login page of a provider set up in SessionVault, so it was not opened."), r.err)
            XCTAssertTrue(r.err.contains(url), "the address is printed for the person: \(r.err)")
        }
        // Without origins from vaultd (an older vaultd), nothing is opened either.
        let r = try login(url: "http://127.0.0.1:8443/authorize", origins: [])
        XCTAssertNil(r.opened)
    }
}

import Foundation
import VaultProtocol
import VaultTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Only the uid that owns vaultd may talk to it (SO_PEERCRED), even when file
/// permissions would let someone else connect.
final class PeerCredentialTests: VaultdTestCase {
    /// A client for the other uid: connects, sends a status request, and prints
    /// everything it receives until the server closes (or 5 s pass) as JSON.
    static let otherUIDClient = """
        import json, socket, sys, time
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(sys.argv[1])
        except OSError as e:
            print(json.dumps({"connect_error": str(e)})); sys.exit(3)
        try:
            s.sendall(b'{"id":1,"op":"status"}\\n{"id":2,"op":"session"}\\n')
        except OSError:
            pass
        s.settimeout(5)
        data = b""; closed = False
        deadline = time.time() + 5
        while time.time() < deadline:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except OSError:
                closed = True; break
            if not chunk:
                closed = True; break
            data += chunk
        print(json.dumps({"data": data.decode("utf-8", "replace"), "closed": closed}))
        """

    func testAnotherUIDGetsForbiddenAndIsDisconnected() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to run a client as uid 65534") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
              FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            throw cannotRunHere("needs /usr/bin/setpriv and /usr/bin/python3")
        }
        let v = try startVaultd()
        try importSession(v, account: "victim", accessToken: "at-other-uid-secret", refreshToken: nil)
        // Open the path for the other uid: search on the directories, write on the socket.
        chmod(v.root, 0o711)
        chmod(v.runDir, 0o711)
        chmod(v.socketPath, 0o666)

        let r = try runProcess("/usr/bin/setpriv",
                               ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
                                Self.otherUIDClient, v.socketPath],
                               env: ["PATH": "/usr/bin:/bin", "HOME": "/"], timeout: 30)
        XCTAssertEqual(r.exit, 0, "other-uid client failed: \(r.out) \(r.err)")
        let report = try JSON.parse(r.out.trimmingCharacters(in: .whitespacesAndNewlines))
        XCTAssertNil(report["connect_error"], "file permissions should have let uid 65534 connect: \(r.out)")
        XCTAssertEqual(report["closed"], .bool(true), "the server did not close the other uid's connection: \(r.out)")
        let lines = (report["data"]?.stringValue ?? "").split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 1, "expected exactly one answer: \(lines)")
        let reply = try JSON.parse(lines.first ?? "")
        XCTAssertEqual(reply["id"], .null, reply.text)
        XCTAssertEqual(reply["ok"], .bool(false), reply.text)
        XCTAssertEqual(reply.errorCode, "forbidden", reply.text)
        XCTAssertFalse((reply.errorMessage ?? "").isEmpty)
        XCTAssertFalse(r.out.contains("at-other-uid-secret"))
        XCTAssertFalse(r.out.contains("victim"), "the other uid learned about accounts: \(r.out)")

        // The owner is still served.
        XCTAssertTrue(try v.raw().call("status").isOK)
    }

    /// A stand-in for vaultd run as another uid: listens at argv[1], answers
    /// every line with a success (so a client that does not check carries on),
    /// and once no one has connected for 3 s prints what it received as JSON.
    static let foreignServer = """
        import json, os, socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666); s.listen(4)
        print("ready", flush=True)
        s.settimeout(3)
        data = b""
        while True:
            try:
                conn, _ = s.accept()
            except socket.timeout:
                break
            conn.settimeout(3)
            try:
                while True:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                    for _ in chunk.split(b"\\n")[:-1]:
                        conn.sendall(b'{"id":1,"ok":true,"result":{"version":1,"server":"fake","locked":false}}\\n')
            except OSError:
                pass
            conn.close()
        print(json.dumps({"received": data.decode("utf-8", "replace")}), flush=True)
        """

    func testVaultctlRefusesAServerOfAnotherUID() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to run a server as uid 65534") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
              FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            throw XCTSkip("needs /usr/bin/setpriv and /usr/bin/python3")
        }
        let v = try makeVaultd()  // only for its temp dir (removed at the end)
        let dir = v.root + "/foreign"
        XCTAssertEqual(mkdir(dir, 0o777), 0)
        chmod(v.root, 0o711)
        chmod(dir, 0o777)
        let path = dir + "/vault.sock"
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        server.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", Self.foreignServer, path]
        server.environment = ["PATH": "/usr/bin:/bin"]
        let out = Pipe()
        server.standardOutput = out
        try server.run()
        defer { if server.isRunning { server.terminate() } }
        var ready = Data()
        while !ready.contains(0x0A) {
            let chunk = out.fileHandleForReading.availableData
            guard !chunk.isEmpty else { break }
            ready.append(chunk)
        }
        XCTAssertEqual(String(decoding: ready, as: UTF8.self), "ready\n")
        var st = stat()
        XCTAssertEqual(lstat(path, &st), 0)
        XCTAssertEqual(st.st_uid, 65534)

        for language in [Language.en, .nb] {
            let r = try runProcess(Binaries.vaultctl, ["status"], env: childEnvironment([
                "SESSIONVAULT_SOCKET": path, "HOME": v.root + "/home", "LANG": language == .en ? "C.UTF-8" : "nb_NO.UTF-8",
            ]), timeout: 30)
            XCTAssertNotEqual(r.exit, 0, "vaultctl talked to a server of another uid: \(r.out)")
            XCTAssertTrue(r.err.contains(Messages.foreignServer(path).text(language)), r.err)
        }
        server.waitUntilExit()
        let report = try JSON.parse(String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines))
        XCTAssertEqual(report["received"], .string(""), "vaultctl sent something to the foreign server")

        // The owner's own vaultd is still accepted.
        let own = try startVaultd()
        let r = own.vaultctl(["status"])
        XCTAssertEqual(r.exit, 0, r.err)
    }
}

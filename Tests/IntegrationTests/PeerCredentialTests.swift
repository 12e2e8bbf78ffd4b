import Foundation
import VaultProtocol
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
}

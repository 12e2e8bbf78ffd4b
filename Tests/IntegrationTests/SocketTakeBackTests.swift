import Foundation
import VaultClient
import VaultProtocol
import VaultTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// An app that may write the socket's directory renames `vault.sock`, binds
/// its own socket at the path and relays to the real one (issue 21). vaultd
/// notices within about a second and takes the path back; clients refuse a
/// server that runs in a sandbox.
final class SocketTakeBackTests: VaultdTestCase {
    // MARK: vaultd takes the path back

    func testVaultdTakesItsPathBackFromAnImpostorAndKeepsItsConnections() throws {
        let v = try startVaultd()
        let existing = try v.raw()
        defer { existing.close() }
        XCTAssertTrue(try existing.hello().isOK)

        let renamed = v.runDir + "/renamed.sock"
        XCTAssertEqual(rename(v.socketPath, renamed), 0, "errno \(errno)")
        let impostor = try listeningSocket(at: v.socketPath)
        defer { close(impostor) }
        let impostorFile = try XCTUnwrap(socketFile(v.socketPath), "the impostor's socket is at the path")
        let swapped = monotonicNow()

        let back = waitUntil(timeout: 5, interval: 0.02) {
            guard let now = socketFile(v.socketPath) else { return false }
            return now != impostorFile
        }
        XCTAssertTrue(back, "vaultd did not take its socket path back within 5 s. Log:\n\(v.log)")
        XCTAssertLessThan(monotonicNow() - swapped, 5)
        // What a person might have connected to in between is the attack; from now on it is over.
        drain(impostor)

        // A fresh connection reaches vaultd itself, not the impostor.
        let fresh = try v.raw()
        defer { fresh.close() }
        XCTAssertEqual(peerPID(fresh.fd), v.pid, "the fresh connection does not lead to vaultd")
        // Short waits: an impostor (the failure) never answers.
        XCTAssertTrue(try fresh.hello(timeout: 5).isOK)
        let status = try fresh.call("status", timeout: 5)
        XCTAssertTrue(status.isOK, status.text)
        let ctl = v.vaultctl(["status"])
        XCTAssertEqual(ctl.exit, 0, ctl.err)
        XCTAssertEqual(drain(impostor), 0, "the impostor got a connection after vaultd took its path back")

        // The old listener is closed: the name the intruder gave it leads nowhere.
        XCTAssertNil(connectUnixSocket(renamed), "vaultd still listens on the renamed socket")
        // The connection made before the swap is still served.
        XCTAssertTrue(try existing.call("status").isOK, "an existing connection was dropped")
        XCTAssertTrue(v.log.contains("the socket was replaced or removed: vaultd takes its path back"), v.log)
        XCTAssertTrue(v.log.contains("vaultd listens at the socket path again"), v.log)

        let entries = try auditEntries(v)
        XCTAssertTrue(entries.contains { $0["event"] == "socket_replaced" && $0["outcome"] == "taken_back" },
                      "no socket_replaced audit entry: \(entries)")

        // The check stops at shutdown: vaultd exits cleanly and removes the socket it bound itself.
        let outcome = v.stop()
        XCTAssertEqual(outcome?.exit, 0)
        XCTAssertEqual(outcome?.timedOut, false)
        XCTAssertNil(socketFile(v.socketPath), "the socket vaultd bound is still there after it stopped")
    }

    func testARemovedSocketIsBoundAgain() throws {
        let v = try startVaultd()
        XCTAssertEqual(unlink(v.socketPath), 0)
        XCTAssertTrue(waitUntil(timeout: 5, interval: 0.02) { socketFile(v.socketPath) != nil },
                      "vaultd did not bind its socket again within 5 s. Log:\n\(v.log)")
        let c = try v.raw()
        defer { c.close() }
        XCTAssertEqual(peerPID(c.fd), v.pid)
        XCTAssertTrue(try c.call("status").isOK)
    }

    /// A link (or a directory, a file) at the path is never removed or
    /// followed: vaultd says so once and takes the path back once it is gone.
    func testALinkAtThePathIsLeftAloneAndNotFollowed() throws {
        let v = try startVaultd()
        let target = v.root + "/target"
        XCTAssertTrue(FileManager.default.createFile(atPath: target, contents: Data("keep".utf8)))
        XCTAssertEqual(rename(v.socketPath, v.runDir + "/renamed.sock"), 0)
        XCTAssertEqual(symlink(target, v.socketPath), 0)
        XCTAssertTrue(waitUntil(timeout: 5, interval: 0.05) { v.log.contains("not a socket; vaultd leaves it alone") }, v.log)
        usleep(1_500_000)  // another check or two
        var st = stat()
        XCTAssertEqual(lstat(v.socketPath, &st), 0, "the link was removed")
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFLNK)
        XCTAssertEqual(try String(contentsOfFile: target, encoding: .utf8), "keep", "the link's target was touched")
        XCTAssertEqual(v.log.components(separatedBy: "not a socket; vaultd leaves it alone").count, 2, "said more than once")

        XCTAssertEqual(unlink(v.socketPath), 0)
        XCTAssertTrue(waitUntil(timeout: 5, interval: 0.02) { socketFile(v.socketPath) != nil }, v.log)
        XCTAssertTrue(try status(v)["locked"] != nil)
    }

    /// With socket activation the path is systemd's; a swapped one is taken
    /// back all the same, with a socket of vaultd's own, and the log says so.
    func testASocketActivatedVaultdTakesItsPathBackToo() throws {
        let (v, p) = try startSocketActivated()
        defer {
            if p.isRunning { p.terminate() }
            p.waitUntilExit()
        }
        let first = try v.raw()
        defer { first.close() }
        XCTAssertTrue(try first.hello(timeout: 20).isOK)
        XCTAssertTrue(waitUntil(timeout: 10, interval: 0.05) { v.log.contains("vaultd ready") }, v.log)

        XCTAssertEqual(rename(v.socketPath, v.runDir + "/renamed.sock"), 0)
        let impostor = try listeningSocket(at: v.socketPath)
        defer { close(impostor) }
        let impostorFile = try XCTUnwrap(socketFile(v.socketPath))
        XCTAssertTrue(waitUntil(timeout: 5, interval: 0.02) { socketFile(v.socketPath).map { $0 != impostorFile } ?? false },
                      "vaultd did not take systemd's path back within 5 s. Log:\n\(v.log)")
        drain(impostor)
        let fresh = try v.raw()
        defer { fresh.close() }
        XCTAssertEqual(peerPID(fresh.fd), p.processIdentifier, "the fresh connection does not lead to vaultd")
        XCTAssertTrue(try fresh.call("status", timeout: 5).isOK)
        XCTAssertEqual(drain(impostor), 0)
        XCTAssertTrue(try first.call("status").isOK, "an existing connection was dropped")
        XCTAssertTrue(v.log.contains("the socket systemd made was replaced or removed"), v.log)
    }

    // MARK: clients refuse a server in a sandbox

    func testClientsRefuseAServerInASandbox() throws {
        let bwrap = ["/usr/bin/bwrap", "/bin/bwrap"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let bwrap else { throw cannotRunHere("bwrap is not installed (apt-get install bubblewrap)") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            throw cannotRunHere("needs /usr/bin/python3")
        }
        let v = try makeVaultd()  // only for its temp dir (removed at the end)
        let dir = v.root + "/app"
        XCTAssertEqual(mkdir(dir, 0o700), 0)
        let path = dir + "/vault.sock"
        // As a Flatpak app runs: as us, with a root directory and pid namespace of its own.
        let (server, out) = try startStandIn(
            [bwrap, "--die-with-parent", "--unshare-pid", "--tmpfs", "/", "--ro-bind", "/usr", "/usr",
             "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
             "--proc", "/proc", "--dev", "/dev", "--bind", dir, dir], path: path)
        defer { if server.isRunning { server.terminate() } }

        XCTAssertThrowsError(try VaultConnection(socketPath: path)) { error in
            guard let error = error as? ClientError, case .sandboxedServer(let p) = error else {
                return XCTFail("expected sandboxedServer, got \(error)")
            }
            XCTAssertEqual(p, path)
            XCTAssertEqual(error.code, "foreign_server")
        }
        for language in [Language.en, .nb] {
            let r = try runProcess(Binaries.vaultctl, ["status"], env: childEnvironment([
                "SESSIONVAULT_SOCKET": path, "HOME": v.root + "/home", "LANG": language == .en ? "C.UTF-8" : "nb_NO.UTF-8",
            ]), timeout: 30)
            XCTAssertNotEqual(r.exit, 0, "vaultctl talked to a server in a sandbox: \(r.out)")
            XCTAssertTrue(r.err.contains(Messages.sandboxedServer(path).text(language)), r.err)
        }
        server.waitUntilExit()
        let report = try JSON.parse(String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines))
        XCTAssertEqual(report["received"], .string(""), "a client sent something to the server in the sandbox")
    }

    /// The control for the test above: the same stand-in outside a sandbox
    /// is spoken to, so the refusal there is the sandbox's.
    func testTheSameServerOutsideASandboxIsSpokenTo() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            throw cannotRunHere("needs /usr/bin/python3")
        }
        let v = try makeVaultd()
        let path = v.root + "/vault.sock"
        let (server, _) = try startStandIn([], path: path)
        defer { if server.isRunning { server.terminate() } }
        let c = try VaultConnection(socketPath: path)
        XCTAssertEqual(try c.hello(client: "test", language: .en, interactive: false)["server"], "fake")
    }

    func testWhatCannotBeToldIsAllowed() {
        XCTAssertFalse(runsUnderAnotherRoot(pid: 0), "pid 0: the server is outside our pid namespace")
        XCTAssertFalse(runsUnderAnotherRoot(pid: getpid()), "our own root")
        XCTAssertFalse(runsUnderAnotherRoot(pid: Int32.max), "no such process: cannot tell")
    }

    // MARK: helpers

    /// Runs PeerCredentialTests' stand-in server (answers everything with a
    /// success, reports what it received) under `wrapper` at `path`; waits until it listens.
    private func startStandIn(_ wrapper: [String], path: String) throws -> (Process, Pipe) {
        let command = wrapper + ["/usr/bin/python3", "-c", PeerCredentialTests.foreignServer, path]
        let server = Process()
        server.executableURL = URL(fileURLWithPath: command[0])
        server.arguments = Array(command.dropFirst())
        server.environment = ["PATH": "/usr/bin:/bin"]
        let out = Pipe()
        let err = Pipe()
        server.standardOutput = out
        server.standardError = err
        try server.run()
        var ready = Data()
        while !ready.contains(0x0A) {
            let chunk = out.fileHandleForReading.availableData
            guard !chunk.isEmpty else { break }
            ready.append(chunk)
        }
        guard String(decoding: ready, as: UTF8.self) == "ready\n" else {
            if server.isRunning { server.terminate() }
            let why = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw cannotRunHere("the stand-in server did not start (\(command[0])): \(why)")
        }
        return (server, out)
    }
}

/// The socket file at `path` (device, inode), or nil when there is none.
private func socketFile(_ path: String) -> [UInt64]? {
    var st = stat()
    guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFSOCK else { return nil }
    return [UInt64(st.st_dev), UInt64(st.st_ino)]
}

/// A non-blocking listening socket at `path`: the impostor.
private func listeningSocket(at path: String) throws -> Int32 {
    let fd = try boundUnixSocket(at: path, kind: Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue))
    guard listen(fd, 16) == 0 else {
        let code = errno
        close(fd)
        throw IntegrationError("impostor listen at \(path): errno \(code)")
    }
    return fd
}

/// Accepts (and closes) every connection waiting at the impostor; returns how many.
@discardableResult
private func drain(_ fd: Int32) -> Int {
    var count = 0
    while true {
        let c = accept(fd, nil, nil)
        guard c >= 0 else { break }
        close(c)
        count += 1
    }
    return count
}

/// The pid of the process that listens at the other end (SO_PEERCRED).
private func peerPID(_ fd: Int32) -> Int32 {
    // pid, uid, gid: struct ucred's layout.
    var cred: (Int32, UInt32, UInt32) = (0, 0, 0)
    var length = socklen_t(MemoryLayout.size(ofValue: cred))
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0 ? cred.0 : -1
}

import Foundation
import VaultProtocol
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// vaultd refuses to start on unsafe or foreign ground, each time with its
/// sentence on stderr, a non-zero exit, and no crash.
final class StartupRefusalTests: VaultdTestCase {
    static let unsafeSocket = "The socket path is not safe (a link, or owned by another user). Remove it and start vaultd again."
    static let inUse = "Another vaultd is already running for this user. Use it, or stop it first."
    static let tooNew = "The vault file was written by a newer SessionVault. Install the newer version (your data is untouched)."

    func assertRefused(_ r: ProcessOutcome, sentence: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertFalse(r.timedOut, "vaultd did not exit; it should have refused to start. stderr: \(r.err)", file: file, line: line)
        XCTAssertFalse(r.signaled, "vaultd died of a signal: \(r.err)", file: file, line: line)
        XCTAssertNotEqual(r.exit, 0, "vaultd exited 0 though it refused: \(r.err)", file: file, line: line)
        XCTAssertTrue(r.err.contains("vaultd: " + sentence), "stderr lacks the sentence “\(sentence)”:\n\(r.err)", file: file, line: line)
        assertNoCrashOutput(r.err, file: file, line: line)
        assertNoCrashOutput(r.out, file: file, line: line)
    }

    func testSymlinkAtSocketPathIsRefused() throws {
        let v = try makeVaultd()
        try FileManager.default.createDirectory(atPath: v.runDir, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let target = v.root + "/elsewhere.sock"
        _ = FileManager.default.createFile(atPath: target, contents: Data("not yours".utf8))
        XCTAssertEqual(symlink(target, v.socketPath), 0)
        let r = try v.runToExit()
        assertRefused(r, sentence: Self.unsafeSocket)
        // Nothing was followed or removed.
        var st = stat()
        XCTAssertEqual(lstat(v.socketPath, &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFLNK, "the symlink was replaced")
        XCTAssertEqual(try String(contentsOfFile: target, encoding: .utf8), "not yours")
    }

    func testSymlinkToALiveSocketIsRefused() throws {
        // A link to another vaultd's socket is refused as unsafe, not as "in use".
        let other = try startVaultd()
        let v = try makeVaultd()
        try FileManager.default.createDirectory(atPath: v.runDir, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        XCTAssertEqual(symlink(other.socketPath, v.socketPath), 0)
        let r = try v.runToExit()
        assertRefused(r, sentence: Self.unsafeSocket)
        XCTAssertTrue(try other.raw().call("status").isOK)
    }

    func testForeignFileAtSocketPathIsRefused() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to chown a file to uid 65534") }
        let v = try makeVaultd()
        try FileManager.default.createDirectory(atPath: v.runDir, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        _ = FileManager.default.createFile(atPath: v.socketPath, contents: Data("planted".utf8))
        XCTAssertEqual(chown(v.socketPath, 65534, 65534), 0)
        let r = try v.runToExit()
        assertRefused(r, sentence: Self.unsafeSocket)
        var st = stat()
        XCTAssertEqual(lstat(v.socketPath, &st), 0, "the foreign file was removed")
        XCTAssertEqual(st.st_uid, 65534)
        XCTAssertEqual(try String(contentsOfFile: v.socketPath, encoding: .utf8), "planted")
    }

    func testRegularFileOfOursAtSocketPathIsRefused() throws {
        let v = try makeVaultd()
        try FileManager.default.createDirectory(atPath: v.runDir, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        _ = FileManager.default.createFile(atPath: v.socketPath, contents: Data("mine".utf8))
        let r = try v.runToExit()
        assertRefused(r, sentence: Self.unsafeSocket)
        XCTAssertEqual(try String(contentsOfFile: v.socketPath, encoding: .utf8), "mine")
    }

    /// Without XDG_RUNTIME_DIR the socket's directory is /tmp/sessionvault-UID,
    /// a name anyone may create first; the same check guards every socket
    /// directory, so the tests use the fixture's own.
    func testSocketDirectoryOthersCanEnterIsRefusedNotRepaired() throws {
        let v = try makeVaultd()
        XCTAssertEqual(mkdir(v.runDir, 0o755), 0)
        XCTAssertEqual(chmod(v.runDir, 0o755), 0)
        assertRefused(try v.runToExit(), sentence: Messages.socketDirectoryUnsafe(v.runDir).en)
        var st = stat()
        XCTAssertEqual(lstat(v.runDir, &st), 0)
        XCTAssertEqual(st.st_mode & 0o7777, 0o755, "the directory was changed instead of refused")
        XCTAssertFalse(FileManager.default.fileExists(atPath: v.socketPath))
    }

    func testSocketDirectoryThatIsALinkIsRefused() throws {
        let v = try makeVaultd()
        let real = v.root + "/elsewhere"
        XCTAssertEqual(mkdir(real, 0o700), 0)
        XCTAssertEqual(symlink(real, v.runDir), 0)
        assertRefused(try v.runToExit(), sentence: Messages.socketDirectoryUnsafe(v.runDir).en)
        XCTAssertFalse(FileManager.default.fileExists(atPath: real + "/vault.sock"), "the link was followed")
    }

    func testSocketDirectoryOfAnotherUserIsRefused() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to chown a directory to uid 65534") }
        let v = try makeVaultd()
        XCTAssertEqual(mkdir(v.runDir, 0o700), 0)
        XCTAssertEqual(chown(v.runDir, 65534, 65534), 0)
        assertRefused(try v.runToExit(), sentence: Messages.socketDirectoryUnsafe(v.runDir).en)
        var st = stat()
        XCTAssertEqual(lstat(v.runDir, &st), 0)
        XCTAssertEqual(st.st_uid, 65534)
    }

    func testSocketDirectoryOfOursWithMode700IsUsed() throws {
        let v = try makeVaultd()
        XCTAssertEqual(mkdir(v.runDir, 0o700), 0)
        try v.start()
        XCTAssertTrue(try v.raw().call("status").isOK)
    }

    func testSecondVaultdOnTheSameSocketIsRefused() throws {
        let v = try startVaultd()
        enrollPIN(v)
        let r = try v.runToExit()
        assertRefused(r, sentence: Self.inUse)
        // The first one is untouched and still serving on its socket.
        XCTAssertTrue(v.isRunning)
        XCTAssertTrue(FileManager.default.fileExists(atPath: v.socketPath))
        let st = try status(v)
        XCTAssertEqual(st["locked"], .bool(false), st.text)
    }

    func testStaleSocketFromAKilledVaultdIsReplaced() throws {
        let v = try startVaultd()
        v.kill9()
        XCTAssertTrue(FileManager.default.fileExists(atPath: v.socketPath), "expected a stale socket after SIGKILL")
        try v.start()
        XCTAssertTrue(try v.raw().call("status").isOK)
    }

    func testStoreFromANewerSchemaIsRefusedAndLeftUntouched() throws {
        let v = try startVaultd()
        enrollPIN(v)
        try importSession(v, account: "keep", accessToken: "at-keep", refreshToken: "rt-keep")
        let stopped = try XCTUnwrap(v.stop())
        XCTAssertEqual(stopped.exit, 0)

        // Bump the schema the way a newer SessionVault would record it (PRAGMA
        // user_version and store_info.schema_version; see Sources/VaultStore/Schema.swift).
        let bump = try sqlite3(v.storePath, "PRAGMA user_version = 4; UPDATE store_info SET schema_version = 4;")
        XCTAssertEqual(bump.exit, 0, bump.err)
        let check = try sqlite3(v.storePath, "PRAGMA user_version;")
        XCTAssertEqual(check.out.trimmingCharacters(in: .whitespacesAndNewlines), "4")

        let before = try snapshot(v.dataDir)
        let r = try v.runToExit()
        assertRefused(r, sentence: Self.tooNew)
        let after = try snapshot(v.dataDir)
        XCTAssertEqual(after["vault.sqlite"], before["vault.sqlite"], "the newer store was modified")
        for name in ["vault.sqlite-wal", "vault.sqlite-journal"] {
            // The read-only probe may leave an empty -wal beside the file; no content may be written.
            if before[name] == nil {
                XCTAssertTrue(after[name] == nil || after[name]?.isEmpty == true, "\(name) was written: \(after[name]?.count ?? 0) bytes")
            } else {
                XCTAssertEqual(after[name], before[name], "\(name) changed")
            }
        }
        XCTAssertEqual(after["device.key"], before["device.key"])
        XCTAssertFalse(after.keys.contains { $0.contains("orphaned") }, "the store was moved aside: \(after.keys.sorted())")

        // Only user_version bumped (store_info says 1): still refused.
        let v2 = try startVaultd()
        v2.stop()
        XCTAssertEqual(try sqlite3(v2.storePath, "PRAGMA user_version = 7;").exit, 0)
        let before2 = try snapshot(v2.dataDir)
        assertRefused(try v2.runToExit(), sentence: Self.tooNew)
        XCTAssertEqual(try snapshot(v2.dataDir)["vault.sqlite"], before2["vault.sqlite"])
    }

    func testUnreadableConfigIsRefusedWithItsSentence() throws {
        let v = try makeVaultd(config: "idle_timeout = \"soon\"\n")
        let r = try v.runToExit()
        XCTAssertEqual(r.exit, 2, r.err)
        XCTAssertTrue(r.err.contains("The configuration file has an error."), r.err)
        XCTAssertTrue(r.err.contains("idle_timeout"), "the detail should name the key: \(r.err)")
        assertNoCrashOutput(r.err)
    }

    /// File name → bytes for every regular file in `dir`.
    func snapshot(_ dir: String) throws -> [String: Data] {
        var out: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: dir) {
            var st = stat()
            guard lstat(dir + "/" + name, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { continue }
            out[name] = FileManager.default.contents(atPath: dir + "/" + name)
        }
        return out
    }
}

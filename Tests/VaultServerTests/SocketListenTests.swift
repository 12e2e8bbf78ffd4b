import Foundation
import Locking
import XCTest
@testable import VaultServer
#if canImport(Glibc)
import Glibc
#endif

/// `VaultServer.listen(on:)` puts a listening socket at the path in one step,
/// which is what a take-back (SocketKeeper) relies on: a client connecting
/// while the path changes hands never finds it missing or refusing. The same
/// take-back against a real vaultd is in Tests/IntegrationTests (SocketTakeBackTests).
final class SocketListenTests: XCTestCase {
    var dir = ""

    override func setUpWithError() throws {
        // Short: a socket path has room for 107 bytes.
        dir = "/tmp/svl.\(getpid()).\(UInt32.random(in: 0 ... .max))"
        XCTAssertEqual(mkdir(dir, 0o700), 0)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// A client connecting in a tight loop while the socket at the path is
    /// replaced 200 times: every connect reaches a listening socket (accepted
    /// or, its queue full, EAGAIN); none finds no file (ENOENT, as between an
    /// unlink and a bind) or a socket that refuses (ECONNREFUSED, as between a
    /// bind and a listen).
    func testAClientNeverFindsThePathMissingOrRefusingWhileTheSocketIsReplaced() throws {
        let path = dir + "/vault.sock"
        var (current, _) = try VaultServer.listen(on: path)
        let stop = Locked(false)
        let seen = Locked([CInt: Int]())  // errno (0: connected) → count
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            while !stop.withLock({ $0 }) {
                let code = Self.connectOnce(path)
                seen.withLock { $0[code, default: 0] += 1 }
            }
            done.signal()
        }
        for _ in 0 ..< 200 {
            let (next, identity) = try VaultServer.listen(on: path)
            XCTAssertEqual(PathState.of(path), identity.map { .socket($0) }, "the identity returned is not the file at the path")
            close(current)
            current = next
            usleep(200)
        }
        stop.withLock { $0 = true }
        done.wait()
        close(current)
        let counts = seen.withLock { $0 }
        XCTAssertGreaterThan(counts[0, default: 0] + counts[EAGAIN, default: 0], 100, "the client hardly ran: \(counts)")
        XCTAssertNil(counts[ENOENT], "a client found no socket at the path: \(counts)")
        XCTAssertNil(counts[ECONNREFUSED], "a client found a socket that refused: \(counts)")
        XCTAssertEqual(Set(counts.keys).subtracting([0, EAGAIN]), [], "\(counts)")
        XCTAssertEqual(PathState.of(path + "~"), .missing, "the staging name was left behind")
    }

    /// What is at the staging name (a crashed vaultd's socket, a planted file
    /// or link) is removed, never followed; the new socket is still 0600.
    func testWhatIsAtTheStagingNameIsRemovedNotFollowed() throws {
        let path = dir + "/vault.sock"
        let target = dir + "/target"
        XCTAssertTrue(FileManager.default.createFile(atPath: target, contents: Data("keep".utf8)))
        XCTAssertEqual(symlink(target, path + "~"), 0)
        let (fd, identity) = try VaultServer.listen(on: path)
        defer { close(fd) }
        XCTAssertNotNil(identity)
        XCTAssertEqual(PathState.of(path), identity.map { .socket($0) })
        XCTAssertEqual(try String(contentsOfFile: target, encoding: .utf8), "keep")
        XCTAssertEqual(PathState.of(path + "~"), .missing)
        var st = stat()
        XCTAssertEqual(lstat(path, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        XCTAssertEqual(Self.connectOnce(path), 0)
    }

    /// A directory at the path is not replaced: the call fails and leaves no staging socket.
    func testADirectoryAtThePathIsNotReplaced() throws {
        let path = dir + "/vault.sock"
        XCTAssertEqual(mkdir(path, 0o700), 0)
        XCTAssertThrowsError(try VaultServer.listen(on: path)) { error in
            XCTAssertTrue("\(error)".contains("rename"), "\(error)")
        }
        var st = stat()
        XCTAssertEqual(lstat(path, &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFDIR)
        XCTAssertEqual(PathState.of(path + "~"), .missing)
    }

    /// A path whose staging name would not fit in a socket address is bound in
    /// place, replacing a stale socket there.
    func testAPathWithNoRoomForTheStagingNameIsBoundInPlace() throws {
        let name = String(repeating: "s", count: 107 - dir.utf8.count - 1)
        let path = dir + "/" + name
        XCTAssertEqual(path.utf8.count, 107)
        let (stale, _) = try VaultServer.listen(on: path)
        close(stale)  // the file stays, refusing: what a killed vaultd leaves
        let (fd, identity) = try VaultServer.listen(on: path)
        defer { close(fd) }
        XCTAssertEqual(PathState.of(path), identity.map { .socket($0) })
        XCTAssertEqual(Self.connectOnce(path), 0)
    }

    /// 0 when a non-blocking connect to `path` succeeded, otherwise its errno.
    static func connectOnce(_ path: String) -> CInt {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        return VaultServer.withAddress(path) { connect(fd, $0, $1) } == 0 ? 0 : errno
    }
}

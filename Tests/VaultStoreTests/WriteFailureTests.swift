import Foundation
import XCTest

@testable import VaultStore

/// Write failures must come back as clear errors, never a crash, and never a
/// half-applied change. Tests run as root, and chmod does not stop root, so the
/// real cases use mounts (a read-only bind, a full tmpfs) and skip where the
/// machine does not allow mounting; SQLite-level stand-ins cover the rest.
/// (Remounting a bind read-only while the store has its files open is refused
/// by the kernel with EBUSY, so "the disk turns read-only under a running
/// daemon" is covered by `PRAGMA query_only` instead.)
final class WriteFailureTests: StoreTestCase {
    func testReadOnlyConnectionGivesIOError() throws {
        let store = try VaultStore(path: storePath())
        try store.putSession(sessionRow(1))
        // query_only makes SQLite refuse writes with SQLITE_READONLY, as a
        // read-only file would.
        try store.onWriter { try $0.execute("PRAGMA query_only = 1") }
        assertThrows({ $0.isIO }) { () throws(StoreError) in try store.putSession(sessionRow(2)) }
        assertThrows({ $0.isIO }) { () throws(StoreError) in _ = try store.recordAttempt(factor: "pin") { _ in 0 } }
        XCTAssertEqual(try store.sessions(), [sessionRow(1)])
    }

    func testFullDatabaseGivesIOErrorAndKeepsOldData() throws {
        let store = try VaultStore(path: storePath())
        try store.putSessions((0..<10).map { sessionRow($0) })
        // Cap the file at its current size: the next big write hits SQLITE_FULL.
        try store.onWriter { db in
            let pages = try db.one("PRAGMA page_count") { $0.int(0) } ?? 0
            try db.execute("PRAGMA max_page_count = \(pages)")
        }
        assertThrows({ $0.isIO }) { () throws(StoreError) in
            try store.putSessions((100..<200).map { sessionRow($0, secretSize: 4096) })
        }
        XCTAssertEqual(try store.sessions(), (0..<10).map { sessionRow($0) })
    }

    func testDiskFullOnRealFilesystem() throws {
        let mountPoint = tmp + "/small"
        XCTAssertEqual(mkdir(mountPoint, 0o700), 0)
        try mountOrSkip(["-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", mountPoint], at: mountPoint)
        let path = mountPoint + "/vault.sqlite"
        let store = try VaultStore(path: path)
        try store.putSessions((0..<10).map { sessionRow($0) })
        var failure: StoreError?
        for batch in 0..<20 {
            do {
                try store.putSessions((0..<50).map { sessionRow(1000 + batch * 50 + $0, secretSize: 2048) })
            } catch {
                failure = error
                break
            }
        }
        guard let failure else { return XCTFail("the tmpfs never filled up") }
        XCTAssertTrue(failure.isIO, "\(failure)")
        // Whatever batches committed are whole; the failed one left nothing.
        let count = try store.sessions().count
        XCTAssertEqual((count - 10) % 50, 0)
        XCTAssertEqual(try store.session(id: sessionRow(3).id), sessionRow(3))
    }

    func testReadOnlyMountIsAClearError() throws {
        let source = tmp + "/src"
        let readOnly = tmp + "/ro"
        XCTAssertEqual(mkdir(source, 0o700), 0)
        XCTAssertEqual(mkdir(readOnly, 0o700), 0)
        let store = try VaultStore(path: source + "/vault.sqlite")
        try store.putSession(sessionRow(1))
        try store.close()

        try mountOrSkip(["--bind", source, readOnly], at: readOnly)
        guard run("/bin/mount", ["-o", "remount,bind,ro", readOnly]) == 0 else {
            throw XCTSkip("cannot remount read-only here")
        }
        // Opening a WAL database on a read-only file system: SQLite cannot
        // create -shm, so the store cannot be used; the error says so.
        assertThrows({ $0.isUnreadable || $0.isIO }) { () throws(StoreError) in
            try VaultStore(path: readOnly + "/vault.sqlite")
        }
        // A new store in a read-only directory.
        assertThrows({ $0.isUnreadable || $0.isIO }) { () throws(StoreError) in
            try VaultStore(path: readOnly + "/new/vault.sqlite")
        }
    }
}

import Foundation
import Keyring
import SodiumKit
import VaultTestSupport
import XCTest

final class FileKeyringTests: XCTestCase {
    private var root = ""

    override func setUpWithError() throws {
        root = try makeTemporaryDirectory()
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: root)
        super.tearDown()
    }

    private func mode(_ path: String) throws -> Int {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw CommandError(description: "lstat \(path) failed") }
        return Int(info.st_mode & 0o7777)
    }

    private func assertUnsafe(_ body: @autoclosure () throws -> some Any, _ note: String = "",
                              file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), note, file: file, line: line) { error in
            guard case KeyringError.unsafeFile? = error as? KeyringError else {
                return XCTFail("expected .unsafeFile, got \(error)", file: file, line: line)
            }
        }
    }

    func testKind() {
        XCTAssertEqual(FileKeyring(path: root + "/key").kind, "file")
    }

    func testCreatesA0600FileInANew0700Directory() throws {
        let dir = root + "/a/b/sessionvault"
        let path = dir + "/device.key"
        let (key, created) = try FileKeyring(path: path).loadOrCreate()

        XCTAssertTrue(created)
        XCTAssertEqual(key.count, 32)
        XCTAssertEqual(try mode(dir), 0o700)
        XCTAssertEqual(try mode(root + "/a"), 0o700)
        XCTAssertEqual(try mode(path), 0o600)
        let onDisk = try XCTUnwrap(FileManager.default.contents(atPath: path))
        XCTAssertEqual(Array(onDisk), key.unsafeCopyToArray())
        // No temporary file is left behind.
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir), ["device.key"])
    }

    func testCreatesWith0600WhateverTheUmask() throws {
        let old = umask(0)
        defer { umask(old) }
        let path = root + "/device.key"
        _ = try FileKeyring(path: path).loadOrCreate()
        XCTAssertEqual(try mode(path), 0o600)
    }

    func testRoundTrip() throws {
        let keyring = FileKeyring(path: root + "/device.key")
        XCTAssertNil(try keyring.load())
        let first = try keyring.loadOrCreate()
        let second = try keyring.loadOrCreate()
        XCTAssertTrue(first.created)
        XCTAssertFalse(second.created)
        XCTAssertTrue(second.key.constantTimeEquals(first.key))
        let loaded = try XCTUnwrap(try keyring.load())
        XCTAssertTrue(loaded.constantTimeEquals(first.key))

        try keyring.delete()
        XCTAssertNil(try keyring.load())
        try keyring.delete()
        let third = try keyring.loadOrCreate()
        XCTAssertTrue(third.created)
        XCTAssertFalse(third.key.constantTimeEquals(first.key))
    }

    func testRefusesASymlink() throws {
        let real = root + "/real.key"
        _ = try FileKeyring(path: real).loadOrCreate()
        let link = root + "/link.key"
        XCTAssertEqual(symlink(real, link), 0)

        assertUnsafe(try FileKeyring(path: link).load())
        assertUnsafe(try FileKeyring(path: link).loadOrCreate(), "must not replace the link with a new key")
        // A dangling link is refused too, rather than followed to create a file elsewhere.
        let dangling = root + "/dangling.key"
        XCTAssertEqual(symlink(root + "/nowhere", dangling), 0)
        assertUnsafe(try FileKeyring(path: dangling).loadOrCreate())
        XCTAssertFalse(FileManager.default.fileExists(atPath: root + "/nowhere"))
    }

    func testRefusesMode0644() throws {
        let path = root + "/device.key"
        let (key, _) = try FileKeyring(path: path).loadOrCreate()
        XCTAssertEqual(chmod(path, 0o644), 0)

        assertUnsafe(try FileKeyring(path: path).load())
        assertUnsafe(try FileKeyring(path: path).loadOrCreate())
        // Untouched, so fixing the mode recovers the same key.
        XCTAssertEqual(chmod(path, 0o600), 0)
        XCTAssertTrue(try XCTUnwrap(try FileKeyring(path: path).load()).constantTimeEquals(key))
    }

    func testRefusesGroupWritable() throws {
        let path = root + "/device.key"
        _ = try FileKeyring(path: path).loadOrCreate()
        XCTAssertEqual(chmod(path, 0o620), 0)
        assertUnsafe(try FileKeyring(path: path).load())
    }

    func testRefusesATruncatedFile() throws {
        let path = root + "/device.key"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(repeating: 9, count: 16),
                                                     attributes: [.posixPermissions: 0o600]))
        for call in [{ _ = try FileKeyring(path: path).load() }, { _ = try FileKeyring(path: path).loadOrCreate() }] {
            XCTAssertThrowsError(try call()) { error in
                guard case KeyringError.failed(let detail)? = error as? KeyringError else {
                    return XCTFail("expected .failed, got \(error)")
                }
                XCTAssertTrue(detail.contains("16 bytes"), detail)
            }
        }
        XCTAssertEqual(FileManager.default.contents(atPath: path)?.count, 16, "the damaged file must be left alone")
    }

    func testRefusesAFIFOWithoutHanging() throws {
        let path = root + "/device.key"
        XCTAssertEqual(mkfifo(path, 0o600), 0)
        assertUnsafe(try FileKeyring(path: path).load())
    }

    func testRefusesAFileOwnedByAnotherUser() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to chown") }
        let path = root + "/device.key"
        _ = try FileKeyring(path: path).loadOrCreate()
        XCTAssertEqual(chown(path, 65534, 65534), 0)
        assertUnsafe(try FileKeyring(path: path).load())
    }

    func testRefusesADirectoryOthersCanWrite() throws {
        let dir = root + "/shared"
        XCTAssertEqual(mkdir(dir, 0o700), 0)
        XCTAssertEqual(chmod(dir, 0o777), 0)
        assertUnsafe(try FileKeyring(path: dir + "/device.key").loadOrCreate())
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/device.key"))
    }

    func testAuditHeadRoundTripsInAPrivateFileBesideTheKey() throws {
        let keyring = FileKeyring(path: root + "/device.key")
        XCTAssertNil(try keyring.loadAuditHead())
        try keyring.saveAuditHead("3 0a0b")
        try keyring.saveAuditHead("4 0c0d")
        XCTAssertEqual(try keyring.loadAuditHead(), "4 0c0d")
        XCTAssertEqual(try mode(root + "/audit.head"), 0o600)
        XCTAssertNil(try keyring.load(), "the head is not the key")
    }
}

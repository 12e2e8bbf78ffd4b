import Foundation
import VaultTestSupport
import XCTest

@testable import VaultStore

#if canImport(Glibc)
import Glibc
#endif

/// A fresh temporary directory per test, removed afterwards (mounts first).
class StoreTestCase: XCTestCase {
    var tmp = ""
    var mounts: [String] = []

    override func setUpWithError() throws {
        tmp = try makeTemporaryDirectory("vaultstore-test")
    }

    override func tearDownWithError() throws {
        for mountPoint in mounts.reversed() {
            _ = run("/bin/umount", [mountPoint])
        }
        try? FileManager.default.removeItem(atPath: tmp)
    }

    func storePath(_ name: String = "vault.sqlite") -> String {
        tmp + "/" + name
    }

    func sessionRow(_ i: Int, secretSize: Int = 64) -> SessionRow {
        SessionRow(
            id: String(format: "s%06d", i),
            tokenHash: String(repeating: String(format: "%02x", i % 256), count: 32),
            sealedMeta: (0..<48).map { UInt8(($0 + i) & 0xff) },
            sealedSecret: (0..<secretSize).map { UInt8(($0 * 7 + i) & 0xff) },
            recordVersion: 1,
            createdAt: 1_700_000_000 + Int64(i),
            updatedAt: 1_700_000_000 + Int64(i))
    }

    func slot(_ id: String, factor: String? = nil, createdAt: Int64 = 1) -> KeyslotRow {
        KeyslotRow(
            id: id, factor: factor ?? id, version: 1, salt: Array(repeating: 0x5a, count: 16),
            kdf: #"{"alg":"argon2id","ops":2,"mem":67108864}"#, binding: #"{"kind":"\#(id)"}"#,
            sealedKey: Array(repeating: 0xab, count: 72), createdAt: createdAt)
    }

    func mode(_ path: String) -> mode_t? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return st.st_mode & 0o7777
    }

    func bytes(_ path: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: path))
    }

    /// Runs a tool; returns its exit status (-1 if it could not start).
    @discardableResult
    func run(_ tool: String, _ arguments: [String]) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            return -1
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Mounts (tests run as root with CAP_SYS_ADMIN here); skips the test when
    /// the machine does not allow it, since chmod alone cannot stop root.
    func mountOrSkip(_ arguments: [String], at mountPoint: String) throws {
        guard run("/bin/mount", arguments) == 0 else {
            throw XCTSkip("cannot mount here (not root or no CAP_SYS_ADMIN): \(arguments)")
        }
        mounts.append(mountPoint)
    }

    /// Writes a database "by hand", bypassing VaultStore.
    func rawWrite(_ path: String, _ sql: String) throws {
        let raw = try SQLiteConnection(path: path)
        try raw.execute(sql)
        try raw.close()
    }

    func assertThrows<T>(
        _ expected: (StoreError) -> Bool, _ body: () throws(StoreError) -> T,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        do {
            _ = try body()
            XCTFail("expected a StoreError, got success", file: file, line: line)
        } catch {
            XCTAssertTrue(expected(error), "unexpected error: \(error)", file: file, line: line)
        }
    }
}

extension StoreError {
    var isIO: Bool { if case .io = self { return true } else { return false } }
    var isUnreadable: Bool { if case .unreadable = self { return true } else { return false } }
    var isUnsafePath: Bool { if case .unsafePath = self { return true } else { return false } }
    var detail: String {
        switch self {
        case .io(let d), .unreadable(let d), .unsafePath(let d): return d
        case .tooNew: return description
        }
    }
}

import AsyncHTTPClient
import Foundation
import NIOCore
import VaultTestSupport
import XCTest

@testable import MemberSync
import NationalID
import SodiumKit
import VaultProtocol
import VaultStore

#if canImport(Glibc)
import Glibc
#endif

/// A synthetic national ID (Skatteetaten's test register marks them with
/// month + 80, so no real person holds one): built from its parts, with the
/// first individual number from `start` whose check digits exist.
func syntheticNumber(day: Int, month: Int, yy: Int, start: Int = 500) -> String {
    let w1 = [3, 7, 6, 1, 8, 9, 4, 5, 2]
    let w2 = [5, 4, 3, 2, 7, 6, 5, 4, 3, 2]
    for individual in start...999 {
        var d = [day / 10, day % 10, (month + 80) / 10, (month + 80) % 10, yy / 10, yy % 10,
                 individual / 100, (individual / 10) % 10, individual % 10]
        let k1 = (11 - zip(w1, d).map { $0 * $1 }.reduce(0, +) % 11) % 11
        guard k1 < 10 else { continue }
        d.append(k1)
        let k2 = (11 - zip(w2, d).map { $0 * $1 }.reduce(0, +) % 11) % 11
        guard k2 < 10 else { continue }
        d.append(k2)
        return d.map(String.init).joined()
    }
    fatalError("no synthetic number for these parts")
}

/// Collects audit events.
final class AuditRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [SyncAuditEvent] = []
    var events: [SyncAuditEvent] { lock.withLock { stored } }
    var sink: MemberSync.AuditSink { { [self] event in self.lock.withLock { self.stored.append(event) } } }
    func outcomes() -> [String] { events.map(\.outcome) }
    func last(_ outcome: String) -> SyncAuditEvent? { events.last { $0.outcome == outcome } }
    /// Every event as text, for scanning.
    var text: String { events.map { "\($0.outcome) \(JSON.object($0.detail).text)" }.joined(separator: "\n") }
}

/// Wraps a registry: fails the next N calls with an error, counts calls.
final class FlakyRegistry: MemberRegistry, @unchecked Sendable {
    let inner: any MemberRegistry
    private let lock = NSLock()
    private var failuresLeft = 0
    private var failure: RegistryError = .unreachable("test outage")
    private(set) var lookups = 0
    private(set) var writes = 0

    init(_ inner: any MemberRegistry) { self.inner = inner }

    func fail(next count: Int, with error: RegistryError = .unreachable("test outage")) {
        lock.withLock {
            failuresLeft = count
            failure = error
        }
    }

    private func take() -> RegistryError? {
        lock.withLock {
            guard failuresLeft > 0 else { return nil }
            failuresLeft -= 1
            return failure
        }
    }

    var calls: Int { lock.withLock { lookups + writes } }

    func lookup(memberKey: MemberKey) async throws(RegistryError) -> MemberRecord? {
        lock.withLock { lookups += 1 }
        if let error = take() { throw error }
        return try await inner.lookup(memberKey: memberKey)
    }

    func setNationalID(memberKey: MemberKey, number: NationalIDNumber, source: String,
                       idempotencyKey: String) async throws(RegistryError) -> SetNationalIDResult {
        lock.withLock { writes += 1 }
        if let error = take() { throw error }
        return try await inner.setNationalID(memberKey: memberKey, number: number, source: source,
                                             idempotencyKey: idempotencyKey)
    }
}

/// A fresh temporary directory per test.
class SyncTestCase: XCTestCase {
    var tmp = ""

    override func setUpWithError() throws {
        tmp = try makeTemporaryDirectory("membersync-test")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: tmp)
    }

    func openStore() throws -> VaultStore {
        try VaultStore(path: tmp + "/vault/store.sqlite")
    }

    /// All bytes of the vault store's files (database and WAL).
    func storeBytes() -> [UInt8] {
        var all: [UInt8] = []
        for suffix in ["", "-wal"] {
            if let data = FileManager.default.contents(atPath: tmp + "/vault/store.sqlite" + suffix) {
                all += Array(data)
            }
        }
        return all
    }

    func assertNotInClear(_ number: String, in text: String, _ what: String, file: StaticString = #filePath,
                          line: UInt = #line) {
        // Don't put the number in the failure message either.
        XCTAssertFalse(text.contains(number), "the number appears in clear in \(what)", file: file, line: line)
    }

    func assertNotInClear(_ number: String, in bytes: [UInt8], _ what: String, file: StaticString = #filePath,
                          line: UInt = #line) {
        let needle = Array(number.utf8)
        var found = false
        if bytes.count >= needle.count {
            for i in 0...(bytes.count - needle.count) where bytes[i] == needle[0] {
                if Array(bytes[i..<i + needle.count]) == needle {
                    found = true
                    break
                }
            }
        }
        XCTAssertFalse(found, "the number appears in clear in \(what)", file: file, line: line)
    }
}

/// The fake registry server (Fixtures/fake_registry.py) on 127.0.0.1.
final class FakeRegistryServer {
    let statePath: String
    private var process: Process?
    private(set) var port = 0

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/fake_registry.py").path

    init(statePath: String) { self.statePath = statePath }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Starts on `port` (0: any free port; the same port again for a restart).
    func start(port wanted: Int? = nil) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", Self.script, "--port", String(wanted ?? 0), "--state", statePath,
                       "--max-seconds", "300"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.standardError
        try p.run()
        process = p
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("PORT "), let n = Int(text.dropFirst(5).prefix { $0.isNumber }) else {
            stop()
            throw NSError(domain: "FakeRegistryServer", code: 1,
                          userInfo: [NSLocalizedDescriptionKey: "fake registry did not start: \(text)"])
        }
        port = n
    }

    /// SIGTERM by pid, then waits (bounded) until it is gone, SIGKILL after
    /// 5 s. Never an unbounded `waitUntilExit`: a child started from a thread
    /// that blocks signals inherits the mask (the script unblocks SIGTERM).
    func stop() {
        guard let p = process else { return }
        process = nil
        let pid = p.processIdentifier
        guard pid > 0 else { return }
        kill(pid, SIGTERM)
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            // Gone, or a zombie waiting for Foundation to reap it: either way it no longer listens.
            if kill(pid, 0) != 0 || Self.isZombie(pid) { return }
            usleep(20_000)
        }
        kill(pid, SIGKILL)
    }

    private static func isZombie(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    deinit { stop() }

    @discardableResult
    func control(_ body: JSON) async throws -> JSON {
        var request = HTTPClientRequest(url: baseURL + "/_control")
        request.method = .POST
        request.body = .bytes(ByteBuffer(bytes: body.serialized()))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return try JSON.parse(Array(bytes.readableBytesView))
    }

    func state() async throws -> JSON {
        let request = HTTPClientRequest(url: baseURL + "/_control/state")
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return try JSON.parse(Array(bytes.readableBytesView))
    }

    func writeCount() async throws -> Int {
        try await state()["writes"]?.arrayValue?.count ?? -1
    }

    /// A member for `seed`.
    static func member(logins: [(String, String)], nationalID: String?, orgs: [Organization]) -> JSON {
        [
            "logins": .array(logins.map { [.string($0.0), .string($0.1)] }),
            "national_id": nationalID.map { .string($0) } ?? .null,
            "organizations": .array(orgs.map {
                ["id": .string($0.id), "name": .string($0.name), "roles": .array($0.roles.map { .string($0) })]
            }),
        ]
    }
}

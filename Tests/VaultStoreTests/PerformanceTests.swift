import Foundation
import XCTest

@testable import VaultStore

/// Timings are printed, not asserted: a loaded CI machine must not fail the suite.
final class PerformanceTests: StoreTestCase {
    func testSessionsAtTenThousandRows() throws {
        // Roughly real sizes: sealed claims ~ 300 B, sealed tokens (JWT access
        // token + refresh token) ~ 2 KB.
        try measureSessions(metaSize: 300, secretSize: 2048)
    }

    func testSessionsAtTenThousandSmallRows() throws {
        try measureSessions(metaSize: 100, secretSize: 200)
    }

    private func measureSessions(metaSize: Int, secretSize: Int) throws {
        let path = storePath()
        let meta = [UInt8](repeating: 0x11, count: metaSize)
        let secret = [UInt8](repeating: 0x22, count: secretSize)
        var rows: [SessionRow] = []
        rows.reserveCapacity(10_000)
        for i in 0..<10_000 {
            var row = SessionRow(
                id: "session-\(100_000 + i)", tokenHash: String(repeating: "ab", count: 32),
                sealedMeta: meta, sealedSecret: secret, recordVersion: 1,
                createdAt: 1_700_000_000 + Int64(i), updatedAt: 1_700_000_000 + Int64(i))
            row.sealedSecret[0] = UInt8(i & 0xff)
            rows.append(row)
        }
        let clock = ContinuousClock()
        let insert: Duration
        do {
            let store = try VaultStore(path: path)
            insert = try clock.measure { () throws(StoreError) in try store.putSessions(rows) }
            try store.close()
        }

        // As at daemon start: a fresh store, an empty SQLite cache.
        let store = try VaultStore(path: path)
        var loaded: [SessionRow] = []
        let first = try clock.measure { () throws(StoreError) in loaded = try store.sessions() }
        XCTAssertEqual(loaded, rows)
        var best = first
        for _ in 0..<4 {
            best = min(best, try clock.measure { () throws(StoreError) in loaded = try store.sessions() })
        }
        // A single durable write (fsync'd commit) for scale.
        let put = try clock.measure { () throws(StoreError) in try store.putSession(rows[0]) }
        print("VaultStore perf (10,000 sessions, \(metaSize) + \(secretSize) B sealed): putSessions \(insert), sessions() first after open \(first), best of 5 \(best); one putSession \(put)")
    }
}

extension ContinuousClock {
    func measure(_ body: () throws(StoreError) -> Void) throws(StoreError) -> Duration {
        let start = now
        try body()
        return now - start
    }
}

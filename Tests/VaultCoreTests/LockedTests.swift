import Locking
import XCTest

/// `Locked` is the lock behind the session table and the server's connection
/// state. Under ThreadSanitizer (scripts/sanitize runs VaultCoreTests) this
/// test is the regression for the false reports of the standard library's
/// futex `Mutex`: eight threads contend for one lock and write the same
/// fields; TSan must see every hand-over, and no update may be lost.
final class LockedTests: XCTestCase {
    func testContendedUpdatesAreNeitherLostNorReportedAsRaces() {
        let threads = 8, rounds = 2_000
        let state = Locked((count: 0, lastWriter: -1, seen: Set<Int>()))
        DispatchQueue.concurrentPerform(iterations: threads) { writer in
            for _ in 0..<rounds {
                state.withLock { s in
                    s.count += 1
                    s.lastWriter = writer
                    s.seen.insert(writer)
                }
            }
        }
        let (count, lastWriter, seen) = state.withLock { ($0.count, $0.lastWriter, $0.seen) }
        XCTAssertEqual(count, threads * rounds)
        XCTAssertEqual(seen, Set(0..<threads))
        XCTAssertTrue((0..<threads).contains(lastWriter))
    }

    func testAThrownErrorReleasesTheLock() {
        struct Refused: Error {}
        let state = Locked(0)
        XCTAssertThrowsError(try state.withLock { (_: inout Int) throws(Refused) in throw Refused() })
        // Taking the lock again would hang if the throw had left it held.
        XCTAssertEqual(state.withLock { v -> Int in v += 1; return v }, 1)
    }
}

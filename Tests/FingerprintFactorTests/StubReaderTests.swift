import Foundation
import XCTest
@testable import FingerprintFactor
import VaultFactor

final class StubReaderTests: TempDirTestCase {
    func testNoStateFileMeansNoReader() async throws {
        let r = reader()
        XCTAssertNil(try r.load())
        let presence = await r.presence()
        XCTAssertEqual(presence, .absent)
        do {
            _ = try await r.enrolledFingers()
            XCTFail("expected .absent")
        } catch {
            XCTAssertEqual(error, .absent)
        }
        let outcome = await r.scan(timeout: .seconds(2))
        XCTAssertEqual(outcome, .disconnected)
    }

    func testStateRoundTripsBetweenTwoInstances() async throws {
        let a = reader(), b = reader()
        try a.plug()
        let finger = try a.enrollFinger("right-index-finger")
        let seen = try await b.enrolledFingers()
        XCTAssertEqual(seen, [finger])
        let presence = await b.presence()
        XCTAssertEqual(presence, .present)

        try b.enqueue(ScriptedScan(.match, finger: "right-index-finger"))
        XCTAssertEqual(try a.load()?.queue, [ScriptedScan(.match, finger: "right-index-finger")])
        let outcome = await a.scan(timeout: .seconds(2))
        XCTAssertEqual(outcome, .match(finger: "right-index-finger"))
        XCTAssertEqual(try b.load()?.queue, [], "the scan took the head of the queue for everyone")

        try b.unplug()
        let afterUnplug = await a.presence()
        XCTAssertEqual(afterUnplug, .absent)
        try a.plug()
        let fingers = try await b.enrolledFingers()
        XCTAssertEqual(fingers, [finger], "unplugging keeps the fingers")
    }

    func testScansComeOutInQueueOrder() async throws {
        let r = try pluggedReader(fingers: ["left-thumb", "right-index-finger"])
        try queue(ScriptedScan(.noMatch), ScriptedScan(.retry), ScriptedScan(.match, finger: "right-index-finger"),
                  ScriptedScan(.match), ScriptedScan(.error), ScriptedScan(.disconnect), ScriptedScan(.timeout),
                  ScriptedScan(.cancel))
        var outcomes: [ScanOutcome] = []
        for _ in 0..<8 { outcomes.append(await r.scan(timeout: .seconds(2))) }
        XCTAssertEqual(outcomes, [.noMatch, .retry, .match(finger: "right-index-finger"), .match(finger: "left-thumb"),
                                  .hardwareError, .disconnected, .timeout, .cancelled])
        XCTAssertEqual(try r.load()?.queue, [])
    }

    func testMatchOfAFingerThatIsNotEnrolledIsNoMatch() async throws {
        let r = try pluggedReader(fingers: ["right-index-finger"])
        try queue(ScriptedScan(.match, finger: "left-thumb"))
        let outcome = await r.scan(timeout: .seconds(2))
        XCTAssertEqual(outcome, .noMatch)

        try r.removeFinger("right-index-finger")
        try queue(ScriptedScan(.match))
        let none = await r.scan(timeout: .seconds(2))
        XCTAssertEqual(none, .noMatch, "nothing enrolled: nothing matches")
    }

    func testEmptyQueueTimesOut() async throws {
        let r = try pluggedReader()
        let start = ContinuousClock.now
        let outcome = await r.scan(timeout: .milliseconds(150))
        let elapsed = seconds(since: start)
        print("empty queue: timeout after \(elapsed) s")
        XCTAssertEqual(outcome, .timeout)
        XCTAssertGreaterThanOrEqual(elapsed, 0.14)
        XCTAssertLessThan(elapsed, 1.0)
    }

    func testWaitingScanPicksUpAnOutcomeQueuedLater() async throws {
        let r = try pluggedReader()
        let scan = Task { await r.scan(timeout: .seconds(5)) }
        try await Task.sleep(for: .milliseconds(100))
        try reader().enqueue(ScriptedScan(.match))
        let outcome = await scan.value
        XCTAssertEqual(outcome, .match(finger: "right-index-finger"))
    }

    func testUnplugDuringAWaitingScanDisconnectsQuickly() async throws {
        let r = try pluggedReader()
        let scan = Task { () -> (ScanOutcome, ContinuousClock.Instant) in
            let outcome = await r.scan(timeout: .seconds(10))
            return (outcome, ContinuousClock.now)
        }
        try await Task.sleep(for: .milliseconds(150))
        try reader().unplug()
        let unplugged = ContinuousClock.now
        let (outcome, ended) = await scan.value
        let lag = Double((ended - unplugged).components.attoseconds) / 1e18 + Double((ended - unplugged).components.seconds)
        print("unplug → disconnected after \(lag * 1000) ms")
        XCTAssertEqual(outcome, .disconnected)
        XCTAssertLessThan(lag, 1.0)
    }

    func testResetDuringAWaitingScanDisconnects() async throws {
        let r = try pluggedReader()
        let scan = Task { await r.scan(timeout: .seconds(10)) }
        try await Task.sleep(for: .milliseconds(100))
        try reader().reset()
        let outcome = await scan.value
        XCTAssertEqual(outcome, .disconnected)
        XCTAssertFalse(FileManager.default.fileExists(atPath: statePath))
    }

    func testCancellingTheTaskEndsTheScan() async throws {
        let r = try pluggedReader()
        let scan = Task { await r.scan(timeout: .seconds(10)) }
        try await Task.sleep(for: .milliseconds(60))
        scan.cancel()
        let outcome = await scan.value
        XCTAssertEqual(outcome, .cancelled)
    }

    func testWritesAreAtomicPrivateAndLeaveNoTemporaryFiles() async throws {
        let r = try pluggedReader(fingers: ["a", "b"])
        try r.enqueue(ScriptedScan(.retry))
        try r.clearQueue()
        try r.removeFinger("a")
        let attributes = try FileManager.default.attributesOfItem(atPath: statePath)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        XCTAssertEqual(names, ["fpstub.json", "fpstub.json.lock"])
    }

    func testConcurrentChangesAreSerialized() async throws {
        try pluggedReader()
        let path = statePath
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<24 {
                group.addTask {
                    // A fresh instance per change: its own lock descriptor, as another process would have.
                    let r = StubReader(path: path)
                    if i % 2 == 0 {
                        try? r.enqueue(ScriptedScan(.noMatch))
                    } else {
                        _ = try? r.enrollFinger("finger-\(i)")
                    }
                }
            }
        }
        let state = try XCTUnwrap(try reader().load())
        XCTAssertEqual(state.queue.count, 12, "no change was lost")
        XCTAssertEqual(state.fingers.count, 13)
    }

    func testUnreadableStateIsABrokenReader() async throws {
        try Data("{not json".utf8).write(to: URL(fileURLWithPath: statePath))
        let r = reader()
        let presence = await r.presence()
        XCTAssertEqual(presence, .present)
        do {
            _ = try await r.enrolledFingers()
            XCTFail("expected a failure")
        } catch {
            guard case .failed = error else { return XCTFail("\(error)") }
        }
        let outcome = await r.scan(timeout: .seconds(1))
        XCTAssertEqual(outcome, .hardwareError)
        XCTAssertThrowsError(try r.enrollFinger("x")) { error in
            XCTAssertEqual(error as? StubError, .corrupt(path: statePath))
        }
        try r.reset()
        XCTAssertNil(try r.load())
    }

    func testControlErrors() throws {
        let r = reader()
        XCTAssertThrowsError(try r.enrollFinger("right-index-finger")) { XCTAssertEqual($0 as? StubError, .noReader(path: statePath)) }
        XCTAssertThrowsError(try r.enqueue(ScriptedScan(.match))) { XCTAssertEqual($0 as? StubError, .noReader(path: statePath)) }
        try r.plug()
        XCTAssertThrowsError(try r.removeFinger("left-thumb")) {
            XCTAssertEqual($0 as? StubError, .unknownFinger("left-thumb", enrolled: []))
        }
        for bad in ["", "has space", "slash/y", String(repeating: "x", count: 65)] {
            XCTAssertThrowsError(try r.enrollFinger(bad)) { XCTAssertEqual($0 as? StubError, .badFingerName(bad)) }
        }
        // Unplug and clear without a state are harmless.
        try r.reset()
        XCTAssertNoThrow(try r.unplug())
        XCTAssertNoThrow(try r.clearQueue())
        XCTAssertNil(try r.load())
    }

    func testPathIsTheOneGiven() {
        // The default (DATA_DIR/fpstub.json) is DaemonConfig's: see FPStubToolTests.
        XCTAssertEqual(StubReader(path: "/given").path, "/given")
    }

    func testPlugCreatesTheDirectory() throws {
        let nested = dir.appendingPathComponent("a/b/fpstub.json").path
        let r = StubReader(path: nested)
        try r.plug()
        XCTAssertEqual(try r.load(), StubState(present: true))
    }
}

final class EnrollmentDigestTests: TempDirTestCase {
    func testDigestChangesWithEveryEnrollmentChangeAndOnlyThen() async throws {
        let r = try pluggedReader(fingers: ["right-index-finger"])
        let d0 = try currentDigest()

        // Not enrollment changes: plug state, queue, clear.
        try r.unplug()
        try r.plug()
        try r.enqueue(ScriptedScan(.noMatch))
        try r.clearQueue()
        XCTAssertEqual(try currentDigest(), d0)

        try r.enrollFinger("left-thumb")
        let d1 = try currentDigest()
        XCTAssertNotEqual(d1, d0, "adding a finger changes it")

        try r.removeFinger("left-thumb")
        let d2 = try currentDigest()
        XCTAssertEqual(d2, d0, "same fingers, same templates: same digest")

        try r.removeFinger("right-index-finger")
        let d3 = try currentDigest()
        XCTAssertNotEqual(d3, d0, "removing a finger changes it")

        try r.enrollFinger("right-index-finger")
        let d4 = try currentDigest()
        XCTAssertNotEqual(d4, d0, "deleting and re-adding the same finger is a change")

        try r.enrollFinger("right-index-finger")
        XCTAssertNotEqual(try currentDigest(), d4, "enrolling the same finger again is a change")
        XCTAssertEqual(d0.count, 32)
    }

    func testDigestIgnoresOrderAndSeparatesFields() {
        let a = EnrolledFinger(name: "a", templateID: "1"), b = EnrolledFinger(name: "b", templateID: "2")
        XCTAssertEqual(FingerprintFactor.enrollmentDigest([a, b]), FingerprintFactor.enrollmentDigest([b, a]))
        XCTAssertNotEqual(FingerprintFactor.enrollmentDigest([EnrolledFinger(name: "ab", templateID: "c")]),
                          FingerprintFactor.enrollmentDigest([EnrolledFinger(name: "a", templateID: "bc")]))
        XCTAssertNotEqual(FingerprintFactor.enrollmentDigest([]), FingerprintFactor.enrollmentDigest([a]))
    }
}

import Foundation
import Locking
import XCTest
@testable import FingerprintFactor
import VaultFactor
import VaultTestSupport

/// A fresh directory per test, removed afterwards.
class TempDirTestCase: XCTestCase {
    var dir: URL!
    var statePath: String { dir.appendingPathComponent("fpstub.json").path }

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("fpstub-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        if let dir { try? FileManager.default.removeItem(at: dir) }
    }

    /// A reader on this test's state file: each call is a separate instance, as
    /// separate processes would have.
    func reader() -> StubReader { StubReader(path: statePath) }

    /// A plugged-in reader with the given fingers enrolled.
    @discardableResult
    func pluggedReader(fingers: [String] = ["right-index-finger"]) throws -> StubReader {
        let r = reader()
        try r.plug()
        for f in fingers { try r.enrollFinger(f) }
        return r
    }

    func queue(_ scans: ScriptedScan...) throws {
        for s in scans { try reader().enqueue(s) }
    }

    func currentDigest() throws -> [UInt8] {
        FingerprintFactor.enrollmentDigest(try XCTUnwrap(try reader().load()).enrolledFingers)
    }

    func factor(timeout: Duration = .seconds(5), attempts: Int = 3) -> FingerprintFactor {
        FingerprintFactor(reader: reader(), scanTimeout: timeout, attempts: attempts)
    }

    let slot = EnrolledSlot(factor: .fingerprint, binding: [:])
}

/// Seconds since `start`.
func seconds(since start: ContinuousClock.Instant) -> Double {
    let d = ContinuousClock.now - start
    return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}

/// Runs `body` and returns its FactorError (nil if it did not throw).
func factorError<T>(_ body: () async throws(FactorError) -> T) async -> FactorError? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error
    }
}

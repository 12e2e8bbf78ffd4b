import Foundation
import VaultProtocol
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The release lane (VaultServer/ReleaseLane.swift) against a real vaultd: it
/// answers plain releases on connections that have asked for nothing else, and
/// hands every other connection to the NIO server without losing or
/// re-answering a byte. Speed is vault-bench's business, not these tests'.
final class ReleaseLaneTests: VaultdTestCase {
    static let token = "lane-access-token-51d0c2"

    func startWithSession(config: String = VaultdProcess.fastPINConfig) throws -> VaultdProcess {
        let v = try startVaultd(config: config)
        _ = try importSession(v, account: "lane", accessToken: Self.token, refreshToken: "lane-refresh-token-9a1f")
        return v
    }

    func testOneRequestPerConnectionIsReleasedAndAudited() throws {
        let v = try startWithSession()
        for n in 0..<50 {
            let c = try v.raw()
            let r = try c.call("session", ["account": "lane"], id: .int(Int64(n)), timeout: 10)
            XCTAssertEqual(r["id"], .int(Int64(n)), r.text)
            XCTAssertEqual(r.result?["access_token"]?.stringValue, Self.token, r.text)
            c.close()
        }
        // Releases to one process are audited once a minute, with its executable.
        var release: JSON?
        _ = try waitUntil(timeout: 10) {
            release = try auditEntries(v).first { $0["event"] == "release" }
            return release != nil
        }
        let audited = try XCTUnwrap(release, "no release in the audit log")
        XCTAssertEqual(audited["pid"]?.intValue, Int64(getpid()), audited.text)
        XCTAssertNotNil(audited["exe"]?.stringValue, audited.text)
    }

    func testAConnectionMovesToTheFullServerAtItsFirstOtherRequest() throws {
        let v = try startWithSession()
        let c = try v.raw()
        XCTAssertEqual(try c.call("session", ["account": "lane"]).result?["access_token"]?.stringValue, Self.token)
        XCTAssertEqual(try c.call("session").result?["access_token"]?.stringValue, Self.token)
        // `hello` leaves the lane; its language holds for what follows.
        XCTAssertTrue(try c.hello(lang: "nb").isOK)
        let missing = try c.call("session", ["account": "nobody"])
        XCTAssertEqual(missing.errorCode, "no_session", missing.text)
        XCTAssertTrue(missing.errorMessage?.contains("logget inn") ?? false, missing.text)
        XCTAssertEqual(try c.call("session", ["account": "lane"]).result?["access_token"]?.stringValue, Self.token)
    }

    func testPipelinedAndSplitRequestsAreAllAnswered() throws {
        let v = try startWithSession()
        // Several frames in the first read: the lane serves none of them itself.
        let batch = try v.raw()
        var bytes: [UInt8] = []
        for n in 0..<20 {
            bytes += Request(id: .int(Int64(n)), op: n % 2 == 0 ? "session" : "status").encoded()
        }
        XCTAssertTrue(batch.send(bytes))
        // Requests in flight together may be answered in any order (PROTOCOL.md).
        var answered = Set<Int64>()
        for _ in 0..<20 {
            let r = try batch.readJSON(timeout: 10)
            XCTAssertTrue(r.isOK, r.text)
            if let id = r["id"]?.intValue { answered.insert(id) }
        }
        XCTAssertEqual(answered, Set(0..<20))
        // A line in two writes, after a request the lane answered.
        let split = try v.raw()
        XCTAssertTrue(try split.call("session").isOK)
        let line = Request(id: "split", op: "session", fields: ["account": "lane"]).encoded()
        XCTAssertTrue(split.send(Array(line.prefix(10))))
        usleep(100_000)
        XCTAssertTrue(split.send(Array(line.dropFirst(10))))
        let r = try split.readJSON(timeout: 10)
        XCTAssertEqual(r["id"], "split", r.text)
        XCTAssertEqual(r.result?["access_token"]?.stringValue, Self.token, r.text)
    }

    func testWhatTheLaneCannotAnswerGetsTheFullServersAnswer() throws {
        let v = try startWithSession()
        let cases: [(line: String, code: String?)] = [
            ("not json\n", "bad_request"),
            ("{\"id\":1,\"op\":\"session\",\"account\":7}\n", "bad_request"),
            ("{\"id\":1,\"op\":\"session\",\"min_valid\":-1}\n", "bad_request"),
            ("{\"id\":1,\"op\":\"session\",\"account\":\"nobody\"}\n", "no_session"),
            ("\n", "bad_request"),
            ("{\"id\":1,\"op\":\"status\"}\r\n", nil),
        ]
        for (line, code) in cases {
            let c = try v.raw()
            XCTAssertTrue(c.send(line))
            let r = try c.readJSON(timeout: 10)
            XCTAssertEqual(r.errorCode, code, "\(line): \(r.text)")
        }
        // Locked: the lane has no key to release with; the full server says which factors to try.
        enrollPIN(v)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let locked = try v.raw().call("session", ["account": "lane"])
        XCTAssertEqual(locked.errorCode, "locked", locked.text)
    }

    func testAnIdleLaneConnectionIsClosedAndLeavesNoDescriptor() throws {
        let v = try startWithSession(config: "connection_idle_timeout = 1\n" + VaultdProcess.fastPINConfig)
        let baseline = try v.openDescriptors()
        let c = try v.raw()
        XCTAssertTrue(try c.call("session").isOK)
        var extra: [[UInt8]] = []
        XCTAssertTrue(c.waitForClose(timeout: 4, extra: &extra), "an idle connection in the lane was not closed")
        XCTAssertEqual(extra.count, 0)
        // Connections that go away by themselves are closed too.
        for _ in 0..<20 {
            let d = try v.raw()
            XCTAssertTrue(try d.call("session").isOK)
            d.close()
        }
        let backToBaseline = try waitUntil(timeout: 5) { try v.openDescriptors() <= baseline }
        let after = try v.openDescriptors()
        XCTAssertTrue(backToBaseline, "vaultd holds \(after) descriptors, \(baseline) before")
    }

    func testLaneConnectionsCountTowardTheConnectionCap() throws {
        let v = try startWithSession(config: "max_connections = 3\n" + VaultdProcess.fastPINConfig)
        var open: [RawClient] = []
        for _ in 0..<3 {
            let c = try v.raw()
            XCTAssertTrue(try c.call("session").isOK)
            open.append(c)
        }
        let over = try v.raw()
        XCTAssertTrue(over.send(Request(id: 1, op: "session")))
        let r = try over.readJSON(timeout: 5)
        XCTAssertEqual(r.errorCode, "rate_limited", r.text)
        open.removeLast().close()
        let again = waitUntil(timeout: 5) { (try? v.raw().call("session", timeout: 2))?.isOK ?? false }
        XCTAssertTrue(again, "a slot freed in the lane was not given to a new connection")
    }

    func testShutdownClosesLaneConnections() throws {
        let v = try startWithSession()
        let c = try v.raw()
        XCTAssertTrue(try c.call("session").isOK)
        let outcome = try XCTUnwrap(v.stop())
        XCTAssertFalse(outcome.timedOut, "vaultd did not stop within 10 s of SIGTERM")
        XCTAssertEqual(outcome.exit, 0)
        var extra: [[UInt8]] = []
        XCTAssertTrue(c.waitForClose(timeout: 5, extra: &extra), "a lane connection outlived vaultd's shutdown")
    }
}

import Foundation
import Locking
import Synchronization
import VaultProtocol
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Load and abuse against a real vaultd: many clients with mixed and bad
/// requests, idle and dribbling connections, the connection cap and the idle
/// timeout. Nothing here measures speed (vault-bench does); these check that
/// every request gets its right answer and that nothing leaks.
final class LoadTests: VaultdTestCase {
    static let token = "load-access-token-7c1e0b9a"

    /// Waits for a moment in which no client connection is open, and returns
    /// the descriptor count then.
    func settledDescriptors(_ v: VaultdProcess) throws -> Int {
        var last = try v.openDescriptors()
        _ = try waitUntil(timeout: 5, interval: 0.2) {
            let now = try v.openDescriptors()
            defer { last = now }
            return now == last
        }
        return last
    }

    func testTwoHundredClientsWithMixedAndBadRequestsAllGetTheirAnswers() throws {
        let v = try startVaultd()
        try importSession(v, account: "load", accessToken: Self.token, refreshToken: "load-refresh-0d1f")
        let baseline = try settledDescriptors(v)

        // 200 at once, each with 100 requests: every client's requests overlap
        // all the others' (CI runs this under ASan, where 500 each took 151 s).
        let clients = 200, requestsEach = 100
        let unexpected = Locked<[String]>([])
        let answered = Atomic<Int>(0)
        let socket = v.socketPath
        // One thread per client, all released at once (concurrentPerform would
        // run only as many at a time as there are cores).
        let group = DispatchGroup()
        let go = DispatchSemaphore(value: 0)
        for n in 0..<clients {
            group.enter()
            Thread {
                defer { group.leave() }
                go.wait()
                Self.loadClient(n, socket: socket, requests: requestsEach, unexpected: unexpected, answered: answered)
            }.start()
        }
        for _ in 0..<clients { go.signal() }
        XCTAssertEqual(group.wait(timeout: .now() + 600), .success, "the clients did not finish")
        XCTAssertEqual(unexpected.withLock { $0 }, [])
        XCTAssertEqual(answered.load(ordering: .relaxed), clients * requestsEach)
        XCTAssertTrue(v.isRunning, "vaultd died under load")

        // Every connection is gone again: vaultd holds what it held before.
        let backToBaseline = try waitUntil(timeout: 10, interval: 0.2) { try v.openDescriptors() <= baseline }
        let after = try v.openDescriptors()
        XCTAssertTrue(backToBaseline, "vaultd holds \(after) descriptors, \(baseline) before the load")
        let c = try v.raw()
        XCTAssertEqual(try c.call("session", ["account": "load"]).result?["access_token"]?.stringValue, Self.token)
        assertNoCrashOutput(v.log)
    }

    /// One load client on its own connection: 7 in 10 releases, 2 status, 1
    /// malformed frame of a rotating kind; anything else than the right answer is noted.
    static func loadClient(_ n: Int, socket: String, requests: Int, unexpected: Locked<[String]>, answered: borrowing Atomic<Int>) {
        func fail(_ what: String) { unexpected.withLock { if $0.count < 20 { $0.append("client \(n): \(what)") } } }
        let c: RawClient
        do { c = try RawClient(path: socket) } catch { return fail("connect: \(error)") }
        defer { c.close() }
        for i in 0..<requests {
            do {
                switch (n + i) % 10 {
                case 0...6:
                    let r = try c.call("session", ["account": "load"])
                    if r.result?["access_token"]?.stringValue != token { fail("session: \(r.text)") }
                case 7, 8:
                    let r = try c.call("status")
                    if !r.isOK { fail("status: \(r.text)") }
                default:
                    let bad = ["{not json\n", "[1,2,3]\n", "{\"id\":\(i)}\n", "{\"id\":\(i),\"op\":\"no_such_op\"}\n", "\u{1}\u{2}\n"][i % 5]
                    guard c.send(bad) else { return fail("send failed") }
                    let r = try c.readJSON()
                    if r["error"]?["code"]?.stringValue != "bad_request" { fail("bad frame \(bad.debugDescription): \(r.text)") }
                }
                answered.add(1, ordering: .relaxed)
            } catch {
                return fail("request \(i): \(error)")
            }
        }
    }

    func testIdleAndDribblingConnectionsDoNotStopOtherClients() throws {
        let v = try startVaultd()
        try importSession(v, account: "load", accessToken: Self.token, refreshToken: nil)
        let baseline = try settledDescriptors(v)

        var idle: [RawClient] = []
        var dribblers: [RawClient] = []
        for _ in 0..<100 { idle.append(try v.raw()) }
        for _ in 0..<100 { dribblers.append(try v.raw()) }
        // The dribblers send a request one byte at a time, never finishing the line.
        let stop = Atomic<Bool>(false)
        let partial = Array(#"{"id":1,"op":"session","account":"load","padding":""#.utf8)
        let fds = dribblers.map(\.fd)
        let dribbling = Thread {
            var i = 0
            while !stop.load(ordering: .relaxed) {
                var byte = partial[i % partial.count]
                for fd in fds { _ = Glibc.send(fd, &byte, 1, Int32(MSG_NOSIGNAL)) }
                i += 1
                usleep(5_000)
            }
        }
        dribbling.start()
        defer { stop.store(true, ordering: .relaxed) }

        let c = try v.raw()
        // 500 requests, each answered within 5 s while 100 connections dribble a
        // byte every 5 ms (a few seconds of dribbling in a debug build, about
        // 25 s under ASan).
        for _ in 0..<500 {
            let r = try c.call("session", ["account": "load"], timeout: 5)
            XCTAssertEqual(r.result?["access_token"]?.stringValue, Self.token)
        }
        stop.store(true, ordering: .relaxed)
        // The idle ones are still served once they speak (the idle timeout is 5 minutes by default).
        for client in idle.prefix(10) {
            XCTAssertTrue(try client.call("status", timeout: 5).isOK)
        }
        for client in idle + dribblers { client.close() }
        c.close()
        let backToBaseline = try waitUntil(timeout: 10, interval: 0.2) { try v.openDescriptors() <= baseline }
        let after = try v.openDescriptors()
        XCTAssertTrue(backToBaseline, "vaultd holds \(after) descriptors, \(baseline) before")
    }

    // The idle timeout itself (closed at the timeout and not before, a complete
    // line restarts it, a dribbled one does not, nothing written to a closed
    // connection) is tested on EmbeddedChannel with the loop's clock moved by
    // hand: VaultServerTests/ConnectionHandlerTests.

    func testARequestWaitingAtAPromptKeepsItsConnectionPastTheIdleTimeout() throws {
        let v = try startVaultd(config: "connection_idle_timeout = 1\n" + VaultdProcess.fastPINConfig)
        enrollPIN(v)
        let c = try v.raw()
        try c.hello(interactive: true)
        XCTAssertTrue(try c.call("lock").isOK)
        // The person takes 2.5 s to type the PIN: longer than the idle timeout.
        let r = try c.call("unlock", ["factor": "pin"], timeout: 30) { prompt in
            guard prompt.kind == .secret else { return .none }
            usleep(2_500_000)
            return .value(.string(VaultdTestCase.pin))
        }
        XCTAssertTrue(r.isOK, "unlock failed: \(r.text)")
        XCTAssertEqual(r.result?["locked"], .bool(false))
    }

    func testConnectionsOverTheCapGetASentenceAndAreClosed() throws {
        let v = try startVaultd(config: "max_connections = 4\n" + VaultdProcess.fastPINConfig)
        var open: [RawClient] = []
        for _ in 0..<4 {
            let c = try v.raw()
            XCTAssertTrue(try c.call("status").isOK)
            open.append(c)
        }
        for _ in 0..<2 {
            let over = try v.raw()
            let r = try over.readJSON(timeout: 5)
            XCTAssertEqual(r["ok"], .bool(false))
            XCTAssertEqual(r["error"]?["code"]?.stringValue, "rate_limited")
            XCTAssertEqual(r["error"]?["retry_after"], .int(1))
            XCTAssertTrue(r["error"]?["message"]?.stringValue?.contains("4 connections open") ?? false, r.text)
            var extra: [[UInt8]] = []
            XCTAssertTrue(over.waitForClose(timeout: 5, extra: &extra))
        }
        // The ones inside the cap are untouched, and a freed slot is usable again.
        for c in open { XCTAssertTrue(try c.call("status").isOK) }
        open.removeLast().close()
        let again = try waitUntil(timeout: 5, interval: 0.1) {
            let c = try v.raw()
            return (try? c.call("status", timeout: 2))?.isOK ?? false
        }
        XCTAssertTrue(again, "a freed slot was not given to a new connection")
    }

    func testNonsenseConnectionLimitsAreRefusedWithTheirSentence() throws {
        for line in ["max_connections = 0\n", "connection_idle_timeout = -5\n"] {
            let v = try makeVaultd(config: line + VaultdProcess.fastPINConfig)
            let out = try v.runToExit()
            XCTAssertEqual(out.exit, 2, "\(line): \(out.err)")
            XCTAssertTrue(out.err.contains(line.split(separator: " ")[0]), "\(line): \(out.err)")
        }
    }
}

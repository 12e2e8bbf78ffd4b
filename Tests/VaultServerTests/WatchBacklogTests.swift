import Locking
import VaultCore
import VaultProtocol
import XCTest
@testable import VaultServer

/// A link whose writes complete only when the test says so: a client that
/// does not read, as vaultd sees it.
final class StalledLink: ClientLink {
    let lines = Locked<[[UInt8]]>([])
    let unwritten = Locked<[@Sendable () -> Void]>([])
    func send(_ line: [UInt8]) { lines.withLock { $0.append(line) } }
    func sendAndClose(_ line: [UInt8]) { send(line) }
    func send(_ line: [UInt8], whenWritten: @escaping @Sendable () -> Void) {
        send(line)
        unwritten.withLock { $0.append(whenWritten) }
    }
    /// The client reads everything: every pending write completes.
    func drain() {
        for done in unwritten.withLock({ w in defer { w.removeAll() }; return w }) { done() }
    }
    var kinds: [String] { lines.withLock { $0 }.compactMap { try? JSON.parse(Array($0.dropLast()))["kind"]?.stringValue } }
}

/// The per-watcher bound (Watch.swift): what a watcher that stops reading costs.
final class WatchBacklogTests: XCTestCase {
    func watcher() -> (Connection, StalledLink) {
        let link = StalledLink()
        let client = Connection(link: link, requester: Requester(pid: 1, uid: 1))
        XCTAssertTrue(client.startWatching())
        return (client, link)
    }

    func testEventsWaitForTheAnswerToWatchAndKeepTheirOrder() {
        let (client, link) = watcher()
        client.deliverEvent(Watchers.line(.locked(reason: "idle")))
        client.deliverEvent(Watchers.line(.unlocked))
        XCTAssertEqual(link.kinds, [], "an event went out before the answer to watch")
        client.watchAnswered()
        client.deliverEvent(Watchers.line(.loggedOut(account: "kari")))
        XCTAssertEqual(link.kinds, ["locked", "unlocked", "logged_out"])
    }

    func testAWatcherThatDoesNotReadHoldsAtMostTheBoundThenGetsOneResync() {
        let (client, link) = watcher()
        client.watchAnswered()
        for i in 0..<10_000 { client.deliverEvent(Watchers.line(.sessionExpired(account: "a\(i)"))) }
        XCTAssertEqual(link.lines.withLock { $0.count }, Watchers.maxUnwritten, "events past the bound were kept")
        link.drain()
        XCTAssertEqual(link.kinds.last, "resync", "a watcher that missed events was not told")
        XCTAssertEqual(link.kinds.filter { $0 == "resync" }.count, 1)
        link.drain()
        client.deliverEvent(Watchers.line(.unlocked))
        XCTAssertEqual(link.kinds.last, "unlocked", "events stopped after the resync")
    }

    func testTheEventLinesAreTheDocumentedShape() throws {
        let locked = try JSON.parse(Array(Watchers.line(.locked(reason: "screen_locked")).dropLast()))
        XCTAssertEqual(locked, ["event": "vault", "kind": "locked", "reason": "screen_locked"])
        let revoked = try JSON.parse(Array(Watchers.line(.grantRevoked(account: "kari", app: "org.example.App")).dropLast()))
        XCTAssertEqual(revoked, ["event": "vault", "kind": "grant_revoked", "account": "kari", "app": "org.example.App"])
        XCTAssertEqual(try JSON.parse(Array(Watchers.resyncLine.dropLast())), ["event": "vault", "kind": "resync"])
    }
}

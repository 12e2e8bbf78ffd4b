import Foundation
import NIOCore
import NIOEmbedded
import VaultCore
import VaultProtocol
import VaultWire
import XCTest
@testable import VaultServer

/// The connection's own limits on NIO's `EmbeddedChannel`, with the event
/// loop's clock moved by hand: no socket, no sleeping. The same limits against
/// a real vaultd under load are in Tests/IntegrationTests (LoadTests).
final class ConnectionHandlerTests: XCTestCase {
    var dir = ""
    var vault: Vault!
    let me = getuid()

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "connection-\(UUID().uuidString)"
        vault = try RequestHandlerTests.pinVault(in: dir)
    }

    /// Every channel a test opened: finished at the end, so the pipeline (which
    /// holds the handlers, which hold the channel) is torn down. An embedded
    /// channel's close leaves that to its loop, which only runs when told to.
    var opened: [EmbeddedChannel] = []
    /// Their request handlers: a `watch` starts a listener on the vault's events, stopped at the end as vaultd's shutdown does.
    var handlers: [RequestHandler] = []

    override func tearDown() {
        for channel in opened {
            _ = try? channel.finish(acceptAlreadyClosed: true)
            channel.embeddedEventLoop.run()
        }
        for handler in handlers { handler.watchers.stop() }
        (opened, handlers) = ([], [])
        vault = nil
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// What vaultd wrote, copied as it passes: `ChannelLink` wipes every
    /// buffer once written (an answer may hold a token), so the channel's own
    /// outbound queue holds zeros by the time a test could read it.
    final class WrittenLines: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        var lines: [JSON] = []

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            let bytes = Array(unwrapOutboundIn(data).readableBytesView)
            for line in bytes.split(separator: 0x0A) { lines.append((try? JSON.parse(Array(line))) ?? .null) }
            context.write(data, promise: promise)
        }
    }

    struct Connection {
        let channel: EmbeddedChannel
        let written: WrittenLines
        var loop: EmbeddedEventLoop { channel.embeddedEventLoop }

        func send(_ text: String) throws { try channel.writeInbound(ByteBuffer(string: text)) }
        func advance(seconds: Int64) { loop.advanceTime(by: .seconds(seconds)) }
        var isOpen: Bool { channel.isActive }
    }

    func connect(idleTimeout: Int = 10, connections: ConnectionSet = ConnectionSet(), maxConnections: Int = 8,
                 peer: Requester?, overCapAtAccept: Bool = false) throws -> Connection {
        let handler = RequestHandler(vault: vault, serverName: "vaultd/test", promptTimeout: 30, maxInFlight: 32, openableOrigins: { [] })
        handlers.append(handler)
        let written = WrittenLines()
        let connection = ConnectionHandler(handler: handler, limits: ConnectionLimits(idleTimeout: idleTimeout, maxConnections: maxConnections),
                                           connections: connections, ownUID: me, peer: peer, overCapAtAccept: overCapAtAccept)
        let channel = EmbeddedChannel(handlers: [written, connection])
        opened.append(channel)
        try channel.connect(to: SocketAddress(unixDomainSocketPath: dir + "/vault.sock")).wait()
        return Connection(channel: channel, written: written)
    }

    var ownPeer: Requester { Requester(pid: getpid(), uid: me) }

    func testAnIdleConnectionIsClosedAtItsTimeoutAndNotBefore() throws {
        let c = try connect(peer: ownPeer)
        c.advance(seconds: 9)
        XCTAssertTrue(c.isOpen)
        c.advance(seconds: 1)
        XCTAssertFalse(c.isOpen, "idle for the whole timeout")
        XCTAssertEqual(c.written.lines, [], "an idle connection is closed without a word")
    }

    func testACompleteLineRestartsTheIdleClockAndAPartialOneDoesNot() throws {
        let c = try connect(peer: ownPeer)
        c.advance(seconds: 6)
        try c.send(#"{"id":1,"op":"hello"}"# + "\n")
        XCTAssertEqual(c.written.lines.first?["result"]?["server"], "vaultd/test")
        c.advance(seconds: 6)
        XCTAssertTrue(c.isOpen, "6 s after a line, with a 10 s timeout")
        // A line dribbled and never finished keeps nothing open.
        try c.send(#"{"id":2,"op":"hel"#)
        c.advance(seconds: 4)
        XCTAssertFalse(c.isOpen, "10 s after the last complete line")
    }

    func testAWatcherIsNeverIdle() throws {
        let c = try connect(peer: ownPeer)
        try c.send(#"{"id":1,"op":"watch"}"# + "\n")
        XCTAssertEqual(c.written.lines.first?["result"]?["watching"], true)
        c.advance(seconds: 3_600)
        XCTAssertTrue(c.isOpen)
    }

    func testALineOverTheLimitIsAnsweredOnceThenTheConnectionCloses() throws {
        let c = try connect(peer: ownPeer)
        try c.send(String(repeating: "x", count: Wire.maxLineBytes + 1))
        XCTAssertEqual(c.written.lines.count, 1)
        XCTAssertEqual(c.written.lines.first?["error"]?["code"], "bad_request")
        XCTAssertEqual(c.written.lines.first?["id"], .null)
        XCTAssertTrue(c.written.lines.first?["error"]?["message"]?.stringValue?.contains("65,536 bytes") == true)
        XCTAssertFalse(c.isOpen)
    }

    func testAnotherUIDOrAnUnreadablePeerIsRefusedAndNothingIsRead() throws {
        for peer in [Requester(pid: getpid(), uid: me &+ 1), nil] {
            let c = try connect(peer: peer)
            XCTAssertEqual(c.written.lines.map { $0["error"]?["code"] }, ["forbidden"])
            XCTAssertFalse(c.isOpen)
            try? c.send(#"{"id":1,"op":"hello"}"# + "\n")
            XCTAssertEqual(c.written.lines.count, 1, "a line after the refusal was answered")
        }
    }

    func testPastTheCapAConnectionGetsOneRateLimitedAndRoomComesBackWhenOneCloses() throws {
        let open = ConnectionSet()
        let first = try connect(connections: open, maxConnections: 1, peer: ownPeer)
        let second = try connect(connections: open, maxConnections: 1, peer: ownPeer)
        XCTAssertEqual(second.written.lines.map { $0["error"]?["code"] }, ["rate_limited"])
        XCTAssertEqual(second.written.lines.first?["error"]?["retry_after"], .int(1))
        XCTAssertTrue(second.written.lines.first?["error"]?["message"]?.stringValue?.contains("1 connections open") == true,
                      "\(second.written.lines)")
        XCTAssertFalse(second.isOpen)
        XCTAssertTrue(first.isOpen)
        try first.channel.close().wait()
        let third = try connect(connections: open, maxConnections: 1, peer: ownPeer)
        XCTAssertTrue(third.isOpen)
        XCTAssertEqual(third.written.lines, [])
    }

    /// One sandboxed app holding connections open (`watch` keeps them open for
    /// good) would shut every other app, and the person's own tools, out: a
    /// confined app holds at most a quarter of the cap, every unidentified peer
    /// counted as one app; the person's unconfined tools are not counted per app.
    func testOneSandboxedAppHoldsAtMostAQuarterOfTheConnections() throws {
        let open = ConnectionSet()
        let limits = ConnectionLimits(maxConnections: 8)
        XCTAssertEqual(limits.maxPerConfinedApp, 2)
        XCTAssertEqual(ConnectionLimits().maxPerConfinedApp, 32, "512 connections: 32 an app")
        let nabo = Requester(pid: getpid(), uid: me, app: AppIdentity(kind: .flatpak, name: "org.example.Nabo"))
        let held = try (0..<2).map { _ in try connect(connections: open, maxConnections: 8, peer: nabo) }
        for c in held {
            try c.send(#"{"id":1,"op":"watch"}"# + "\n")
            XCTAssertTrue(c.isOpen)
        }
        // Another uid's process of the same app is refused as a stranger, and takes none of the app's share.
        let stranger = try connect(connections: open, maxConnections: 8, peer: Requester(pid: getpid(), uid: me &+ 1, app: nabo.app))
        XCTAssertEqual(stranger.written.lines.map { $0["error"]?["code"] }, ["forbidden"])
        let third = try connect(connections: open, maxConnections: 8, peer: nabo)
        XCTAssertEqual(third.written.lines.map { $0["error"]?["code"] }, ["rate_limited"])
        XCTAssertEqual(third.written.lines.first?["error"]?["message"],
                       .string(Messages.tooManyConnectionsForApp("org.example.Nabo", limit: 2).en))
        XCTAssertFalse(third.isOpen)
        XCTAssertEqual(open.count(of: "flatpak:org.example.Nabo"), 2, "the refused one holds no place")

        // Unidentified peers share one count, whatever their pid.
        let ghosts = try (Int32(5000)..<5003).map { pid in
            try connect(connections: open, maxConnections: 8, peer: Requester(pid: pid, uid: me, unidentified: true))
        }
        XCTAssertEqual(ghosts.map(\.isOpen), [true, true, false])
        // Another sandboxed app, and the person's own tools, still get in.
        let other = try connect(connections: open, maxConnections: 8,
                                peer: Requester(pid: getpid(), uid: me, app: AppIdentity(kind: .flatpak, name: "org.example.Annen")))
        XCTAssertTrue(other.isOpen)
        let person = try (0..<3).map { _ in try connect(connections: open, maxConnections: 8, peer: ownPeer) }
        XCTAssertEqual(person.map(\.isOpen), [true, true, true])
        XCTAssertEqual(open.count, 8)

        // One of the app's closed: it may open one again.
        try held[0].channel.close().wait()
        XCTAssertEqual(open.count(of: "flatpak:org.example.Nabo"), 1)
        let again = try connect(connections: open, maxConnections: 8, peer: nabo)
        XCTAssertTrue(again.isOpen)
        XCTAssertEqual(again.written.lines, [])
    }

    /// The server reads no peer for a connection accepted while the cap is full
    /// (VaultServer's child initializer): it is refused as over the cap even
    /// when a place has come free by the time it is active.
    func testAConnectionAcceptedOverTheCapIsRefusedAsSuchWithoutItsPeer() throws {
        let open = ConnectionSet()
        let late = try connect(connections: open, maxConnections: 1, peer: nil, overCapAtAccept: true)
        XCTAssertEqual(late.written.lines.map { $0["error"]?["code"] }, ["rate_limited"], "not forbidden: its peer was never read")
        XCTAssertFalse(late.isOpen)
        XCTAssertEqual(open.count, 0, "it never took a place")
    }
}

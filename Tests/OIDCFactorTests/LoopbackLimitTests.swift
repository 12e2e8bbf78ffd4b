import CVaultShims
import Foundation
import Locking
import NIOCore
import NIOPosix
import VaultTestSupport
import XCTest
@testable import OIDCFactor
import VaultFactor

/// Another local process of this user (another user's are refused unread) holding
/// connections to the login's redirect port open without sending a request.
extension FlowTests {
    /// 96 connections that send nothing, or half a request, while the login
    /// waits: each cost vaultd a descriptor and buffers until the login ended
    /// (five minutes at most, then again for the next login). Now at most 32 are
    /// held; each new one closes the oldest that has sent nothing, so the
    /// browser's redirect, which comes while the last 32 are still open, logs in.
    func testSilentConnectionsAreCappedAndTheBrowserStillGetsIn() async throws {
        stub.update {
            $0.idClaims = ["bankid_altsub": "altsub-kari", "name": "Kari Nordmann", "acr": "urn:bankid:bid;LOA=4"]
        }
        let attackers = 96
        let held = Locked<[Int32]>([])
        let closedBeforeTheRedirect = Locked<Int>(-1)
        let browser = BrowserConversation { request in
            guard let port = URLComponents(string: request.redirectURI)?.port else { return nil }
            var sockets: [Int32] = []
            for i in 0..<attackers {
                let fd = silentConnection(to: port, sending: i % 2 == 0 ? "" : "GET /callback?state=")
                if fd >= 0 { sockets.append(fd) }
            }
            held.withLock { $0 = sockets }
            let closed = await closedByPeer(sockets, atLeast: attackers - 32)
            closedBeforeTheRedirect.withLock { $0 = closed }
            return await loggingIn(self.stub)(request)
        }
        var profile = stub.profile(.bankID(.test, clientID: "x"))
        profile.redirectTimeout = .seconds(60)  // a debug build with sanitizers accepts slowly
        let provider = OIDCProvider(profile: profile, http: sharedTestHTTP)
        let login = try await provider.login(browser)
        let sockets = held.withLock { $0 }
        defer { sockets.forEach { _ = close($0) } }
        XCTAssertEqual(sockets.count, attackers, "the attacker's connections were made")
        XCTAssertGreaterThanOrEqual(closedBeforeTheRedirect.withLock { $0 }, attackers - 32,
                                    "at most 32 silent connections are held")
        XCTAssertEqual(login.subject, "altsub-kari", "the browser's redirect got in beside the 32 held")
        let page = await browser.browserResult()
        XCTAssertEqual(page?.status, 200)
    }

    /// A connection that sends no whole request within `requestWithin` is closed,
    /// whether it sent nothing or half a request; one that sends its request in
    /// time is answered.
    func testAConnectionWithoutARequestInTimeIsClosed() async throws {
        let listener = try await LoopbackListener.start(
            group: MultiThreadedEventLoopGroup.singleton, port: 0, path: "/callback", language: .en,
            expectedState: "s", limits: .init(connections: 32, requestWithin: .milliseconds(300)))
        let quiet = silentConnection(to: listener.port, sending: "")
        let half = silentConnection(to: listener.port, sending: "GET /callback?state=s HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        defer { _ = close(quiet); _ = close(half) }
        let closed = await closedByPeer([quiet, half], atLeast: 2)
        XCTAssertEqual(closed, 2, "both were closed")
        XCTAssertEqual(listener.silentClosed, 2)
        let stray = try await browserGET("http://127.0.0.1:\(listener.port)/callback?state=other")
        XCTAssertEqual(stray.status, 400, "a request in time is still answered")
        await listener.finish(.notFound(.en))
    }

    /// The listener serves only this user's programs, asking the kernel who owns
    /// the connecting socket: the very connection, never a listener on its port
    /// (the kernel's lookup falls back to one) nor the TIME_WAIT left of it,
    /// which reports uid 0 and so would pass for root's own.
    func testTheKernelNamesWhoMadeAConnectionAndNoOneForWhatIsLeftOfIt() async throws {
        let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(server, $0, length) == 0 && listen(server, 4) == 0 && getsockname(server, $0, &length) == 0
            }
        }
        XCTAssertTrue(bound)
        defer { close(server) }
        let serverPort = UInt16(bigEndian: address.sin_port)
        let client = silentConnection(to: Int(serverPort), sending: "")
        let accepted = accept(server, nil, nil)
        XCTAssertGreaterThanOrEqual(accepted, 0)
        var local = sockaddr_in()
        withUnsafeMutablePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(client, $0, &length) }
        }
        let clientPort = UInt16(bigEndian: local.sin_port)
        let loopback = inet_addr("127.0.0.1")
        XCTAssertEqual(sv_tcp4_owner(loopback, clientPort, loopback, serverPort), Int(getuid()), "the connecting socket's owner")
        XCTAssertEqual(sv_tcp4_owner(loopback, serverPort, loopback, 9), -1, "a listener on the port is not the connection")
        XCTAssertEqual(sv_tcp4_owner(loopback, clientPort, loopback, serverPort &+ 1), -1, "no such connection")
        close(client)
        close(accepted)
        var owner = 0
        for _ in 0..<100 {  // the client's end passes FIN_WAIT into TIME_WAIT
            owner = sv_tcp4_owner(loopback, clientPort, loopback, serverPort)
            if owner == -1 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertEqual(owner, -1, "a closed connection's TIME_WAIT has no owner")
    }

    /// A provider that needs its exact redirect address registered has a fixed
    /// port, which another user can take first (between logins any program may
    /// listen there): the login cannot start. The person was told "Another login
    /// is already waiting in your browser. Finish or close it", which they
    /// cannot; now they hear that another user holds it, and whom to ask. Taken
    /// on 127.0.0.1 and on every address (IPv6 dual-stack too).
    func testAFixedPortTakenByAnotherUserIsSaidToBeSo() async throws {
        guard getuid() == 0 else { throw cannotRunHere("another user is played with setpriv, which needs root") }
        stub.update { $0.idClaims = ["bankid_altsub": "a"] }
        for (family, host) in [("AF_INET", "127.0.0.1"), ("AF_INET", "0.0.0.0"), ("AF_INET6", "::")] {
            let port = try await closedPort()
            let holder = Process()
            holder.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            holder.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", """
                import socket, sys, time
                s = socket.socket(socket.\(family))
                if socket.\(family) == socket.AF_INET6:
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
                s.bind(("\(host)", \(port)))
                s.listen()
                print("listening", flush=True)
                time.sleep(30)
                """]
            let out = Pipe()
            holder.standardOutput = out
            try holder.run()
            defer {
                kill(holder.processIdentifier, SIGKILL)
                holder.waitUntilExit()
            }
            XCTAssertTrue(String(decoding: out.fileHandleForReading.availableData, as: UTF8.self).hasPrefix("listening"))
            XCTAssertEqual(sv_tcp4_loopback_listener_owner(UInt16(port)), 65534, "\(host): the kernel names the other user")
            let provider = bankID {
                $0.redirect = .fixedPort(UInt16(port), path: "/oidc/bankid")
                $0.redirectTimeout = .seconds(3)
            }
            let failure = await assertFailure(.loginFailed) { () async throws(VaultFailure) in
                try await provider.login(BrowserConversation(action: loggingIn(self.stub)))
            }
            XCTAssertEqual(failure?.message, Messages.redirectPortHeldByAnotherUser(provider: "BankID"), host)
        }
        // This user's own listener is most likely another login: as before.
        let own = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = try XCTUnwrap(own.localAddress?.port)
        XCTAssertEqual(sv_tcp4_loopback_listener_owner(UInt16(port)), Int(getuid()))
        let provider = bankID { $0.redirect = .fixedPort(UInt16(port), path: "/oidc/bankid") }
        let failure = await assertFailure(.loginFailed) { () async throws(VaultFailure) in
            try await provider.login(BrowserConversation(action: loggingIn(self.stub)))
        }
        XCTAssertEqual(failure?.message, Messages.loginAlreadyWaiting)
        try await own.close()
        XCTAssertEqual(sv_tcp4_loopback_listener_owner(UInt16(port)), -1, "no one listens there now")
    }
}

/// A TCP connection to 127.0.0.1:`port` that sends `text` and then nothing.
func silentConnection(to port: Int, sending text: String) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return -1 }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        close(fd)
        return -1
    }
    if !text.isEmpty { _ = Array(text.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) } }
    return fd
}

/// How many of `sockets` the other end has closed, waiting (up to 10 s) until
/// at least `wanted` are.
func closedByPeer(_ sockets: [Int32], atLeast wanted: Int) async -> Int {
    var count = 0
    for _ in 0..<200 {
        count = sockets.filter { fd in
            var byte: UInt8 = 0
            let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
            return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        }.count
        if count >= wanted { break }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return count
}

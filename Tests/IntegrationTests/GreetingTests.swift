import Foundation
import Locking
import VaultClient
import VaultProtocol
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `VaultConnection.greet`: the hello goes out with the first request in one
/// write (one round trip for a client that connects per request, as vaultctl
/// does), and vaultd still serves that request as the hello said.
final class GreetingTests: VaultdTestCase {
    /// The request after a greeting is answered in the greeting's language:
    /// vaultd took the hello first, though both came in one read.
    func testTheFirstRequestIsServedAsTheGreetingSays() throws {
        let v = try startVaultd()
        func noSession(_ language: Language) throws -> String {
            let c = try VaultConnection(socketPath: v.socketPath)
            c.greet(client: "greeting-test", language: language, interactive: false)
            do {
                _ = try c.call("session")
                XCTFail("a session from an empty vault")
                return ""
            } catch ClientError.vault(let code, let message, _) {
                XCTAssertEqual(code, "no_session")
                return message
            }
        }
        let english = try noSession(.en)
        let bokmal = try noSession(.nb)
        XCTAssertNotEqual(english, bokmal, "the session was served before the hello that asked for bokmål")
        // The same words a hello answered first gives.
        let c = try VaultConnection(socketPath: v.socketPath)
        try c.hello(client: "greeting-test", language: .nb, interactive: false)
        XCTAssertThrowsError(try c.call("session")) { error in
            guard case ClientError.vault(_, let message, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(message, bokmal)
        }
        // A second call on the connection sends no second hello.
        XCTAssertThrowsError(try c.call("session"))
    }

    /// Against a server in this process: both lines arrive in its first read,
    /// and a refused hello is what the call throws (not the request's answer).
    func testHelloAndRequestLeaveInOneWriteAndARefusedHelloIsThrown() throws {
        // Short: a socket path has room for 107 bytes.
        let path = NSTemporaryDirectory() + "greet-\(getpid())-\(UUID().uuidString.prefix(8)).sock"
        defer { unlink(path) }
        let listener = try boundUnixSocket(at: path, kind: Int32(SOCK_STREAM.rawValue))
        defer { close(listener) }
        XCTAssertEqual(listen(listener, 4), 0)

        let firstRead = Locked<[UInt8]?>(nil)
        let served = expectation(description: "served")
        let server = Thread {
            defer { served.fulfill() }
            let conn = accept(listener, nil, nil)
            guard conn >= 0 else { return }
            defer { close(conn) }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let n = chunk.withUnsafeMutableBytes { recv(conn, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { return }
            let got = Array(chunk[0..<n])
            firstRead.withLock { $0 = got }
            let answers = #"{"id":1,"ok":false,"error":{"code":"bad_request","message":"hello refused"}}"# + "\n"
                + #"{"id":2,"ok":true,"result":{"access_token":"at-greet"}}"# + "\n"
            _ = Array(answers.utf8).withUnsafeBytes { send(conn, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        server.start()

        let c = try VaultConnection(socketPath: path)
        c.greet(client: "greeting-test", language: .en, interactive: false)
        XCTAssertThrowsError(try c.call("session", ["account": "a"])) { error in
            guard case ClientError.vault(let code, let message, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(code, "bad_request")
            XCTAssertEqual(message, "hello refused")
        }
        wait(for: [served], timeout: 10)
        let lines = try XCTUnwrap(firstRead.withLock { $0 }).split(separator: 0x0A).map { try JSON.parse(Array($0)) }
        XCTAssertEqual(lines.count, 2, "both lines in the server's first read")
        XCTAssertEqual(lines.first?["op"], "hello")
        XCTAssertEqual(lines.first?["id"], .int(1))
        XCTAssertEqual(lines.first?["lang"], "en")
        XCTAssertEqual(lines.last?["op"], "session")
        XCTAssertEqual(lines.last?["id"], .int(2))
    }
}

import DemoProviders
import Foundation
import JWTKit
import NIOCore
import NIOHTTP1
import NIOPosix
import SodiumKit
import VaultProtocol
import XCTest
import VaultTestSupport

// A raw HTTP/1.1 client over NIO: no redirect following, any Host header, one or more
// requests per connection. Plus small OAuth helpers for the tests.

struct Reply {
    let status: Int
    let headers: HTTPHeaders
    let body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }
    var location: String? { headers.first(name: "location") }
    func json(file: StaticString = #filePath, line: UInt = #line) throws -> JSON {
        do {
            return try JSON.parse(body)
        } catch {
            XCTFail("not JSON (\(status)): \(text)", file: file, line: line)
            throw error
        }
    }
}

struct Req {
    var method: HTTPMethod = .GET
    var url: String
    var headers: [(String, String)] = []
    var form: [(String, String)]?
    var host: String?
    var rawBody: String?
}

enum ClientError: Error { case badURL(String), noResponse }

/// `http://HOST:PORT/path?query` → (host, port, path+query)
func splitURL(_ url: String) throws -> (host: String, port: Int, target: String) {
    guard url.hasPrefix("http://") else { throw ClientError.badURL(url) }
    let rest = url.dropFirst("http://".count)
    let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
    let authority = rest[..<slash]
    var target = String(rest[slash...])
    if target.isEmpty || target.hasPrefix("?") { target = "/" + target }
    guard let colon = authority.lastIndex(of: ":"), let port = Int(authority[authority.index(after: colon)...]) else {
        throw ClientError.badURL(url)
    }
    return (String(authority[..<colon]), port, target)
}

func formBody(_ pairs: [(String, String)]) -> String {
    func enc(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed)!
    }
    return pairs.map { "\(enc($0.0))=\(enc($0.1))" }.joined(separator: "&")
}

/// Sends the requests in order over ONE connection (keep-alive), then closes it.
func send(_ requests: [Req]) async throws -> [Reply] {
    let first = try splitURL(requests[0].url)
    let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .connectTimeout(.seconds(5))
        .connect(host: first.host, port: first.port) { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
            }
        }
    return try await channel.executeThenClose { inbound, outbound in
        var replies: [Reply] = []
        var iterator = inbound.makeAsyncIterator()
        for (n, r) in requests.enumerated() {
            let target = try splitURL(r.url)
            var head = HTTPRequestHead(version: .http1_1, method: r.method, uri: target.target)
            head.headers.add(name: "Host", value: r.host ?? "\(target.host):\(target.port)")
            if n == requests.count - 1 { head.headers.add(name: "Connection", value: "close") }
            for (k, v) in r.headers { head.headers.add(name: k, value: v) }
            var body: ByteBuffer?
            if let form = r.form {
                let text = formBody(form)
                head.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
                head.headers.add(name: "Content-Length", value: String(text.utf8.count))
                body = ByteBuffer(string: text)
            } else if let raw = r.rawBody {
                head.headers.add(name: "Content-Length", value: String(raw.utf8.count))
                body = ByteBuffer(string: raw)
            } else if r.method == .POST {
                head.headers.add(name: "Content-Length", value: "0")
            }
            // One batch: the server may answer (and close) as soon as it has the head, and a
            // separate `.end` write would then race the close.
            var parts: [HTTPClientRequestPart] = [.head(head)]
            if let body { parts.append(.body(.byteBuffer(body))) }
            parts.append(.end(nil))
            try await outbound.write(contentsOf: parts)

            var status = 0
            var headers = HTTPHeaders()
            var bytes: [UInt8] = []
            reading: while let part = try await iterator.next() {
                switch part {
                case .head(let h):
                    status = Int(h.status.code)
                    headers = h.headers
                case .body(let b):
                    bytes.append(contentsOf: b.readableBytesView)
                case .end:
                    break reading
                }
            }
            guard status != 0 else { throw ClientError.noResponse }
            replies.append(Reply(status: status, headers: headers, body: bytes))
        }
        return replies
    }
}

func get(_ url: String, headers: [(String, String)] = [], host: String? = nil) async throws -> Reply {
    try await send([Req(url: url, headers: headers, host: host)])[0]
}

func post(_ url: String, form: [(String, String)], headers: [(String, String)] = []) async throws -> Reply {
    try await send([Req(method: .POST, url: url, headers: headers, form: form)])[0]
}

/// Query parameters of a URL (the part after `?`).
func queryItems(_ url: String) -> [String: String] {
    guard let comps = URLComponents(string: url) else { return [:] }
    var out: [String: String] = [:]
    for item in comps.queryItems ?? [] { out[item.name] = item.value ?? "" }
    return out
}

func base64URLDecode(_ s: Substring) -> [UInt8]? {
    var t = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while t.count % 4 != 0 { t += "=" }
    return Data(base64Encoded: t).map { Array($0) }
}

func base64URL(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

struct PKCE {
    let verifier: String
    let challenge: String

    init() {
        verifier = base64URL(Random.bytes(48))  // 64 characters
        challenge = base64URL(Digest.sha256(Array(verifier.utf8)))
    }
}

/// The standard claims jwt-kit checks while verifying the signature.
struct IDTokenPayload: JWTPayload {
    var iss: IssuerClaim
    var sub: SubjectClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim
    var iat: IssuedAtClaim

    func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired()
    }
}

/// Splits a compact JWS into its decoded header and claims (no verification).
func jwtParts(_ token: String) throws -> (header: JSON, claims: JSON) {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3, let h = base64URLDecode(parts[0]), let p = base64URLDecode(parts[1]) else {
        throw ClientError.badURL("not a JWS")
    }
    return (try JSON.parse(h), try JSON.parse(p))
}

// MARK: - National identity numbers

/// A tiny, independent validator for Norwegian fødselsnummer, including synthetic test
/// numbers (month + 80). Returns the birth date (y, m, d) or nil when invalid.
func validateFodselsnummer(_ s: String, allowSynthetic: Bool = true) -> (year: Int, month: Int, day: Int, synthetic: Bool)? {
    let d = s.compactMap { $0.wholeNumberValue }
    guard s.count == 11, d.count == 11, s.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
    func checkDigit(_ weights: [Int]) -> Int? {
        let sum = zip(weights, d).map { $0 * $1 }.reduce(0, +)
        let k = (11 - sum % 11) % 11
        return k == 10 ? nil : k  // a remainder that would need 10 is never issued
    }
    guard let k1 = checkDigit([3, 7, 6, 1, 8, 9, 4, 5, 2]), k1 == d[9],
          let k2 = checkDigit([5, 4, 3, 2, 7, 6, 5, 4, 3, 2]), k2 == d[10] else { return nil }
    let day = d[0] * 10 + d[1]
    var month = d[2] * 10 + d[3]
    var synthetic = false
    if month > 80 {
        guard allowSynthetic else { return nil }
        month -= 80
        synthetic = true
    }
    let yy = d[4] * 10 + d[5]
    let individual = d[6] * 100 + d[7] * 10 + d[8]
    let year: Int
    switch individual {
    case 0...499: year = 1900 + yy
    case 500...749 where yy >= 54: year = 1800 + yy
    case 500...999 where yy <= 39: year = 2000 + yy
    case 900...999 where yy >= 40: year = 1900 + yy
    default: return nil
    }
    guard (1...12).contains(month) else { return nil }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
    guard (1...days).contains(day) else { return nil }
    return (year, month, day, synthetic)
}

/// `XCTAssertEqual` for expressions that await (XCTest's autoclosures cannot).
func assertEqual<T: Equatable>(_ a: @autoclosure () async throws -> T, _ b: @autoclosure () async throws -> T,
                               _ message: @autoclosure () -> String = "",
                               file: StaticString = #filePath, line: UInt = #line) async {
    do {
        let x = try await a()
        let y = try await b()
        XCTAssertEqual(x, y, message(), file: file, line: line)
    } catch {
        XCTFail("threw \(error) \(message())", file: file, line: line)
    }
}

import Foundation
import VaultProtocol
#if canImport(Glibc)
import Glibc
#endif

/// One HTTP answer, with header names lowercased.
struct HTTPResponse {
    var status: Int
    var headers: [String: String]
    var body: [UInt8]

    func header(_ name: String) -> String? { headers[name.lowercased()] }
    var json: JSON? { try? JSON.parse(body) }
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// A minimal HTTP/1.1 client for 127.0.0.1, one connection per request.
/// The bench plays the browser: it must see the provider's 302 itself (not
/// follow it) and know exactly when it hits vaultd's loopback listener, which
/// URLSession's redirect handling and connection pooling would blur.
enum HTTP {
    static func get(_ url: String, timeout: Double = 15) throws -> HTTPResponse {
        try request("GET", url, timeout: timeout)
    }

    static func postForm(_ url: String, _ form: [(String, String)], headers: [(String, String)] = [],
                         timeout: Double = 15) throws -> HTTPResponse {
        try request("POST", url, headers: [("Content-Type", "application/x-www-form-urlencoded")] + headers,
                    body: Array(formEncode(form).utf8), timeout: timeout)
    }

    static func postJSON(_ url: String, _ body: JSON, timeout: Double = 15) throws -> HTTPResponse {
        try request("POST", url, headers: [("Content-Type", "application/json")], body: body.serialized(), timeout: timeout)
    }

    static func formEncode(_ form: [(String, String)]) -> String {
        form.map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }.joined(separator: "&")
    }

    static func percentEncode(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }

    static func request(_ method: String, _ url: String, headers: [(String, String)] = [], body: [UInt8] = [],
                        timeout: Double = 15) throws -> HTTPResponse {
        guard let parts = URLComponents(string: url), parts.scheme == "http", parts.host == "127.0.0.1",
              let port = parts.port, let portNumber = UInt16(exactly: port) else {
            throw BenchError("not an http://127.0.0.1:PORT address: \(url)")
        }
        let target = (parts.percentEncodedPath.isEmpty ? "/" : parts.percentEncodedPath)
            + (parts.percentEncodedQuery.map { "?" + $0 } ?? "")
        let fd = try connectLoopback(port: portNumber, timeout: timeout)
        defer { close(fd) }
        var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        if method != "GET" || !body.isEmpty { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try sendAll(fd, Array(head.utf8) + body)
        return try readResponse(fd)
    }

    private static func connectLoopback(port: UInt16, timeout: Double) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket() failed: errno \(errno)") }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1e6))
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            let e = errno
            close(fd)
            throw BenchError("could not connect to 127.0.0.1:\(port) (errno \(e))")
        }
        return fd
    }

    /// Reads the head, then the body by Content-Length (or to the end).
    private static func readResponse(_ fd: Int32) throws -> HTTPResponse {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let separator: [UInt8] = [13, 10, 13, 10]
        var headEnd: Int?
        var expected: Int?
        while true {
            if headEnd == nil, buffer.count >= 4 {
                for i in 0...(buffer.count - 4) where Array(buffer[i..<(i + 4)]) == separator {
                    headEnd = i + 4
                    break
                }
                if let end = headEnd {
                    let head = String(decoding: buffer[..<end], as: UTF8.self)
                    for line in head.split(separator: "\r\n") where line.lowercased().hasPrefix("content-length:") {
                        expected = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
                    }
                }
            }
            if let end = headEnd, let expected, buffer.count >= end + expected { break }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw BenchError("HTTP read failed (errno \(errno)); timed out?") }
            if n == 0 { break }
            buffer.append(contentsOf: chunk[0..<n])
        }
        guard let end = headEnd else { throw BenchError("HTTP answer without a complete head") }
        let head = String(decoding: buffer[..<(end - 4)], as: UTF8.self)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        guard !lines.isEmpty else { throw BenchError("empty HTTP answer") }
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw BenchError("bad HTTP status line") }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let bodyEnd = expected.map { min(buffer.count, end + $0) } ?? buffer.count
        return HTTPResponse(status: status, headers: headers, body: Array(buffer[end..<bodyEnd]))
    }
}

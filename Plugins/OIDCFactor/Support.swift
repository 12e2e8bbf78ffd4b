import VaultFactor

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Small, exact helpers for the OAuth wire formats: base64url, form encoding,
// query strings, and just enough URL parsing to apply the scheme policy.
// Kept free of Foundation so that parsing rules are ours and visible.

enum FormEncoding {
    /// RFC 3986 unreserved characters pass; everything else is %XX (UTF-8). Used
    /// for query strings and for `application/x-www-form-urlencoded` bodies.
    static func escape(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        let hex = Array("0123456789ABCDEF")
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                out.append("%")
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 0xF)])
            }
        }
        return out
    }

    static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }

    /// Decodes `%XX` and `+`; nil for malformed escapes or invalid UTF-8.
    static func unescape<S: StringProtocol>(_ s: S) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(s.utf8.count)
        var it = Array(s.utf8)[...]
        while let c = it.popFirst() {
            if c == UInt8(ascii: "+") {
                bytes.append(0x20)
            } else if c == UInt8(ascii: "%") {
                guard let h = it.popFirst(), let l = it.popFirst(), let hv = hexValue(h), let lv = hexValue(l) else {
                    return nil
                }
                bytes.append(hv << 4 | lv)
            } else {
                bytes.append(c)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// Parses a query string into (name, value) pairs in order, keeping duplicates
    /// (the caller decides what a duplicate means). Nil when an escape is malformed.
    static func parseQuery<S: StringProtocol>(_ query: S) -> [(String, String)]? {
        var out: [(String, String)] = []
        for part in query.split(separator: "&", omittingEmptySubsequences: true) {
            let kv = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let k = unescape(kv[0]) else { return nil }
            let v = kv.count > 1 ? unescape(kv[1]) : ""
            guard let v else { return nil }
            out.append((k, v))
        }
        return out
    }
}

/// Just enough of a URL to apply the transport policy.
struct URLParts: Equatable {
    var scheme: String
    var host: String
    var port: Int?
    var pathAndQuery: String

    init?(_ text: String) {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let scheme = text[..<colon].lowercased()
        guard scheme == "http" || scheme == "https", text[colon...].hasPrefix("://") else { return nil }
        if text.contains("#") { return nil }  // fragments are not allowed in OAuth endpoints
        let rest = text[text.index(colon, offsetBy: 3)...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.isEmpty, !authority.contains("@") else { return nil }  // no userinfo in provider URLs
        var host: Substring
        var port: Int?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") {
                guard let p = Int(after.dropFirst()), (1...65535).contains(p) else { return nil }
                port = p
            } else if !after.isEmpty {
                return nil
            }
        } else if let portColon = authority.lastIndex(of: ":") {
            host = authority[..<portColon]
            guard let p = Int(authority[authority.index(after: portColon)...]), (1...65535).contains(p) else { return nil }
            port = p
        } else {
            host = authority
        }
        guard !host.isEmpty else { return nil }
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = port
        let pq = rest[authorityEnd...]
        self.pathAndQuery = pq.isEmpty ? "/" : String(pq)
    }

    var isLoopback: Bool {
        host == "127.0.0.1" || host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }
}

enum Randomness {
    /// `count` random bytes as unpadded base64url: state, nonce, PKCE verifier.
    static func token(bytes count: Int) -> String {
        Base64URL.encode(Random.bytes(count))
    }
}

enum PKCE {
    /// RFC 7636 S256: BASE64URL(SHA256(ASCII(code_verifier))).
    static func challenge(for verifier: String) -> String {
        Base64URL.encode(Digest.sha256(Array(verifier.utf8)))
    }
}

/// Unix seconds now (the providers' default clock).
@Sendable public func systemUnixTime() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec)
}


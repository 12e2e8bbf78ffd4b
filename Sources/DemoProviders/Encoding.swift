import VaultProtocol
import SodiumKit

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Small encoders the providers need: base64url, URL form encoding, HTML escaping.
// All pure functions over bytes, no Foundation.

/// Base64url without padding (RFC 7515 §2).
func base64URL(_ bytes: [UInt8]) -> String { Base64URL.encode(bytes) }

/// An opaque random token: `bytes` random bytes, base64url.
func randomToken(bytes: Int = 32) -> String {
    base64URL(Random.bytes(bytes))
}

/// The key under which a token is remembered: the provider keeps hashes, not tokens.
func tokenKey(_ token: String) -> String {
    Digest.hex(Digest.sha256(Array(token.utf8)))
}

/// OIDC `at_hash`: the left half of SHA-256 over the access token's ASCII, base64url.
func leftHalfHash(_ value: String) -> String {
    base64URL(Array(Digest.sha256(Array(value.utf8)).prefix(16)))
}

/// PKCE S256 (RFC 7636 §4.2).
func pkceS256(_ verifier: String) -> String {
    base64URL(Digest.sha256(Array(verifier.utf8)))
}

func uuidString(_ b: [UInt8]) -> String {
    let hex = Digest.hex(b)
    var out = ""
    for (n, c) in hex.enumerated() {
        if n == 8 || n == 12 || n == 16 || n == 20 { out.append("-") }
        out.append(c)
    }
    return out
}

/// A random (version 4) UUID.
func randomUUID() -> String {
    var b = Random.bytes(16)
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    return uuidString(b)
}

/// Seconds since the Unix epoch.
func unixNow() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec)
}

// MARK: - URL form encoding

private func isUnreserved(_ c: UInt8) -> Bool {
    switch c {
    case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
         UInt8(ascii: "0")...UInt8(ascii: "9"),
         UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
        return true
    default:
        return false
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
func percentEncode(_ s: String) -> String {
    let hex = Array("0123456789ABCDEF".utf8)
    var out: [UInt8] = []
    for c in s.utf8 {
        if isUnreserved(c) {
            out.append(c)
        } else {
            out.append(UInt8(ascii: "%"))
            out.append(hex[Int(c >> 4)])
            out.append(hex[Int(c & 0xF)])
        }
    }
    return String(decoding: out, as: UTF8.self)
}

func formEncode(_ pairs: [(String, String)]) -> String {
    pairs.map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }.joined(separator: "&")
}

private func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
    default: return nil
    }
}

/// Decodes one `application/x-www-form-urlencoded` component (`+` is a space).
/// nil for a broken `%` escape or invalid UTF-8.
private func formDecode(_ part: ArraySlice<UInt8>) -> String? {
    var out: [UInt8] = []
    out.reserveCapacity(part.count)
    var i = part.startIndex
    while i < part.endIndex {
        let c = part[i]
        if c == UInt8(ascii: "+") {
            out.append(0x20)
            i += 1
        } else if c == UInt8(ascii: "%") {
            guard i + 2 < part.endIndex, let hi = hexValue(part[i + 1]), let lo = hexValue(part[i + 2]) else { return nil }
            out.append(hi << 4 | lo)
            i += 3
        } else {
            out.append(c)
            i += 1
        }
    }
    return String(validating: out, as: UTF8.self)
}

/// Parses a query string or form body into ordered pairs; nil when malformed.
func parseForm<C: Collection>(_ bytes: C) -> [(String, String)]? where C.Element == UInt8 {
    let all = Array(bytes)
    var pairs: [(String, String)] = []
    for field in all.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
        let name: ArraySlice<UInt8>
        let value: ArraySlice<UInt8>
        if let eq = field.firstIndex(of: UInt8(ascii: "=")) {
            name = field[field.startIndex..<eq]
            value = field[(eq + 1)...]
        } else {
            name = field
            value = []
        }
        guard let n = formDecode(name), let v = formDecode(value) else { return nil }
        pairs.append((n, v))
    }
    return pairs
}

/// Pairs to a dictionary, plus the names that occurred more than once (RFC 6749 §3.1:
/// request parameters must not be repeated).
func singleValued(_ pairs: [(String, String)]) -> (values: [String: String], repeated: Set<String>) {
    var values: [String: String] = [:]
    var repeated: Set<String> = []
    for (k, v) in pairs {
        if values.updateValue(v, forKey: k) != nil { repeated.insert(k) }
    }
    return (values, repeated)
}

// MARK: - HTML

/// HTML escaping for the login pages (shared with the OIDC loopback page).
func htmlEscape(_ s: String) -> String { HTML.escape(s) }

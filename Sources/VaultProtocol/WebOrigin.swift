/// The origin (scheme, host, port) of an http(s) URL, as a browser would
/// see it, for deciding whether a URL is a provider's login page. Strict on
/// purpose: anything a browser might read differently from this parser (user
/// info, backslashes, percent-encoded or non-ASCII hosts, control characters)
/// has no origin here, so it is never treated as a provider's.
public enum WebOrigin {
    /// "https://login.example.org:443" (lower case, port always written), or
    /// nil for any other scheme or anything ambiguous.
    public static func of(_ url: String) -> String? {
        let bytes = Array(url.utf8)
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }) else { return nil }
        let lower = url.lowercased()
        let scheme: String
        let defaultPort: Int
        if lower.hasPrefix("https://") {
            (scheme, defaultPort) = ("https", 443)
        } else if lower.hasPrefix("http://") {
            (scheme, defaultPort) = ("http", 80)
        } else {
            return nil
        }
        let rest = lower.dropFirst(scheme.count + 3)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.isEmpty, !authority.contains("@"), !authority.contains("%") else { return nil }
        let host: Substring
        var port = defaultPort
        if authority.hasPrefix("[") {
            // An IPv6 literal: [hex and colons], then an optional :port.
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[...close]
            guard host.dropFirst().dropLast().allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return nil }
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.first == ":", let p = parsePort(after.dropFirst()) else { return nil }
                port = p
            }
        } else {
            let parts = authority.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            host = parts[0]
            guard !host.isEmpty, host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") }) else {
                return nil
            }
            if parts.count == 2 {
                guard let p = parsePort(parts[1]) else { return nil }
                port = p
            }
        }
        return "\(scheme)://\(host):\(port)"
    }

    private static func parsePort(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.count <= 5, text.allSatisfy({ $0.isASCII && $0.isNumber }), let p = Int(text), p > 0, p <= 65_535 else { return nil }
        return p
    }
}

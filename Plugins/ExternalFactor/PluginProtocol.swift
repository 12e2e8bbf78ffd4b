import VaultFactor

// The wire protocol between vaultd and an external factor `vault-factor-NAME`:
// JSON lines (one UTF-8 JSON object per line, "\n"-terminated) over the
// plugin's stdin/stdout. docs/plugins.md is the reference for plugin authors.
//
// This file is a pure codec — no I/O, no state — so it can be fuzzed on its own:
// `PluginCodec.decode(line:)` turns one line into a `PluginMessage` or a
// `PluginProtocolError`, and never traps on any input.

/// The operation a plugin process is started for: its only argument.
public enum PluginOperation: String, Sendable, CaseIterable {
    case probe
    case enroll
    case unlock
}

/// The outcome codes a plugin may end with (`{"type":"error","code":…}`).
public enum PluginErrorCode: String, Sendable, CaseIterable {
    case cancelled
    case noMatch = "no_match"
    case tooManyAttempts = "too_many_attempts"
    case unavailable
    case rejected
    case timeout
}

/// What a plugin says in its `probe` answer.
public struct PluginDescriptor: Sendable, Equatable {
    public var name: LocalizedText
    public var rank: Int
    public var contribution: ContributionKind
    public var available: Bool
    /// Why the factor can't be used now (only when `available` is false).
    public var reason: LocalizedText?

    public init(name: LocalizedText, rank: Int, contribution: ContributionKind, available: Bool, reason: LocalizedText? = nil) {
        self.name = name
        self.rank = rank
        self.contribution = contribution
        self.available = available
        self.reason = reason
    }
}

/// A plugin's successful final answer to `enroll` or `unlock`.
public struct PluginResult: Sendable {
    /// The secret the person gave (secret factors only), in guarded memory.
    public var contribution: SecureBytes?
    /// Opaque digest of the authenticator's enrollment (non-secret).
    public var enrollmentState: [UInt8]
    /// Public facts the slot is bound to; given back in `start.slot.binding` on unlock.
    public var binding: [String: String]

    public init(contribution: SecureBytes?, enrollmentState: [UInt8], binding: [String: String]) {
        self.contribution = contribution
        self.enrollmentState = enrollmentState
        self.binding = binding
    }
}

/// One line from plugin to vault.
public enum PluginMessage: Sendable {
    /// The answer to `probe`.
    case descriptor(PluginDescriptor)
    /// Show a message; no answer.
    case message(LocalizedText)
    /// Ask for a secret (typed without echo); answered with a string value.
    case secret(LocalizedText)
    /// Ask a yes/no question; answered with a boolean value.
    case confirm(LocalizedText)
    /// Ask the client to open an http(s) URL; no answer.
    case openURL(url: String, text: LocalizedText)
    /// Final: success.
    case ok(PluginResult)
    /// Final: failure, with an optional sentence for the person.
    case error(PluginErrorCode, LocalizedText?)

    public var isFinal: Bool {
        switch self {
        case .descriptor, .ok, .error: return true
        case .message, .secret, .confirm, .openURL: return false
        }
    }

    /// The message type as on the wire, for logs.
    public var typeName: String {
        switch self {
        case .descriptor: return "descriptor"
        case .message: return "message"
        case .secret: return "secret"
        case .confirm: return "confirm"
        case .openURL: return "open_url"
        case .ok: return "ok"
        case .error: return "error"
        }
    }
}

/// Why a line was refused. `reason` is for vaultd's log, never for the person.
public struct PluginProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

public enum PluginCodec {
    /// The protocol version this vault speaks (sent in `start`).
    public static let version = 1
    /// The longest line accepted, without its "\n". Longer → the plugin is stopped.
    public static let maxLineLength = 64 * 1024
    /// Limits on what a plugin can make the vault store or show.
    public static let maxTextLength = 500
    public static let maxContributionBytes = 1024
    public static let maxEnrollmentStateBytes = 4096
    public static let maxBindingEntries = 16
    public static let maxBindingKeyLength = 64
    public static let maxBindingValueLength = 512
    public static let maxURLLength = 4096
    public static let rankRange = 0...1000
    public static let defaultRank = 50

    // MARK: - Decoding (plugin → vault)

    /// Decodes one line (without its "\n"; a trailing "\r" is tolerated).
    /// Works on a copy that is wiped before returning.
    public static func decode(line: [UInt8]) throws(PluginProtocolError) -> PluginMessage {
        var copy = line
        defer { Sodium.wipe(&copy) }
        return try decode(&copy)
    }

    /// Decodes one line in place. The `contribution` value (a secret) is copied
    /// straight from the line into guarded memory and then overwritten in the
    /// line, so no Swift `String` ever holds it; the caller wipes the rest.
    public static func decode(_ line: inout [UInt8]) throws(PluginProtocolError) -> PluginMessage {
        guard line.count <= maxLineLength else {
            throw PluginProtocolError("line longer than \(maxLineLength) bytes")
        }
        if line.last == UInt8(ascii: "\r") { line.removeLast() }

        // Lift the secret out before the generic parser can copy it into a String.
        // (Only in `ok`: the descriptor's "contribution" is the kind, not a secret.)
        var contribution: SecureBytes?
        let types = topLevelStringValueRanges(key: "type", in: line)
        if types.count == 1, line[types[0]].elementsEqual("ok".utf8) {
            let ranges = topLevelStringValueRanges(key: "contribution", in: line)
            guard ranges.count <= 1 else {
                for r in ranges { for i in r { line[i] = UInt8(ascii: "A") } }
                throw PluginProtocolError("duplicate \"contribution\"")
            }
            if let range = ranges.first {
                contribution = try liftBase64Secret(&line, range)
            }
        }

        let json: JSON
        do {
            json = try JSON.parse(line)
        } catch {
            throw PluginProtocolError("not JSON (\(error.reason) at byte \(error.offset))")
        }
        guard case .object(let o) = json else { throw PluginProtocolError("not a JSON object") }
        guard let type = o["type"]?.stringValue else { throw PluginProtocolError("no \"type\"") }

        switch type {
        case "descriptor":
            guard let name = try text(o["name"], field: "name") else { throw PluginProtocolError("descriptor without \"name\"") }
            guard let kind = o["contribution"]?.stringValue else { throw PluginProtocolError("descriptor without \"contribution\"") }
            let contributionKind: ContributionKind
            switch kind {
            case "presence": contributionKind = .presenceOnly
            case "secret": contributionKind = .lowEntropySecret
            default: throw PluginProtocolError("unknown contribution kind")
            }
            guard let available = o["available"]?.boolValue else { throw PluginProtocolError("descriptor without boolean \"available\"") }
            var rank = defaultRank
            if let r = o["rank"] {
                guard let n = r.intValue else { throw PluginProtocolError("\"rank\" is not an integer") }
                rank = Int(max(Int64(rankRange.lowerBound), min(Int64(rankRange.upperBound), n)))
            }
            if let v = o["version"] {
                guard v.intValue == Int64(version) else { throw PluginProtocolError("plugin speaks protocol version \(v.text), vault speaks \(version)") }
            }
            let reason = try text(o["reason"], field: "reason")
            return .descriptor(PluginDescriptor(name: name, rank: rank, contribution: contributionKind,
                                                available: available, reason: available ? nil : reason))
        case "message", "secret", "confirm":
            guard let t = try text(o["text"], field: "text") else { throw PluginProtocolError("\"\(type)\" without \"text\"") }
            switch type {
            case "message": return .message(t)
            case "secret": return .secret(t)
            default: return .confirm(t)
            }
        case "open_url":
            guard let url = o["url"]?.stringValue, url.utf8.count <= maxURLLength,
                  url.hasPrefix("https://") || url.hasPrefix("http://"),
                  !url.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7F }) else {
                throw PluginProtocolError("\"open_url\" needs an http(s) \"url\" without spaces or control characters")
            }
            let t = try text(o["text"], field: "text") ?? LocalizedText(en: "Open this address:", nb: "Åpne denne adressen:")
            return .openURL(url: url, text: t)
        case "ok":
            if o["contribution"] != nil && contribution == nil { throw PluginProtocolError("\"contribution\" must be a base64 string") }
            if let c = contribution, c.count == 0 { throw PluginProtocolError("empty \"contribution\"") }
            var state: [UInt8] = []
            if let s = o["enrollment_state"] {
                guard let text = s.stringValue, let bytes = base64Decode(text) else {
                    throw PluginProtocolError("\"enrollment_state\" is not base64")
                }
                guard bytes.count <= maxEnrollmentStateBytes else { throw PluginProtocolError("\"enrollment_state\" too long") }
                state = bytes
            }
            var binding: [String: String] = [:]
            if let b = o["binding"] {
                guard let fields = b.objectValue, fields.count <= maxBindingEntries else {
                    throw PluginProtocolError("\"binding\" must be an object of at most \(maxBindingEntries) strings")
                }
                for (k, v) in fields {
                    guard let s = v.stringValue, !k.isEmpty, k.utf8.count <= maxBindingKeyLength, s.utf8.count <= maxBindingValueLength else {
                        throw PluginProtocolError("\"binding\" values must be short strings")
                    }
                    binding[k] = s
                }
            }
            return .ok(PluginResult(contribution: contribution, enrollmentState: state, binding: binding))
        case "error":
            guard let c = o["code"]?.stringValue, let code = PluginErrorCode(rawValue: c) else {
                throw PluginProtocolError("\"error\" without a known \"code\"")
            }
            return .error(code, try text(o["text"], field: "text"))
        default:
            throw PluginProtocolError("unknown message type")
        }
    }

    /// A sentence: `{"en": …, "nb": …}` (nb falls back to en) or a plain string
    /// for both. Control characters are replaced and the length capped: the text
    /// goes to the person's terminal or screen reader.
    static func text(_ value: JSON?, field: String) throws(PluginProtocolError) -> LocalizedText? {
        guard let value, value != .null else { return nil }
        if let s = value.stringValue {
            let t = clean(s)
            return LocalizedText(en: t, nb: t)
        }
        guard let o = value.objectValue, let en = o["en"]?.stringValue else {
            throw PluginProtocolError("\"\(field)\" must be a string or {\"en\": …, \"nb\": …}")
        }
        if let nb = o["nb"], nb.stringValue == nil { throw PluginProtocolError("\"\(field)\".nb must be a string") }
        let cleanEn = clean(en)
        return LocalizedText(en: cleanEn, nb: o["nb"]?.stringValue.map(clean) ?? cleanEn)
    }

    /// Replaces C0/C1 control characters (terminal escapes, bidi tricks stay
    /// visible as text) with spaces and caps the length.
    static func clean(_ s: String) -> String {
        var out = String.UnicodeScalarView()
        var n = 0
        for u in s.unicodeScalars {
            if n == maxTextLength { out.append("…"); break }
            let v = u.value
            let control = v < 0x20 || (v >= 0x7F && v <= 0x9F) || (v >= 0x202A && v <= 0x202E) || (v >= 0x2066 && v <= 0x2069)
            out.append(control ? " " : u)
            n += 1
        }
        return String(out)
    }

    /// Copies a base64 string value out of `line` into guarded memory, decodes it
    /// there, and overwrites the value in the line with "A"s (still valid JSON).
    static func liftBase64Secret(_ line: inout [UInt8], _ range: Range<Int>) throws(PluginProtocolError) -> SecureBytes {
        defer { for i in range { line[i] = UInt8(ascii: "A") } }
        guard range.count <= (maxContributionBytes + 2) / 3 * 4 + 8 else { throw PluginProtocolError("\"contribution\" too long") }
        for i in range {
            let c = line[i]
            let ok = (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39)
                || c == UInt8(ascii: "+") || c == UInt8(ascii: "/") || c == UInt8(ascii: "=")
            guard ok else { throw PluginProtocolError("\"contribution\" is not base64") }
        }
        do {
            let text = try SecureBytes(count: range.count + 1) { buf in
                for (n, i) in range.enumerated() { buf[n] = line[i] }
                buf[range.count] = 0
            }
            let decoded = try text.withUnsafeBytes { raw throws(SodiumError) -> SecureBytes in
                try SecureBytes.fromBase64(raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            guard decoded.count <= maxContributionBytes else { throw PluginProtocolError("\"contribution\" too long") }
            return decoded
        } catch let e as PluginProtocolError {
            throw e
        } catch {
            throw PluginProtocolError("\"contribution\" is not base64")
        }
    }

    /// Byte ranges (inside the quotes) of the string values of `key` in the
    /// top-level object, found with a small tokenizer that tracks strings and
    /// nesting, so the key is never confused with text inside another value.
    /// Returns nothing for lines that aren't an object; the parser judges those.
    static func topLevelStringValueRanges(key: String, in line: [UInt8]) -> [Range<Int>] {
        let target = Array(key.utf8)
        var found: [Range<Int>] = []
        var depth = 0
        var i = 0
        var expectKey = false
        var pendingKeyMatch = false
        let n = line.count
        func isWS(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D }
        /// Scans a string starting at the quote at `start`; returns the index after the closing quote.
        func endOfString(_ start: Int) -> (end: Int, hasEscape: Bool)? {
            var j = start + 1
            var escaped = false
            while j < n {
                let c = line[j]
                if c == 0x5C { escaped = true; j += 2; continue }
                if c == 0x22 { return (j + 1, escaped) }
                j += 1
            }
            return nil
        }
        while i < n {
            let c = line[i]
            switch c {
            case 0x22:  // "
                guard let (end, hasEscape) = endOfString(i) else { return found }
                if depth == 1 && expectKey {
                    expectKey = false
                    pendingKeyMatch = !hasEscape && end - i - 2 == target.count && line[(i + 1)..<(end - 1)].elementsEqual(target)
                    if pendingKeyMatch {
                        // Expect `:` then a string value.
                        var j = end
                        while j < n && isWS(line[j]) { j += 1 }
                        guard j < n, line[j] == UInt8(ascii: ":") else { i = end; continue }
                        j += 1
                        while j < n && isWS(line[j]) { j += 1 }
                        if j < n, line[j] == 0x22, let (vEnd, _) = endOfString(j) {
                            found.append((j + 1)..<(vEnd - 1))
                            i = vEnd
                            pendingKeyMatch = false
                            continue
                        }
                        pendingKeyMatch = false
                    }
                }
                i = end
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                expectKey = depth == 1 && c == UInt8(ascii: "{")
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
            case UInt8(ascii: ","):
                if depth == 1 { expectKey = true }
            default:
                break
            }
            i += 1
        }
        return found
    }

    /// Strict standard base64 (padding optional) for non-secret values.
    static func base64Decode(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count / 4 * 3)
        var acc: UInt32 = 0
        var bits = 0
        var padding = 0
        for c in text.utf8 {
            let v: UInt32
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = UInt32(c - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = UInt32(c - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = UInt32(c - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "+"): v = 62
            case UInt8(ascii: "/"): v = 63
            case UInt8(ascii: "="): padding += 1; continue
            default: return nil
            }
            guard padding == 0 else { return nil }
            acc = (acc << 6) | v
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((acc >> UInt32(bits)) & 0xFF))
            }
        }
        // Leftover bits must be zero padding of a valid length.
        guard bits < 6, acc & ((1 << UInt32(bits)) - 1) == 0, padding <= 2 else { return nil }
        return out
    }

    // MARK: - Encoding (vault → plugin); every line ends with "\n"

    /// The first line of every run.
    public static func start(_ op: PluginOperation, factor: String, language: Language, slot: EnrolledSlot?) -> [UInt8] {
        var o: [String: JSON] = [
            "type": "start", "version": .int(Int64(version)), "op": .string(op.rawValue),
            "factor": .string(factor), "lang": .string(language.rawValue),
        ]
        if let slot {
            o["slot"] = ["binding": .object(slot.binding.mapValues { .string($0) }), "attempt": .int(Int64(slot.attempt))]
        }
        return JSON.object(o).serialized() + [0x0A]
    }

    /// `{"type":"answer","value":"<secret>"}` built byte by byte from guarded
    /// memory. The caller wipes the returned array once it is written.
    public static func answer(secret: SecureBytes) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(secret.count * 2 + 32)
        out.append(contentsOf: Array(#"{"type":"answer","value":""#.utf8))
        secret.withUnsafeBytes { bytes in
            let hex: [UInt8] = Array("0123456789abcdef".utf8)
            for c in bytes {
                switch c {
                case 0x22: out.append(0x5C); out.append(0x22)
                case 0x5C: out.append(0x5C); out.append(0x5C)
                case 0..<0x20, 0x7F:
                    out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(c >> 4)], hex[Int(c & 0xF)]])
                default: out.append(c)
                }
            }
        }
        out.append(contentsOf: Array("\"}\n".utf8))
        return out
    }

    public static func answer(confirmed: Bool) -> [UInt8] {
        Array(#"{"type":"answer","value":\#(confirmed)}"#.utf8) + [0x0A]
    }

    public static let cancel: [UInt8] = Array(#"{"type":"cancel"}"#.utf8) + [0x0A]
}

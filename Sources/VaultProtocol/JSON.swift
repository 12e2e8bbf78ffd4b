/// A JSON value. The protocol's frames are small objects; a purpose-built parser
/// keeps them exact (integers stay integers, `true` is never `1`), bounded
/// (nesting depth) and fast, with no Foundation bridging on the hot path.
public enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    public subscript(key: String) -> JSON? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }
    public var intValue: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) < 9.0e15: return Int64(d)
        default: return nil
        }
    }
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }
    public var objectValue: [String: JSON]? {
        if case .object(let o) = self { return o }
        return nil
    }
    public var arrayValue: [JSON]? {
        if case .array(let a) = self { return a }
        return nil
    }
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSON)...) {
        var o: [String: JSON] = [:]
        for (k, v) in elements { o[k] = v }
        self = .object(o)
    }
    public init(nilLiteral: ()) { self = .null }
}

public struct JSONParseError: Error, Equatable, Sendable {
    public let offset: Int
    public let reason: String
}

// MARK: - Parsing

extension JSON {
    public static let maxDepth = 32

    public static func parse(_ text: String) throws(JSONParseError) -> JSON {
        try parse(Array(text.utf8))
    }

    public static func parse<C: Collection>(_ bytes: C) throws(JSONParseError) -> JSON where C.Element == UInt8 {
        try parse(bytes, secretField: nil) { _ in }
    }

    /// Parses like `parse`, except that a string value of the top-level
    /// member `secretField` never becomes a Swift `String` (which cannot be
    /// wiped): its UTF-8 bytes are handed to `takeSecret`, straight from
    /// `bytes` when it has no escapes, and the member reads as `null`.
    public static func parse<C: Collection>(_ bytes: C, secretField: String?,
                                            takeSecret: @escaping (UnsafeBufferPointer<UInt8>) -> Void) throws(JSONParseError) -> JSON
    where C.Element == UInt8 {
        let result: Result<JSON, JSONParseError>? = bytes.withContiguousStorageIfAvailable { buf in
            var p = Parser(buf, secretField: secretField, takeSecret: takeSecret)
            return Result { () throws(JSONParseError) in try p.parseDocument() }
        }
        if let result { return try result.get() }
        let copy = Array(bytes)
        return try copy.withUnsafeBufferPointer { buf in
            var p = Parser(buf, secretField: secretField, takeSecret: takeSecret)
            return Result { () throws(JSONParseError) in try p.parseDocument() }
        }.get()
    }
}

private struct Parser {
    let b: UnsafeBufferPointer<UInt8>
    var i = 0
    let secretField: String?
    let takeSecret: (UnsafeBufferPointer<UInt8>) -> Void

    init(_ b: UnsafeBufferPointer<UInt8>, secretField: String? = nil, takeSecret: @escaping (UnsafeBufferPointer<UInt8>) -> Void = { _ in }) {
        self.b = b
        self.secretField = secretField
        self.takeSecret = takeSecret
    }

    func fail(_ reason: String) -> JSONParseError { JSONParseError(offset: i, reason: reason) }

    mutating func skipWS() {
        while i < b.count {
            let c = b[i]
            if c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { i += 1 } else { break }
        }
    }

    mutating func parseDocument() throws(JSONParseError) -> JSON {
        skipWS()
        let v = try parseValue(depth: 0)
        skipWS()
        guard i == b.count else { throw fail("trailing characters") }
        return v
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSON {
        guard depth <= JSON.maxDepth else { throw fail("nested too deeply") }
        guard i < b.count else { throw fail("unexpected end") }
        switch b[i] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    mutating func literal(_ word: StaticString) throws(JSONParseError) {
        let n = word.utf8CodeUnitCount
        guard i + n <= b.count else { throw fail("unexpected end") }
        let w = word.utf8Start
        for k in 0..<n where b[i + k] != w[k] { throw fail("invalid literal") }
        i += n
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSON {
        i += 1
        var o: [String: JSON] = [:]
        skipWS()
        if i < b.count, b[i] == UInt8(ascii: "}") { i += 1; return .object(o) }
        while true {
            skipWS()
            guard i < b.count, b[i] == UInt8(ascii: "\"") else { throw fail("expected a key") }
            let key = try parseString()
            skipWS()
            guard i < b.count, b[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            i += 1
            skipWS()
            let v: JSON
            if depth == 0, key == secretField, i < b.count, b[i] == UInt8(ascii: "\"") {
                try parseSecret()
                v = .null
            } else {
                v = try parseValue(depth: depth + 1)
            }
            // Duplicate keys are ambiguous (which one wins differs between parsers): refuse them.
            guard o.updateValue(v, forKey: key) == nil else { throw fail("duplicate key") }
            skipWS()
            guard i < b.count else { throw fail("unexpected end") }
            if b[i] == UInt8(ascii: ",") { i += 1; continue }
            if b[i] == UInt8(ascii: "}") { i += 1; return .object(o) }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSON {
        i += 1
        var a: [JSON] = []
        skipWS()
        if i < b.count, b[i] == UInt8(ascii: "]") { i += 1; return .array(a) }
        while true {
            skipWS()
            a.append(try parseValue(depth: depth + 1))
            skipWS()
            guard i < b.count else { throw fail("unexpected end") }
            if b[i] == UInt8(ascii: ",") { i += 1; continue }
            if b[i] == UInt8(ascii: "]") { i += 1; return .array(a) }
            throw fail("expected ',' or ']'")
        }
    }

    mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard i + 4 <= b.count else { throw fail("short \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = b[i]
            let d: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw fail("bad \\u escape")
            }
            v = v << 4 | d
            i += 1
        }
        return v
    }

    /// A string handed to `takeSecret` as bytes. Without escapes (a PIN is
    /// digits) it is validated and handed over in place; with escapes it is
    /// decoded through `parseString`, the one case where a String is made.
    mutating func parseSecret() throws(JSONParseError) {
        let open = i
        i += 1
        let start = i
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: b[start..<i])
                guard Parser.isValidUTF8(slice) else { throw fail("invalid UTF-8") }
                i += 1
                takeSecret(slice)
                return
            }
            if c == UInt8(ascii: "\\") || c < 0x20 { break }
            i += 1
        }
        i = open
        var bytes = Array(try parseString().utf8)
        bytes.withUnsafeBufferPointer { takeSecret($0) }
        bytes.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
    }

    static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var input = bytes.makeIterator()
        var parser = Unicode.UTF8.ForwardParser()
        while true {
            switch parser.parseScalar(from: &input) {
            case .valid: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }

    mutating func parseString() throws(JSONParseError) -> String {
        i += 1
        let start = i
        // Fast path: no escapes.
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: b[start..<i])
                i += 1
                guard let s = String(validating: slice, as: UTF8.self) else { throw fail("invalid UTF-8") }
                return s
            }
            if c == UInt8(ascii: "\\") || c < 0x20 { break }
            i += 1
        }
        var out = Array(b[start..<i])
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                guard let s = String(validating: out, as: UTF8.self) else { throw fail("invalid UTF-8") }
                return s
            }
            if c < 0x20 { throw fail("control character in string") }
            if c != UInt8(ascii: "\\") { out.append(c); i += 1; continue }
            i += 1
            guard i < b.count else { throw fail("unexpected end") }
            let e = b[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if scalar >= 0xD800 && scalar < 0xDC00 {
                    guard i + 2 <= b.count, b[i] == UInt8(ascii: "\\"), b[i + 1] == UInt8(ascii: "u") else {
                        throw fail("lone surrogate")
                    }
                    i += 2
                    let low = try hex4()
                    guard low >= 0xDC00 && low < 0xE000 else { throw fail("bad surrogate pair") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if scalar >= 0xDC00 && scalar < 0xE000 {
                    throw fail("lone surrogate")
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("bad code point") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default: throw fail("bad escape")
            }
        }
        throw fail("unterminated string")
    }

    mutating func parseNumber() throws(JSONParseError) -> JSON {
        let start = i
        if b[i] == UInt8(ascii: "-") { i += 1 }
        guard i < b.count, b[i] >= 0x30, b[i] <= 0x39 else { throw fail("bad number") }
        if b[i] == 0x30 {
            i += 1
        } else {
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 { i += 1 }
        }
        var isInt = true
        if i < b.count, b[i] == UInt8(ascii: ".") {
            isInt = false
            i += 1
            guard i < b.count, b[i] >= 0x30, b[i] <= 0x39 else { throw fail("bad number") }
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 { i += 1 }
        }
        if i < b.count, b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") {
            isInt = false
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
            guard i < b.count, b[i] >= 0x30, b[i] <= 0x39 else { throw fail("bad number") }
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 { i += 1 }
        }
        guard let text = String(validating: UnsafeBufferPointer(rebasing: b[start..<i]), as: UTF8.self) else {
            throw fail("bad number")
        }
        if isInt, let v = Int64(text) { return .int(v) }
        guard let d = Double(text), d.isFinite else { throw fail("number out of range") }
        return .double(d)
    }
}

// MARK: - Serialising

extension JSON {
    /// Compact UTF-8 serialisation with sorted keys (stable output for tests and logs).
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(1024)
        write(into: &out)
        return out
    }

    public var text: String { String(decoding: serialized(), as: UTF8.self) }

    public func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
        case .bool(let v): out.append(contentsOf: v ? Array("true".utf8) : Array("false".utf8))
        case .int(let v): out.append(contentsOf: Array(String(v).utf8))
        case .double(let v):
            if v.isFinite { out.append(contentsOf: Array(String(v).utf8)) } else { out.append(contentsOf: Array("null".utf8)) }
        case .string(let s): JSON.writeString(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (n, v) in a.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                v.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            for (n, k) in o.keys.sorted().enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(k, into: &out)
                out.append(UInt8(ascii: ":"))
                o[k]?.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            // Tokens are long runs of safe bytes: copy runs in bulk, escape the rest.
            var runStart = 0
            for i in 0..<bytes.count {
                let c = bytes[i]
                guard c < 0x20 || c == 0x22 || c == 0x5C || c == 0x7F else { continue }
                if runStart < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i])) }
                runStart = i + 1
                switch c {
                case 0x22: out.append(0x5C); out.append(0x22)
                case 0x5C: out.append(0x5C); out.append(0x5C)
                case 0x0A: out.append(0x5C); out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(0x5C); out.append(UInt8(ascii: "r"))
                case 0x09: out.append(0x5C); out.append(UInt8(ascii: "t"))
                default:
                    let hexDigits: StaticString = "0123456789abcdef"
                    out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30])
                    out.append(hexDigits.utf8Start[Int(c >> 4)])
                    out.append(hexDigits.utf8Start[Int(c & 0xF)])
                }
            }
            if runStart < bytes.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<bytes.count])) }
        }
        out.append(UInt8(ascii: "\""))
    }
}

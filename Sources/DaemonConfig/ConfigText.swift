/// The TOML that config.toml uses, and nothing more: every line is blank, a
/// `# comment`, a `[table]` header, or `key = value` where the value is a
/// whole number, `true`/`false`, or a one-line string, each with an optional
/// comment after it. That subset is valid TOML and means the same there;
/// anything outside it (arrays, inline tables, multi-line strings, dates, a
/// table written twice) is refused with its line number, never guessed at.
///
/// Parsed here rather than by a TOML library: the one SessionVault used
/// (TOMLKit over toml++) aborted the process on some malformed input (found by
/// fuzzing) and imported Foundation, which linked ICU's data into vaultd.
enum ConfigText {
    enum Value {
        case integer(Int)
        case boolean(Bool)
        case text(String)

        /// What a person wrote, in the words of the error messages.
        var kind: String {
            switch self {
            case .integer: return "a whole number"
            case .boolean: return "true or false"
            case .text: return "text in quotes"
            }
        }
    }

    struct Entry {
        var value: Value
        var line: Int
    }

    /// Table name ("" for the top level, "pin", "providers.bankid") → its keys.
    typealias Tables = [String: [String: Entry]]

    static func parse(_ text: String) throws(ConfigError) -> Tables {
        let space = " \t"
        var tables: Tables = ["": [:]]
        var table = ""
        var headerLine: [String: Int] = [:]
        // Split on scalars: as Characters, "\r\n" is one grapheme and never equals "\n".
        for (index, scalars) in text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let n = index + 1
            let raw = String(String.UnicodeScalarView(scalars))
            // TOML's whitespace is space and tab only; anything else stays and is checked.
            let line = raw.trimmingTOMLSpace(" \t\r")
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                let body = line.split(separator: "#", maxSplits: 1)[0].trimmingTOMLSpace(space)
                let isArray = body.hasPrefix("[[")
                let open = isArray ? 2 : 1
                guard body.hasSuffix(isArray ? "]]" : "]"), body.count > 2 * open,
                      isDottedKey(body.dropFirst(open).dropLast(open)[...]) else {
                    throw ConfigError(detail: "line \(n): a table header like [pin] was expected")
                }
                table = body.dropFirst(open).dropLast(open).split(separator: ".").map { $0.trimmingTOMLSpace(space) }
                    .joined(separator: ".")
                guard !isArray, FileConfig.knownKeys(table: table) != nil else {
                    throw ConfigError(detail: "line \(n): there is no table [\(table)]; docs/operations.md lists the settings")
                }
                if let first = headerLine[table] {
                    throw ConfigError(detail: "line \(n): [\(table)] was already begun on line \(first); put its settings together under one header")
                }
                headerLine[table] = n
                tables[table] = [:]
                continue
            }
            guard let eq = line.firstIndex(of: "="), isDottedKey(line[..<eq]) else {
                throw ConfigError(detail: "line \(n): “key = value” was expected (keys use letters, digits, “_” and “-”)")
            }
            // A mistyped setting would otherwise be ignored without a word, and
            // the person would believe, say, a shorter lock timeout is in force.
            let key = line[..<eq].trimmingTOMLSpace(space)
            if let known = FileConfig.knownKeys(table: table), !known.contains(key) {
                let place = table.isEmpty ? "at the top level" : "in [\(table)]"
                throw ConfigError(detail: "line \(n): “\(key)” is not a setting \(place); docs/operations.md lists the settings")
            }
            guard let value = parseValue(line[line.index(after: eq)...].trimmingTOMLSpace(space)) else {
                throw ConfigError(detail: "line \(n): the value must be a whole number, true or false, or \"text in quotes\"")
            }
            if let first = tables[table]?[key] {
                throw ConfigError(detail: "line \(n): “\(key)” is already set on line \(first.line); keep one of them")
            }
            tables[table, default: [:]][key] = Entry(value: value, line: n)
        }
        return tables
    }

    static func isDottedKey(_ s: Substring) -> Bool {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        return !parts.isEmpty && parts.allSatisfy { part in
            let t = part.trimmingTOMLSpace(" \t")
            return !t.isEmpty && t.unicodeScalars.allSatisfy {
                ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") || $0 == "_" || $0 == "-"
            }
        }
    }

    /// A whole number, a boolean, or a one-line string, then an optional
    /// comment; nil for anything else.
    static func parseValue(_ written: String) -> Value? {
        var rest = Substring(written)
        let value: Value
        if let quote = rest.first, quote == "\"" || quote == "'" {
            rest = rest.dropFirst()
            var text = ""
            var escaped = false
            var closed = false
            while let c = rest.first {
                rest = rest.dropFirst()
                if escaped {
                    // TOML's escapes but \u and \U, which the config never needs.
                    let unescaped: [Character: Character] = ["\"": "\"", "\\": "\\", "b": "\u{8}", "f": "\u{C}",
                                                             "n": "\n", "r": "\r", "t": "\t"]
                    guard let u = unescaped[c] else { return nil }
                    text.append(u)
                    escaped = false
                } else if quote == "\"", c == "\\" {
                    escaped = true
                } else if c == quote {
                    closed = true
                    break
                } else {
                    text.append(c)
                }
            }
            guard closed else { return nil }
            value = .text(text)
        } else if rest.hasPrefix("true") {
            rest = rest.dropFirst(4)
            value = .boolean(true)
        } else if rest.hasPrefix("false") {
            rest = rest.dropFirst(5)
            value = .boolean(false)
        } else {
            var sign = ""
            if let s = rest.first, s == "-" || s == "+" {
                sign = s == "-" ? "-" : ""
                rest = rest.dropFirst()
            }
            let digits = rest.prefix { $0.isASCII && $0.isNumber }
            // TOML: no leading zeros. 18 digits always fit in an Int.
            guard !digits.isEmpty, digits.count <= 18, digits == "0" || !digits.hasPrefix("0"),
                  let number = Int(sign + digits) else { return nil }
            rest = rest.dropFirst(digits.count)
            value = .integer(number)
        }
        let tail = rest.trimmingTOMLSpace(" \t")
        return tail.isEmpty || tail.hasPrefix("#") ? value : nil
    }
}

// MARK: - Decoding into FileConfig

/// Reads parsed tables into the config's Codable types: a struct is the table
/// its key names, `[String: ProviderSection]` the tables under `providers.`.
/// A value of the wrong kind is refused with its line and what was expected.
struct ConfigDecoder: Decoder {
    let tables: ConfigText.Tables
    /// The table this decoder reads ([] for the top level).
    let path: [String]

    var codingPath: [any CodingKey] { path.map { ConfigKey($0) } }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(ConfigTable<Key>(decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, .init(codingPath: codingPath, debugDescription: "a list"))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw DecodingError.typeMismatch(Any.self, .init(codingPath: codingPath, debugDescription: "a single value"))
    }
}

struct ConfigKey: CodingKey {
    var stringValue: String
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    var intValue: Int? { nil }
    init?(intValue: Int) { nil }
}

/// Thrown for a value of the wrong kind; `FileConfig.parse` turns it into the sentence.
struct WrongKind: Error {
    var detail: String
}

struct ConfigTable<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: ConfigDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    private var name: String { decoder.path.joined(separator: ".") }
    private var entries: [String: ConfigText.Entry] { decoder.tables[name] ?? [:] }
    /// The tables directly under this one.
    private var subtables: [String] {
        let prefix = name.isEmpty ? "" : name + "."
        return decoder.tables.keys.compactMap { table in
            guard !table.isEmpty, table.hasPrefix(prefix) else { return nil }
            let rest = table.dropFirst(prefix.count)
            return rest.contains(".") ? nil : String(rest)
        }
    }

    var allKeys: [Key] { (Array(entries.keys) + subtables).compactMap { Key(stringValue: $0) } }

    /// A setting, a table, or (as `providers`) a name with tables under it.
    func contains(_ key: Key) -> Bool {
        let table = (name.isEmpty ? "" : name + ".") + key.stringValue
        return entries[key.stringValue] != nil || decoder.tables.keys.contains { $0 == table || $0.hasPrefix(table + ".") }
    }

    func decodeNil(forKey key: Key) throws -> Bool { !contains(key) }

    private func entry(_ key: Key, _ expected: String) throws -> ConfigText.Entry {
        guard let entry = entries[key.stringValue] else {
            let place = (decoder.path + [key.stringValue]).joined(separator: ".")
            throw WrongKind(detail: "“\(place)” must be \(expected), not a table")
        }
        return entry
    }

    private func wrong(_ key: Key, _ entry: ConfigText.Entry, _ expected: String) -> WrongKind {
        let place = (decoder.path + [key.stringValue]).joined(separator: ".")
        return WrongKind(detail: "line \(entry.line): “\(place)” must be \(expected), not \(entry.value.kind)")
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        let e = try entry(key, "text in quotes")
        guard case .text(let s) = e.value else { throw wrong(key, e, "text in quotes") }
        return s
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        let e = try entry(key, "true or false")
        guard case .boolean(let b) = e.value else { throw wrong(key, e, "true or false") }
        return b
    }

    func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
        let e = try entry(key, "a whole number")
        guard case .integer(let i) = e.value else { throw wrong(key, e, "a whole number") }
        return i
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        if let e = entries[key.stringValue] { throw wrong(key, e, "a table of settings") }
        return try T(from: ConfigDecoder(tables: decoder.tables, path: decoder.path + [key.stringValue]))
    }

    // The config has no other kinds of value.
    private func unsupported<T>(_ key: Key) throws -> T {
        let e = try entry(key, "a whole number")
        throw wrong(key, e, "a kind of value this setting never has")
    }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try unsupported(key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try unsupported(key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try unsupported(key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try unsupported(key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try unsupported(key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try unsupported(key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try unsupported(key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try unsupported(key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try unsupported(key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try unsupported(key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try unsupported(key) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey> {
        KeyedDecodingContainer(ConfigTable<NestedKey>(decoder: ConfigDecoder(tables: decoder.tables, path: decoder.path + [key.stringValue])))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try ConfigDecoder(tables: decoder.tables, path: decoder.path + [key.stringValue]).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { decoder }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        ConfigDecoder(tables: decoder.tables, path: decoder.path + [key.stringValue])
    }
}

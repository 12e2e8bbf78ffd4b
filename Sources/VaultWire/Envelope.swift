import VaultProtocol

/// Protocol version 1 framing: one JSON object per line (NDJSON).
public enum Wire {
    public static let version: Int64 = 1
    /// A line longer than this is answered with one `bad_request` and the connection closed.
    public static let maxLineBytes = 65_536
}

/// A decoded request line. `id` is the client's (integer or string); `fields`
/// holds everything else, including `op`.
public struct Request: Sendable {
    public var id: JSON
    public var op: String
    public var fields: [String: JSON]

    public init(id: JSON, op: String, fields: [String: JSON] = [:]) {
        self.id = id
        self.op = op
        self.fields = fields
    }

    public subscript(key: String) -> JSON? { fields[key] }

    /// Why a line could not become a request: the failure to send, and the id
    /// it should carry (null when the line had no usable id).
    public struct DecodeFailure: Error, Sendable {
        public var id: JSON
        public var failure: VaultFailure
    }

    public static func decode<C: Collection>(line: C) throws(DecodeFailure) -> Request where C.Element == UInt8 {
        try decode(line: line, secretField: nil) { _ in }
    }

    /// Decodes like `decode(line:)`; a top-level string `secretField` is
    /// handed to `takeSecret` as bytes instead of becoming a field (it reads
    /// as `null`). vaultd passes "value", so an `answer` (a PIN) goes from the
    /// read buffer straight into secure memory.
    public static func decode<C: Collection>(line: C, secretField: String?,
                                             takeSecret: @escaping (UnsafeBufferPointer<UInt8>) -> Void) throws(DecodeFailure) -> Request
    where C.Element == UInt8 {
        let value: JSON
        do {
            value = try JSON.parse(line, secretField: secretField, takeSecret: takeSecret)
        } catch {
            throw DecodeFailure(id: .null, failure: .badRequest(LocalizedText(
                en: "The request is not valid JSON. Send one JSON object per line.",
                nb: "Forespørselen er ikke gyldig JSON. Send ett JSON-objekt per linje.")))
        }
        guard case .object(var o) = value else {
            throw DecodeFailure(id: .null, failure: .badRequest(LocalizedText(
                en: "The request must be a JSON object with an “op” field.",
                nb: "Forespørselen må være et JSON-objekt med feltet «op».")))
        }
        let id: JSON
        switch o["id"] {
        case .some(.int(let i)): id = .int(i)
        case .some(.string(let s)) where s.utf8.count <= 256: id = .string(s)
        case .none, .some(.null): id = .null
        default:
            throw DecodeFailure(id: .null, failure: .badRequest(LocalizedText(
                en: "The request “id” must be an integer or a short string.",
                nb: "Forespørselens «id» må være et heltall eller en kort tekst.")))
        }
        guard case .some(.string(let op)) = o["op"], !op.isEmpty else {
            throw DecodeFailure(id: id, failure: .badRequest(LocalizedText(
                en: "The request has no “op” field. Say which operation you want, for example “status”.",
                nb: "Forespørselen mangler feltet «op». Oppgi hvilken operasjon du vil ha, for eksempel «status».")))
        }
        o["id"] = nil
        o["op"] = nil
        return Request(id: id, op: op, fields: o)
    }

    public func encoded() -> [UInt8] {
        var o = fields
        o["op"] = .string(op)
        if id != .null { o["id"] = id }
        var out = JSON.object(o).serialized()
        out.append(0x0A)
        return out
    }
}

/// What the server writes: a final answer or a prompt event.
public enum Response: Sendable {
    case success(id: JSON, result: JSON)
    case failure(id: JSON, error: VaultFailure, language: Language)
    case prompt(id: JSON, prompt: Prompt)

    public func encoded() -> [UInt8] {
        let value: JSON
        switch self {
        case .success(let id, let result):
            value = ["id": id, "ok": true, "result": result]
        case .failure(let id, let error, let language):
            value = ["id": id, "ok": false, "error": error.json(language)]
        case .prompt(let id, let prompt):
            value = ["id": id, "event": "prompt", "prompt": prompt.json]
        }
        var out = value.serialized()
        out.append(0x0A)
        return out
    }
}

/// A question or message for the person, relayed to an interactive client.
public struct Prompt: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case secret, confirm, message, openURL = "open_url", choice
    }
    public var pid: String
    public var kind: Kind
    public var text: String
    public var extra: [String: JSON]

    public init(pid: String, kind: Kind, text: String, extra: [String: JSON] = [:]) {
        self.pid = pid
        self.kind = kind
        self.text = text
        self.extra = extra
    }

    public var json: JSON {
        var o = extra
        o["pid"] = .string(pid)
        o["kind"] = .string(kind.rawValue)
        o["text"] = .string(text)
        return .object(o)
    }

    public init?(json: JSON) {
        guard let o = json.objectValue, let pid = o["pid"]?.stringValue,
              let k = o["kind"]?.stringValue, let kind = Kind(rawValue: k),
              let text = o["text"]?.stringValue else { return nil }
        var extra = o
        extra["pid"] = nil
        extra["kind"] = nil
        extra["text"] = nil
        self.init(pid: pid, kind: kind, text: text, extra: extra)
    }
}

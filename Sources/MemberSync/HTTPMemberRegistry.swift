import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NationalID
import SodiumKit
import VaultProtocol

/// The organization's member system over HTTP(S) with JSON. The API is in
/// docs/member-sync.md:
///
///     POST {base}/v1/members/lookup        {"provider","subject"}
///          200 {"member_id","national_id"|null or "national_id_hash","organizations":[…]}
///          404 no member linked to this login
///     POST {base}/v1/members/national-id   {"provider","subject","national_id","source"}
///          Idempotency-Key: <key>
///          200 {"result":"written"|"unchanged"}, 409 different number on record, 404 no member
///
/// Every request carries the configured auth header and has one deadline
/// (`timeout`) for connecting, sending and reading. Connection errors,
/// timeouts, 5xx, 408, 425 and 429 are `.unreachable`/`.unavailable` (the
/// engine queues and retries); other 4xx are `.rejected`.
///
/// Errors carry the transport's own short description or the status code,
/// never a body. The request body of a write holds the number in clear (it is
/// going to the member record); our copy is wiped, NIO's buffers are not.
public struct HTTPMemberRegistry: MemberRegistry {
    /// One header sent with every request, e.g. `.bearer(token)` or
    /// `AuthHeader(name: "X-Api-Key", value: key)`.
    public struct AuthHeader: Sendable {
        public var name: String
        public var value: String
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
        public static func bearer(_ token: String) -> AuthHeader {
            AuthHeader(name: "Authorization", value: "Bearer " + token)
        }
    }

    public let baseURL: String
    public let authHeader: AuthHeader?
    public let timeout: Duration
    private let comparisonKey: SecureBytes?
    private let client: HTTPClient

    /// Largest response body read (the answers are small objects).
    static let maxBody = 256 * 1024

    /// - Parameters:
    ///   - baseURL: e.g. `https://members.example.org/api` (a trailing `/` is ignored).
    ///   - authHeader: sent with every request.
    ///   - timeout: the whole request, connect included.
    ///   - comparisonKey: the key shared with a registry that answers with
    ///     `national_id_hash` instead of the number (16–64 bytes).
    ///   - client: defaults to `HTTPMemberRegistry.defaultClient`, one
    ///     process-wide client that needs no shutdown.
    public init(baseURL: String, authHeader: AuthHeader?, timeout: Duration = .seconds(10),
                comparisonKey: SecureBytes? = nil, client: HTTPClient = HTTPMemberRegistry.defaultClient) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.authHeader = authHeader
        self.timeout = timeout
        self.comparisonKey = comparisonKey
        self.client = client
    }

    public func lookup(memberKey: MemberKey) async throws(RegistryError) -> MemberRecord? {
        let body: JSON = ["provider": .string(memberKey.provider), "subject": .string(memberKey.subject)]
        var bytes = body.serialized()
        let (status, answer) = try await post("/v1/members/lookup", body: &bytes, headers: [])
        switch status {
        case 200:
            break
        case 404:
            return nil
        default:
            throw Self.statusError(status)
        }
        guard let object = answer?.objectValue else { throw .badResponse("lookup: not a JSON object") }
        guard let memberID = object["member_id"]?.stringValue, !memberID.isEmpty else {
            throw .badResponse("lookup: no member_id")
        }
        let nationalID: NationalIDOnRecord
        if let text = object["national_id"]?.stringValue, !text.isEmpty {
            do {
                nationalID = .number(try SecureBytes.utf8(text))
            } catch {
                throw .storage("secure memory")
            }
        } else if let hex = object["national_id_hash"]?.stringValue, !hex.isEmpty {
            guard let key = comparisonKey else {
                throw .badResponse("lookup: national_id_hash but no comparison key is configured")
            }
            nationalID = .keyedHash(hex: hex, key: key)
        } else {
            nationalID = .none
        }
        var organizations: [Organization] = []
        for entry in object["organizations"]?.arrayValue ?? [] {
            guard let id = entry["id"]?.stringValue, !id.isEmpty else {
                throw .badResponse("lookup: organization without id")
            }
            let roles = (entry["roles"]?.arrayValue ?? []).compactMap(\.stringValue)
            organizations.append(Organization(id: id, name: entry["name"]?.stringValue ?? id, roles: roles))
        }
        return MemberRecord(memberID: memberID, nationalID: nationalID, organizations: organizations)
    }

    @discardableResult
    public func setNationalID(memberKey: MemberKey, number: NationalIDNumber, source: String,
                              idempotencyKey: String) async throws(RegistryError) -> SetNationalIDResult {
        // {"provider":…,"subject":…,"source":…,"national_id":"<digits>"}, the
        // digits copied straight from secure memory into this array, wiped below.
        var bytes = Array(#"{"provider":"#.utf8)
        JSON.string(memberKey.provider).write(into: &bytes)
        bytes += Array(#","subject":"#.utf8)
        JSON.string(memberKey.subject).write(into: &bytes)
        bytes += Array(#","source":"#.utf8)
        JSON.string(source).write(into: &bytes)
        bytes += Array(#","national_id":""#.utf8)
        number.withUnsafeDigits { bytes.append(contentsOf: $0) }
        bytes += Array(#""}"#.utf8)
        let (status, answer) = try await post("/v1/members/national-id", body: &bytes,
                                              headers: [("Idempotency-Key", idempotencyKey)])
        switch status {
        case 200, 201:
            switch answer?["result"]?.stringValue {
            case "written": return .written
            case "unchanged": return .unchanged
            default: throw .badResponse("write: no result")
            }
        case 409:
            throw .conflict
        case 404:
            throw .memberNotFound
        default:
            throw Self.statusError(status)
        }
    }

    /// The process-wide client (a global, so never shut down or deinitialised,
    /// like `HTTPClient.shared`), configured for a registry behind a retry queue:
    ///
    /// - a refused or failed connection fails the request at once
    ///   (`retryConnectionEstablishment = false`): AsyncHTTPClient would otherwise
    ///   keep reconnecting until the request's deadline, and the queue retries anyway;
    /// - redirects are not followed: a write's body holds the number, and it goes
    ///   to the configured registry or nowhere;
    /// - connect timeout 5 s (each request's own deadline still bounds the whole).
    public static var defaultClient: HTTPClient { memberRegistryHTTPClient }

    static func statusError(_ status: Int) -> RegistryError {
        if status >= 500 || [408, 425, 429].contains(status) { return .unavailable(status: status) }
        return .rejected(status: status)
    }

    /// Sends `body` (wiped afterwards) and returns the status and the parsed
    /// JSON answer, if any.
    private func post(_ path: String, body: inout [UInt8], headers extra: [(String, String)])
        async throws(RegistryError) -> (Int, JSON?)
    {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Accept", value: "application/json")
        if let authHeader { request.headers.add(name: authHeader.name, value: authHeader.value) }
        for (name, value) in extra { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: body))
        Sodium.wipe(&body)

        let status: Int
        var answer: [UInt8]
        do {
            let response = try await client.execute(request, timeout: Self.timeAmount(timeout))
            status = Int(response.status.code)
            let buffer = try await response.body.collect(upTo: Self.maxBody)
            answer = Array(buffer.readableBytesView)
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout
            || error == .connectTimeout
        {
            throw .unreachable("timeout")
        } catch {
            throw .unreachable(Self.describe(error))
        }
        defer { Sodium.wipe(&answer) }
        if answer.isEmpty { return (status, nil) }
        do {
            return (status, try JSON.parse(answer))
        } catch {
            // A proxy's HTML error page on a 5xx is no reason to fail differently.
            if status >= 300 { return (status, nil) }
            throw .badResponse("not JSON")
        }
    }

    static func timeAmount(_ d: Duration) -> TimeAmount {
        let (seconds, attoseconds) = d.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// The transport's own short text (e.g. "connection refused"), bounded.
    static func describe(_ error: any Error) -> String {
        String(String(describing: error).prefix(160))
    }
}

private let memberRegistryHTTPClient: HTTPClient = {
    var configuration = HTTPClient.Configuration()
    configuration.connectionPool.retryConnectionEstablishment = false
    configuration.redirectConfiguration = .disallow
    configuration.timeout = .init(connect: .seconds(5), read: .seconds(30))
    return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
}()

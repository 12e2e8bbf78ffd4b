import AsyncHTTPClient
import NIOCore
import Locking
import NIOHTTP1
import NIOPosix
import VaultFactor

/// The one HTTP client all providers share (vaultd creates it once and calls
/// `shutdown()` when it stops).
///
/// - A refused connection fails at once (`retryConnectionEstablishment = false`;
///   AsyncHTTPClient's default retries until the deadline).
/// - Redirects are never followed: a provider endpoint that redirects is broken
///   or hostile, and a token request must never be re-sent elsewhere.
/// - Bodies are streamed with a cap, so a huge response cannot blow up memory.
public final class OIDCHTTPClient: Sendable {
    private let group: (any EventLoopGroup)?
    /// Made on the first request: a vaultd that never talks to a provider
    /// never starts AsyncHTTPClient or NIO's shared event loop threads (and
    /// keeps their memory).
    private let made = Locked<HTTPClient?>(nil)

    /// The event loops for HTTP and the loopback listener (NIO's shared group unless given).
    public var eventLoopGroup: any EventLoopGroup { group ?? MultiThreadedEventLoopGroup.singleton }

    public init(eventLoopGroup: (any EventLoopGroup)? = nil) {
        self.group = eventLoopGroup
    }

    var client: HTTPClient {
        made.withLock { made in
            if let client = made { return client }
            var config = HTTPClient.Configuration()
            config.redirectConfiguration = .disallow
            config.connectionPool.retryConnectionEstablishment = false
            config.decompression = .disabled
            config.timeout = HTTPClient.Configuration.Timeout(connect: .seconds(10))
            let client = HTTPClient(eventLoopGroup: eventLoopGroup, configuration: config)
            made = client
            return client
        }
    }

    /// Closes idle connections; pending requests fail. Call once, when vaultd stops.
    public func shutdown() async {
        guard let client = made.withLock({ $0 }) else { return }
        try? await client.shutdown()
    }

    struct Response {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]

        var contentType: String {
            (headers.first(name: "content-type") ?? "").lowercased()
        }
    }

    enum Failure: Error, Equatable {
        /// Refused, reset, DNS, TLS, closed early: the provider cannot be reached.
        case unavailable(String)
        case timeout
        /// The body exceeded the cap.
        case tooLarge
        /// The task was cancelled (the person's client went away).
        case cancelled
        /// The URL is not allowed by the transport policy (http outside loopback).
        case forbiddenURL
    }

    /// One request with a deadline covering connect, headers and body.
    /// The caller has checked the URL against the transport policy.
    func send(_ method: HTTPMethod, _ url: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
              timeout: Duration, maxBytes: Int) async throws(Failure) -> Response {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.headers.replaceOrAdd(name: "user-agent", value: "SessionVault")
        if let body {
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let end = ContinuousClock.now + timeout
        do {
            let response = try await client.execute(request, deadline: .now() + TimeAmount(timeout))
            // AsyncHTTPClient's deadline covers the request until the response head;
            // a body that stalls afterwards would wait forever, so the rest of the
            // time is enforced here.
            let bytes = try await withThrowingTaskGroup(of: [UInt8]?.self) { group in
                group.addTask {
                    var buffer = try await response.body.collect(upTo: maxBytes)
                    return buffer.readBytes(length: buffer.readableBytes) ?? []
                }
                group.addTask {
                    try await Task.sleep(until: end, clock: .continuous)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let body = first else {
                    throw HTTPClientError.deadlineExceeded
                }
                return body
            }
            return Response(status: Int(response.status.code), headers: response.headers, body: bytes)
        } catch {
            throw OIDCHTTPClient.classify(error)
        }
    }

    static func classify(_ error: any Error) -> Failure {
        if error is CancellationError { return .cancelled }
        if error is NIOTooManyBytesError { return .tooLarge }
        if let e = error as? HTTPClientError {
            switch e {
            case .deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout, .getConnectionFromPoolTimeout,
                 .tlsHandshakeTimeout:
                return .timeout
            case .cancelled:
                return .cancelled
            default:
                return .unavailable("http: \(e)")
            }
        }
        // IOError (refused, reset), NIOConnectionError, ChannelError, TLS and DNS errors.
        return .unavailable("\(type(of: error))")
    }
}

/// Which URLs a provider may make us talk to: https, or plain http only on
/// loopback for a loopback issuer (local test providers).
struct TransportPolicy: Sendable {
    let issuerIsLoopback: Bool

    init(issuer: String) {
        if let parts = URLParts(issuer), parts.scheme == "http", parts.isLoopback {
            issuerIsLoopback = true
        } else {
            issuerIsLoopback = false
        }
    }

    func allows(_ url: String) -> Bool {
        guard let parts = URLParts(url) else { return false }
        if parts.scheme == "https" { return true }
        return issuerIsLoopback && parts.isLoopback
    }
}

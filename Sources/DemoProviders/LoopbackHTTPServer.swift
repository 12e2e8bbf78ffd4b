import NIOCore
import NIOHTTP1
import NIOPosix

/// One HTTP request, fully read (bodies are small: forms and nothing else).
struct HTTPRequest: Sendable {
    var method: HTTPMethod
    /// The path without the query, as sent (not percent-decoded).
    var path: String
    /// The raw query string (without `?`), empty when there is none.
    var query: String
    var headers: HTTPHeaders
    var body: [UInt8]

    init(method: HTTPMethod, uri: String, headers: HTTPHeaders, body: [UInt8]) {
        self.method = method
        if let q = uri.firstIndex(of: "?") {
            path = String(uri[..<q])
            query = String(uri[uri.index(after: q)...])
        } else {
            path = uri
            query = ""
        }
        self.headers = headers
        self.body = body
    }
}

struct HTTPResponse: Sendable {
    var status: HTTPResponseStatus
    var headers: [(String, String)]
    var body: [UInt8]

    init(status: HTTPResponseStatus, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    static func text(_ status: HTTPResponseStatus, _ text: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store")],
                     body: Array((text + "\n").utf8))
    }
}

/// An HTTP/1.1 server on 127.0.0.1 (never any other address), ephemeral port.
/// Each connection is served by its own task; requests on one connection in order.
final class LoopbackHTTPServer: Sendable {
    let port: Int
    private let task: Task<Void, Never>

    private init(port: Int, task: Task<Void, Never>) {
        self.port = port
        self.task = task
    }

    static let maxBodyBytes = 64 * 1024
    static let idleTimeout = TimeAmount.seconds(30)

    static func start(group: any EventLoopGroup,
                      handler: @escaping @Sendable (HTTPRequest) async -> HTTPResponse) async throws -> LoopbackHTTPServer {
        let server = try await ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 64)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    // Idle connections (a browser's kept-alive ones, a client that never closes)
                    // are closed after a while.
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(allTimeout: idleTimeout))
                    try channel.pipeline.syncOperations.addHandler(CloseWhenIdle())
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(
                        wrappingChannelSynchronously: channel,
                        configuration: .init(isOutboundHalfClosureEnabled: true))
                }
            }
        guard let port = server.channel.localAddress?.port else {
            try? await server.channel.close()
            throw DemoProvidersError.bind("no local port")
        }
        let task = Task<Void, Never> {
            try? await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { connections in
                    for try await connection in connections {
                        group.addTask { await serve(connection, handler: handler) }
                    }
                }
            }
        }
        return LoopbackHTTPServer(port: port, task: task)
    }

    /// Stops listening and closes every open connection (keep-alive ones included).
    func shutdown() async {
        task.cancel()
        await task.value
    }

    private static func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>,
                              handler: @Sendable (HTTPRequest) async -> HTTPResponse) async {
        // Errors here are transport errors (peer went away, malformed HTTP, shutdown):
        // the connection is closed and there is nothing useful, or safe, to report.
        try? await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            var body: [UInt8] = []
            var tooLarge = false
            var closing = false
            for try await part in inbound {
                if closing { continue }  // after "Connection: close": wait for the client to go
                switch part {
                case .head(let h):
                    head = h
                    body = []
                    tooLarge = false
                case .body(let buffer):
                    if body.count + buffer.readableBytes > maxBodyBytes {
                        tooLarge = true
                    } else if !tooLarge {
                        body.append(contentsOf: buffer.readableBytesView)
                    }
                case .end:
                    guard let h = head else { continue }
                    head = nil
                    let response: HTTPResponse
                    if tooLarge {
                        response = .text(.payloadTooLarge, "Request body too large.")
                    } else {
                        response = await handler(HTTPRequest(method: h.method, uri: h.uri, headers: h.headers, body: body))
                    }
                    body = []
                    let keepAlive = h.isKeepAlive && !tooLarge
                    var headers = HTTPHeaders(response.headers)
                    headers.replaceOrAdd(name: "Content-Length", value: String(response.body.count))
                    if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
                    var parts: [HTTPServerResponsePart] = [
                        .head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers)),
                    ]
                    if !response.body.isEmpty && h.method != .HEAD {
                        parts.append(.body(.byteBuffer(ByteBuffer(bytes: response.body))))
                    }
                    parts.append(.end(nil))
                    try await outbound.write(contentsOf: parts)
                    if !keepAlive {
                        // Returning would close the channel at once and could drop the response
                        // still buffered in the pipeline (swift-nio #2795). Half-close instead: the
                        // output is shut down once everything is written, the client sees the end
                        // and closes, and the loop above ends.
                        outbound.finish()
                        closing = true
                    }
                }
            }
        }
    }
}

/// Closes a connection when `IdleStateHandler` reports it idle.
private final class CloseWhenIdle: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}

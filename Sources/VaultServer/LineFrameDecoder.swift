import NIOCore
import VaultProtocol

/// One inbound frame: a complete line, or the news that a line grew past the limit.
enum Frame {
    case line(ByteBuffer)
    case tooLong
}

/// Splits the byte stream at `\n` (an optional `\r` before it is dropped).
/// A line longer than `Wire.maxLineBytes` is never buffered whole: as soon as
/// the limit is passed the decoder reports `.tooLong` and discards input, and
/// the connection handler answers once and closes.
struct LineFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = Frame

    let maxLineBytes: Int
    /// Bytes already searched for a newline, so a slowly dribbled line is
    /// scanned once, not once per arriving packet.
    private var scanned = 0
    private var overflowed = false

    init(maxLineBytes: Int = Wire.maxLineBytes) {
        self.maxLineBytes = maxLineBytes
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if overflowed {
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
            return .needMoreData
        }
        let view = buffer.readableBytesView
        let searchStart = view.index(view.startIndex, offsetBy: scanned)
        if let newline = view[searchStart...].firstIndex(of: 0x0A) {
            let length = view.distance(from: view.startIndex, to: newline)
            scanned = 0
            if length > maxLineBytes {
                overflow(context: context, buffer: &buffer)
                return .needMoreData
            }
            guard var line = buffer.readSlice(length: length) else { return .needMoreData }
            buffer.moveReaderIndex(forwardBy: 1)
            if line.readableBytes > 0, line.getInteger(at: line.writerIndex - 1, as: UInt8.self) == 0x0D {
                line.moveWriterIndex(to: line.writerIndex - 1)
            }
            context.fireChannelRead(wrapInboundOut(.line(line)))
            return .continue
        }
        scanned = view.count
        if view.count > maxLineBytes {
            overflow(context: context, buffer: &buffer)
        }
        return .needMoreData
    }

    private mutating func overflow(context: ChannelHandlerContext, buffer: inout ByteBuffer) {
        overflowed = true
        scanned = 0
        buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
        context.fireChannelRead(wrapInboundOut(.tooLong))
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        // Whole lines still buffered are served; a partial last line is dropped.
        while try decode(context: context, buffer: &buffer) == .continue {}
        buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
        return .needMoreData
    }
}

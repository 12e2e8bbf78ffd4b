import CVaultShims
import NIOCore
import VaultWire

/// One inbound frame: a complete line, or the news that a line grew past the limit.
public enum Frame {
    case line(ByteBuffer)
    case tooLong
}

/// Splits a connection's byte stream at `\n` (an optional `\r` before it is
/// dropped). A line longer than `Wire.maxLineBytes` is never buffered whole:
/// as soon as the limit is passed the splitter reports `.tooLong` once and
/// ignores everything after, and the connection handler answers and closes.
///
/// Its own target so that the fuzzer (fuzz-frames) reaches it without the server.
/// The connection handler calls it directly rather than through a
/// `ByteToMessageHandler`: a request is usually one whole line in one read,
/// handed on as a slice of the read buffer with no copy, no extra pipeline
/// step and no boxing of the frame.
public struct LineSplitter {
    public let maxLineBytes: Int
    /// A partial line carried over to the next read.
    private var pending: ByteBuffer?
    /// Bytes of `pending` already searched for a newline, so a slowly dribbled
    /// line is scanned once, not once per arriving packet.
    private var scanned = 0
    public private(set) var overflowed = false

    public init(maxLineBytes: Int = Wire.maxLineBytes) {
        self.maxLineBytes = maxLineBytes
    }

    /// Calls `emit` for every whole line in `incoming` (after what was
    /// pending), or once with `.tooLong`; keeps a partial last line.
    public mutating func feed(_ incoming: inout ByteBuffer, _ emit: (Frame) -> Void) {
        guard !overflowed else { return }
        var buffer: ByteBuffer
        if var carried = pending {
            // The read buffer's copy of a line's second part is wiped here; the
            // handler wipes the whole line in `carried` once it is parsed.
            let copied = incoming
            carried.writeBuffer(&incoming)
            copied.withUnsafeReadableBytes { sv_wipe(UnsafeMutableRawPointer(mutating: $0.baseAddress), UInt($0.count)) }
            buffer = carried
            pending = nil
        } else {
            buffer = incoming
        }
        while true {
            let view = buffer.readableBytesView
            let searchStart = view.index(view.startIndex, offsetBy: scanned)
            guard let newline = view[searchStart...].firstIndex(of: 0x0A) else {
                scanned = view.count
                if view.count > maxLineBytes {
                    overflow(emit)
                } else if view.count > 0 {
                    pending = buffer
                }
                return
            }
            let length = view.distance(from: view.startIndex, to: newline)
            scanned = 0
            if length > maxLineBytes {
                overflow(emit)
                return
            }
            guard var line = buffer.readSlice(length: length) else { return }
            buffer.moveReaderIndex(forwardBy: 1)
            if line.readableBytes > 0, line.getInteger(at: line.writerIndex - 1, as: UInt8.self) == 0x0D {
                line.moveWriterIndex(to: line.writerIndex - 1)
            }
            emit(.line(line))
        }
    }

    private mutating func overflow(_ emit: (Frame) -> Void) {
        overflowed = true
        pending = nil
        scanned = 0
        emit(.tooLong)
    }
}

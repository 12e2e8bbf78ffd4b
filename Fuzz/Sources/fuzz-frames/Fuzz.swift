import FuzzReplay
import LineFraming
import NIOCore
import VaultProtocol
import VaultWire

// libFuzzer supplies `main` when scripts/fuzz builds this (-D FUZZING).
#if !FUZZING
@main enum Replay { static func main() { FuzzReplay.main(fuzz) } }
#endif

/// A connection's bytes as vaultd receives them. The first byte picks how the
/// rest arrives in reads (one byte at a time, or chunks of up to 255); the
/// splitter must cut exactly the lines a plain split of the whole input gives
/// (`\n`-terminated, a `\r` before it dropped, a partial last line kept back),
/// and report one `.tooLong` and nothing more once a line passes the limit
/// (a small limit here, so the fuzzer reaches it). Each line is then decoded
/// as a request; one that decodes must survive encode/decode.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let all = UnsafeBufferPointer(start: data, count: size)
    let chunk = Int(all[0]) == 0 ? 1 : Int(all[0])
    let stream = Array(all.dropFirst())
    let limit = 64

    var got: [[UInt8]] = []
    var tooLong = 0
    var splitter = LineSplitter(maxLineBytes: limit)
    var offset = 0
    while offset < stream.count {
        let end = min(offset + chunk, stream.count)
        var buffer = ByteBuffer(bytes: stream[offset..<end])
        splitter.feed(&buffer) { frame in
            switch frame {
            case .line(let line):
                precondition(tooLong == 0, "a line after .tooLong")
                got.append(Array(line.readableBytesView))
            case .tooLong:
                tooLong += 1
            }
        }
        offset = end
    }

    // The reference: every whole line, in order, up to the first that is too long.
    var expected: [[UInt8]] = []
    var expectTooLong = false
    var start = 0
    for (i, byte) in stream.enumerated() where byte == 0x0A {
        var line = Array(stream[start..<i])
        start = i + 1
        if line.count > limit { expectTooLong = true; break }
        if line.last == 0x0D { line.removeLast() }
        expected.append(line)
    }
    // A partial last line past the limit is reported as soon as it passes it.
    if !expectTooLong, stream.count - start > limit { expectTooLong = true }
    precondition(got == expected, "the splitter cut other lines than a plain split")
    precondition(tooLong == (expectTooLong ? 1 : 0), "tooLong reported \(tooLong) times")

    for line in got {
        guard let request = try? Request.decode(line: line) else { continue }
        let again = try? Request.decode(line: request.encoded().dropLast())
        precondition(again?.op == request.op && again?.id == request.id, "a decoded request must survive encode/decode")
        if let value = try? JSON.parse(line) {
            precondition((try? JSON.parse(value.serialized())) == value, "serialise/parse must round-trip")
        }
    }
    return 0
}

import FuzzReplay
import VaultProtocol

// libFuzzer supplies `main` when scripts/fuzz builds this (-D FUZZING).
#if !FUZZING
@main enum Replay { static func main() { FuzzReplay.main(fuzz) } }
#endif

/// One request line as vaultd receives it: decode, and when it decodes,
/// re-encode and decode again (what we write must parse the same).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    guard let request = try? Request.decode(line: bytes) else { return 0 }
    let again = try? Request.decode(line: request.encoded().dropLast())
    precondition(again?.op == request.op && again?.id == request.id, "a decoded request must survive encode/decode")
    if let value = try? JSON.parse(bytes) {
        precondition((try? JSON.parse(value.serialized())) == value, "serialise/parse must round-trip")
    }
    return 0
}

import ExternalFactor
import FuzzReplay

// libFuzzer supplies `main` when scripts/fuzz builds this (-D FUZZING).
#if !FUZZING
@main enum Replay { static func main() { FuzzReplay.main(fuzz) } }
#endif

/// One line from an external factor plugin (an untrusted process).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var line = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? PluginCodec.decode(&line)
    return 0
}

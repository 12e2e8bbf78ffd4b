import FuzzReplay
import ExternalFactor

#if FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt { fuzz(data, size) }
#else
@main enum Replay { static func main() { FuzzReplay.main(fuzz) } }
#endif

/// One line from an external factor plugin (an untrusted process).
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var line = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? PluginCodec.decode(&line)
    return 0
}

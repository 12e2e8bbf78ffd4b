import FuzzReplay
import DaemonConfig

#if FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt { fuzz(data, size) }
#else
@main enum Replay { static func main() { FuzzReplay.main(fuzz) } }
#endif

/// A config file as a person might write it (or mistype it).
func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    _ = try? FileConfig.parse(text)
    return 0
}

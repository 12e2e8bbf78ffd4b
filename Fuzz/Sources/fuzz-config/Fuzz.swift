import DaemonConfig
import FuzzReplay

// libFuzzer supplies `main` when scripts/fuzz builds this (-D FUZZING).
#if !FUZZING
@main enum Replay { static func main() { FuzzReplay.main(fuzz) } }
#endif

/// A config file as a person might write it (or mistype it).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    _ = try? FileConfig.parse(text)
    return 0
}

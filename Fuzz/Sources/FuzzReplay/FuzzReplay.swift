import Foundation

/// What a fuzz target is when it is built without libFuzzer (every build but
/// scripts/fuzz's): a program that feeds files through the target's
/// `LLVMFuzzerTestOneInput` body, so a crash input from Fuzz/crashes/ or a
/// whole corpus can be replayed under the debugger or a plain `swift run`:
///
///     swift run fuzz-config Fuzz/corpus/config Fuzz/crashes/config-crash-…
///
/// Under `-D FUZZING` the targets leave `main` to libFuzzer and this is unused.
public enum FuzzReplay {
    public typealias Entry = (UnsafePointer<UInt8>, Int) -> CInt

    /// Runs `entry` on every file named, and on every file in every directory
    /// named; exits 0 when all of them returned (a finding crashes the process,
    /// as it does under libFuzzer), 2 when there was nothing to read.
    public static func main(_ entry: Entry) -> Never {
        let arguments = CommandLine.arguments.dropFirst()
        let name = (CommandLine.arguments.first ?? "fuzz").split(separator: "/").last.map(String.init) ?? "fuzz"
        guard !arguments.isEmpty else {
            FileHandle.standardError.write(Data("usage: \(name) FILE|DIR...  (replays the inputs; scripts/fuzz builds the fuzzer)\n".utf8))
            exit(2)
        }
        var replayed = 0
        for path in arguments {
            for file in files(at: path) {
                guard let data = FileManager.default.contents(atPath: file) else {
                    FileHandle.standardError.write(Data("\(name): cannot read \(file)\n".utf8))
                    exit(2)
                }
                run(entry, Array(data))
                replayed += 1
            }
        }
        print("\(name): replayed \(replayed) inputs, no finding")
        exit(0)
    }

    /// The input as libFuzzer passes it: a pointer that is valid even for an empty input.
    static func run(_ entry: Entry, _ bytes: [UInt8]) {
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        defer { buffer.deallocate() }
        buffer.initialize(from: bytes, count: bytes.count)
        _ = entry(buffer, bytes.count)
    }

    static func files(at path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else { return [path] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.sorted().map { path + "/" + $0 }.filter { !FileManager.default.fileExists(atPath: $0, isDirectory: &isDirectory) || !isDirectory.boolValue }
    }
}

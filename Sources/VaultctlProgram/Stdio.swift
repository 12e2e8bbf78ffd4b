import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Standard error, standard input and starting the browser without
/// Foundation's FileHandle and Process: vaultctl links FoundationEssentials
/// only, which keeps ICU out of the process. Loading Foundation was most of
/// `vaultctl token`'s run time (docs/benchmarks.md).
enum Stdio {
    static func error(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return }
            bytes = bytes.dropFirst(n)
        }
    }

    /// Everything on standard input, to its end.
    static func readAllInput() -> Data {
        var all = Data()
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            all.append(contentsOf: chunk[0..<n])
        }
        return all
    }

    /// Starts `argv` (searched in PATH) with stdio on /dev/null, without
    /// waiting for it; false if it could not start.
    static func spawnDetached(_ argv: [String]) -> Bool {
        guard !argv.isEmpty else { return false }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] {
            posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0)
        }
        var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) }
        cArgs.append(nil)
        defer { for p in cArgs { free(p) } }
        var pid: pid_t = 0
        return posix_spawnp(&pid, argv[0], &actions, nil, cArgs, environ) == 0
    }
}

extension StringProtocol {
    /// Without white space (newlines included) at either end.
    var trimmed: String {
        let head = drop(while: \.isWhitespace)
        var end = head.endIndex
        while end > head.startIndex, head[head.index(before: end)].isWhitespace { end = head.index(before: end) }
        return String(head[head.startIndex..<end])
    }
}

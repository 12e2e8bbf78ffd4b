#if canImport(Glibc)
import Glibc
#endif

/// Standard error, standard input, files, the environment and starting the
/// browser over libc: vaultctl links no Foundation at all, so the release
/// build is one small static executable that starts in a fraction of a
/// millisecond (docs/benchmarks.md, session 20).
enum Stdio {
    /// The environment variable `name`, nil when unset.
    static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// Whether `path` is a file this process may run.
    static func isExecutable(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFREG && access(path, X_OK) == 0
    }

    /// The whole file at `path`, nil when it cannot be read.
    static func contents(atPath path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return readAll(fd)
    }

    /// Everything on standard input, to its end.
    static func readAllInput() -> [UInt8] {
        readAll(STDIN_FILENO) ?? []
    }

    /// Everything `fd` gives, to its end; nil on a read error.
    private static func readAll(_ fd: Int32) -> [UInt8]? {
        var all: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { return all }
            all.append(contentsOf: chunk[0..<n])
        }
    }

    /// `text` and `terminator` on standard output, written at once. Not
    /// `Swift.print`: it takes `Any`, and the first time it asks how to write
    /// one the runtime searches the binary's conformance records.
    static func out(_ text: String, terminator: String = "\n") {
        write(STDOUT_FILENO, text + terminator)
    }

    static func error(_ text: String) {
        write(STDERR_FILENO, text)
    }

    private static func write(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return }
            bytes = bytes.dropFirst(n)
        }
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

import Foundation
import VaultClient
import VaultProtocol
import CVaultShims
#if canImport(Glibc)
import Glibc
#endif

/// The machine's floor, with no vault at all: a blocking echo server on a Unix
/// socket in this process, one thread, answering each line with the bytes
/// vaultd answered it with (captured from the real vaultd first). The client
/// side is the same `VaultConnection` the vault lines use, so the difference
/// between a vault line and its floor is vaultd's own work: framing, JSON,
/// the decision, the event loop.
final class EchoFloor: Sendable {
    let socket: String
    private let dir: String
    private let listener: Int32
    private let helloAnswer: [UInt8]
    private let sessionAnswer: [UInt8]

    /// `helloAnswer`/`sessionAnswer`: whole lines as vaultd wrote them.
    init(helloAnswer: [UInt8], sessionAnswer: [UInt8]) throws {
        self.helloAnswer = helloAnswer + [0x0A]
        self.sessionAnswer = sessionAnswer + [0x0A]
        dir = NSTemporaryDirectory() + "vault-bench-floor-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let path = Array((dir + "/echo.sock").utf8)
        socket = dir + "/echo.sock"
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: path.prefix(raw.count - 1))
        }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard fd >= 0, bound == 0, listen(fd, 64) == 0 else { throw BenchError("the echo floor's socket could not be opened") }
        listener = fd
        let thread = Thread { [self] in serve() }
        thread.start()
    }

    /// One connection at a time, as the measurements use it; a line with
    /// `"op":"hello"` gets hello's answer, any other the session's. On the
    /// last CPU (`Cores.server`), as vaultd's event loop is on a core of its
    /// own while a client waits.
    private func serve() {
        Cores.pinThisThread(to: Cores.server)
        let hello = Array(#""op":"hello""#.utf8)
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let conn = accept(listener, nil, nil)
            if conn < 0 {
                if errno == EINTR { continue }
                return   // closed by stop()
            }
            var pending: [UInt8] = []
            while true {
                let n = chunk.withUnsafeMutableBytes { recv(conn, $0.baseAddress, $0.count, 0) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { break }
                pending.append(contentsOf: chunk[0..<n])
                // Every line this read completed, answered in one write (as
                // vaultd flushes once per read).
                var answers: [UInt8] = []
                while let nl = pending.firstIndex(of: 0x0A) {
                    answers += contains(pending[..<nl], hello) ? helloAnswer : sessionAnswer
                    pending.removeSubrange(...nl)
                }
                guard answers.isEmpty || writeAll(conn, answers) else { break }
            }
            close(conn)
        }
    }

    private func contains(_ line: ArraySlice<UInt8>, _ needle: [UInt8]) -> Bool {
        guard line.count >= needle.count else { return false }
        var i = line.startIndex
        while i + needle.count <= line.endIndex {
            if line[i..<(i + needle.count)].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// The answers vaultd gives a `hello` and a release of `account`, as bytes,
    /// with the ids a `VaultConnection` gives them after `greet` (1 and 2).
    static func capture(_ socket: String, account: String) throws -> (hello: [UInt8], session: [UInt8]) {
        let c = try VaultConnection(socketPath: socket)
        try c.send(Request(id: 1, op: "hello", fields: ["client": "vault-bench", "lang": "en", "interactive": false]).encoded())
        let hello = try c.readLine()
        try c.send(Request(id: 2, op: "session", fields: ["account": .string(account)]).encoded())
        return (hello, try c.readLine())
    }
}

/// Where the floor's two ends run. Left to the scheduler, the echo pair
/// sometimes shares one core (a round trip of ~10 µs here: no idle core to
/// wake) and sometimes not (~40 µs), run to run, while vaultd's event loop
/// waits on a core of its own: its release is the same either way. So the
/// floor is measured with its server on the last CPU and its client on the
/// first, the case vaultd is in; the same pair on one core is printed beside it.
enum Cores {
    static let count = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    /// The echo server's CPU.
    static let server: Int? = count >= 2 ? count - 1 : nil
    /// The client's CPU while it measures the floor: another one, or the same.
    static func client(sameCore: Bool) -> Int? { count >= 2 ? (sameCore ? count - 1 : 0) : nil }

    /// Pins the calling thread to `cpu` (nil: every CPU).
    static func pinThisThread(to cpu: Int?) {
        _ = sv_pin_thread(Int32(cpu ?? -1))
    }

    /// `measure` with the calling thread on `cpu`, then free again.
    static func on<T>(_ cpu: Int?, _ measure: () throws -> T) rethrows -> T {
        pinThisThread(to: cpu)
        defer { pinThisThread(to: nil) }
        return try measure()
    }
}

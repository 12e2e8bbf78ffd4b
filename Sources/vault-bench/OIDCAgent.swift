import CSodium
import Foundation
import SodiumKit
import VaultClient
import VaultProtocol
#if canImport(Glibc)
import Glibc
#endif

/// A private oidc-agent for the side-by-side lines: its own socket, HOME and
/// OIDC_CONFIG_DIR under a temp dir (nothing of the user's is read or
/// touched), run in the foreground (`-d`) so the bench owns and stops it.
final class OIDCAgent {
    let dir: String
    let socket: String
    let account = "vault-bench"
    private var process: Process?
    private var workers: [pid_t] = []

    /// What the agent's tools need in their environment.
    var environment: [String: String] {
        ["HOME": dir + "/home", "OIDC_CONFIG_DIR": dir + "/config", "OIDC_SOCK": socket, "TMPDIR": dir,
         "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "LANG": "C.UTF-8"]
    }

    init(agent: String) throws {
        dir = NSTemporaryDirectory() + "vault-bench-oidc-agent-\(getpid())"
        socket = dir + "/agent.sock"
        Children.shared.add(dir: dir)
        for sub in ["home", "config"] {
            try FileManager.default.createDirectory(atPath: dir + "/" + sub, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        let p: Process
        do {
            p = try startChild(agent, ["-d", "-a", socket], environment: environment)
        } catch {
            stop()
            throw error
        }
        process = p
        let deadline = monotonicNs() + 10_000_000_000
        while monotonicNs() < deadline {
            if let fd = try? connectUnix(socket) {
                close(fd)
                // It forks a worker at start; remember it to stop it too.
                workers = childPIDs(of: p.processIdentifier)
                for w in workers { Children.shared.add(w) }
                return
            }
            if !p.isRunning { break }
            usleep(5_000)
        }
        stop()
        throw BenchError("oidc-agent did not open its socket")
    }

    /// `oidc-gen --flow=refresh`: the agent takes the refresh token, checks it
    /// with one refresh at the provider and holds the account from then on.
    func addAccount(gen: String, provider: StrictProvider, refreshToken: String, scope: String) throws {
        let pwFile = dir + "/pw"
        try "vault-bench-password\n".write(toFile: pwFile, atomically: true, encoding: .utf8)
        let status = try spawnAndWait(gen, [
            "--flow=refresh", "--rt=\(refreshToken)", "--iss=\(provider.issuer)", "--client-id=\(provider.clientID)",
            "--client-secret=\(provider.clientSecret)", "--pw-file=\(pwFile)", "--scope=\(scope)",
            "--confirm-default", account,
        ], environment: environment)
        guard status == 0 else { throw BenchError("oidc-gen failed (exit \(status))") }
    }

    /// One request the way a plain-JSON client can talk to the agent (it takes
    /// unencrypted JSON too): connect, send, read the reply; the agent closes
    /// the connection after one answer.
    func request(_ body: JSON) throws -> JSON {
        let fd = try connectUnix(socket)
        defer { close(fd) }
        try sendAll(fd, body.serialized())
        return try readJSON(fd)
    }

    /// The same request as liboidc-agent 4.2 (and so `oidc-token`) sends it: a
    /// fresh X25519 key pair per connection, public keys swapped in base64, one
    /// shared key (crypto_box_beforenm), then the request sealed with
    /// crypto_secretbox as "LEN:NONCE:CIPHERTEXT" (base64), the answer likewise.
    /// (Checked against the Debian package's library symbols and its answers;
    /// newer oidc-agent versions derive two keys with crypto_kx_*_session_keys.)
    func encryptedRequest(_ body: JSON) throws -> JSON {
        try Sodium.ensureReady()
        let fd = try connectUnix(socket)
        defer { close(fd) }
        var pk = [UInt8](repeating: 0, count: Int(crypto_kx_PUBLICKEYBYTES))
        var sk = [UInt8](repeating: 0, count: Int(crypto_kx_SECRETKEYBYTES))
        crypto_kx_keypair(&pk, &sk)
        defer { Sodium.wipe(&sk) }
        try sendAll(fd, Array(base64(pk).utf8))
        let serverKeyText = try readExactly(fd, base64Length(Int(crypto_kx_PUBLICKEYBYTES)))
        guard let serverKey = unbase64(serverKeyText), serverKey.count == Int(crypto_kx_PUBLICKEYBYTES) else {
            throw BenchError("oidc-agent sent a bad public key")
        }
        var key = [UInt8](repeating: 0, count: Int(crypto_box_BEFORENMBYTES))
        defer { Sodium.wipe(&key) }
        guard crypto_box_beforenm(&key, serverKey, sk) == 0 else {
            throw BenchError("oidc-agent's public key was refused")
        }
        let plain = body.serialized()
        let nonce = Random.bytes(Int(crypto_secretbox_NONCEBYTES))
        var cipher = [UInt8](repeating: 0, count: plain.count + Int(crypto_secretbox_MACBYTES))
        crypto_secretbox_easy(&cipher, plain, UInt64(plain.count), nonce, key)
        try sendAll(fd, Array("\(plain.count):\(base64(nonce)):\(base64(cipher))".utf8))

        // The answer: "LEN:NONCE:CIPHERTEXT"; its length follows from LEN.
        var head: [UInt8] = []
        while !head.contains(UInt8(ascii: ":")) { head += try readSome(fd) }
        guard let colon = head.firstIndex(of: UInt8(ascii: ":")),
              let length = Int(String(decoding: head[..<colon], as: UTF8.self)) else {
            throw BenchError("oidc-agent's answer is not LEN:NONCE:CIPHERTEXT: \(String(decoding: head.prefix(300), as: UTF8.self))")
        }
        let total = colon + 1 + base64Length(Int(crypto_secretbox_NONCEBYTES)) + 1
            + base64Length(length + Int(crypto_secretbox_MACBYTES))
        while head.count < total { head += try readSome(fd) }
        let parts = head.split(separator: UInt8(ascii: ":"))
        guard parts.count == 3, let n = unbase64(Array(parts[1])), let c = unbase64(Array(parts[2])),
              c.count == length + Int(crypto_secretbox_MACBYTES) else {
            throw BenchError("oidc-agent's answer is malformed")
        }
        var opened = [UInt8](repeating: 0, count: length)
        guard crypto_secretbox_open_easy(&opened, c, UInt64(c.count), n, key) == 0 else {
            throw BenchError("oidc-agent's answer did not decrypt")
        }
        return try JSON.parse(opened)
    }

    func accessTokenRequest(minValid: Int) -> JSON {
        ["request": "access_token", "account": .string(account), "min_valid_period": .int(Int64(minValid))]
    }

    func stop() {
        if let p = process { stopChild(p) }
        process = nil
        // The worker normally exits with the agent; make sure, by pid.
        for w in workers {
            if !isZombie(w) { kill(w, SIGTERM) }
            Children.shared.remove(w)
        }
        workers = []
        try? FileManager.default.removeItem(atPath: dir)
        Children.shared.remove(dir: dir)
    }

    // MARK: - Socket plumbing

    private func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }
    private func unbase64(_ text: [UInt8]) -> [UInt8]? { Data(base64Encoded: Data(text)).map { Array($0) } }
    private func base64Length(_ n: Int) -> Int { (n + 2) / 3 * 4 }

    private func readSome(_ fd: Int32) throws -> [UInt8] {
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw BenchError("oidc-agent closed the connection early") }
            return Array(chunk[0..<n])
        }
    }

    private func readExactly(_ fd: Int32, _ count: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        while out.count < count { out += try readSome(fd) }
        return out
    }

    /// Reads until the bytes so far form one JSON object (the agent's answers
    /// carry no terminator).
    private func readJSON(_ fd: Int32) throws -> JSON {
        var buffer: [UInt8] = []
        while true {
            buffer += try readSome(fd)
            if buffer.last == UInt8(ascii: "}"), let j = try? JSON.parse(buffer) { return j }
        }
    }
}

func connectUnix(_ path: String) throws -> Int32 {
    guard let fd = connectUnixSocket(path) else { throw BenchError("could not connect to \(path)") }
    return fd
}

func sendAll(_ fd: Int32, _ bytes: [UInt8]) throws {
    guard writeAll(fd, bytes) else { throw BenchError("send failed: errno \(errno)") }
}

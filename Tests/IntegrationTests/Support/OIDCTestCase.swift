import Foundation
import VaultProtocol
import VaultTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// oidc-provider-mock (PyPI) behind Tests/providers/mock_provider.py, on 127.0.0.1.
/// Needs the venv made by scripts/provider-venv.
final class MockOIDCProvider {
    let process: Process
    let issuer: String

    init(arguments: [String] = []) throws {
        (process, issuer) = try startPythonProvider("mock_provider.py", ["--idle-exit", "300"] + (arguments.isEmpty ? [] : ["--"] + arguments),
                                                    timeout: 40)
    }

    deinit { stop() }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }
}

/// Starts `DIRECTORY/SCRIPT` (Tests/providers unless told) with the venv's
/// Python and waits for its READY line; returns the process and its URL.
func startPythonProvider(_ script: String, _ arguments: [String], timeout: Double,
                         directory: String = "Tests/providers") throws -> (Process, String) {
    guard let python = TestProvider.python else {
        throw cannotRunHere("the provider venv is missing: run scripts/provider-venv (scripts/test does)")
    }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: python)
    p.arguments = [repositoryRoot + "/" + directory + "/" + script] + arguments
    let out = Pipe()
    p.standardOutput = out
    p.standardError = FileHandle.nullDevice
    try p.run()
    return (p, try readReadyLine(out, process: p, timeout: timeout))
}

/// Reads the provider's first stdout line, "READY http://127.0.0.1:PORT", and returns the URL.
func readReadyLine(_ pipe: Pipe, process p: Process, timeout: Double) throws -> String {
    var line = [UInt8]()
    let fd = pipe.fileHandleForReading.fileDescriptor
    let deadline = monotonicNow() + timeout
    while monotonicNow() < deadline {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, 200) > 0 else { continue }
        var byte: UInt8 = 0
        guard read(fd, &byte, 1) == 1 else { break }
        if byte == 0x0A { break }
        line.append(byte)
    }
    let text = String(decoding: line, as: UTF8.self)
    guard text.hasPrefix("READY ") else {
        p.terminate()
        throw IntegrationError("the provider did not start: \(text)")
    }
    return String(text.dropFirst("READY ".count))
}

/// What one vaultctl run produced, with its `--json` output parsed.
struct CtlRun: CustomStringConvertible {
    var exit: Int32
    var out: String
    var err: String
    var seconds: Double

    /// The JSON object vaultctl printed on stdout (`--json`), if any.
    var json: JSON? {
        let text = out.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let last = text.split(separator: "\n").last else { return nil }
        return try? JSON.parse(String(last))
    }
    var error: JSON? { json?["error"] }
    var errorCode: String? { error?["code"]?.stringValue }
    var errorMessage: String? { error?["message"]?.stringValue }

    var description: String { "exit \(exit) after \(String(format: "%.2f", seconds)) s\nstdout: \(out)\nstderr: \(err)" }
}

/// Logins through a real vaultd and vaultctl against the Python test providers.
class OIDCTestCase: VaultdTestCase {
    private var providers: [TestProvider] = []
    private var mocks: [MockOIDCProvider] = []
    /// Everything vaultctl printed during this test (scanned for national ID numbers).
    private(set) var ctlOutput = ""

    /// No reader: no fingerprint offer after the first login.
    static let noFingerprint = "[fingerprint]\nreader = \"none\"\n"

    override func tearDown() {
        for p in providers { p.stop() }
        for m in mocks { m.stop() }
        providers = []
        mocks = []
        ctlOutput = ""
        super.tearDown()
    }

    func startProvider(_ profile: String, arguments: [String] = []) throws -> TestProvider {
        let p = try TestProvider(profile: profile, arguments: arguments)
        providers.append(p)
        return p
    }

    func startMockProvider(arguments: [String] = []) throws -> MockOIDCProvider {
        let m = try MockOIDCProvider(arguments: arguments)
        mocks.append(m)
        return m
    }

    /// vaultd's config: cheap PIN hashing, no fingerprint reader, and the provider tables.
    func config(_ tables: [String], extra: String = "") -> String {
        VaultdProcess.fastPINConfig + OIDCTestCase.noFingerprint + extra + "\n" + tables.joined(separator: "\n")
    }

    /// A started vaultd with a `[providers.NAME]` table for each provider.
    func startVaultd(providers: [TestProvider], tableExtra: [String: String] = [:], extraArgs: [String] = [],
                     extraConfig: String = "") throws -> VaultdProcess {
        let tables = providers.map { $0.configTable(extra: tableExtra[$0.profile] ?? "") }
        return try startVaultd(config: config(tables, extra: extraConfig), extraArgs: extraArgs)
    }

    /// Runs vaultctl and records its output.
    @discardableResult
    func ctl(_ v: VaultdProcess, _ args: [String], stdin: String? = nil, env: [String: String] = [:],
             timeout: Double = 60) -> CtlRun {
        let start = monotonicNow()
        let r = v.vaultctl(args, stdin: stdin, env: env, timeout: timeout)
        let run = CtlRun(exit: r.exit, out: r.out, err: r.err, seconds: monotonicNow() - start)
        ctlOutput += r.out + "\n" + r.err + "\n"
        return run
    }

    /// `vaultctl login NAME --browser scripts/demo-browser --json` as TEST_USER.
    /// A fingerprint offer, should one come, is declined on stdin.
    func login(_ v: VaultdProcess, _ provider: String, user: String = "kari", json: Bool = true,
               env: [String: String] = [:], timeout: Double = 45) -> CtlRun {
        var e = ["TEST_USER": user]
        for (k, val) in env { e[k] = val }
        return ctl(v, ["login", provider, "--browser", TestProvider.browser] + (json ? ["--json"] : []),
                   stdin: "n\n", env: e, timeout: timeout)
    }

    /// The released session (`vaultctl token --json`); fails the test when it is not there.
    func releasedSession(_ v: VaultdProcess, stdin: String? = nil, file: StaticString = #filePath,
                         line: UInt = #line) throws -> JSON {
        let r = ctl(v, ["token", "--json"], stdin: stdin)
        XCTAssertEqual(r.exit, 0, "vaultctl token --json: \(r)", file: file, line: line)
        guard let j = r.json, j["access_token"]?.stringValue != nil else {
            throw IntegrationError("vaultctl token --json gave no session: \(r)")
        }
        return j
    }

    /// `vaultctl sessions --json`.
    func sessions(_ v: VaultdProcess) throws -> [JSON] {
        let r = ctl(v, ["sessions", "--json"])
        guard r.exit == 0, let list = r.json?["sessions"]?.arrayValue else {
            throw IntegrationError("vaultctl sessions --json failed: \(r)")
        }
        return list
    }

    /// The login keyslots in the store: "id|binding|created_at|hex(sealed_key)" per row.
    func loginSlots(_ v: VaultdProcess) throws -> [String] {
        let r = try sqlite3(v.storePath, "SELECT id || '|' || binding || '|' || created_at || '|' || hex(sealed_key) FROM keyslot WHERE factor = 'login' OR id LIKE 'login:%' ORDER BY id;")
        guard r.exit == 0 else { throw IntegrationError("sqlite3 failed: \(r.err)") }
        return r.out.split(separator: "\n").map(String.init).filter { !$0.isEmpty }
    }

    /// The number of session rows in the store.
    func storedSessionRows(_ v: VaultdProcess) throws -> Int {
        let r = try sqlite3(v.storePath, "SELECT count(*) FROM session;")
        guard r.exit == 0, let n = Int(r.out.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw IntegrationError("sqlite3 failed: \(r.err)")
        }
        return n
    }

    /// After a failed login: no session (listed or stored) and no login slot.
    func assertNothingStored(_ v: VaultdProcess, _ context: String = "", file: StaticString = #filePath,
                             line: UInt = #line) throws {
        XCTAssertEqual(try sessions(v).count, 0, "a session was listed after a failed login \(context)", file: file, line: line)
        XCTAssertEqual(try storedSessionRows(v), 0, "a session row was stored after a failed login \(context)", file: file, line: line)
        XCTAssertEqual(try loginSlots(v), [], "a login slot was written after a failed login \(context)", file: file, line: line)
    }

    /// A failed login: exit status, `code`, exact `message` (also on stderr).
    func assertLoginFails(_ r: CtlRun, code: String, message: String, exit: Int32? = nil,
                          file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertNotEqual(r.exit, 0, "the login should have failed: \(r)", file: file, line: line)
        if let exit { XCTAssertEqual(r.exit, exit, "exit status: \(r)", file: file, line: line) }
        XCTAssertEqual(r.errorCode, code, "error code: \(r)", file: file, line: line)
        XCTAssertEqual(r.errorMessage, message, "error message: \(r)", file: file, line: line)
        XCTAssertTrue(r.err.contains("vaultctl: \(message)"), "stderr should carry the sentence: \(r)", file: file, line: line)
    }

    /// Files under `dir` (recursively) whose bytes contain `needle`.
    func filesContaining(_ needle: String, under dir: String) -> [String] {
        var hits: [String] = []
        let bytes = Array(needle.utf8)
        guard let walker = FileManager.default.enumerator(atPath: dir) else { return [] }
        for case let rel as String in walker {
            let path = dir + "/" + rel
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir), !isDir.boolValue,
                  let data = FileManager.default.contents(atPath: path) else { continue }
            if contains(Array(data), bytes) { hits.append(path) }
        }
        return hits
    }

    private func contains(_ hay: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, hay.count >= needle.count else { return false }
        let first = needle[0]
        var i = 0
        while i <= hay.count - needle.count {
            if hay[i] == first, Array(hay[i..<(i + needle.count)]) == needle { return true }
            i += 1
        }
        return false
    }

    /// The provider's synthetic national ID number for a test user.
    func nationalID(of user: String, at provider: TestProvider) throws -> String {
        let users = try provider.admin("users")
        guard let nin = users[user]?["nin"]?.stringValue, nin.count == 11 else {
            throw IntegrationError("the provider has no national ID for \(user): \(users.text)")
        }
        return nin
    }

    func int(_ v: JSON?) -> Int64 { v?.intValue ?? -1 }
}

import Foundation
import VaultProtocol
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Nothing secret is written in clear: not in the store (including -wal and
/// -shm), not in any other file under the data dir, not in vaultd's log.
final class AtRestTests: VaultdTestCase {
    func testNoTokenOrPINOnDiskOrInTheLog() throws {
        let v = try startVaultd(config: "log_level = \"trace\"\n[pin]\nargon_memory_mib = 64\n")
        let pin = "906218"
        let unique = UUID().uuidString.replacingOccurrences(of: "-", with: "")
        let secrets = [
            "AT1-zebra-\(unique)-access", "RT1-quokka-\(unique)-refresh",
            "AT2-narwhal-\(unique)-access", "RT2-axolotl-\(unique)-refresh",
        ]
        try importSession(v, account: "first", accessToken: secrets[0], refreshToken: secrets[1])
        try importSession(v, account: "second", accessToken: secrets[2], refreshToken: secrets[3])
        // A refresh token alone, through vaultctl's stdin (one line).
        let rtOnly = "RT3-okapi-\(unique)-refresh"
        let imp = v.vaultctl(["import", "--issuer", "https://idp.example.test", "--client-id", "c3", "--account", "third"],
                             stdin: rtOnly + "\n")
        XCTAssertEqual(imp.exit, 0, imp.err)
        enrollPIN(v, pin: pin)
        // Release the tokens (they pass through memory and the socket), lock, unlock with the PIN.
        let c = try v.raw()
        XCTAssertEqual(try c.call("session", ["account": "first"]).result?["access_token"]?.stringValue, secrets[0])
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let (u, _) = try unlock(v, pins: [pin])
        XCTAssertTrue(u.isOK, u.text)
        // A wrong PIN attempt too (it is hashed and compared, never stored).
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        _ = try unlock(v, pins: ["906219", pin])
        XCTAssertEqual(try c.call("session", ["account": "second"]).result?["access_token"]?.stringValue, secrets[2])

        // Modes: only the owner can read anything.
        XCTAssertEqual(mode(v.dataDir), 0o700)
        XCTAssertEqual(mode(v.runDir), 0o700)
        XCTAssertEqual(mode(v.socketPath), 0o600)
        for name in ["vault.sqlite", "vault.sqlite-wal", "vault.sqlite-shm", "device.key"] {
            let path = v.dataDir + "/" + name
            if FileManager.default.fileExists(atPath: path) {
                XCTAssertEqual(mode(path), 0o600, "\(name) has mode \(String(mode(path), radix: 8))")
            }
        }

        let needles = secrets + [rtOnly, pin, "906219"]
        // While running: the WAL holds the latest writes.
        assertNoSecrets(needles, under: v.dataDir, log: v.logPath)
        // After a clean stop (checkpointed) and after a crash (WAL left as is).
        v.stop()
        assertNoSecrets(needles, under: v.dataDir, log: v.logPath)
        try v.start()
        let (again, _) = try unlock(v, pins: [pin])
        XCTAssertTrue(again.isOK, again.text)
        _ = try importSession(v, account: "fourth", accessToken: "AT4-\(unique)", refreshToken: "RT4-\(unique)")
        v.kill9()
        assertNoSecrets(needles + ["AT4-\(unique)", "RT4-\(unique)"], under: v.dataDir, log: v.logPath)

        // The scan itself works: a file holding a needle would be found.
        _ = FileManager.default.createFile(atPath: v.dataDir + "/canary-probe.txt", contents: Data("x\(pin)x".utf8))
        // And digits inside a MAC's hex are not one (scripts/scan-secrets: decoy-*), as in audit.head.
        let mac = "9f3ab" + pin + "c" + String(repeating: "e1", count: 28)
        _ = FileManager.default.createFile(atPath: v.dataDir + "/decoy-audit-head.txt", contents: Data("17 \(mac)".utf8))
        XCTAssertFalse(filesContaining(Array(pin.utf8), under: v.dataDir).isEmpty, "the scan does not find what it looks for")
    }

    func mode(_ path: String) -> mode_t {
        var st = stat()
        guard lstat(path, &st) == 0 else { return 0 }
        return st.st_mode & 0o7777
    }

    func assertNoSecrets(_ needles: [String], under dir: String, log: String, file: StaticString = #filePath, line: UInt = #line) {
        for needle in needles {
            let hits = filesContaining(Array(needle.utf8), under: dir)
            XCTAssertTrue(hits.isEmpty, "“\(needle.prefix(6))…” is stored in clear in \(hits)", file: file, line: line)
            let logBytes = [UInt8](FileManager.default.contents(atPath: log) ?? Data())
            XCTAssertFalse(contains(logBytes, Array(needle.utf8)), "“\(needle.prefix(6))…” is in vaultd's log", file: file, line: line)
        }
    }

    /// Every regular file under `dir` (recursively) whose bytes contain `needle`.
    func filesContaining(_ needle: [UInt8], under dir: String) -> [String] {
        var hits: [String] = []
        guard let e = FileManager.default.enumerator(atPath: dir) else { return hits }
        var seen: [String] = []
        while let rel = e.nextObject() as? String {
            let path = dir + "/" + rel
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir), !isDir.boolValue else { continue }
            seen.append(rel)
            if let data = FileManager.default.contents(atPath: path), contains([UInt8](data), needle) { hits.append(rel) }
        }
        XCTAssertTrue(seen.contains("vault.sqlite"), "the scan did not see the store: \(seen)")
        return hits
    }

    func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        let first = needle[0]
        var i = 0
        let last = haystack.count - needle.count
        while i <= last {
            if haystack[i] == first && Array(haystack[i..<(i + needle.count)]) == needle { return true }
            i += 1
        }
        return false
    }
}

import Foundation
import VaultProtocol
import VaultTestSupport
import XCTest

/// The stub fingerprint reader is a simulation any program of the user can make
/// report a match: vaultd has no reader by default, runs the stub only with
/// `--demo` or `allow_stub_reader = true` (and says so on every start), and
/// keeps its state file out of the socket directory.
final class StubReaderOptInTests: VaultdTestCase {
    static let stubOnly = "[fingerprint]\nreader = \"stub\"\n"
    static let warning = "the fingerprint reader is the stub, a simulation"

    /// Plugs a stub reader with one finger in at `path`, with the real vault-fpstub.
    func plugStub(at path: String) throws {
        for args in [["plug"], ["enroll-finger", "right-index"]] {
            let r = try runProcess(Binaries.fpstub, ["--state", path] + args,
                                   env: childEnvironment([:]), timeout: 20)
            XCTAssertEqual(r.exit, 0, "vault-fpstub \(args): \(r.err)")
        }
    }

    func fingerprintEntry(_ v: VaultdProcess) throws -> JSON? {
        let c = try v.raw()
        defer { c.close() }
        let r = try c.call("factors")
        XCTAssertTrue(r.isOK, r.text)
        return r.result?["factors"]?.arrayValue?.first { $0["factor"]?.stringValue == "fingerprint" }
    }

    func testTheStubWithoutTheOptInIsRefusedWithASentenceInBothLanguages() throws {
        let v = try makeVaultd(config: VaultdProcess.fastPINConfig + Self.stubOnly)
        let en = try v.runToExit()
        XCTAssertEqual(en.exit, 2, en.err)
        XCTAssertTrue(en.err.contains("vaultd: " + Messages.stubReaderNotAllowed.en), en.err)
        XCTAssertTrue(en.err.contains("allow_stub_reader = true"), "the sentence names the way out: \(en.err)")
        let nb = try v.runToExit(env: ["LANG": "nb_NO.UTF-8"])
        XCTAssertEqual(nb.exit, 2, nb.err)
        XCTAssertTrue(nb.err.contains("vaultd: " + Messages.stubReaderNotAllowed.nb), nb.err)
        assertNoCrashOutput(en.err + nb.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: v.socketPath), "refused before the socket was bound")

        // allow_stub_reader = false is no opt-in either.
        try (VaultdProcess.fastPINConfig + Self.stubOnly + "allow_stub_reader = false\n")
            .write(toFile: v.configPath, atomically: true, encoding: .utf8)
        XCTAssertEqual(try v.runToExit().exit, 2)
    }

    func testTheOptInStartsTheStubAndWarnsOnEveryStart() throws {
        let v = try makeVaultd(config: VaultdProcess.fastPINConfig + Self.stubOnly + "allow_stub_reader = true\n")
        // No stub_state: the default, in the data dir (vaultd's --data-dir).
        try plugStub(at: v.dataDir + "/fpstub.json")
        try v.start()
        XCTAssertEqual(v.log.components(separatedBy: Self.warning).count - 1, 1, v.log)
        XCTAssertTrue(v.log.contains("allowed_by=allow_stub_reader") || v.log.contains("allowed_by: allow_stub_reader"), v.log)
        let entry = try XCTUnwrap(try fingerprintEntry(v), "the fingerprint is a factor")
        XCTAssertNotEqual(entry["state"], "unavailable", "the stub in the data dir is the reader: \(entry.text)")
        try v.restart()
        XCTAssertEqual(v.log.components(separatedBy: Self.warning).count - 1, 2, "the warning comes on every start: \(v.log)")
    }

    func testDemoModeRunsTheStubWithTheWarning() throws {
        let v = try makeVaultd(config: VaultdProcess.fastPINConfig + Self.stubOnly, extraArgs: ["--demo"])
        try v.start()
        XCTAssertTrue(v.log.contains(Self.warning), v.log)
        XCTAssertTrue(v.log.contains("--demo"), v.log)
    }

    func testByDefaultThereIsNoReader() throws {
        let v = try makeVaultd()
        // A stub plugged in where any default would look (the data dir, and the
        // runtime dir where it once lived) is still not used.
        try plugStub(at: v.dataDir + "/fpstub.json")
        try plugStub(at: v.root + "/xdg-runtime/sessionvault/fpstub.json")
        try plugStub(at: v.root + "/xdg-data/sessionvault/fpstub.json")
        try v.start()
        XCTAssertNil(try fingerprintEntry(v), "no fingerprint factor without a reader")
        XCTAssertFalse(v.log.contains(Self.warning), v.log)
        enrollPIN(v)
        XCTAssertEqual(v.vaultctl(["lock"]).exit, 0)
        let status = v.vaultctl(["status"])
        XCTAssertFalse(status.out.lowercased().contains("fingerprint"), "status offers no fingerprint: \(status.out)")
    }

    func testTheDefaultStateFileIsNotInTheSocketDirectory() throws {
        let v = try makeVaultd(config: VaultdProcess.fastPINConfig + Self.stubOnly + "allow_stub_reader = true\n")
        try v.start()
        let logged = try XCTUnwrap(v.log.components(separatedBy: "\n").first { $0.contains(Self.warning) })
        XCTAssertTrue(logged.contains(v.dataDir + "/fpstub.json"), logged)
        XCTAssertFalse(logged.contains(v.runDir), logged)
        // A stub in the socket directory is not the reader.
        try plugStub(at: v.runDir + "/fpstub.json")
        XCTAssertEqual(try fingerprintEntry(v)?["state"], "unavailable")
        let runEntries = try FileManager.default.contentsOfDirectory(atPath: v.runDir)
        XCTAssertEqual(runEntries.filter { $0 != "fpstub.json" && $0 != "fpstub.json.lock" }, ["vault.sock"])
    }
}

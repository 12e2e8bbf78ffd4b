import Foundation
import VaultTestSupport
import XCTest
@testable import FingerprintFactor
import VaultFactor

/// `vault-fpstub` run as a real subprocess against a state file that an
/// in-process StubReader reads and changes too.
final class FPStubToolTests: TempDirTestCase {
    struct Run {
        var status: Int32
        var out: String
        var err: String
    }

    static let binary = builtExecutable("vault-fpstub", env: "VAULT_FPSTUB_BIN")

    /// Runs the tool with `--state` pointing at this test's file (unless `state` is false).
    @discardableResult
    func tool(_ args: String..., state: Bool = true, env extra: [String: String] = [:]) throws -> Run {
        guard FileManager.default.isExecutableFile(atPath: Self.binary) else {
            throw cannotRunHere("vault-fpstub is not built (looked for \(Self.binary)); run swift build first")
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.binary)
        p.arguments = state ? ["--state", statePath] + args : args
        var env = ProcessInfo.processInfo.environment
        // Nothing of the developer's own vault: no variables, and a config that does not exist.
        for key in env.keys where key.hasPrefix("SESSIONVAULT_") { env[key] = nil }
        env["SESSIONVAULT_CONFIG"] = dir.appendingPathComponent("config.toml").path
        env["XDG_DATA_HOME"] = dir.appendingPathComponent("data").path
        env["XDG_RUNTIME_DIR"] = dir.appendingPathComponent("run").path
        for (k, v) in extra { env[k] = v }
        p.environment = env
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Run(status: p.terminationStatus, out: String(decoding: outData, as: UTF8.self),
                   err: String(decoding: errData, as: UTF8.self))
    }

    func listJSON() throws -> [String: Any] {
        let r = try tool("list", "--json")
        XCTAssertEqual(r.status, 0, r.err)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any], r.out)
    }

    func testToolAndReaderShareTheState() async throws {
        XCTAssertEqual(try tool("plug").status, 0)
        let enrolled = try tool("enroll-finger", "right-index-finger")
        XCTAssertEqual(enrolled.status, 0, enrolled.err)
        XCTAssertTrue(enrolled.out.contains("Enrolled right-index-finger"), enrolled.out)

        // In-process reader sees what the tool wrote.
        let r = reader()
        let presence = await r.presence()
        XCTAssertEqual(presence, .present)
        let fingers = try await r.enrolledFingers()
        XCTAssertEqual(fingers.map(\.name), ["right-index-finger"])

        // The tool sees what the reader wrote.
        try r.enrollFinger("left-thumb")
        try r.enqueue(ScriptedScan(.retry))
        let json = try listJSON()
        XCTAssertEqual(json["present"] as? Bool, true)
        XCTAssertEqual(json["exists"] as? Bool, true)
        let listed = try XCTUnwrap(json["fingers"] as? [[String: String]])
        XCTAssertEqual(listed.map { $0["name"] }, ["left-thumb", "right-index-finger"])
        XCTAssertEqual(listed.map { $0["template_id"] }, try r.load()?.enrolledFingers.map(\.templateID))
        XCTAssertEqual(json["queue"] as? [String], ["retry"])
        XCTAssertEqual(json["enrollment_digest"] as? String, Digest.hex(try currentDigest()))

        // Several `next` calls queue in order, behind what is there; the reader pops them.
        XCTAssertEqual(try tool("next", "match", "left-thumb").status, 0)
        XCTAssertEqual(try tool("next", "no-match").status, 0)
        XCTAssertEqual(try tool("next", "error").status, 0)
        var outcomes: [ScanOutcome] = []
        for _ in 0..<4 { outcomes.append(await r.scan(timeout: .seconds(2))) }
        XCTAssertEqual(outcomes, [.retry, .match(finger: "left-thumb"), .noMatch, .hardwareError])

        let human = try tool("list")
        XCTAssertTrue(human.out.contains("plugged in") && human.out.contains("left-thumb"), human.out)

        XCTAssertEqual(try tool("unplug").status, 0)
        let unplugged = await r.presence()
        XCTAssertEqual(unplugged, .absent)
        XCTAssertEqual(try tool("plug").status, 0)
        let fingersAgain = try await r.enrolledFingers()
        XCTAssertEqual(fingersAgain.count, 2)

        XCTAssertEqual(try tool("next", "timeout").status, 0)
        XCTAssertEqual(try tool("clear").status, 0)
        XCTAssertEqual(try r.load()?.queue, [])

        XCTAssertEqual(try tool("reset").status, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: statePath))
        let gone = await r.presence()
        XCTAssertEqual(gone, .absent)
        let absentJSON = try listJSON()
        XCTAssertEqual(absentJSON["exists"] as? Bool, false)
        XCTAssertEqual(absentJSON["present"] as? Bool, false)
    }

    func testEveryOutcomeNameQueues() async throws {
        try pluggedReader(fingers: ["right-index-finger"])
        for name in ["match", "no-match", "retry", "error", "disconnect", "timeout", "cancel"] {
            let r = try tool("next", name)
            XCTAssertEqual(r.status, 0, "\(name): \(r.err)")
        }
        var outcomes: [ScanOutcome] = []
        for _ in 0..<7 { outcomes.append(await reader().scan(timeout: .seconds(2))) }
        XCTAssertEqual(outcomes, [.match(finger: "right-index-finger"), .noMatch, .retry, .hardwareError, .disconnected,
                                  .timeout, .cancelled])
    }

    func testReEnrollingThroughTheToolChangesTheDigest() throws {
        try tool("plug")
        try tool("enroll-finger", "right-index-finger")
        let d0 = try listJSON()["enrollment_digest"] as? String
        try tool("next", "match")
        try tool("unplug")
        try tool("plug")
        XCTAssertEqual(try listJSON()["enrollment_digest"] as? String, d0, "no enrollment change")
        let again = try tool("enroll-finger", "right-index-finger")
        XCTAssertTrue(again.out.contains("again"), again.out)
        XCTAssertNotEqual(try listJSON()["enrollment_digest"] as? String, d0)
        let removed = try tool("remove-finger", "right-index-finger")
        XCTAssertEqual(removed.status, 0, removed.err)
        XCTAssertEqual((try listJSON()["fingers"] as? [Any])?.count, 0)
    }

    func testStatePathFromTheEnvironmentTheConfigAndTheDataDir() throws {
        let envPath = dir.appendingPathComponent("from-env.json").path
        XCTAssertEqual(try tool("plug", state: false, env: ["SESSIONVAULT_FPSTUB": envPath]).status, 0)
        XCTAssertNotNil(try StubReader(path: envPath).load())

        // Neither --state nor the variable nor a config: vaultd's data dir,
        // $XDG_DATA_HOME/sessionvault/fpstub.json, never the socket (runtime) dir.
        let plain = try tool("plug", state: false)
        XCTAssertEqual(plain.status, 0, plain.err)
        XCTAssertNotNil(try StubReader(path: dir.appendingPathComponent("data/sessionvault/fpstub.json").path).load())
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("run").path),
                       "nothing in the runtime dir, where vaultd's socket lives")

        // $SESSIONVAULT_DATA_DIR, as vaultd takes it.
        let dataDir = dir.appendingPathComponent("vaultd-data").path
        XCTAssertEqual(try tool("plug", state: false, env: ["SESSIONVAULT_DATA_DIR": dataDir]).status, 0)
        XCTAssertNotNil(try StubReader(path: dataDir + "/fpstub.json").load())

        // vaultd's config: its stub_state, else its data_dir.
        let config = dir.appendingPathComponent("config.toml").path
        let configured = dir.appendingPathComponent("configured.json").path
        try "[fingerprint]\nstub_state = \"\(configured)\"\n".write(toFile: config, atomically: true, encoding: .utf8)
        XCTAssertEqual(try tool("plug", state: false).status, 0)
        XCTAssertNotNil(try StubReader(path: configured).load())
        let configDataDir = dir.appendingPathComponent("config-data").path
        try "data_dir = \"\(configDataDir)\"\n".write(toFile: config, atomically: true, encoding: .utf8)
        XCTAssertEqual(try tool("plug", state: false).status, 0)
        XCTAssertNotNil(try StubReader(path: configDataDir + "/fpstub.json").load())

        // A config vaultd would refuse: no guess, a sentence and exit 1.
        try "[fingerprint]\nreader = 3\n".write(toFile: config, atomically: true, encoding: .utf8)
        let broken = try tool("plug", state: false)
        XCTAssertEqual(broken.status, 1)
        XCTAssertTrue(broken.err.contains("vaultd's config file has an error") && broken.err.contains("--state"), broken.err)

        // --state after the subcommand works too.
        let after = dir.appendingPathComponent("after.json").path
        XCTAssertEqual(try tool("plug", "--state", after, state: false).status, 0)
        XCTAssertNotNil(try StubReader(path: after).load())
    }

    func testBadInputExitsWithClearMessages() throws {
        // Wrong usage: 2.
        let badOutcome = try tool("next", "maybe")
        XCTAssertEqual(badOutcome.status, 2)
        XCTAssertTrue(badOutcome.err.contains("“maybe” is not a scan outcome") && badOutcome.err.contains("no-match"),
                      badOutcome.err)
        let fingerOnNoMatch = try tool("next", "no-match", "right-index-finger")
        XCTAssertEqual(fingerOnNoMatch.status, 2)
        XCTAssertTrue(fingerOnNoMatch.err.contains("Only “match” takes a finger"), fingerOnNoMatch.err)
        let badName = try tool("enroll-finger", "two words")
        XCTAssertEqual(badName.status, 2)
        XCTAssertTrue(badName.err.contains("not a usable finger name"), badName.err)
        XCTAssertEqual(try tool("frobnicate").status, 2)
        XCTAssertEqual(try tool(state: false).status, 2, "no subcommand")
        XCTAssertEqual(try tool("enroll-finger").status, 2)

        // Failures: 1.
        let noReader = try tool("enroll-finger", "right-index-finger")
        XCTAssertEqual(noReader.status, 1)
        XCTAssertTrue(noReader.err.contains("vault-fpstub plug"), noReader.err)
        let noReaderNext = try tool("next", "match")
        XCTAssertEqual(noReaderNext.status, 1)
        try tool("plug")
        let unknown = try tool("remove-finger", "left-thumb")
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.err.contains("“left-thumb” is not enrolled"), unknown.err)
        try Data("nonsense".utf8).write(to: URL(fileURLWithPath: statePath))
        let corrupt = try tool("list")
        XCTAssertEqual(corrupt.status, 1)
        XCTAssertTrue(corrupt.err.contains("vault-fpstub reset"), corrupt.err)

        // Harmless without a reader: 0 and a sentence.
        try tool("reset")
        let unplug = try tool("unplug")
        XCTAssertEqual(unplug.status, 0)
        XCTAssertTrue(unplug.out.contains("nothing to unplug"), unplug.out)
    }

    func testNextMatchOfAnUnenrolledFingerWarnsButQueues() async throws {
        try pluggedReader(fingers: ["right-index-finger"])
        let r = try tool("next", "match", "left-thumb")
        XCTAssertEqual(r.status, 0)
        XCTAssertTrue(r.out.contains("not enrolled now"), r.out)
        let outcome = await reader().scan(timeout: .seconds(2))
        XCTAssertEqual(outcome, .noMatch)
    }
}

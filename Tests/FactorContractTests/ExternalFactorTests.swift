import ExternalFactor
import Foundation
import VaultFactor
import XCTest
#if canImport(Glibc)
import Glibc
import VaultTestSupport
#endif

/// ExternalFactor's own promises: discovery refuses unsafe plugins without
/// running them, and no plugin behaviour — hanging, crashing, garbage, floods —
/// can crash or hang the caller.
final class ExternalFactorTests: XCTestCase {
    var sandbox: PluginSandbox!

    override func setUpWithError() throws { sandbox = try PluginSandbox() }
    override func tearDown() { sandbox?.cleanup() }

    /// A shell plugin that leaves a marker when run, to prove refused plugins never run.
    func writeMarkerPlugin(_ name: String, mode: mode_t = 0o755, in dir: String? = nil) throws -> (path: String, marker: String) {
        let marker = sandbox.root + "/ran-\(name)"
        let path = (dir ?? sandbox.pluginDir) + "/vault-factor-\(name)"
        try "#!/bin/sh\ntouch \(marker)\nexit 1\n".write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, mode)
        return (path, marker)
    }

    func refusals(_ dir: String? = nil, options: ExternalFactor.Options? = nil) async -> [ExternalFactor.Discovery.Refusal] {
        await ExternalFactor.discover(directory: dir ?? sandbox.pluginDir, options: options ?? sandbox.options()).refused
    }

    func since(_ start: ContinuousClock.Instant) -> Double {
        let d = ContinuousClock.now - start
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    // MARK: - Discovery

    func testDiscoversThePluginAndReadsItsDescriptor() async throws {
        try sandbox.write(["kind": "presence", "rank": 7])
        let found = await ExternalFactor.discover(directory: sandbox.pluginDir, options: sandbox.options())
        XCTAssertEqual(found.refused, [])
        let factor = try XCTUnwrap(found.factors.first)
        XCTAssertEqual(factor.name, "pytest")
        XCTAssertEqual(factor.descriptor.id, "pytest")
        XCTAssertEqual(factor.descriptor.displayName, LocalizedText(en: "Test code", nb: "Testkode"))
        XCTAssertEqual(factor.descriptor.rank, 7)
        XCTAssertEqual(factor.descriptor.contribution, .presenceOnly)
        XCTAssertNil(factor.descriptor.throttle, "presence factors are not throttled by the vault")
        let presence = await factor.probe()
        XCTAssertEqual(presence, .available)

        try sandbox.write(["kind": "secret"])
        let secret = try await sandbox.load()
        XCTAssertEqual(secret.descriptor.contribution, .lowEntropySecret)
        XCTAssertEqual(secret.descriptor.throttle, ThrottlePolicy(freeAttempts: 2, firstDelay: 30, maxDelay: 120),
                       "secret plugins get the vault's throttle")
    }

    // MARK: - Probe cache

    func testProbesWithinTheCacheTimeStartThePluginOnce() async throws {
        try sandbox.write(["kind": "presence", "runs_log": sandbox.runsLog])
        let factor = try await sandbox.load(sandbox.options(probeCache: .seconds(600)))
        XCTAssertEqual(sandbox.runs(), ["probe"], "discovery probes once")
        for _ in 0..<10 {
            let presence = await factor.probe()
            XCTAssertEqual(presence, .available)
        }
        // A copy (vaultd keeps the factor in more than one place) shares the answer.
        let copy = factor
        _ = await copy.probe()
        XCTAssertEqual(sandbox.runs(), ["probe"], "the probe that loaded the plugin answers every probe within the cache time")
        // The price: a change shows only when the answer expires.
        try sandbox.update(["mode": "unavailable"])
        let stale = await factor.probe()
        XCTAssertEqual(stale, .available)
    }

    func testAnExpiredProbeRunsAgainOnceForConcurrentCallers() async throws {
        try sandbox.write(["kind": "presence", "runs_log": sandbox.runsLog])
        let factor = try await sandbox.load(sandbox.options(probeCache: .milliseconds(300)))
        try sandbox.update(["mode": "unavailable"])
        try await Task.sleep(for: .milliseconds(400))
        let answers = await withTaskGroup(of: FactorPresence.self) { group in
            for _ in 0..<8 { group.addTask { await factor.probe() } }
            var all: [FactorPresence] = []
            for await a in group { all.append(a) }
            return all
        }
        XCTAssertEqual(sandbox.runs(), ["probe", "probe"], "eight probes at once after expiry: one plugin start")
        XCTAssertTrue(answers.allSatisfy { if case .unavailable = $0 { true } else { false } }, "\(answers)")
    }

    func testWithoutACacheEveryProbeStartsThePlugin() async throws {
        try sandbox.write(["kind": "presence", "runs_log": sandbox.runsLog])
        let factor = try await sandbox.load(sandbox.options(probeCache: .zero))
        for _ in 0..<3 { _ = await factor.probe() }
        XCTAssertEqual(sandbox.runs().count, 4)
    }

    func testAMissingDirectoryHoldsNoPluginsAndIsNoError() async {
        let found = await ExternalFactor.discover(directory: sandbox.root + "/nope", options: sandbox.options())
        XCTAssertTrue(found.factors.isEmpty)
        XCTAssertTrue(found.refused.isEmpty)
    }

    func testAnUnavailablePluginIsStillLoadedAndSaysWhy() async throws {
        try sandbox.write(["mode": "unavailable"])
        let factor = try await sandbox.load()
        let presence = await factor.probe()
        XCTAssertEqual(presence, .unavailable(LocalizedText(en: "The test key is not plugged in. Use your PIN instead.",
                                                            nb: "Testnøkkelen er ikke satt i. Bruk PIN-koden i stedet.")))
    }

    func testRefusesAGroupOrWorldWritablePlugin() async throws {
        let group = try writeMarkerPlugin("groupw", mode: 0o775)
        let world = try writeMarkerPlugin("worldw", mode: 0o757)
        let refused = await refusals()
        XCTAssertEqual(Set(refused.map(\.path)), [group.path, world.path])
        XCTAssertTrue(refused.allSatisfy { $0.reason.contains("writable by its group or by others") }, "\(refused)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: group.marker), "a refused plugin is never run")
        XCTAssertFalse(FileManager.default.fileExists(atPath: world.marker))
        // The safe plugin beside them still loads.
        let found = await ExternalFactor.discover(directory: sandbox.pluginDir, options: sandbox.options())
        XCTAssertEqual(found.factors.map(\.name), ["pytest"])
    }

    func testRefusesEverythingInAGroupWritableDirectory() async throws {
        chmod(sandbox.pluginDir, 0o770)
        let found = await ExternalFactor.discover(directory: sandbox.pluginDir, options: sandbox.options())
        XCTAssertTrue(found.factors.isEmpty)
        XCTAssertEqual(found.refused.map(\.path), [sandbox.pluginDir])
        XCTAssertTrue(found.refused[0].reason.contains("writable by its group or by others"))
    }

    func testRefusesAPluginOwnedByAnotherUser() async throws {
        try XCTSkipIf(geteuid() != 0, "giving a file to another user needs root")
        let other = try writeMarkerPlugin("other")
        XCTAssertEqual(chown(other.path, 65534, 65534), 0)
        let refused = await refusals()
        XCTAssertEqual(refused.map(\.path), [other.path])
        XCTAssertTrue(refused[0].reason.contains("owned by uid 65534"), refused[0].reason)
        XCTAssertFalse(FileManager.default.fileExists(atPath: other.marker))
    }

    func testRefusesADirectoryOwnedByAnotherUser() async throws {
        try XCTSkipIf(geteuid() != 0, "giving a directory to another user needs root")
        XCTAssertEqual(chown(sandbox.pluginDir, 65534, 65534), 0)
        let found = await ExternalFactor.discover(directory: sandbox.pluginDir, options: sandbox.options())
        XCTAssertTrue(found.factors.isEmpty)
        XCTAssertTrue(found.refused.first?.reason.contains("owned by uid 65534") ?? false, "\(found.refused)")
    }

    func testRefusesWhatIsNotARegularExecutableFile() async throws {
        let plain = try writeMarkerPlugin("plain", mode: 0o644)
        try FileManager.default.createDirectory(atPath: sandbox.pluginDir + "/vault-factor-adir", withIntermediateDirectories: false)
        XCTAssertEqual(mkfifo(sandbox.pluginDir + "/vault-factor-fifo", 0o700), 0)
        let refused = await refusals()
        let byPath = Dictionary(uniqueKeysWithValues: refused.map { ($0.path, $0.reason) })
        XCTAssertTrue(byPath[plain.path]?.contains("not executable") ?? false, "\(refused)")
        XCTAssertTrue(byPath[sandbox.pluginDir + "/vault-factor-adir"]?.contains("not a regular file") ?? false)
        XCTAssertTrue(byPath[sandbox.pluginDir + "/vault-factor-fifo"]?.contains("not a regular file") ?? false)
    }

    func testRefusesBadAndReservedNames() async throws {
        let upper = try writeMarkerPlugin("Upper")
        let dotted = try writeMarkerPlugin("a.b")
        let pin = try writeMarkerPlugin("pin")
        let device = try writeMarkerPlugin("device")
        let refused = await refusals()
        XCTAssertEqual(Set(refused.map(\.path)), [upper.path, dotted.path, pin.path, device.path])
        for r in refused {
            XCTAssertTrue(r.reason.contains("not a valid plugin name") || r.reason.contains("built-in"), r.reason)
        }
        for m in [upper, dotted, pin, device] { XCTAssertFalse(FileManager.default.fileExists(atPath: m.marker)) }
    }

    func testFollowsALinkOnlyToASafeTarget() async throws {
        // A link to the safe copy is fine; a link into a world-writable directory is not.
        XCTAssertEqual(symlink(sandbox.pluginPath, sandbox.pluginDir + "/vault-factor-linked"), 0)
        let unsafeDir = sandbox.root + "/unsafe"
        try FileManager.default.createDirectory(atPath: unsafeDir, withIntermediateDirectories: false)
        chmod(unsafeDir, 0o777)
        let target = try writeMarkerPlugin("target", in: unsafeDir)
        XCTAssertEqual(symlink(target.path, sandbox.pluginDir + "/vault-factor-sneaky"), 0)
        let found = await ExternalFactor.discover(directory: sandbox.pluginDir, options: sandbox.options())
        XCTAssertEqual(found.factors.map(\.name).sorted(), ["linked", "pytest"])
        XCTAssertEqual(found.refused.map(\.path), [sandbox.pluginDir + "/vault-factor-sneaky"])
        XCTAssertTrue(found.refused.first?.reason.contains("its directory") ?? false)
        XCTAssertFalse(FileManager.default.fileExists(atPath: target.marker))
    }

    func testAProbeThatHangsIsRefusedWithinTheProbeTimeout() async throws {
        try sandbox.write(["mode": ["probe": "hang"]])
        let start = ContinuousClock.now
        let found = await ExternalFactor.discover(directory: sandbox.pluginDir, options: sandbox.options(probe: .milliseconds(700)))
        XCTAssertLessThan(since(start), 5)
        XCTAssertTrue(found.factors.isEmpty)
        XCTAssertTrue(found.refused.first?.reason.contains("no final message within") ?? false, "\(found.refused)")
        if let pids = sandbox.hangPIDs() {
            for pid in pids { XCTAssertTrue(stopsRunning(pid), "pid \(pid) survived") }
        }
    }

    func testAProbeThatPromptsIsRefused() async throws {
        try sandbox.write(["mode": ["probe": "prompt_in_probe"]])
        let found = await ExternalFactor.discover(directory: sandbox.pluginDir, options: sandbox.options())
        XCTAssertTrue(found.factors.isEmpty)
        XCTAssertTrue(found.refused.first?.reason.contains("probe must never talk to the person") ?? false, "\(found.refused)")
    }

    // MARK: - Robustness of a running plugin

    func loadedPlugin(_ mode: [String: Any], kind: String = "secret", operation: Duration = .seconds(20)) async throws -> ExternalFactor {
        try sandbox.write(["kind": kind])
        let factor = try await sandbox.load(sandbox.options(operation: operation))
        try sandbox.update(["mode": mode])
        return factor
    }


    func assertUnavailable(_ error: FactorError?, saying phrase: String, file: StaticString = #filePath, line: UInt = #line) {
        guard case .unavailable(let text)? = error else {
            return XCTFail("expected unavailable, got \(String(describing: error))", file: file, line: line)
        }
        XCTAssertTrue(text.en.contains(phrase), text.en, file: file, line: line)
        XCTAssertTrue(text.en.contains("PIN") && text.en.contains("BankID"), "a next step: \(text.en)", file: file, line: line)
        XCTAssertFalse(text.nb.isEmpty, file: file, line: line)
    }

    func testAHangingPluginIsKilledWithItsProcessGroupAfterTheTimeout() async throws {
        let factor = try await loadedPlugin(["unlock": "hang"], operation: .seconds(1))
        let start = ContinuousClock.now
        let error = await verifyError(factor)
        let elapsed = since(start)
        assertUnavailable(error, saying: "did not respond in time")
        XCTAssertGreaterThanOrEqual(elapsed, 0.9)
        XCTAssertLessThan(elapsed, 5)
        let pids = try XCTUnwrap(sandbox.hangPIDs(), "the plugin wrote its pids")
        for pid in pids { XCTAssertTrue(stopsRunning(pid), "pid \(pid) survived: the whole group must be killed") }
        XCTAssertTrue(sandbox.log.contains { $0.metadata["outcome"]?.contains("killed (timeout)") ?? false }, "\(sandbox.log)")
    }

    func testTheClockStopsWhileThePersonAnswers() async throws {
        // Budget 2 s, the person takes 3 s: the plugin isn't to blame for that.
        let factor = try await loadedPlugin([:], operation: .seconds(2))
        let client = scripted([.secret("1234")], delay: .seconds(3))
        let proof = try await factor.verify(client, slot: EnrolledSlot(factor: "pytest", binding: [:]))
        XCTAssertEqual(proof.contribution?.unsafeCopyToArray(), Array("1234".utf8))
    }

    func testCancellingTheTaskKillsThePlugin() async throws {
        let factor = try await loadedPlugin(["unlock": "hang"], operation: .seconds(60))
        let task = Task { await verifyError(factor) }
        var pids: [pid_t]?
        for _ in 0..<200 where pids == nil {
            try await Task.sleep(for: .milliseconds(25))
            pids = sandbox.hangPIDs()
        }
        let start = ContinuousClock.now
        task.cancel()
        _ = await task.value
        XCTAssertLessThan(since(start), 3)
        for pid in try XCTUnwrap(pids) { XCTAssertTrue(stopsRunning(pid), "pid \(pid) survived") }
    }

    func testACrashIsUnavailableAndItsStderrGoesOnlyToTheLog() async throws {
        let factor = try await loadedPlugin(["unlock": "crash"])
        let client = scripted([.secret("1234")])
        assertUnavailable(await verifyError(factor, client), saying: "stopped unexpectedly")
        let record = try XCTUnwrap(sandbox.log.last { $0.metadata["op"] == "unlock" })
        XCTAssertTrue(record.metadata["stderr"]?.contains("crashing on purpose") ?? false, "\(record)")
        XCTAssertTrue(record.metadata["outcome"]?.contains("signal 6") ?? false, "\(record)")
        XCTAssertFalse(client.shown.joined().contains("crashing"), "stderr is never shown to the person")
    }

    func testExitingWithoutAFinalMessageIsUnavailable() async throws {
        let factor = try await loadedPlugin(["unlock": "exit"])
        assertUnavailable(await verifyError(factor), saying: "stopped unexpectedly")
    }

    func testGarbageIsUnavailable() async throws {
        let factor = try await loadedPlugin(["unlock": "garbage"])
        assertUnavailable(await verifyError(factor), saying: "does not understand")
        XCTAssertTrue(sandbox.log.contains { $0.metadata["problem"]?.contains("not JSON") ?? false }, "\(sandbox.log)")
    }

    func testAnOverlongLineIsUnavailable() async throws {
        let factor = try await loadedPlugin(["unlock": "long_line"])
        let start = ContinuousClock.now
        assertUnavailable(await verifyError(factor), saying: "does not understand")
        XCTAssertLessThan(since(start), 5)
        XCTAssertTrue(sandbox.log.contains { $0.metadata["problem"]?.contains("line longer than") ?? false }, "\(sandbox.log)")
    }

    func testAFloodOfMessagesIsCutOff() async throws {
        let factor = try await loadedPlugin(["unlock": "flood"])
        let client = scripted([.secret("1234")])
        assertUnavailable(await verifyError(factor, client), saying: "does not understand")
        XCTAssertLessThan(client.shown.count, 1100, "at most 1 MiB of output is read")
        XCTAssertTrue(sandbox.log.contains { $0.metadata["problem"]?.contains("bytes of output") ?? false }, "\(sandbox.log)")
    }

    func testTheDocsExamplePluginWorks() async throws {
        // docs/plugins.md §6 must stay a working plugin.
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/plugins.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let start = try XCTUnwrap(text.range(of: "```python\n"))
        let end = try XCTUnwrap(text.range(of: "```", range: start.upperBound..<text.endIndex))
        let path = sandbox.pluginDir + "/vault-factor-deskcode"
        try String(text[start.upperBound..<end.lowerBound]).write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o755)
        let found = await ExternalFactor.discover(directory: sandbox.pluginDir, options: sandbox.options())
        XCTAssertEqual(found.refused, [])
        let desk = try XCTUnwrap(found.factors.first { $0.name == "deskcode" })
        XCTAssertEqual(desk.descriptor.contribution, .lowEntropySecret)
        let enrolled = try await desk.enroll(scripted([.secret("correct horse"), .secret("correct horse")]))
        let unlocked = try await desk.verify(scripted([.secret("correct horse")]), slot: EnrolledSlot(factor: "deskcode", binding: [:]))
        XCTAssertEqual(enrolled.contribution?.unsafeCopyToArray(), unlocked.contribution?.unsafeCopyToArray())
        do {
            _ = try await desk.enroll(scripted([.secret("abc")]))
            XCTFail("a short code must be rejected")
        } catch {
            guard case .rejected(let why) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(why.en.contains("at least 6"))
        }
    }

    func testAFloodOnStderrNeitherDeadlocksNorFloodsTheLog() async throws {
        let factor = try await loadedPlugin(["unlock": "noisy"])
        let proof = try await factor.verify(scripted([.secret("1234")]), slot: EnrolledSlot(factor: "pytest", binding: [:]))
        XCTAssertEqual(proof.contribution?.count, 4)
        let stderr = try XCTUnwrap(sandbox.log.last?.metadata["stderr"])
        XCTAssertLessThan(stderr.utf8.count, 6000, "truncated")
        XCTAssertTrue(stderr.hasPrefix("…"))
    }

    func testPluginErrorCodesBecomeFactorErrors() async throws {
        let factor = try await loadedPlugin([:])
        let says = LocalizedText(en: "The test plugin says no.", nb: "Testtillegget sier nei.")
        let expected: [(String, FactorError)] = [
            ("cancelled", .cancelled), ("no_match", .noMatch), ("too_many_attempts", .tooManyAttempts),
            ("unavailable", .unavailable(says)), ("rejected", .rejected(says)), ("timeout", .timeout),
        ]
        for (code, error) in expected {
            try sandbox.update(["mode": ["unlock": "error:\(code)"]])
            let got = await verifyError(factor)
            XCTAssertEqual(got, error, code)
        }
        try sandbox.update(["mode": ["unlock": "error:bogus"]])
        assertUnavailable(await verifyError(factor), saying: "does not understand")
    }

    func testAClientThatCannotAnswerEndsThePluginRun() async throws {
        let factor = try await loadedPlugin([:])
        let start = ContinuousClock.now
        let error = await verifyError(factor, scripted(interactive: false))
        XCTAssertEqual(error, .notInteractive)
        XCTAssertLessThan(since(start), 3)
    }

    func testRunsLeaveNoDescriptorsBehind() async throws {
        let factor = try await loadedPlugin([:])
        // Pipes by descriptor and inode, not a count: earlier tests in this process may still be closing their
        // own descriptors while this one runs (ASan's slower runner showed the count fall by ten), which a count
        // would read as a pass or a leak by chance. A pipe that is open now and was not before is ours.
        // An unreadable /proc/self/fd throws: two empty listings would compare equal and pass.
        func openPipes() throws -> Set<String> {
            let names = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")
            return Set(names.compactMap { name in
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)"),
                      target.hasPrefix("pipe:") else { return nil }
                return "\(name) → \(target)"
            })
        }
        _ = await verifyError(factor)   // warm up lazily opened descriptors
        let before = try openPipes()
        for mode in ["normal", "crash", "garbage", "exit", "error:no_match"] {
            try sandbox.update(["mode": ["unlock": mode]])
            _ = await verifyError(factor)
            _ = await verifyError(factor, scripted([.cancel]))
        }
        XCTAssertEqual(try openPipes().subtracting(before), [], "every pipe is closed after each run")
    }

    func testBindingAndEnrollmentStateTravelBothWays() async throws {
        let factor = try await loadedPlugin([:], kind: "presence")
        let enrolled = try await factor.enroll(scripted([.confirm(true)]))
        XCTAssertEqual(enrolled.binding, ["serial": "pytest-0001"])
        XCTAssertEqual(enrolled.enrollmentState, Array("enrolled-1".utf8))
        XCTAssertNil(enrolled.contribution)
        // The plugin gets the slot's binding back in `start` and echoes it.
        let proof = try await factor.verify(scripted([.secret("246810")]),
                                            slot: EnrolledSlot(factor: "pytest", binding: ["serial": "echo-me"], attempt: 2))
        XCTAssertEqual(proof.binding, ["serial": "echo-me"])
    }

    func testPromptsAndMessagesAreRelayedToThePerson() async throws {
        let factor = try await loadedPlugin([:], kind: "presence")
        let client = scripted([.secret("1"), .secret("246810")])
        _ = try await factor.verify(client, slot: EnrolledSlot(factor: "pytest", binding: [:]))
        XCTAssertEqual(client.prompts, ["Type the code shown on the test key:", "Type the code shown on the test key:"])
        XCTAssertEqual(client.shown, ["That code did not match."])
    }
}

/// The error a plugin's unlock ends with, or nil on success.
func verifyError(_ factor: ExternalFactor, _ client: ScriptedClient = scripted([.secret("1234")])) async -> FactorError? {
    do {
        _ = try await factor.verify(client, slot: EnrolledSlot(factor: factor.descriptor.id, binding: [:]))
        return nil
    } catch {
        return error
    }
}

import Foundation
import VaultProtocol
import VaultTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The TPM layer through a real vaultd, with swtpm as this computer's chip
/// (docs/key-hierarchy.md, "Bound to this computer").
final class TPMTests: VaultdTestCase {
    func config(_ tpm: SoftwareTPM?, mode: String = "required") -> String {
        // per_app off as VaultdProcess has it: the kill test rewrites the file.
        var text = "per_app = false\ntpm = \"\(mode)\"\n"
        if let tpm { text += "tpm_device = \"\(tpm.tcti)\"\n" }
        return text + VaultdProcess.fastPINConfig
    }

    /// The attacker copies the data directory and the device key (`--keyring=file`)
    /// to another computer: with the chip layer, nothing opens there.
    func testACopiedDataDirectoryAndDeviceKeyOpenNoSessionOnAnotherComputer() throws {
        let here = try SoftwareTPM(tries: 5, interval: 10)
        let v = try startVaultd(config: config(here))
        try importSession(v, account: "a", accessToken: "AT-tpm-copy", refreshToken: nil)
        let shown = v.vaultctl(["status"])
        XCTAssertEqual(shown.exit, 0, shown.err)
        XCTAssertTrue(shown.out.contains("bound to this computer's security chip (TPM)"), shown.out)
        enrollPIN(v)
        XCTAssertTrue(try status(v)["protection"]?.stringValue?.contains("guards your PIN") ?? false)
        v.stop()

        let elsewhere = try SoftwareTPM(tries: 5, interval: 10)
        let copy = try makeVaultd(config: config(elsewhere))
        try FileManager.default.copyItem(atPath: v.dataDir, toPath: copy.dataDir)
        try copy.start()
        XCTAssertEqual(try status(copy)["protection"]?.stringValue, Messages.chipReplaced.en, "said at start, without a guess")
        let (answer, _) = try unlock(copy, pins: [VaultdTestCase.pin])
        XCTAssertEqual(answer.errorMessage, Messages.chipReplaced.en, answer.text)
        XCTAssertEqual(try TPMChipStatus.failures(elsewhere), 0, "the right PIN was not a guess there either")
        let c = try copy.raw()
        let r = try c.call("session", ["account": "a"])
        XCTAssertFalse(r.isOK, "no session on another computer: \(r.text)")

        // This computer still opens it.
        try v.start()
        let (opened, _) = try unlock(v, pins: [VaultdTestCase.pin])
        XCTAssertTrue(opened.isOK, opened.text)
        XCTAssertEqual(try v.raw().call("session", ["account": "a"]).result?["access_token"]?.stringValue, "AT-tpm-copy")
    }

    func testRequiredWithoutAChipRefusesToStartWithItsSentence() throws {
        let dir = try makeTemporaryDirectory("svit-notpm", in: "/tmp")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let v = try makeVaultd(config: "tpm = \"required\"\ntpm_device = \"device:\(dir)/tpmrm0\"\n" + VaultdProcess.fastPINConfig)
        let r = try v.runToExit()
        XCTAssertFalse(r.timedOut, r.err)
        XCTAssertEqual(r.exit, 3, r.err)
        XCTAssertTrue(r.err.contains(Messages.chipRequiredMissing.en), r.err)
        let typo = try makeVaultd(config: "tpm = \"yes\"\n")
        let t = try typo.runToExit()
        XCTAssertEqual(t.exit, 2, t.err)
        XCTAssertTrue(t.err.contains("tpm must be “auto”, “required” or “off”"), t.err)
    }

    func testAutoWithoutAChipRunsAsBeforeAndSaysSo() throws {
        let dir = try makeTemporaryDirectory("svit-notpm", in: "/tmp")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let v = try startVaultd(config: "tpm = \"auto\"\ntpm_device = \"device:\(dir)/tpmrm0\"\n" + VaultdProcess.fastPINConfig)
        try importSession(v, account: "a", accessToken: "AT-no-chip", refreshToken: nil)
        XCTAssertEqual(try status(v)["protection"]?.stringValue, Messages.chipNotUsedNone.en)
        // A device node this user may not open: the way to enable it is said.
        _ = FileManager.default.createFile(atPath: dir + "/tpmrm0", contents: nil, attributes: [.posixPermissions: 0o000])
        v.stop()
        try v.start()
        let said = try status(v)["protection"]?.stringValue
        if getuid() != 0 {
            XCTAssertEqual(said, Messages.chipNotUsedNoAccess.en)
        } else {
            // root opens a mode-000 file, which is no TPM: either sentence names a way on.
            XCTAssertTrue(said == Messages.chipNotUsedNoAccess.en || said == Messages.chipNotUsedNone.en, String(describing: said))
        }
        XCTAssertEqual(try v.raw().call("session", ["account": "a"]).result?["access_token"]?.stringValue, "AT-no-chip")
    }

    /// vaultd killed (-9) at the one point between the two steps of a rebind —
    /// the TPM has sealed the new wrap's part, the keyslot row is not yet
    /// replaced (the debug hook `SESSIONVAULT_TEST_PAUSE_BEFORE_REBIND`) — keeps
    /// the old wrap, which opens, and the next PIN rebinds it. Both ways.
    func testKilledBetweenTheChipsSealAndTheKeyslotWriteTheOldWrapOpens() throws {
        let tpm = try SoftwareTPM(tries: 32, interval: 1)
        let v = try startVaultd(config: config(tpm, mode: "off"))
        try importSession(v, account: "a", accessToken: "AT-tpm-pause", refreshToken: nil)
        enrollPIN(v)
        func bound() throws -> Bool {
            let r = try sqlite3(v.storePath, "SELECT kdf FROM keyslot WHERE id = 'pin';")
            XCTAssertEqual(r.exit, 0, r.err)
            return r.out.contains("\"tpm\"")
        }
        for (from, to) in [("off", "required"), ("required", "off")] {
            XCTAssertEqual(try bound(), from == "required")
            v.stop()
            try config(tpm, mode: to).write(toFile: v.configPath, atomically: true, encoding: .utf8)
            let marker = v.root + "/rebind.marker"
            try v.start(env: ["SESSIONVAULT_TEST_PAUSE_BEFORE_REBIND": marker])
            let unlocking = try vaultctlUnlock(v)
            let paused = waitUntil(timeout: 20) { FileManager.default.fileExists(atPath: marker) }
            guard paused else {
                throw IntegrationError("vaultd did not pause before the rebind's write (the hook exists only in debug builds)")
            }
            v.kill9()
            unlocking.waitUntilExit()
            try FileManager.default.removeItem(atPath: marker)
            XCTAssertEqual(try bound(), from == "required", "\(from) → \(to): killed before the write, the old wrap is kept")
            try v.start(env: [:])
            let (opened, _) = try unlock(v, pins: [VaultdTestCase.pin])
            XCTAssertTrue(opened.isOK, "\(from) → \(to): \(opened.text)")
            XCTAssertEqual(try bound(), to == "required", "\(from) → \(to): rebound at the next PIN")
            XCTAssertEqual(try v.raw().call("session", ["account": "a"]).result?["access_token"]?.stringValue, "AT-tpm-pause")
        }
    }

    /// `vaultctl unlock pin` with the PIN on stdin, running on its own.
    func vaultctlUnlock(_ v: VaultdProcess) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Binaries.vaultctl)
        p.arguments = ["unlock", "pin"]
        p.environment = childEnvironment(["SESSIONVAULT_SOCKET": v.socketPath, "HOME": v.root + "/home"])
        let stdin = Pipe()
        p.standardInput = stdin
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        stdin.fileHandleForWriting.write(Data("\(VaultdTestCase.pin)\n".utf8))
        return p
    }

    /// Turning the layer on and off rebinds the PIN's wrap in one transaction
    /// at the next PIN; vaultd killed (-9) at any moment of it leaves a vault
    /// the PIN opens, under either setting.
    func testKilledWhileTurningTheLayerOnOrOffTheVaultStillOpens() throws {
        let tpm = try SoftwareTPM(tries: 32, interval: 1)
        let v = try startVaultd(config: config(tpm, mode: "off"))
        try importSession(v, account: "a", accessToken: "AT-tpm-kill", refreshToken: nil)
        enrollPIN(v)
        // Delays spread over the unlock: before the PIN is read, during Argon2id,
        // during the TPM's seal, around the keyslot transaction, after it.
        let delays: [UInt32] = [0, 30_000, 80_000, 150_000, 250_000, 400_000, 600_000, 900_000]
        for (round, delay) in delays.enumerated() {
            v.stop()
            try config(tpm, mode: round % 2 == 0 ? "required" : "off").write(toFile: v.configPath, atomically: true, encoding: .utf8)
            try v.start()
            // vaultctl reads the PIN from stdin, as `enroll` does; it dies with vaultd's socket.
            let unlocking = try vaultctlUnlock(v)
            usleep(delay)
            v.kill9()
            unlocking.waitUntilExit()
            // Whatever it got to, the vault opens with the PIN, bound or not.
            for mode in ["required", "off"] {
                try config(tpm, mode: mode).write(toFile: v.configPath, atomically: true, encoding: .utf8)
                try v.start()
                let (opened, _) = try unlock(v, pins: [VaultdTestCase.pin])
                XCTAssertTrue(opened.isOK, "round \(round) (\(delay) µs), then \(mode): \(opened.text)")
                // The PIN just typed bound (or unbound) its wrap, in place.
                let kdfRead = try sqlite3(v.storePath, "SELECT kdf FROM keyslot WHERE id = 'pin';")
                XCTAssertEqual(kdfRead.exit, 0, kdfRead.err)
                let kdf = kdfRead.out
                XCTAssertEqual(kdf.contains("\"tpm\""), mode == "required", "round \(round), then \(mode): \(kdf)")
                let session = try v.raw().call("session", ["account": "a"])
                XCTAssertEqual(session.result?["access_token"]?.stringValue, "AT-tpm-kill", "round \(round), then \(mode): \(session.text)")
                v.stop()
            }
        }
    }
}

/// The chip's own count of wrong answers, read with tpm2-tools as an outsider would.
enum TPMChipStatus {
    static func failures(_ tpm: SoftwareTPM) throws -> Int {
        let r = try runCommand(["tpm2_getcap", "-T", tpm.tcti, "properties-variable"])
        guard r.status == 0 else { throw CommandError(description: "tpm2_getcap: \(r.stderr)") }
        // "TPM2_PT_LOCKOUT_COUNTER: 0x0"
        guard let line = r.stdout.split(separator: "\n").first(where: { $0.hasPrefix("TPM2_PT_LOCKOUT_COUNTER:") }),
              let hex = line.split(separator: "x").last, let value = Int(hex.trimmingCharacters(in: .whitespaces), radix: 16)
        else { throw CommandError(description: "no lockout counter in: \(r.stdout)") }
        return value
    }
}

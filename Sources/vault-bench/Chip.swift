import Foundation
#if canImport(Glibc)
import Glibc
#endif
import SecurityChip
import SodiumKit

/// The threat model's PIN-guessing lines (docs/threat-model.md): what one
/// guess costs an offline attacker who has the data directory and the device
/// key but not the chip (Argon2id at vaultd's default cost), and how fast the
/// chip lets guesses through on this computer (swtpm as this user's TPM, with
/// its own shipped limits and with 5 tries / 10 s). `--only chip`; needs swtpm
/// and tpm2-tools (scripts/setup).
extension VaultBench {
    func runChipLines(_ table: inout Table) throws {
        // ESAPI logs every refused guess to stderr; the table says what happened.
        setenv("TSS2_LOG", "all+NONE", 1)
        // Offline, without the chip: one Argon2id per guess, one core.
        let pin = try SecureBytes.utf8("000000")
        let salt = Random.bytes(PasswordHash.saltSize)
        var argon: [UInt64] = []
        for _ in 0..<5 {
            let t0 = monotonicNs()
            _ = try PasswordHash.argon2id(pin, salt: salt, cost: .interactive)
            argon.append(monotonicNs() - t0)
        }
        let perGuess = Double(argon.sorted()[argon.count / 2]) / 1e9
        table.add("offline guess without the chip (Argon2id 64 MiB, 2 passes, 1 core)", String(format: "%.0f ms", perGuess * 1000), "", nil)
        for digits in [4, 6, 8] {
            let half = pow(10, Double(digits)) / 2
            table.add("  \(digits)-digit PIN, half the space, 1 core", duration(half * perGuess), "", nil)
        }

        // On this computer, through the chip.
        // swtpm's own defaults; what Windows sets a TPM 2.0 to when it takes
        // ownership (Microsoft, "TPM fundamentals": lock after 32 failures,
        // forget one every 10 minutes), which most PCs a person buys have; and
        // the short limits the tests use.
        let settings: [(String, (Int, Int)?)] = [("swtpm as shipped", nil), ("as Windows sets it", (32, 600)), ("5 tries / 10 s", (5, 10))]
        for (label, limits) in settings {
            let tpm = try SwtpmProcess(limits: limits)
            defer { tpm.stop() }
            let chip = TPMChip(location: tpm.tcti)
            let blob = try chip.seal(try SecureBytes.random(count: 32), auth: try SecureBytes.utf8("482915"), guessProtected: true)
            let status = try chip.status()
            var answered = 0
            var roundTrip: [UInt64] = []
            let started = monotonicNs()
            // Guesses as fast as the chip takes them: the first `maxTries` at
            // once, then one per interval (measured over 3 intervals when short).
            let window = status.interval <= 60 ? Double(status.interval) * 3.2 : 0
            var guess = 0
            while true {
                let t0 = monotonicNs()
                let auth = try SecureBytes.utf8(String(format: "%06d", guess))
                do {
                    _ = try chip.unseal(blob, auth: auth)
                } catch .wrongAuth {
                    answered += 1
                    roundTrip.append(monotonicNs() - t0)
                } catch .lockedOut {
                    if Double(monotonicNs() - started) / 1e9 >= window { break }
                    usleep(200_000)
                    continue
                }
                guess += 1
            }
            let elapsed = Double(monotonicNs() - started) / 1e9
            let rt = roundTrip.isEmpty ? 0 : Double(roundTrip.sorted()[roundTrip.count / 2]) / 1e6
            table.add("chip, \(label): \(status.maxTries) tries, then 1 per \(status.interval) s", "\(answered) guesses in \(String(format: "%.1f", elapsed)) s", "", nil)
            table.add("  one wrong PIN at the chip (round trip)", String(format: "%.1f ms", rt), "", nil)
            for digits in [4, 6, 8] {
                let half = pow(10, Double(digits)) / 2
                table.add("  \(digits)-digit PIN, half the space, at the chip's pace", duration(max(0, half - Double(status.maxTries)) * Double(status.interval)), "", nil)
            }
            flushOutput()
        }
    }

    private func duration(_ seconds: Double) -> String {
        switch seconds {
        case ..<120: String(format: "%.0f s", seconds)
        case ..<7200: String(format: "%.0f min", seconds / 60)
        case ..<172_800: String(format: "%.1f h", seconds / 3600)
        case ..<(2 * 31_557_600): String(format: "%.0f days", seconds / 86400)
        default: String(format: "%.0f years", seconds / 31_557_600)
        }
    }
}

/// swtpm on a Unix socket in a temporary directory, as this user.
final class SwtpmProcess {
    let dir: String
    var tcti: String { "swtpm:path=\(dir)/tpm.sock" }
    private let process: Process

    init(limits: (tries: Int, interval: Int)?) throws {
        dir = NSTemporaryDirectory() + "vault-bench-swtpm-\(getpid())-\(monotonicNs())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        process = try startChild("/usr/bin/swtpm", ["socket", "--tpm2", "--tpmstate", "dir=\(dir)",
                                                     "--server", "type=unixio,path=\(dir)/tpm.sock",
                                                     "--ctrl", "type=unixio,path=\(dir)/tpm.sock.ctrl", "--flags", "not-need-init,startup-clear"])
        let deadline = monotonicNs() + 5_000_000_000
        while !FileManager.default.fileExists(atPath: "\(dir)/tpm.sock") {
            guard monotonicNs() < deadline, process.isRunning else { throw BenchError("swtpm did not start (scripts/setup installs it)") }
            usleep(10_000)
        }
        if let limits {
            let status = try spawnAndWait("/usr/bin/tpm2_dictionarylockout", ["-T", tcti, "-s", "-n", "\(limits.tries)",
                                                                               "-t", "\(limits.interval)", "-l", "\(limits.interval)"],
                                          environment: ProcessInfo.processInfo.environment)
            guard status == 0 else { throw BenchError("tpm2_dictionarylockout failed (scripts/setup installs tpm2-tools)") }
        }
    }

    func stop() {
        stopChild(process)
        try? FileManager.default.removeItem(atPath: dir)
    }
}

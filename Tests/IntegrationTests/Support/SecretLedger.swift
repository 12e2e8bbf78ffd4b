import Foundation
import Locking

/// The secrets-after-the-run check (docs/reliability.md): when
/// `SESSIONVAULT_TEST_ARCHIVE` names a directory (scripts/test sets it), every
/// fixture's directory (data dir, runtime dir, config, vaultd's log with all it
/// printed) is moved there instead of deleted, and every secret a test hands
/// to vaultd (PINs typed, tokens imported; the strict provider adds each token
/// and national ID number it issues) is written to `secrets.tsv`.
/// `scripts/scan-secrets` then looks for each of them in every archived file.
enum SecretLedger {
    static let archive: String? = ProcessInfo.processInfo.environment["SESSIONVAULT_TEST_ARCHIVE"].flatMap { $0.isEmpty ? nil : $0 }
    /// Counts the lines written; a lock's value must not be zero-sized (`Locked`).
    private static let lock = Locked(0)

    /// Notes a secret of `kind` (pin, token, nin) that a test gave vaultd.
    static func record(_ kind: String, _ value: String) {
        guard let archive, !value.isEmpty, !value.contains("\t"), !value.contains("\n") else { return }
        lock.withLock { written in
            let fd = open(archive + "/secrets.tsv", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return }
            written += 1
            defer { close(fd) }
            let line = Array("\(kind)\t\(value)\n".utf8)
            _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        }
    }

    /// Notes each line of a vaultctl stdin that is a PIN (digits only).
    static func recordTyped(_ stdin: String?) {
        for line in (stdin ?? "").split(separator: "\n") where line.count >= 4 && line.allSatisfy(\.isASCII) && line.allSatisfy(\.isNumber) {
            record("pin", String(line))
        }
    }

    /// Where a provider should log what it issues, if anywhere.
    static func issuedLog(_ name: String) -> String? {
        archive.map { $0 + "/issued-\(name)-\(getpid())-\(UUID().uuidString.prefix(8)).tsv" }
    }

    /// Moves a finished fixture's directory into the archive; false when not archiving.
    static func keep(_ root: String) -> Bool {
        guard let archive else { return false }
        let target = archive + "/" + (root.split(separator: "/").last.map(String.init) ?? UUID().uuidString)
        return rename(root, target) == 0
    }
}

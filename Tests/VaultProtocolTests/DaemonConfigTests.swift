import DaemonConfig
import XCTest

/// The config gate in front of TOMLKit: what a person may write parses; what
/// made the TOML parser abort (found by fuzzing, kept in Fuzz/corpus/config)
/// is a sentence with a line number instead.
final class DaemonConfigTests: XCTestCase {
    func testTheDocumentedConfigParses() throws {
        let text = """
            # SessionVault
            socket = "/run/user/1000/sessionvault/vault.sock"
            keyring = 'secret-service'   # or "file"
            idle_timeout = 900
            log_level = "info"

            [pin]
            min_length = 6
            free_attempts = 5

            [fingerprint]
            reader = "stub"
            """
        let c = try FileConfig.parse(text)
        XCTAssertEqual(c.socket, "/run/user/1000/sessionvault/vault.sock")
        XCTAssertEqual(c.keyring, "secret-service")
        XCTAssertEqual(c.idle_timeout, 900)
        XCTAssertEqual(c.pin?.min_length, 6)
        XCTAssertEqual(c.fingerprint?.reader, "stub")
    }

    func testWindowsLineEndsAndAByteOrderMarkAreFine() throws {
        let c = try FileConfig.parse("\u{FEFF}idle_timeout = 60\r\n[pin]\r\nfree_attempts = 3\r\n")
        XCTAssertEqual(c.idle_timeout, 60)
        XCTAssertEqual(c.pin?.free_attempts, 3)
    }

    func testMistakesAreSentencesWithALineNumber() {
        let cases: [(String, String)] = [
            ("idle_timeout = \"soon\"", "idle_timeout"),
            ("[pin\nmin_length = 6", "line 1"),
            ("idle_timeout = 9----- 9,m", "line 1"),
            ("\n\n[\u{2}]", "line 3"),
            ("[\u{FFFD}]", "line 1"),
            ("ключ = 1", "line 1"),
            ("x = \"\"\"\nmulti\n\"\"\"", "line 1"),
            ("# \"\"\" in a comment\r\n[\u{FFFD}\u{FFFD}", "line 2"),
        ]
        for (text, expected) in cases {
            XCTAssertThrowsError(try FileConfig.parse(text), text) { error in
                let detail = (error as? ConfigError)?.detail ?? ""
                XCTAssertTrue(detail.contains(expected), "\(text.debugDescription) → \(detail)")
            }
        }
    }

    func testEveryCommittedFuzzRegressionIsHandled() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus/config")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("regression-") }
        XCTAssertGreaterThanOrEqual(files.count, 5)
        for f in files {
            let data = try Data(contentsOf: dir.appendingPathComponent(f))
            // Must return (either way) instead of aborting the process.
            _ = try? FileConfig.parse(String(decoding: data, as: UTF8.self))
        }
    }
}

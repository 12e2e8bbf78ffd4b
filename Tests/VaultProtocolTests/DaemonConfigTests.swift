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

    /// docs/operations.md's config.toml, with its commented-out settings switched
    /// on too: every setting the docs name is one vaultd knows.
    func testTheOperationsGuideConfigParsesWithEverySettingOn() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/operations.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let start = try XCTUnwrap(text.range(of: "```toml\n"))
        let end = try XCTUnwrap(text.range(of: "```", range: start.upperBound..<text.endIndex))
        let block = text[start.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.hasPrefix("# ") && line.contains(" = ") ? String(line.dropFirst(2)) : String(line)
        }.joined(separator: "\n")
        let c = try FileConfig.parse(block)
        XCTAssertNotNil(c.max_connections)
        XCTAssertNotNil(c.connection_idle_timeout)
        XCTAssertEqual(c.lock_on_screen_lock, true, "the guide shows the default: lock with the desktop")
        XCTAssertNotNil(c.providers?["bankid"]?.client_id)
        XCTAssertEqual(c.fingerprint?.reader, "auto", "the guide shows the default: fprintd when it has a reader")
        XCTAssertEqual(c.fingerprint?.allow_stub_reader, true)
        XCTAssertNotNil(c.plugins?.probe_cache)
    }

    func testTheFingerprintReaderChoiceDefaultsToAuto() throws {
        XCTAssertEqual(try FingerprintReaderChoice.from(FileConfig.parse("")), .auto)
        for choice in FingerprintReaderChoice.allCases {
            XCTAssertEqual(try FingerprintReaderChoice.from(FileConfig.parse("[fingerprint]\nreader = \"\(choice.rawValue)\"\n")), choice)
        }
        XCTAssertThrowsError(try FingerprintReaderChoice.from(FileConfig.parse("[fingerprint]\nreader = \"synaptics\"\n"))) { error in
            let detail = (error as? ConfigError)?.detail ?? ""
            XCTAssertTrue(detail.contains("“auto” (the default), “fprintd”, “none” or “stub”") && detail.contains("synaptics"), detail)
        }
    }

    func testAMistypedSettingIsRefusedNotIgnored() {
        let cases: [(String, String)] = [
            ("idle_timout = 60", "line 1: “idle_timout” is not a setting at the top level"),
            ("[pin]\nmax_connections = 4", "line 2: “max_connections” is not a setting in [pin]"),
            ("[pinn]\nmin_length = 6", "line 1: there is no table [pinn]"),
            ("[providers]\nclient_id = \"x\"", "line 1: there is no table [providers]"),
            ("[providers.bankid]\nclient_idd = \"x\"", "“client_idd” is not a setting in [providers.bankid]"),
            ("[[pin]]\nmin_length = 6", "there is no table [pin]"),
        ]
        assertRefused(cases)
        XCTAssertNoThrow(try FileConfig.parse("[providers.my-idp]\nissuer = \"https://idp.example\"\nclient_id = \"c\""))
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
        assertRefused(cases)
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

    /// Each text is refused, with a detail that contains its expected words.
    func assertRefused(_ cases: [(String, String)], file: StaticString = #filePath, line: UInt = #line) {
        for (text, expected) in cases {
            XCTAssertThrowsError(try FileConfig.parse(text), text, file: file, line: line) { error in
                let detail = (error as? ConfigError)?.detail ?? ""
                XCTAssertTrue(detail.contains(expected), "\(text.debugDescription) → \(detail)", file: file, line: line)
            }
        }
    }
}

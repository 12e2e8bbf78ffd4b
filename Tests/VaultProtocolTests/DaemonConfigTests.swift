import DaemonConfig
import XCTest

/// config.toml's own parser (DaemonConfig/ConfigText.swift, TOML's subset the
/// config uses): what a person may write parses; everything else, and what
/// made the earlier TOML library abort (found by fuzzing, kept in
/// Fuzz/corpus/config), is a sentence with a line number instead.
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

    /// Values mean what TOML says: escapes in "basic" strings, none in
    /// 'literal' ones, signs, comments after a value, a # inside quotes.
    func testValuesMeanWhatTOMLSays() throws {
        let c = try FileConfig.parse(#"""
            socket = "/tmp/a \"b\"\\c\tend"   # a comment
            data_dir = 'C:\no\escapes # here'
            idle_timeout = +0
            max_unlocked = -5
            per_app = false
            [providers.bankid]
            display_name = "BankID # 1"
            [providers.vipps]
            client_id = ""
            """#)
        XCTAssertEqual(c.socket, "/tmp/a \"b\"\\c\tend")
        XCTAssertEqual(c.data_dir, #"C:\no\escapes # here"#)
        XCTAssertEqual(c.idle_timeout, 0)
        XCTAssertEqual(c.max_unlocked, -5)
        XCTAssertEqual(c.per_app, false)
        XCTAssertEqual(c.providers?["bankid"]?.display_name, "BankID # 1")
        XCTAssertEqual(c.providers?["vipps"]?.client_id, "")
        XCTAssertEqual(c.providers.map { Set($0.keys) }, ["bankid", "vipps"])
        XCTAssertNil(c.pin)
        XCTAssertNil(try FileConfig.parse("[pin]\n").pin?.min_length)
        XCTAssertNotNil(try FileConfig.parse("[pin]\n").pin, "an empty table is still there")
    }

    /// What TOML forbids is refused with its line, and a value of the wrong
    /// kind says which setting, on which line, and what it must be.
    func testWhatTOMLForbidsAndWrongKindsAreSentences() {
        assertRefused([
            ("idle_timeout = 1\nidle_timeout = 2", "line 2: “idle_timeout” is already set on line 1"),
            ("[pin]\nmin_length = 6\n[fingerprint]\n[pin]\nfree_attempts = 1", "line 4: [pin] was already begun on line 1"),
            ("idle_timeout = 0900", "line 1: the value must be a whole number"),
            ("idle_timeout = 1_000", "line 1: the value must be a whole number"),
            ("socket = \"\\u0041\"", "line 1: the value must be"),
            ("socket = \"open", "line 1: the value must be"),
            ("per_app = yes", "line 1: the value must be"),
            ("idle_timeout = 5 extra", "line 1: the value must be"),
            ("idle_timeout = 9999999999999999999", "line 1: the value must be"),
            ("\n\nidle_timeout = \"soon\"", "line 3: “idle_timeout” must be a whole number, not text in quotes"),
            ("per_app = 1", "line 1: “per_app” must be true or false, not a whole number"),
            ("[providers.bankid]\nclient_id = true", "line 2: “providers.bankid.client_id” must be text in quotes, not true or false"),
            ("pin = 3", "“pin” is not a setting at the top level"),
        ])
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

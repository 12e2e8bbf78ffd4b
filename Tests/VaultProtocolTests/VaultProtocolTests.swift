import VaultWire
import XCTest
@testable import VaultProtocol

final class JSONTests: XCTestCase {
    func testParsesAndSerialisesRoundTrip() throws {
        let text = #"{"a":[1,-2,3.5,true,false,null],"b":{"c":"d\n\"e\"\u00e6\ud83d\ude00"},"n":9007199254740993}"#
        let v = try JSON.parse(text)
        XCTAssertEqual(v["n"], .int(9_007_199_254_740_993), "integers stay exact")
        XCTAssertEqual(v["b"]?["c"], .string("d\n\"e\"æ😀"))
        XCTAssertEqual(try JSON.parse(v.text), v)
    }

    func testRejectsBadInput() {
        for bad in ["", "{", "{\"a\":}", "[1,]", "{\"a\":1,}", "01", "1.", "-", "\"\\x\"", "\"\u{01}\"", "nul", "{} {}",
                    "\"\\ud800\"", "{\"a\":1,\"a\":2}", "1e999", "[\"\\udc00\"]"] {
            XCTAssertThrowsError(try JSON.parse(bad), bad)
        }
    }

    func testDepthIsBounded() {
        let deep = String(repeating: "[", count: 1000) + String(repeating: "]", count: 1000)
        XCTAssertThrowsError(try JSON.parse(deep))
        let ok = String(repeating: "[", count: 20) + String(repeating: "]", count: 20)
        XCTAssertNoThrow(try JSON.parse(ok))
    }

    func testInvalidUTF8Rejected() {
        XCTAssertThrowsError(try JSON.parse([0x22, 0xFF, 0xFE, 0x22]))
    }

    func testControlCharactersEscapedOnOutput() {
        XCTAssertEqual(JSON.string("a\u{1}b\u{7f}").text, #""a\u0001b\u007f""#)
    }
}

final class EnvelopeTests: XCTestCase {
    func testDecodeRequest() throws {
        let r = try Request.decode(line: Array(#"{"id":7,"op":"session","account":"x"}"#.utf8))
        XCTAssertEqual(r.id, .int(7))
        XCTAssertEqual(r.op, "session")
        XCTAssertEqual(r["account"], .string("x"))
        XCTAssertNil(r["op"])
    }

    func testDecodeFailuresCarryTheRightID() {
        func failure(_ s: String) -> Request.DecodeFailure? {
            do { _ = try Request.decode(line: Array(s.utf8)); return nil } catch { return error }
        }
        XCTAssertEqual(failure("not json")?.id, .null)
        XCTAssertEqual(failure("[1,2]")?.failure.code, .badRequest)
        XCTAssertEqual(failure(#"{"id":"abc"}"#)?.id, .string("abc"), "missing op keeps the id")
        XCTAssertEqual(failure(#"{"id":3,"op":5}"#)?.failure.code, .badRequest)
        XCTAssertEqual(failure(#"{"id":{"x":1},"op":"status"}"#)?.failure.code, .badRequest)
    }

    func testResponsesAreOneLine() {
        let line = Response.failure(id: .int(1), error: .lockedOut(retryAfter: 30), language: .nb).encoded()
        XCTAssertEqual(line.last, 0x0A)
        XCTAssertEqual(line.filter { $0 == 0x0A }.count, 1)
        let v = try? JSON.parse(line.dropLast())
        XCTAssertEqual(v?["error"]?["code"], "locked_out")
        XCTAssertEqual(v?["error"]?["retry_after"], 30)
        XCTAssertEqual(v?["error"]?["message"]?.stringValue?.contains("30 sek"), true)
    }
}

final class MessagesTests: XCTestCase {
    /// Every code has a sentence in both languages, and they differ (a real translation).
    func testEveryCodeHasBothLanguages() {
        for code in ErrorCode.allCases {
            let m = Messages.standard(code)
            XCTAssertFalse(m.en.isEmpty, "\(code)")
            XCTAssertFalse(m.nb.isEmpty, "\(code)")
            XCTAssertNotEqual(m.en, m.nb, "\(code) needs a Norwegian text")
        }
    }

    func testRequirementTextsVerbatim() {
        XCTAssertEqual(Messages.standard(.sessionExpired).en, "Your session has expired — please log in again")
        XCTAssertEqual(Messages.standard(.loginFailed).en, "Login failed — please try again")
        XCTAssertEqual(Messages.standard(.timeout).en, "The login timed out — please try again")
        XCTAssertEqual(Messages.standard(.stateMismatch).en, "Something went wrong — please log in again")
        XCTAssertEqual(Messages.standard(.tokenInvalid).en, "Login could not be verified — please try again")
        XCTAssertEqual(Messages.standard(.ageRequirement).en, "You must be at least 18 to use this service")
        XCTAssertEqual(Messages.standard(.rateLimited).en, "Too many attempts — wait a moment and try again")
        XCTAssertEqual(Messages.keyringLocked.en, "Your desktop keyring is locked — unlock it and start vaultd again.")
    }

    func testLanguageFromLocale() {
        XCTAssertEqual(Language(locale: "nb_NO.UTF-8"), .nb)
        XCTAssertEqual(Language(locale: "no_NO"), .nb)
        XCTAssertEqual(Language(locale: "en_GB.UTF-8"), .en)
        XCTAssertEqual(Language(locale: nil), .en)
    }

    func testDurations() {
        XCTAssertEqual(Messages.duration(30, .en), "30 s")
        XCTAssertEqual(Messages.duration(60, .en), "1 min")
        XCTAssertEqual(Messages.duration(86_400, .nb), "24 t")
    }
}

final class WebOriginTests: XCTestCase {
    func testOriginsOfHTTPURLs() {
        XCTAssertEqual(WebOrigin.of("https://Login.Example.org/authorize?x=1"), "https://login.example.org:443")
        XCTAssertEqual(WebOrigin.of("http://127.0.0.1:1/x"), "http://127.0.0.1:1")
        XCTAssertEqual(WebOrigin.of("http://127.0.0.1:80"), "http://127.0.0.1:80")
        XCTAssertEqual(WebOrigin.of("https://[::1]:8443/a"), "https://[::1]:8443")
    }

    func testNoOriginForAnythingAmbiguous() {
        for url in ["file:///etc/passwd", "javascript:alert(1)", "ftp://example.org/", "https://", "https:///x",
                    "https://user@example.org/", "https://example.org@evil.example/", "https://evil.example\\@example.org/",
                    "https://exa mple.org/", "https://ex%61mple.org/", "https://example.org:0/", "https://example.org:99999/",
                    "https://example.org:+443/", "https://exämple.org/", "https://example.org:/", "https://[::1/"] {
            XCTAssertNil(WebOrigin.of(url), url)
        }
    }
}

final class SecretFieldTests: XCTestCase {
    func decode(_ line: String) throws -> (Request, [[UInt8]]) {
        var taken: [[UInt8]] = []
        let r = try Request.decode(line: Array(line.utf8), secretField: "value") { taken.append(Array($0)) }
        return (r, taken)
    }

    /// An answer's value goes to the caller as bytes; no String of it is in the request.
    func testTopLevelValueIsHandedOverAsBytes() throws {
        let (r, taken) = try decode(#"{"id":3,"op":"answer","pid":"p1","value":"482915"}"#)
        XCTAssertEqual(r.op, "answer")
        XCTAssertEqual(r["value"], .null)
        XCTAssertEqual(r["pid"], .string("p1"))
        XCTAssertEqual(taken, [Array("482915".utf8)])
    }

    func testEscapedValueIsDecodedFirst() throws {
        let (r, taken) = try decode(#"{"op":"answer","pid":"p1","value":"4\u00f82\"9"}"#)
        XCTAssertEqual(r["value"], .null)
        XCTAssertEqual(taken, [Array("4ø2\"9".utf8)])
    }

    func testOtherValuesAndNestedFieldsAreUntouched() throws {
        let (r, taken) = try decode(#"{"op":"answer","pid":"p1","value":true,"x":{"value":"kept"}}"#)
        XCTAssertEqual(r["value"], .bool(true))
        XCTAssertEqual(r["x"]?["value"], .string("kept"))
        XCTAssertTrue(taken.isEmpty)
    }

    func testInvalidUTF8InTheSecretIsRefused() {
        var line = Array(#"{"op":"answer","pid":"p1","value":"ab"}"#.utf8)
        line[line.count - 3] = 0xFF
        XCTAssertThrowsError(try Request.decode(line: line, secretField: "value") { _ in })
    }
}

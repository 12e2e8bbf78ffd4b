@testable import ExternalFactor
import VaultFactor
import XCTest

/// The pure line codec of the external factor protocol.
final class PluginCodecTests: XCTestCase {
    func decode(_ text: String) throws -> PluginMessage { try PluginCodec.decode(line: Array(text.utf8)) }

    func reason(_ text: String) -> String? {
        do {
            _ = try decode(text)
            return nil
        } catch let e as PluginProtocolError {
            return e.reason
        } catch {
            return "\(error)"
        }
    }

    func testDecodesEveryMessageType() throws {
        guard case .descriptor(let d) = try decode(#"{"type":"descriptor","version":1,"name":{"en":"Key","nb":"Nøkkel"},"rank":3,"contribution":"presence","available":false,"reason":"unplugged"}"#) else {
            return XCTFail()
        }
        XCTAssertEqual(d, PluginDescriptor(name: LocalizedText(en: "Key", nb: "Nøkkel"), rank: 3, contribution: .presenceOnly,
                                           available: false, reason: LocalizedText(en: "unplugged", nb: "unplugged")))
        guard case .message(let m) = try decode(#"{"type":"message","text":{"en":"Touch it"}}"#) else { return XCTFail() }
        XCTAssertEqual(m, LocalizedText(en: "Touch it", nb: "Touch it"), "nb falls back to en")
        guard case .secret = try decode(#"{"type":"secret","text":"Code?"}"#) else { return XCTFail() }
        guard case .confirm = try decode(#"{"type":"confirm","text":"Sure?","extra":"ignored"}"#) else { return XCTFail() }
        guard case .openURL(let url, _) = try decode(#"{"type":"open_url","url":"https://example.org/a?b=c"}"#) else { return XCTFail() }
        XCTAssertEqual(url, "https://example.org/a?b=c")
        guard case .ok(let r) = try decode(#"{"type":"ok","contribution":"MTIzNA==","enrollment_state":"AQID","binding":{"k":"v"}}"#) else {
            return XCTFail()
        }
        XCTAssertEqual(r.contribution?.unsafeCopyToArray(), Array("1234".utf8))
        XCTAssertEqual(r.enrollmentState, [1, 2, 3])
        XCTAssertEqual(r.binding, ["k": "v"])
        guard case .error(.tooManyAttempts, nil) = try decode(#"{"type":"error","code":"too_many_attempts"}"#) else { return XCTFail() }
        XCTAssertNoThrow(try decode("{\"type\":\"message\",\"text\":\"crlf\"}\r"), "a trailing CR is tolerated")
    }

    func testRefusesWhatIsNotTheProtocol() {
        let bad = [
            "", "null", "[]", #"{"text":"x"}"#, #"{"type":"dance"}"#, #"{"type":"message"}"#,
            #"{"type":"message","text":{"nb":"bare nb"}}"#, #"{"type":"message","text":5}"#,
            #"{"type":"descriptor","name":"X","contribution":"magic","available":true}"#,
            #"{"type":"descriptor","name":"X","contribution":"secret"}"#,
            #"{"type":"descriptor","name":"X","contribution":"secret","available":true,"version":2}"#,
            #"{"type":"descriptor","name":"X","contribution":"secret","available":true,"rank":"high"}"#,
            #"{"type":"ok","contribution":"not base64!"}"#, #"{"type":"ok","contribution":""}"#,
            #"{"type":"ok","contribution":5}"#, #"{"type":"ok","contribution":"QQ==","contribution":"Qg=="}"#,
            #"{"type":"ok","enrollment_state":"%%%"}"#, #"{"type":"ok","binding":{"k":1}}"#, #"{"type":"ok","binding":[]}"#,
            #"{"type":"error","code":"oops"}"#, #"{"type":"error"}"#,
            #"{"type":"open_url","url":"file:///etc/passwd"}"#, #"{"type":"open_url","url":"https://a b"}"#,
            "{\"type\":\"message\",\"text\":\"x\"", "\u{FF}\u{FE}",
        ]
        for line in bad { XCTAssertNotNil(reason(line), "accepted: \(line)") }
    }

    func testLinesLongerThan64KiBAreRefused() {
        let text = String(repeating: "a", count: PluginCodec.maxLineLength)
        XCTAssertTrue(reason(#"{"type":"message","text":"\#(text)"}"#)?.contains("longer than") ?? false)
        let fits = String(repeating: "a", count: PluginCodec.maxLineLength - 40)
        XCTAssertNil(reason(#"{"type":"message","text":"\#(fits)"}"#))
    }

    func testRankIsClampedAndTextsAreCleanedAndCapped() throws {
        guard case .descriptor(let d) = try decode(#"{"type":"descriptor","name":"X","contribution":"secret","available":true,"rank":99999}"#) else {
            return XCTFail()
        }
        XCTAssertEqual(d.rank, 1000)
        guard case .message(let m) = try decode(#"{"type":"message","text":"red\u001b[31m\u0007bell\u202Eevil\nline"}"#) else { return XCTFail() }
        XCTAssertEqual(m.en, "red [31m bell evil line", "terminal escapes and bidi overrides never reach the person")
        let long = String(repeating: "é", count: 2000)
        guard case .message(let capped) = try decode(#"{"type":"message","text":"\#(long)"}"#) else { return XCTFail() }
        XCTAssertEqual(capped.en.count, PluginCodec.maxTextLength + 1)
    }

    func testTheContributionIsLiftedOutOfTheLineAndOverwritten() throws {
        var line = Array(#"{"type":"ok", "contribution" : "c2VjcmV0LXBpbg==","enrollment_state":""}"#.utf8)
        guard case .ok(let r) = try PluginCodec.decode(&line) else { return XCTFail() }
        XCTAssertEqual(r.contribution?.unsafeCopyToArray(), Array("secret-pin".utf8))
        let after = String(decoding: line, as: UTF8.self)
        XCTAssertFalse(after.contains("c2VjcmV0"), after)
        XCTAssertTrue(after.contains(#""contribution" : "AAAAAAAAAAAAAAAA""#), after)
    }

    func testTheTokenizerIsNotFooledByLookalikes() {
        // "contribution" inside a nested object or inside a string is not the top-level key.
        let nested = Array(#"{"type":"ok","binding":{"contribution":"QUJD"},"text":"\"contribution\":\"QUJD\""}"#.utf8)
        XCTAssertEqual(PluginCodec.topLevelStringValueRanges(key: "contribution", in: nested), [])
        let escapedKey = Array(#"{"contrib\u0075tion":"QUJD"}"#.utf8)
        XCTAssertEqual(PluginCodec.topLevelStringValueRanges(key: "contribution", in: escapedKey), [])
        let real = Array(#"{"a":[1,{"b":2}],"contribution":"QUJD"}"#.utf8)
        XCTAssertEqual(PluginCodec.topLevelStringValueRanges(key: "contribution", in: real).count, 1)
    }

    func testSecretAnswersAreEscapedAndRoundTrip() throws {
        let tricky = "a\"b\\c\u{01}d\næøå"
        let line = PluginCodec.answer(secret: try SecureBytes.utf8(tricky))
        XCTAssertEqual(line.last, 0x0A)
        let json = try JSON.parse(line.dropLast())
        XCTAssertEqual(json["type"], "answer")
        XCTAssertEqual(json["value"]?.stringValue, tricky)
        XCTAssertEqual(try JSON.parse(PluginCodec.answer(confirmed: true).dropLast())["value"], .bool(true))
        XCTAssertEqual(try JSON.parse(PluginCodec.cancel.dropLast())["type"], "cancel")
    }

    func testTheStartLineCarriesVersionOpLanguageAndSlot() throws {
        let line = PluginCodec.start(.unlock, factor: "yubi", language: .nb,
                                     slot: EnrolledSlot(factor: "yubi", binding: ["serial": "42"], attempt: 1))
        let json = try JSON.parse(line.dropLast())
        XCTAssertEqual(json["type"], "start")
        XCTAssertEqual(json["version"], 1)
        XCTAssertEqual(json["op"], "unlock")
        XCTAssertEqual(json["factor"], "yubi")
        XCTAssertEqual(json["lang"], "nb")
        XCTAssertEqual(json["slot"], ["binding": ["serial": "42"], "attempt": 1])
        XCTAssertNil(try JSON.parse(PluginCodec.start(.probe, factor: "yubi", language: .en, slot: nil).dropLast())["slot"])
    }

    /// A cheap stand-in for the fuzzer: random and mutated lines never trap.
    func testRandomAndMutatedLinesNeverTrap() {
        var rng = SystemRandomNumberGenerator()
        let seeds = [
            #"{"type":"ok","contribution":"MTIzNA==","enrollment_state":"AQID","binding":{"k":"v"}}"#,
            #"{"type":"descriptor","name":{"en":"K","nb":"N"},"rank":3,"contribution":"secret","available":true}"#,
            #"{"type":"secret","text":{"en":"Code?","nb":"Kode?"}}"#,
        ].map { Array($0.utf8) }
        let alphabet = Array(#"{}[]":,\"abc0123 AQ==+/"#.utf8) + [0x00, 0xFF, 0x0A]
        for n in 0..<3000 {
            var line: [UInt8]
            if n % 3 == 0 {
                line = (0..<Int.random(in: 0..<80, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
            } else {
                line = seeds[n % seeds.count]
                for _ in 0..<Int.random(in: 1..<6, using: &rng) {
                    let i = Int.random(in: 0..<line.count, using: &rng)
                    switch Int.random(in: 0..<3, using: &rng) {
                    case 0: line[i] = alphabet.randomElement(using: &rng)!
                    case 1: line.remove(at: i)
                    default: line.insert(alphabet.randomElement(using: &rng)!, at: i)
                    }
                    if line.isEmpty { break }
                }
            }
            _ = try? PluginCodec.decode(&line)
        }
    }
}

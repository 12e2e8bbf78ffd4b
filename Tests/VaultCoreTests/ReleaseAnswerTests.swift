import XCTest
@testable import VaultCore
import VaultProtocol

/// The release fast path writes its answer by hand and reads only the access
/// token out of an opened record; both must agree exactly with the general code.
final class ReleaseAnswerTests: XCTestCase {
    func meta(expires: Int64?, claims: [String: JSON]) -> SessionMeta {
        SessionMeta(account: "kari@bankid", provider: "bankid", issuer: "https://idp.example", clientID: "c", subject: "s",
                    name: "Kari \"K\" Nordmann – ÆØÅ", claims: claims, accessExpiresAt: expires, refreshExpiresAt: nil,
                    hasRefreshToken: true, createdAt: 1)
    }

    func testTheFastAnswerIsByteForByteTheGeneralOne() {
        let claimSets: [[String: JSON]] = [
            [:],
            ["org": "Mentorforeningen", "roles": ["mentor", "admin"], "name": "Override \\ \u{1}"],
            ["nested": ["a": 1, "b": [true, .null]]],
        ]
        let ids: [JSON] = [1, 0, -7, 9_007_199_254_740_993, "abc", "with \"quote\" and \\ and ø", ""]
        let tokens = ["eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJrYXJpIn0.c2ln", String(repeating: "A", count: 4000), "tok with space ~!"]
        for claims in claimSets {
            for expires in [nil, Int64(1_790_000_000)] as [Int64?] {
                for token in tokens {
                    var r = ReleasedSession(accessToken: token, expiresAt: expires, meta: meta(expires: expires, claims: claims))
                    r.resultTail = ReleasedSession.tail(of: r.meta)
                    for id in ids {
                        XCTAssertEqual(String(decoding: r.answer(id: id), as: UTF8.self),
                                       String(decoding: Response.success(id: id, result: r.json).encoded(), as: UTF8.self))
                    }
                }
            }
        }
    }

    func testATokenThatNeedsEscapingTakesTheGeneralWriter() {
        for token in ["a\"b", "a\\b", "a\u{1}b", "a\u{7F}b"] {
            var r = ReleasedSession(accessToken: token, expiresAt: 5, meta: meta(expires: 5, claims: [:]))
            r.resultTail = ReleasedSession.tail(of: r.meta)
            let answer = r.answer(id: 3)
            XCTAssertEqual(answer, Response.success(id: 3, result: r.json).encoded())
            XCTAssertEqual(try JSON.parse(Array(answer.dropLast()))["result"]?["access_token"]?.stringValue, token)
        }
    }

    func testOnlyTheAccessTokenIsReadFromAnOpenedRecord() {
        let secrets = [
            SessionSecret(accessToken: "AT-1", refreshToken: "RT-1", idToken: "ID-1"),
            SessionSecret(accessToken: "AT-2", refreshToken: nil, idToken: nil),
            SessionSecret(accessToken: nil, refreshToken: "RT-3", idToken: "ID-3"),
            SessionSecret(accessToken: String(repeating: "x", count: 3000), refreshToken: "RT \"q\" \\", idToken: "é"),
        ]
        for s in secrets {
            let bytes = s.serialized()
            let fast = bytes.withUnsafeBytes { SessionSecret.accessToken(in: $0) }
            XCTAssertEqual(fast, s.accessToken)
        }
        // Anything unexpected (truncated, escaped key, not an object) gives nil: the full parse decides.
        for junk in ["", "{", "[1]", #"{"access_token":1}"#, #"{"a\u0063cess_token":"x"}"#, #"{"refresh_token":"x""#, #"{"access_token":"a\"b"}"#] {
            XCTAssertNil(Array(junk.utf8).withUnsafeBytes { SessionSecret.accessToken(in: $0) }, junk)
        }
    }
}

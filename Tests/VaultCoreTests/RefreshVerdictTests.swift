import VaultFactor
import VaultProtocol
import XCTest
@testable import VaultCore

/// What a refresh's answer makes of a session, on its own: no provider, no
/// store, no clock (RefreshTests shows the same through a vault).
final class RefreshVerdictTests: XCTestCase {
    let meta = SessionMeta(account: "a", provider: "p", issuer: "https://idp.example", clientID: "c", subject: "s", name: "A",
                           claims: [:], accessExpiresAt: 1_000, refreshExpiresAt: 5_000, hasRefreshToken: true, createdAt: 0)
    let secret = SessionSecret(accessToken: "at-old", refreshToken: "rt-old", idToken: "id-old")

    func verdict(_ answer: Result<TokenGrant, VaultFailure>, now: Int64 = 900, secret: SessionSecret? = nil) -> RefreshVerdict {
        RefreshVerdict(answer, meta: meta, secret: secret ?? self.secret, refreshToken: "rt-old", now: now)
    }

    func testARotatingGrantReplacesTheTokensAndTheirEnds() throws {
        let grant = TokenGrant(accessToken: "at-new", accessExpiresAt: 2_000, refreshToken: "rt-new", refreshExpiresAt: 9_000, idToken: "id-new")
        guard case .renewed(let r) = verdict(.success(grant)) else { return XCTFail("not renewed") }
        XCTAssertEqual([r.accessToken, r.refreshToken, r.idToken], ["at-new", "rt-new", "id-new"])
        XCTAssertEqual(r.meta.accessExpiresAt, 2_000)
        XCTAssertEqual(r.meta.refreshExpiresAt, 9_000)
        XCTAssertTrue(r.rotated)
        XCTAssertEqual(r.secret.refreshToken, "rt-new")
    }

    func testAGrantWithoutANewRefreshTokenKeepsTheOneSentAndItsEnd() {
        let grant = TokenGrant(accessToken: "at-new", accessExpiresAt: 2_000, refreshToken: nil)
        guard case .renewed(let r) = verdict(.success(grant)) else { return XCTFail("not renewed") }
        XCTAssertEqual(r.refreshToken, "rt-old")
        XCTAssertEqual(r.idToken, "id-old", "the ID token kept too")
        XCTAssertEqual(r.meta.refreshExpiresAt, 5_000)
        XCTAssertFalse(r.rotated)
        // The same refresh token given back is no rotation either.
        guard case .renewed(let same) = verdict(.success(TokenGrant(accessToken: "at-new", accessExpiresAt: nil, refreshToken: "rt-old"))) else {
            return XCTFail("not renewed")
        }
        XCTAssertFalse(same.rotated)
        XCTAssertNil(same.meta.accessExpiresAt, "an end the provider no longer gives is not kept")
    }

    func testOnlyTheProvidersWordThatTheGrantIsDeadEndsTheSession() {
        guard case .ended(let f) = verdict(.failure(VaultFailure(.sessionExpired))) else { return XCTFail("not ended") }
        XCTAssertEqual(f.code, .sessionExpired)
        // Down or slow: the old access token is served while it works for more than 5 s.
        guard case .served(let released) = verdict(.failure(VaultFailure(.providerUnavailable)), now: 994) else {
            return XCTFail("not served")
        }
        XCTAssertEqual(released.accessToken, "at-old")
        XCTAssertEqual(released.expiresAt, 1_000)
        guard case .failed(let down) = verdict(.failure(VaultFailure(.providerUnavailable)), now: 995) else {
            return XCTFail("served a token with 5 s left")
        }
        XCTAssertEqual(down.code, .providerUnavailable)
        let noAccess = SessionSecret(accessToken: nil, refreshToken: "rt-old", idToken: nil)
        guard case .failed = verdict(.failure(VaultFailure(.providerUnavailable)), secret: noAccess) else {
            return XCTFail("served without an access token")
        }
    }
}

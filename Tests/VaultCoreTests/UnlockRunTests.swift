import XCTest
@testable import VaultCore
import VaultFactor
import VaultProtocol

/// The order of the ways in during one unlock, on its own: no factor, no
/// dialog, no actor. Each test walks an `UnlockRun` as the actor does.
final class UnlockRunTests: XCTestCase {
    let noMatch = VaultFailure.noMatch(attemptsLeft: 0)
    let unplugged = VaultFailure(.factorUnavailable, message: LocalizedText(en: "unplugged", nb: "frakoblet"))
    let eve = FactorID(rawValue: "eve")

    func testFactorsAreAskedInOrderThenTheLoginAfterTheLastFailure() {
        var run = UnlockRun(candidates: [.fingerprint, .pin], loginFallback: true)
        XCTAssertEqual(run.next(), .ask(.fingerprint, index: 0))
        XCTAssertTrue(run.record(.failed(noMatch)), "a failure with a way after it is said before it")
        XCTAssertEqual(run.next(), .ask(.pin, index: 1))
        XCTAssertTrue(run.record(.failed(VaultFailure(.timeout))), "the login still comes after the last factor")
        XCTAssertEqual(run.next(), .login(after: VaultFailure(.timeout)))
    }

    func testWithoutALoginTheLastFailureIsTheAnswerAndIsNotSaidTwice() {
        var run = UnlockRun(candidates: [.pin], loginFallback: false)
        XCTAssertEqual(run.next(), .ask(.pin, index: 0))
        XCTAssertFalse(run.record(.failed(noMatch)), "nothing comes after: the answer itself says it")
        XCTAssertEqual(run.next(), .fail(noMatch))
    }

    func testTheLoginButtonGoesStraightToTheLogin() {
        var run = UnlockRun(candidates: [.fingerprint, .pin], loginFallback: true)
        XCTAssertEqual(run.next(), .ask(.fingerprint, index: 0))
        XCTAssertFalse(run.record(.chose(UnlockAttempt.loginChoice)))
        XCTAssertEqual(run.next(), .login(after: VaultFailure(.cancelled)), "the PIN is not asked first")
    }

    func testTheLoginButtonWithNoProviderEndsTheUnlockAsCancelled() {
        var run = UnlockRun(candidates: [.fingerprint, .pin], loginFallback: false)
        _ = run.next()
        _ = run.record(.chose(UnlockAttempt.loginChoice))
        XCTAssertEqual(run.next(), .fail(VaultFailure(.cancelled)))
    }

    func testAFactorButtonPassesOverTheOnesBeforeIt() {
        var run = UnlockRun(candidates: [.fingerprint, eve, .pin], loginFallback: true)
        _ = run.next()
        XCTAssertFalse(run.record(.chose("pin")))
        XCTAssertEqual(run.next(), .ask(.pin, index: 2), "eve, between them, is not asked")
        _ = run.record(.failed(noMatch))
        XCTAssertEqual(run.next(), .login(after: noMatch))
    }

    func testAFactorNotSetUpOrUnpluggedIsPassedOverSilently() {
        var run = UnlockRun(candidates: [.fingerprint, eve, .pin], loginFallback: true)
        XCTAssertEqual(run.next(), .ask(.fingerprint, index: 0))
        XCTAssertFalse(run.record(.unavailable(unplugged)), "an unplugged reader is not a failure to announce")
        XCTAssertEqual(run.next(), .ask(eve, index: 1))
        XCTAssertFalse(run.record(.notSetUp))
        XCTAssertEqual(run.next(), .ask(.pin, index: 2))
        _ = run.record(.unavailable(unplugged))
        XCTAssertEqual(run.next(), .login(after: unplugged), "the login is told why no factor was asked")
    }

    func testNoCandidateGoesToTheLoginOrToThePolicysLockedAnswer() {
        var withLogin = UnlockRun(candidates: [], loginFallback: true)
        XCTAssertEqual(withLogin.next(), .login(after: nil))
        var without = UnlockRun(candidates: [], loginFallback: false)
        XCTAssertEqual(without.next(), .fail(nil))
    }
}

/// Seed 003: an enrollment change goes straight to the login, whose dialog says
/// what happened and offers the factors not yet asked beside the providers.
final class UnlockRunEnrollmentChangeTests: XCTestCase {
    let changed = VaultFailure(.enrollmentChanged, message: LocalizedText(en: "changed", nb: "endret"))

    func testAChangeGoesToTheLoginAtOnceWithTheRestBesideIt() {
        var run = UnlockRun(candidates: [.fingerprint, .pin], loginFallback: true)
        XCTAssertEqual(run.next(), .ask(.fingerprint, index: 0))
        XCTAssertFalse(run.record(.presenceFailed(changed)), "said in the login's dialog, not before it")
        XCTAssertEqual(run.next(), .login(after: changed, saying: changed.message, beside: [.pin]))
    }

    func testThePINChosenBesideTheLoginIsAskedAndTheLoginComesLast() {
        var run = UnlockRun(candidates: [.fingerprint, .pin], loginFallback: true)
        _ = run.next()
        _ = run.record(.presenceFailed(changed))
        _ = run.next()
        run.choseBesideLogin(.pin)
        XCTAssertEqual(run.next(), .ask(.pin, index: 1))
        let wrong = VaultFailure.noMatch(attemptsLeft: 0)
        XCTAssertTrue(run.record(.failed(wrong)))
        XCTAssertEqual(run.next(), .login(after: wrong), "the usual last login, without the change's sentence")
    }

    func testAPINsFailureStillGoesToTheNextWayInAfterSayingWhy() {
        var run = UnlockRun(candidates: [.pin, .fingerprint], loginFallback: true)
        _ = run.next()
        XCTAssertTrue(run.record(.failed(VaultFailure(.timeout))))
        XCTAssertEqual(run.next(), .ask(.fingerprint, index: 1))
    }

    func testWithoutALoginAChangeGoesToTheNextFactor() {
        var run = UnlockRun(candidates: [.fingerprint, .pin], loginFallback: false)
        _ = run.next()
        XCTAssertTrue(run.record(.presenceFailed(changed)), "said before the PIN")
        XCTAssertEqual(run.next(), .ask(.pin, index: 1))
    }
}

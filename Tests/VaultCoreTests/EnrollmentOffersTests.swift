import XCTest
@testable import VaultCore
import VaultFactor
import VaultProtocol

/// Which factors are offered after a login, on its own: no actor, no dialog,
/// no store. LoginTests and ReenrollmentTests show the same through a vault.
final class EnrollmentOffersTests: XCTestCase {
    let fingerprint = FactorDescriptor(id: .fingerprint, displayName: LocalizedText(en: "Fingerprint", nb: "Fingeravtrykk"),
                                       rank: 10, contribution: .presenceOnly, offerAfterLogin: true)
    let pin = FactorDescriptor(id: .pin, displayName: LocalizedText(en: "PIN", nb: "PIN"), rank: 20, contribution: .lowEntropySecret)
    let touch = FactorDescriptor(id: "touch", displayName: LocalizedText(en: "Touch", nb: "Berøring"), rank: 30,
                                 contribution: .presenceOnly, offerAfterLogin: true)

    func candidates(enrolled: Set<FactorID> = [], stale: Set<FactorID> = []) -> [EnrollmentOffers.Candidate] {
        [fingerprint, pin, touch].map { .init(descriptor: $0, enrolled: enrolled.contains($0.id), stale: stale.contains($0.id)) }
    }

    func testAFirstLoginOffersEveryFactorThatWantsOfferingInOrder() {
        var offers = EnrollmentOffers(saved: nil)
        XCTAssertEqual(offers.afterLogin(candidates()), [.ask(.fingerprint), .ask("touch")], "never the PIN: it does not want offering")
        XCTAssertEqual(offers.afterLogin(candidates(enrolled: [.fingerprint, "touch"])), [], "set up: nothing to offer")
    }

    func testANotNowIsKeptAndSavedUntilTheFactorIsWelcomeAgain() {
        var offers = EnrollmentOffers(saved: nil)
        XCTAssertTrue(offers.note(.fingerprint, declined: true))
        XCTAssertFalse(offers.note(.fingerprint, declined: true), "no change, nothing to save")
        XCTAssertEqual(offers.afterLogin(candidates()), [.ask("touch")])
        let restarted = EnrollmentOffers(saved: offers.saved)
        XCTAssertEqual(restarted.declined, [.fingerprint], "kept across a restart")
        XCTAssertTrue(offers.note(.fingerprint, declined: false))
        XCTAssertEqual(offers.afterLogin(candidates()), [.ask(.fingerprint), .ask("touch")])
        XCTAssertEqual(EnrollmentOffers(saved: offers.saved).declined, [])
    }

    func testAFactorThatFailedBeforeTheFallbackLoginIsOfferedOnce() {
        var offers = EnrollmentOffers(saved: nil)
        offers.failedBeforeFallback = [.fingerprint]
        let enrolled = candidates(enrolled: [.fingerprint, "touch"])
        XCTAssertEqual(offers.afterLogin(enrolled), [.ask(.fingerprint)], "set up, but it just failed")
        XCTAssertEqual(offers.afterLogin(enrolled), [], "once: the failures are taken")
        offers.failedBeforeFallback = [.fingerprint]
        _ = offers.note(.fingerprint, declined: true)
        XCTAssertEqual(offers.afterLogin(enrolled), [], "a Not now holds for a failure too")
    }

    func testAChangedFactorNeedsAStrongLoginOfThisRun() {
        var offers = EnrollmentOffers(saved: nil)
        let changed = candidates(stale: [.fingerprint])
        XCTAssertEqual(offers.afterLogin(changed), [.needsStrongLogin(.fingerprint), .ask("touch")])
        XCTAssertNil(offers.afterPIN(changed), "no strong login yet")
        offers.strongLoginAt = 1_000
        XCTAssertEqual(offers.afterLogin(changed), [.ask(.fingerprint), .ask("touch")])
        XCTAssertEqual(offers.afterPIN(changed)?.id, .fingerprint, "only a changed one is offered after the PIN")
        XCTAssertNil(offers.afterPIN(candidates()), "nothing changed: the PIN brings no offer")
        _ = offers.note(.fingerprint, declined: true)
        XCTAssertNil(offers.afterPIN(changed))
    }

    func testStartingOverForgetsTheNotNowsAndTheStrongLogin() {
        var offers = EnrollmentOffers(saved: Array("fingerprint\ntouch".utf8))
        offers.strongLoginAt = 1_000
        XCTAssertTrue(offers.startOver(), "a change to save")
        XCTAssertEqual(offers.declined, [])
        XCTAssertNil(offers.strongLoginAt)
        XCTAssertFalse(offers.startOver(), "nothing declined: nothing to save")
        XCTAssertEqual(offers.saved, [])
    }
}

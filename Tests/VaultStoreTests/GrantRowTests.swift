import Foundation
import XCTest
@testable import VaultStore

/// The `app_grant` table (schema version 2): opaque rows, written with their
/// audit entry in one commit; a last use never brings back a revoked grant.
final class GrantRowTests: StoreTestCase {
    func testGrantsRoundTripAndALastUseDoesNotReviveARevokedOne() throws {
        let store = try VaultStore(path: storePath())
        let a = GrantRow(id: "a", sealed: [1, 2, 3], updatedAt: 10)
        let b = GrantRow(id: "b", sealed: [4], updatedAt: 11)
        try store.updateGrants(put: [a, b], delete: [])
        XCTAssertEqual(try store.grants(), [a, b])

        XCTAssertTrue(try store.updateGrantIfPresent(GrantRow(id: "a", sealed: [9], updatedAt: 20)))
        XCTAssertEqual(try store.grants().first, GrantRow(id: "a", sealed: [9], updatedAt: 20))

        try store.updateGrants(put: [], delete: ["a"])
        XCTAssertFalse(try store.updateGrantIfPresent(GrantRow(id: "a", sealed: [7], updatedAt: 30)))
        XCTAssertEqual(try store.grants(), [b])

        // The delete and its audit entry commit together, or neither does.
        XCTAssertThrowsError(try store.updateGrants(put: [], delete: ["b"]) { _ in throw StoreError.io("refused") })
        XCTAssertEqual(try store.grants(), [b])
        XCTAssertEqual(try store.auditRows().count, 0)

        // reset (vaultctl reset) removes them with everything else.
        _ = try store.reset(slots: [], meta: [:])
        XCTAssertEqual(try store.grants(), [])
    }
}

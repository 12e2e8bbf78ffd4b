import Foundation
import XCTest

/// What a test throws when something it needs is missing here (a tool, the
/// provider venv): a skip on a developer's machine, saying how to get it, and a
/// failure under `CI=true`, where a skipped suite would let the run go green
/// without having tested anything.
func cannotRunHere(_ reason: String) -> any Error {
    guard ProcessInfo.processInfo.environment["CI"] == "true" else { return XCTSkip(reason) }
    return IntegrationError("CI=true, so this is a failure, not a skip: \(reason)")
}

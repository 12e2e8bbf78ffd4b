import Foundation
import XCTest

/// What a test throws when something it needs is missing here (a tool, a built
/// binary, the provider venv, a private keyring): a skip on a developer's
/// machine, saying how to get it, and a failure under `CI=true`, where a
/// skipped suite would let the run go green without having tested anything.
public func cannotRunHere(_ reason: String) -> any Error {
    guard ProcessInfo.processInfo.environment["CI"] == "true" else { return XCTSkip(reason) }
    return CannotRunUnderCI(description: "CI=true, so this is a failure, not a skip: \(reason)")
}

public struct CannotRunUnderCI: Error, CustomStringConvertible {
    public let description: String
}

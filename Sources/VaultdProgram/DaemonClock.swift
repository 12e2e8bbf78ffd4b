import FoundationEssentials
import Logging

/// vaultd's one reading of the time (Unix seconds), given to the broker, its
/// session ends and the identity providers, so they agree on when a token or a
/// session ends.
///
/// In a debug build only, `SESSIONVAULT_TEST_CLOCK_FILE` names a file holding
/// whole seconds to add to the wall clock; a test writes a new number to move
/// vaultd's days forward beside the reference backend's (docs/backend.md,
/// section 9).
/// A release build, which is what the package ships, never reads it: a clock
/// moved by whoever sets vaultd's environment would keep ended sessions alive.
enum DaemonClock {
    static func make(logger: Logger) -> @Sendable () -> Double {
        #if DEBUG
        if let path = ProcessInfo.processInfo.environment["SESSIONVAULT_TEST_CLOCK_FILE"], !path.isEmpty {
            logger.warning("debug build: the clock is moved by a test file", metadata: ["file": "\(path)"])
            return { Date().timeIntervalSince1970 + offset(in: path) }
        }
        #endif
        return { Date().timeIntervalSince1970 }
    }

    #if DEBUG
    /// The file's whole seconds; 0 when it is missing or not a number, so a
    /// test that has not moved the clock yet sees the wall clock.
    private static func offset(in path: String) -> Double {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              let seconds = Int64(text.split(whereSeparator: \.isWhitespace).first ?? "") else { return 0 }
        return Double(seconds)
    }
    #endif
}

import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Debug-build hooks for the crash tests: with `SESSIONVAULT_TEST_PAUSE_<POINT>`
/// set to a file name, vaultd writes that file and pauses 30 s at the point,
/// so a test can kill -9 it exactly there (IntegrationTests: CrashSafetyTests,
/// TPMTests). Release builds have none.
enum TestPause {
    /// `AFTER_COUNTER`: a PIN attempt is counted durably, not yet checked.
    /// `BEFORE_REBIND`: a wrap was remade (the TPM has sealed its part), not yet stored.
    static func at(_ point: String) {
        #if DEBUG
        if let marker = ProcessInfo.processInfo.environment["SESSIONVAULT_TEST_PAUSE_" + point] {
            _ = FileManager.default.createFile(atPath: marker, contents: Data("paused\n".utf8))
            sleep(30)
        }
        #endif
    }
}

import Foundation
import VaultTestSupport
import XCTest

/// The README's first command, `scripts/demo`, walked as a newcomer would see it
/// (the set-up and the build are the test command's, so the walk itself runs:
/// `SESSIONVAULT_DEMO_INNER`), against the binaries under test, inside a private
/// keyring as `scripts/demo` starts one. Each step the walk names is checked by
/// what it printed; a step that does not do what it says stops the walk with
/// "demo: step “…” did not do what it says", which comes first in the message.
final class DemoTests: XCTestCase {
    /// Runs `scripts/demo ARGS` through scripts/with-keyring.
    func walk(_ args: [String], extra: [String: String] = [:]) throws -> ProcessOutcome {
        let r = try runProcess(repositoryRoot + "/scripts/with-keyring", [repositoryRoot + "/scripts/demo"] + args,
                               env: childEnvironment(["VAULTD": Binaries.vaultd, "VAULTCTL": Binaries.vaultctl,
                                                      "VAULT_FPSTUB": Binaries.fpstub, "SESSIONVAULT_DEMO_INNER": "1",
                                                      "SESSIONVAULT_DEMO_INTERACTIVE": "0", "NO_COLOR": "1"].merging(extra) { $1 }),
                               timeout: 180)
        XCTAssertFalse(r.timedOut, "scripts/demo \(args) did not end:\n\(r.out)\n\(r.err)")
        return r
    }

    /// What the walk said first of a step that failed, for the first line of a message.
    func failedStep(_ r: ProcessOutcome) -> String {
        r.err.split(separator: "\n").filter { $0.hasPrefix("demo") }.joined(separator: " / ")
    }

    /// The walk: a Demo Vipps login with fingerprint login turned on, the lock, the
    /// example app's session after a touch, a finger added at the reader found at the
    /// next unlock, Demo BankID as the way back in and the fingerprint set up again.
    func testTheDemoWalksTheWholeStory() throws {
        let r = try walk([])
        XCTAssertEqual(r.exit, 0, "\(failedStep(r))\nout:\n\(r.out)\nerr:\n\(r.err)")
        // vaultctl's questions and notes go to stderr, its answers to stdout.
        let out = r.out + "\n" + r.err
        for said in ["Turn on fingerprint login?", "Fingerprint is set up.", "Logged in as Kari Nordmann (vipps).",
                     "member_sync\tupdated",
                     "Touch the fingerprint reader to unlock.", "Hello, Kari Nordmann (Mentorhuset Oslo/peer_mentor)",
                     "Your fingerprints on this computer have changed. Log in with BankID or Vipps to turn fingerprint login back on.",
                     "Log in with Demo BankID in your browser.",
                     "(the session was handed to the app)",
                     "bankid (bankid): Kari Nordmann\n  vipps (vipps): Kari Nordmann",
                     "Fingerprint enabled",
                     "The audit log is intact.",
                     "Done. vaultd stops now"] {
            XCTAssertTrue(out.contains(said), "the demo did not say “\(said)”:\n\(out)")
        }
        // The national identity number the demo person logs in with is never shown.
        XCTAssertFalse(out.contains("15838512329"), out)
    }

    /// `scripts/demo --backend`: a Vipps login kept by the organization's backend is
    /// still there the next three days (a new token each day, refreshed at the
    /// backend), and ends with the usual sentence after the backend's seven days.
    func testTheBackendDemoKeepsTheSessionForTheBackendsDays() throws {
        guard TestProvider.python != nil else {
            throw cannotRunHere("the providers' venv is missing (scripts/provider-venv makes it)")
        }
        let r = try walk(["--backend"])
        XCTAssertEqual(r.exit, 0, "\(failedStep(r))\nout:\n\(r.out)\nerr:\n\(r.err)")
        let out = r.out
        XCTAssertTrue(out.contains("Sessions are kept by your organization's service at http://127.0.0.1:"), out)
        XCTAssertTrue(out.contains("  logged in\n  the organization's API says: hello Kari Nordmann"), out)
        XCTAssertEqual(out.components(separatedBy: "→ a new token, refreshed at the backend\n  the organization's API says: hello Kari Nordmann").count - 1, 3, out)
        XCTAssertTrue(r.err.contains("vaultctl: Your session has expired — please log in again")
                      || out.contains("vaultctl: Your session has expired — please log in again"), "\(out)\n\(r.err)")
    }

    /// A step that does not do what it says stops the walk, and says which: here the
    /// reader never answers (its driver is `true`), so the example app gets no session.
    func testAStepThatFailsStopsTheDemoAndSaysWhich() throws {
        let r = try walk([], extra: ["VAULT_FPSTUB": "/bin/true"])
        XCTAssertNotEqual(r.exit, 0, r.out)
        XCTAssertTrue(failedStep(r).hasPrefix("demo: step “5. An app opens: the fingerprint comes first, no login screen” did not do what it says"),
                      "\(failedStep(r))\n\(r.err)")
        XCTAssertFalse(r.out.contains("Done."), r.out)
    }
}

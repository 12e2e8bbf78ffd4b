import VaultFactor

/// The backend interface under the fingerprint factor: a sensor that can say
/// whether it is there, which fingers it holds, and scan one finger.
///
/// Two backends are meant to sit behind it: `StubReader` (a simulated sensor
/// for demos and tests) and, later, fprintd (D-Bus `net.reactivated.Fprint`).
/// A caveat for the fprintd backend: fprintd reports only finger *names*
/// (`ListEnrolledFingers`), not template ids, so deleting and re-enrolling the
/// same finger is invisible there (checked with fprintd 1.94). Such a backend would have
/// to report a stable id per name, and re-enrolling the same finger would then
/// *not* change the enrollment digest; adding or removing a finger still would.
public protocol FingerprintReader: Sendable {
    /// Is a reader plugged in? Must answer quickly and never prompt.
    func presence() async -> ReaderPresence

    /// The fingers enrolled at the reader, each with the id of its template.
    /// A finger enrolled again gets a new template id.
    func enrolledFingers() async throws(ReaderError) -> [EnrolledFinger]

    /// Waits for one finger on the sensor, at most `timeout`. Never throws: every
    /// way a scan can end is a `ScanOutcome`. A cancelled task ends in `.cancelled`.
    func scan(timeout: Duration) async -> ScanOutcome
}

public enum ReaderPresence: Sendable, Equatable {
    case present
    case absent
}

/// One finger the reader knows.
public struct EnrolledFinger: Sendable, Hashable, Codable {
    /// The finger's name, e.g. "right-index-finger".
    public var name: String
    /// Changes every time the finger is enrolled, so delete + re-add is a change.
    public var templateID: String

    public init(name: String, templateID: String) {
        self.name = name
        self.templateID = templateID
    }
}

public enum ReaderError: Error, Sendable, Equatable {
    /// No reader is plugged in.
    case absent
    /// The reader (or its backend) could not be read; the detail is for logs, not people.
    case failed(String)
}

/// How one scan ended.
public enum ScanOutcome: Sendable, Equatable {
    /// A finger enrolled at the reader matched.
    case match(finger: String)
    /// A finger was read but matched none of the enrolled ones.
    case noMatch
    /// The scan was unusable (finger moved, too short, dirty sensor): scan again.
    case retry
    /// The reader failed.
    case hardwareError
    /// The reader went away during the scan.
    case disconnected
    /// No finger arrived within the timeout.
    case timeout
    /// The person pressed Cancel in the prompt (or the scan's task was cancelled).
    case cancelled
}

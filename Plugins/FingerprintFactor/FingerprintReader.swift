import VaultFactor

/// The backend interface under the fingerprint factor: a sensor that can say
/// whether it is there, which fingers it holds, and scan one finger.
///
/// Two backends sit behind it: `StubReader` (a simulated sensor for demos and
/// tests) and `FprintdReader` (the desktop's fingerprint service, D-Bus
/// `net.reactivated.Fprint`). fprintd reports only finger *names*, not template
/// ids, so `FprintdReader` uses the name as the id: adding or removing a finger
/// changes the enrollment digest, deleting and re-enrolling the same finger does
/// not (docs/threat-model.md; the fingerprint time limit bounds it).
public protocol FingerprintReader: Sendable {
    /// Is a reader plugged in? Must answer quickly and never prompt.
    func presence() async -> ReaderPresence

    /// How long the factor may reuse what `presence` and `enrolledFingers`
    /// said for `status` and `factors` (never for a scan or an enrollment).
    var probeCacheTime: Duration { get }

    /// The fingers enrolled at the reader, each with the id of its template.
    /// A finger enrolled again gets a new template id.
    func enrolledFingers() async throws(ReaderError) -> [EnrolledFinger]

    /// A name for the hardware, for status lines ("Synaptics …"); nil when the
    /// backend has none to give.
    func deviceName() async -> String?

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
    /// The backend said no, for a reason the person can act on.
    case refused(ReaderRefusal)
}

/// Why the backend would not scan, each with its own next step.
public enum ReaderRefusal: Sendable, Equatable {
    /// Another program holds the reader (fprintd `AlreadyInUse`).
    case inUse
    /// The service runs but has no reader (fprintd `NoSuchDevice`).
    case noDevice
    /// The system's policy (polkit) refused this user (fprintd `PermissionDenied`).
    case permissionDenied
    /// No finger is enrolled for this user (fprintd `NoEnrolledPrints`).
    case noEnrolledPrints
    /// The fingerprint service itself stopped or does not answer.
    case serviceStopped
}

/// Why a scan was unusable, so the prompt can say what to do differently.
public enum UnclearScan: Sendable, Equatable {
    case tooShort
    case notCentered
    case removeAndRetry
}

/// How one scan ended.
public enum ScanOutcome: Sendable, Equatable {
    /// A finger enrolled at the reader matched.
    case match(finger: String)
    /// A finger was read but matched none of the enrolled ones.
    case noMatch
    /// The scan was unusable (finger moved, dirty sensor): scan again.
    case retry
    /// The scan was unusable for a reason the person can correct: scan again.
    case unclear(UnclearScan)
    /// The backend would not scan (busy, no device, no permission, no fingers).
    case refused(ReaderRefusal)
    /// The reader failed.
    case hardwareError
    /// The reader went away during the scan.
    case disconnected
    /// No finger arrived within the timeout.
    case timeout
    /// The person pressed Cancel in the prompt (or the scan's task was cancelled).
    case cancelled
}

extension FingerprintReader {
    /// Asked afresh every time, but one question at a time.
    public var probeCacheTime: Duration { .zero }
}

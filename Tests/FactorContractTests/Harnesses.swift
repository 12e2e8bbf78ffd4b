import ExternalFactor
import FingerprintFactor
import Foundation
import PINFactor
import Locking
import Testing
import VaultFactor
import VaultTestSupport

/// How to drive one factor through the contract in FactorContractTests.swift.
///
/// Every factor — built in, fake or external — must pass the same assertions
/// through a real `Vault`. To add one (say the fingerprint factor on its stub
/// reader), write a type conforming to this protocol and add one line to
/// `Harnesses.all`:
///
///     struct FingerprintHarness: FactorHarness {
///         static let name = "fingerprint (stub reader)"
///         static let kind = ContributionKind.presenceOnly
///         static let canBeUnavailable = true      // unplug the reader
///         static let hasEnrollmentState = true    // re-enroll a finger
///         let reader: StubReader
///         let factor: any UnlockFactor
///         static func make(in directory: String) async throws -> Self { … }
///         func enrollInput() -> ScriptedClient { reader.queue(.match); return scripted() }
///         func correctInput() -> ScriptedClient { reader.queue(.match); return scripted() }
///         func wrongInput() -> ScriptedClient { reader.queue(.noMatch, .noMatch, .noMatch); return scripted() }
///         func setAvailable(_ yes: Bool) throws { reader.connected = yes }
///         func changeEnrollment() throws { reader.reenroll(finger: 1) }
///     }
///
/// Hooks that prepare the authenticator (queue a scan outcome) do so in the
/// method that returns the conversation, so each call sets up one attempt.
protocol FactorHarness: Sendable {
    /// Shown in test results.
    static var name: String { get }
    /// Secret factors are judged (and throttled) by the vault; presence
    /// factors judge the person themselves and bind the slot to their enrollment.
    static var kind: ContributionKind { get }
    /// Whether `setAvailable(false)` means something (a PIN is always available).
    static var canBeUnavailable: Bool { get }
    /// Whether `changeEnrollment()` means something (a PIN has no enrollment state).
    static var hasEnrollmentState: Bool { get }
    /// Whether a cancel is an answer to one of the vault's questions (true), or
    /// happens at the authenticator's own prompt, as the fingerprint reader's (false).
    static var cancelsThroughConversation: Bool { get }

    /// A fresh factor with its own state, kept under `directory` if it needs files.
    static func make(in directory: String) async throws -> Self

    var factor: any UnlockFactor { get }

    /// Answers that complete enrollment.
    func enrollInput() -> ScriptedClient
    /// Answers that pass one unlock.
    func correctInput() -> ScriptedClient
    /// Answers that never pass (asked again, it keeps answering wrong).
    func wrongInput() -> ScriptedClient
    /// The person cancels the first prompt.
    func cancellingInput() -> ScriptedClient
    /// Makes the factor (un)usable here: reader unplugged, plugin says unavailable.
    func setAvailable(_ available: Bool) throws
    /// Changes the authenticator's enrollment (a finger added, a key re-registered).
    func changeEnrollment() throws
}

extension FactorHarness {
    static var cancelsThroughConversation: Bool { true }
    func cancellingInput() -> ScriptedClient { scripted([.cancel]) }
    func setAvailable(_ available: Bool) throws {
        if !available { Issue.record("\(Self.name) cannot be made unavailable") }
    }
    func changeEnrollment() throws { Issue.record("\(Self.name) has no enrollment state to change") }
}

/// A harness type as a test argument.
struct HarnessKind: Sendable, CustomTestStringConvertible {
    let type: any FactorHarness.Type
    init(_ type: any FactorHarness.Type) { self.type = type }
    var testDescription: String { type.name }
}

enum Harnesses {
    /// Every factor the contract runs against. Add new factors here.
    static let all: [HarnessKind] = [
        HarnessKind(PINHarness.self),
        HarnessKind(FakePresenceHarness.self),
        HarnessKind(FingerprintHarness.self),
        HarnessKind(ExternalSecretHarness.self),
        HarnessKind(ExternalPresenceHarness.self),
    ]
    static var unavailable: [HarnessKind] { all.filter { $0.type.canBeUnavailable } }
    static var withEnrollmentState: [HarnessKind] { all.filter { $0.type.hasEnrollmentState } }
}

/// The same throttle everywhere in the contract: two free tries, then 30 s.
let contractThrottle = ThrottlePolicy(freeAttempts: 2, firstDelay: 30, maxDelay: 120)

// MARK: - PIN (built in)

struct PINHarness: FactorHarness {
    static let name = "PIN"
    static let kind = ContributionKind.lowEntropySecret
    static let canBeUnavailable = false
    static let hasEnrollmentState = false
    let factor: any UnlockFactor = PINFactor(throttle: contractThrottle)
    static let pin = "482915"

    static func make(in directory: String) async throws -> Self { Self() }
    func enrollInput() -> ScriptedClient { scripted([.secret(Self.pin), .secret(Self.pin)]) }
    func correctInput() -> ScriptedClient { scripted([.secret(Self.pin)]) }
    func wrongInput() -> ScriptedClient { scripted(repeating: .secret("192837")) }
}

// MARK: - Fingerprint (built in) on the stub reader

struct FingerprintHarness: FactorHarness {
    static let name = "fingerprint (stub reader)"
    static let kind = ContributionKind.presenceOnly
    static let canBeUnavailable = true      // unplug the reader
    static let hasEnrollmentState = true    // re-enroll the same finger
    static let cancelsThroughConversation = false  // Cancel is pressed at the reader's prompt
    let reader: StubReader
    let factor: any UnlockFactor

    static func make(in directory: String) async throws -> Self {
        let reader = StubReader(path: directory + "/fpstub.json", pollInterval: .milliseconds(5))
        _ = try reader.plug()
        _ = try reader.enrollFinger("right-index")
        return Self(reader: reader, factor: FingerprintFactor(reader: reader, scanTimeout: .seconds(5)))
    }

    func queue(_ scans: ScriptedScan...) -> ScriptedClient {
        for scan in scans { try? reader.enqueue(scan) }
        return scripted()
    }
    func enrollInput() -> ScriptedClient { queue(ScriptedScan(.match, finger: "right-index")) }
    func correctInput() -> ScriptedClient { queue(ScriptedScan(.match, finger: "right-index")) }
    func wrongInput() -> ScriptedClient { queue(ScriptedScan(.noMatch), ScriptedScan(.noMatch), ScriptedScan(.noMatch)) }
    func cancellingInput() -> ScriptedClient { queue(ScriptedScan(.cancel)) }
    func setAvailable(_ available: Bool) throws {
        if available { _ = try reader.plug() } else { try reader.unplug() }
    }
    /// Deleting and re-adding the same finger gives it a new template: a change.
    func changeEnrollment() throws {
        try reader.removeFinger("right-index")
        _ = try reader.enrollFinger("right-index")
    }
}

// MARK: - A fake presence factor (in-process, shaped like a fingerprint reader)

/// Asks the person to "touch the fake key" (a confirm prompt): yes = present,
/// no = no match. Its enrollment state and availability are scriptable.
final class TouchKeyFactor: UnlockFactor, Sendable {
    private let state = Locked<(enrollment: [UInt8], available: Bool)>(([7, 7, 1], true))
    let descriptor = FactorDescriptor(id: "touchkey", displayName: LocalizedText(en: "Touch key", nb: "Berøringsnøkkel"),
                                      rank: 10, contribution: .presenceOnly)

    var available: Bool {
        get { state.withLock { $0.available } }
        set { state.withLock { $0.available = newValue } }
    }

    func reenroll() { state.withLock { $0.enrollment.append(1) } }

    func probe() async -> FactorPresence {
        available ? .available : .unavailable(LocalizedText(en: "The touch key is not plugged in.", nb: "Berøringsnøkkelen er ikke satt i."))
    }

    func enroll(_ conversation: any FactorConversation) async throws(FactorError) -> FactorProof {
        guard try await conversation.confirm(LocalizedText(en: "Touch the key to set it up.", nb: "Berør nøkkelen for å sette den opp.")) else {
            throw .cancelled
        }
        return FactorProof(enrollmentState: state.withLock { $0.enrollment })
    }

    func verify(_ conversation: any FactorConversation, slot: EnrolledSlot) async throws(FactorError) -> FactorProof {
        guard try await conversation.confirm(LocalizedText(en: "Touch the key.", nb: "Berør nøkkelen.")) else { throw .noMatch }
        return FactorProof(enrollmentState: state.withLock { $0.enrollment })
    }
}

struct FakePresenceHarness: FactorHarness {
    static let name = "fake presence"
    static let kind = ContributionKind.presenceOnly
    static let canBeUnavailable = true
    static let hasEnrollmentState = true
    let touch = TouchKeyFactor()
    var factor: any UnlockFactor { touch }

    static func make(in directory: String) async throws -> Self { Self() }
    func enrollInput() -> ScriptedClient { scripted([.confirm(true)]) }
    func correctInput() -> ScriptedClient { scripted([.confirm(true)]) }
    func wrongInput() -> ScriptedClient { scripted(repeating: .confirm(false)) }
    func setAvailable(_ available: Bool) throws { touch.available = available }
    func changeEnrollment() throws { touch.reenroll() }
}

// MARK: - The external Python plugin (Tests/plugins/vault-factor-pytest) through ExternalFactor

/// Shared by the two ways the Python plugin can be a factor.
protocol ExternalHarness: FactorHarness {
    var sandbox: PluginSandbox { get }
    var plugin: ExternalFactor { get }
    init(sandbox: PluginSandbox, plugin: ExternalFactor)
    static var pluginKind: String { get }
}

extension ExternalHarness {
    var factor: any UnlockFactor { plugin }
    static var canBeUnavailable: Bool { true }
    static var hasEnrollmentState: Bool { kind == .presenceOnly }

    static func make(in directory: String) async throws -> Self {
        // Rank 5: tried before the PIN, so "skipped when unavailable" is exercised.
        let sandbox = try PluginSandbox(in: directory, state: ["kind": pluginKind, "rank": 5, "code": "246810", "enrollment": "enrolled-1"])
        return Self(sandbox: sandbox, plugin: try await sandbox.load())
    }

    func setAvailable(_ available: Bool) throws { try sandbox.update(["mode": available ? "normal" : "unavailable"]) }
}

struct ExternalSecretHarness: ExternalHarness {
    static let name = "external plugin (secret)"
    static let kind = ContributionKind.lowEntropySecret
    static let pluginKind = "secret"
    let sandbox: PluginSandbox
    let plugin: ExternalFactor

    func enrollInput() -> ScriptedClient { scripted([.secret("7391"), .secret("7391")]) }
    func correctInput() -> ScriptedClient { scripted([.secret("7391")]) }
    func wrongInput() -> ScriptedClient { scripted(repeating: .secret("1111")) }
}

struct ExternalPresenceHarness: ExternalHarness {
    static let name = "external plugin (presence)"
    static let kind = ContributionKind.presenceOnly
    static let pluginKind = "presence"
    let sandbox: PluginSandbox
    let plugin: ExternalFactor

    func enrollInput() -> ScriptedClient { scripted([.confirm(true)]) }
    func correctInput() -> ScriptedClient { scripted([.secret("246810")]) }
    func wrongInput() -> ScriptedClient { scripted(repeating: .secret("000000")) }
    func changeEnrollment() throws { try sandbox.update(["enrollment": "enrolled-2"]) }
}

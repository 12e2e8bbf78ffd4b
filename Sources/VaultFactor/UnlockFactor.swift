@_exported import SodiumKit
import Synchronization

/// The plugin interface for unlock factors.
///
/// A factor decides *whether the user is present*; the vault decides *what that
/// opens*. A factor never sees the vault key, the device key or any session token.
/// Writing a factor means writing four things: a descriptor, `probe`, `enroll`
/// and `verify`. Everything else (keyslots, throttling, Argon2id, audit,
/// relaying prompts to the person's client) is the vault's job.
public protocol UnlockFactor: Sendable {
    /// Who this factor is and how the vault must treat what it returns.
    var descriptor: FactorDescriptor { get }

    /// Is the factor usable on this machine right now (reader plugged in, …)?
    /// Must answer quickly and never prompt.
    func probe() async -> FactorPresence

    /// Sets the factor up. Ask the person what you need through `conversation`;
    /// return what the new keyslot is bound to.
    func enroll(_ conversation: any FactorConversation) async throws(FactorError) -> FactorProof

    /// Checks that the person is present. Return the same kind of proof as at
    /// enrollment; the vault derives the slot key from it, so a wrong PIN or a
    /// changed enrollment simply fails to open the slot.
    func verify(_ conversation: any FactorConversation, slot: EnrolledSlot) async throws(FactorError) -> FactorProof
}

/// A factor's stable name on the wire, in the store and on the command line.
public struct FactorID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ raw: String) { self.rawValue = raw }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }

    public static let fingerprint: FactorID = "fingerprint"
    public static let pin: FactorID = "pin"
    public static let oidc: FactorID = "oidc"
}

/// What the factor hands to the vault, and so how the vault derives a slot key.
public enum ContributionKind: Sendable, Equatable {
    /// No secret, only presence (fingerprint, OIDC). The slot is bound to the
    /// enrollment state: if the slot fails to open, the enrollment has changed.
    case presenceOnly
    /// A low-entropy secret (PIN): the vault stretches it with Argon2id and
    /// throttles attempts. If the slot fails to open, the secret was wrong.
    case lowEntropySecret
}

/// Escalating lockout for guessable factors, modelled on Android Gatekeeper:
/// a few free attempts, then `firstDelay`, doubling on each further failure,
/// capped at `maxDelay`.
public struct ThrottlePolicy: Sendable, Equatable {
    public var freeAttempts: Int
    public var firstDelay: Int
    public var maxDelay: Int

    public init(freeAttempts: Int = 5, firstDelay: Int = 30, maxDelay: Int = 86_400) {
        self.freeAttempts = freeAttempts
        self.firstDelay = firstDelay
        self.maxDelay = maxDelay
    }

    /// Seconds to wait after `failures` consecutive failures (0 = no wait).
    public func delay(afterFailures failures: Int) -> Int {
        guard failures >= freeAttempts else { return 0 }
        let doublings = failures - freeAttempts
        if doublings >= 32 { return maxDelay }
        return min(maxDelay, firstDelay << doublings)
    }

    /// Attempts left before the first wait, for messages like "2 tries left".
    public func attemptsLeft(afterFailures failures: Int) -> Int {
        max(0, freeAttempts - failures)
    }
}

public struct FactorDescriptor: Sendable {
    public var id: FactorID
    /// "PIN", "Fingerprint", in the person's language.
    public var displayName: LocalizedText
    /// Order in the unlock policy: lower is tried first.
    public var rank: Int
    public var contribution: ContributionKind
    /// Set for guessable factors; the vault persists the failure counter
    /// *before* checking an attempt, so a crash never gives a free guess.
    public var throttle: ThrottlePolicy?
    /// Offer to set this factor up right after a first login (the fingerprint
    /// does), with `offerText` as the one-sentence explanation.
    public var offerAfterLogin: Bool
    public var offerText: LocalizedText?
    /// Said in brackets after "… enabled" in status lines: the hardware behind the
    /// factor and what it cannot see ("Virtual device …. A finger deleted and …").
    public var enabledDetail: LocalizedText?
    /// A presence factor's words for a changed enrollment (fingerprints added
    /// or removed), so the broker needs to know no factor by name: `changed`,
    /// what a request is told when the change turned it off (nil: a sentence
    /// made from `displayName`); `changedReason`, why `status` says it must be
    /// set up again (nil: "its enrollment changed").
    public var changed: LocalizedText?
    public var changedReason: LocalizedText?

    public init(id: FactorID, displayName: LocalizedText, rank: Int, contribution: ContributionKind, throttle: ThrottlePolicy? = nil,
                offerAfterLogin: Bool = false, offerText: LocalizedText? = nil, enabledDetail: LocalizedText? = nil,
                changed: LocalizedText? = nil, changedReason: LocalizedText? = nil) {
        self.id = id
        self.displayName = displayName
        self.rank = rank
        self.contribution = contribution
        self.throttle = throttle
        self.offerAfterLogin = offerAfterLogin
        self.offerText = offerText
        self.enabledDetail = enabledDetail
        self.changed = changed
        self.changedReason = changedReason
    }
}

public enum FactorPresence: Sendable, Equatable {
    case available
    /// Not usable here (no reader, …). The factor is then neither offered nor an error.
    case unavailable(LocalizedText)
}

/// What a factor proves. The vault feeds it into the slot key derivation.
public struct FactorProof: Sendable {
    /// The factor's secret contribution (a PIN), or nil for presence-only factors.
    public var contribution: SecureBytes?
    /// A digest of the authenticator's enrollment state (the enrolled fingers and
    /// their template ids). Not secret; changes whenever the enrollment changes.
    public var enrollmentState: [UInt8]
    /// Public facts the slot is bound to and that `verify` needs later
    /// (e.g. an OIDC issuer and subject). Stored in clear beside the slot.
    public var binding: [String: String]

    public init(contribution: SecureBytes? = nil, enrollmentState: [UInt8] = [], binding: [String: String] = [:]) {
        self.contribution = contribution
        self.enrollmentState = enrollmentState
        self.binding = binding
    }
}

/// What the vault tells `verify` about the slot it is trying to open.
public struct EnrolledSlot: Sendable {
    public var factor: FactorID
    public var binding: [String: String]
    /// How many times this unlock has already called `verify` for this slot.
    public var attempt: Int
    /// The failed tries counted so far, across unlocks (a presence factor's
    /// failed scans since the PIN, a login or a match last opened the vault).
    /// Add each failed try with `failures.record()` as it happens; the vault
    /// reads the count back however `verify` ends, Cancel and timeout included.
    /// A factor that keeps no count ignores it.
    public var failures: FailureTally

    public init(factor: FactorID, binding: [String: String], attempt: Int = 0, failures: FailureTally = FailureTally()) {
        self.factor = factor
        self.binding = binding
        self.attempt = attempt
        self.failures = failures
    }
}

/// A count of failed tries that the vault keeps and a factor adds to.
///
/// Why a shared counter and not a return value: a try must count even when
/// `verify` then throws (two misses, then Cancel or a timeout), and a thrown
/// `FactorError` carries no count. The vault owns the number between unlocks
/// (it outlives requests and connections, not vaultd: in memory is enough,
/// since a restart with a PIN needs the PIN again, and without a PIN whoever
/// can restart vaultd can read the device key that opens the vault anyway);
/// the factor only adds to it and decides, by its own limit, when to give up
/// with `tooManyAttempts`.
///
/// An atomic, not a lock: this module depends on nothing but SodiumKit and
/// VaultProtocol, and an atomic is a race ThreadSanitizer can see.
public final class FailureTally: Sendable {
    private let count: Atomic<Int>

    /// `failures`: the count so far (negative counts as none).
    public init(_ failures: Int = 0) {
        count = Atomic(max(0, failures))
    }

    /// The failed tries counted so far.
    public var failures: Int { count.load(ordering: .sequentiallyConsistent) }

    /// Counts one failed try; returns the count with it.
    @discardableResult
    public func record() -> Int {
        count.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue
    }
}

/// Why a factor could not prove presence. The vault maps these to protocol
/// error codes and decides whether to move on to the next factor.
public enum FactorError: Error, Sendable, Equatable {
    /// The person cancelled the prompt.
    case cancelled
    /// A scan or answer did not match; the factor may be asked again.
    case noMatch
    /// The factor gave up for this unlock (e.g. 3 failed scans in a row).
    case tooManyAttempts
    /// The hardware or service is not usable now (reader gone, hardware error).
    case unavailable(LocalizedText)
    /// Input that can never be accepted (a PIN that is too short), with the reason.
    case rejected(LocalizedText)
    /// The client cannot answer prompts (it did not say `interactive: true`).
    case notInteractive
    /// No answer in time.
    case timeout
    /// The person ended a wait (`FactorConversation.showWhile`) with a button
    /// of its dialog: a factor passes it on as it is.
    case pressed(WaitButton)
}

/// A button of the dialog shown while a factor waits (the fingerprint's
/// "Touch the reader"), as a value.
public enum WaitButton: Sendable, Equatable {
    /// Another way in: a later factor's id, or the login ("Use BankID or Vipps").
    case wayIn(String)
    /// Cancel, or the client went away: the person does not want in now.
    case cancel
}

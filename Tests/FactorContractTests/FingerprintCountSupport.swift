import Foundation
import FingerprintFactor
import Locking
import PINFactor
@testable import VaultCore
import VaultFactor
import VaultTestSupport
import VaultStore

/// What happened in one test, in order: "scan" (the reader was asked), "pin"
/// (a PIN question), "login" (the provider choice), and every message shown.
final class EventLog: Sendable {
    private let state = Locked<(events: [String], shown: [String])>(([], []))
    func add(_ event: String) { state.withLock { $0.events.append(event) } }
    func said(_ text: String) { state.withLock { $0.shown.append(text) } }
    var events: [String] { state.withLock { $0.events } }
    var shown: [String] { state.withLock { $0.shown } }
    func clear() { state.withLock { $0 = ([], []) } }
}

/// An in-memory fingerprint reader: one enrolled finger, a queue of scan
/// outcomes; with the queue empty a scan ends in Cancel at once (the person
/// gives up), so no test waits for a scan timeout.
final class QueuedReader: FingerprintReader, Sendable {
    private let state = Locked<(template: Int, queue: [ScanOutcome])>((1, []))
    let log: EventLog

    init(log: EventLog) { self.log = log }

    func queue(_ outcomes: ScanOutcome...) { state.withLock { $0.queue += outcomes } }
    var queued: Int { state.withLock { $0.queue.count } }
    /// Deleting and re-adding the finger: a new template, so a new enrollment digest.
    func reenrollFinger() { state.withLock { $0.template += 1 } }

    func presence() async -> ReaderPresence { .present }
    func deviceName() async -> String? { nil }
    func enrolledFingers() async throws(ReaderError) -> [EnrolledFinger] {
        let t = state.withLock { $0.template }
        return [EnrolledFinger(name: "right-index", templateID: "template-\(t)")]
    }
    func scan(timeout: Duration) async -> ScanOutcome {
        log.add("scan")
        return state.withLock { s in s.queue.isEmpty ? .cancelled : s.queue.removeFirst() }
    }
}

/// The person at the client: answers PIN questions from a list (then Cancel),
/// cancels every provider choice and says no to every offer.
final class PersonClient: ClientConversation, Sendable {
    let language: Language = .en
    let isInteractive = true
    let requester = Requester(pid: 1, uid: 0, executable: "/usr/bin/fingerprint-count-test",
                              app: AppIdentity(kind: .executable, name: "/usr/bin/fingerprint-count-test"))
    private let pins: Locked<[String]>
    let log: EventLog

    init(log: EventLog, pins: [String] = []) {
        self.log = log
        self.pins = Locked(pins)
    }

    func show(_ message: LocalizedText) async { log.said(message.en) }
    func askSecret(_ prompt: LocalizedText) async throws(FactorError) -> SecureBytes {
        log.add("pin")
        guard let pin = pins.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { throw .cancelled }
        do { return try SecureBytes.utf8(pin) } catch { throw .cancelled }
    }
    func confirm(_ prompt: LocalizedText) async throws(FactorError) -> Bool { false }
    func choose(_ prompt: LocalizedText, options: [ChoiceOption]) async throws(FactorError) -> String {
        log.add("login")
        log.said(prompt.en)
        throw .cancelled
    }
}

/// BankID as the vault's owner logs in with it: always the same person.
struct OwnerLogin: IdentityProvider, IdentityProviderDirectory {
    let id = "bankid"
    let displayName = "BankID"
    let issuesRefreshTokens = true
    var loginProviders: [any IdentityProvider] { [self] }
    func provider(for session: SessionMeta) -> (any IdentityProvider)? { self }

    func login(_ conversation: any FactorConversation) async throws(VaultFailure) -> VerifiedLogin {
        VerifiedLogin(provider: id, providerName: displayName, issuer: "https://idp.example.test/bankid", clientID: "app",
                      subject: "subject-kari", name: "Kari Nordmann", claims: [:], nationalID: nil, acr: nil,
                      tokens: TokenGrant(accessToken: "AT-\(UUID().uuidString)", accessExpiresAt: 4_102_444_800,
                                         refreshToken: "RT-\(UUID().uuidString)"))
    }
    func refresh(refreshToken: String) async throws(VaultFailure) -> TokenGrant { throw VaultFailure(.sessionExpired) }
    func revoke(token: String, isRefreshToken: Bool) async -> Bool { false }
}

/// The PIN every test enrolls, and a throttle shaped like the model's (FREE = 2).
enum CountTest {
    static let pin = "482915"
    static let wrongPIN = "192837"
    static let throttle = ThrottlePolicy(freeAttempts: 2, firstDelay: 600, maxDelay: 600)
}

/// A real vault on a real store with the real PIN and fingerprint factors
/// (the fingerprint on `QueuedReader`) and the owner's BankID.
struct CountRig {
    let dir: String
    let deviceKey: SecureBytes
    let store: VaultStore
    let log = EventLog()
    let reader: QueuedReader
    let factors: [any UnlockFactor]

    /// `copying`: start from a copy of another rig's files (same device key).
    init(copying template: (dir: String, deviceKey: SecureBytes)? = nil) throws {
        dir = TempDir.make("fpcount")
        if let template {
            for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: template.dir + "/vault.sqlite" + suffix) {
                try FileManager.default.copyItem(atPath: template.dir + "/vault.sqlite" + suffix, toPath: dir + "/vault.sqlite" + suffix)
            }
            deviceKey = template.deviceKey
        } else {
            deviceKey = try SecureBytes.random(count: 32)
        }
        store = try VaultStore(path: dir + "/vault.sqlite")
        reader = QueuedReader(log: log)
        factors = [FingerprintFactor(reader: reader, scanTimeout: .seconds(5), attempts: 3), PINFactor(throttle: CountTest.throttle)]
    }

    func open(_ store: VaultStore? = nil) throws -> Vault {
        try Vault(store: store ?? self.store, deviceKey: deviceKey, factors: factors, config: VaultConfig(idleTimeout: 0),
                  logger: VaultFixture.logger, providers: OwnerLogin())
    }

    /// vaultd started again on the same files.
    func restarted() throws -> (Vault, VaultStore) {
        let store = try VaultStore(path: dir + "/vault.sqlite")
        return (try open(store), store)
    }

    func cleanup() { TempDir.remove(dir) }

    func person(_ pins: String...) -> PersonClient { PersonClient(log: log, pins: pins) }

    /// The owner's first login, then (with `pin`) the PIN, then the fingerprint; locked.
    func enrolledVault(pin: Bool = true) async throws -> Vault {
        let vault = try open()
        _ = try await vault.login(provider: "bankid", conversation: person())
        if pin { _ = try await vault.enroll(.pin, conversation: person(CountTest.pin, CountTest.pin)) }
        reader.queue(.match(finger: "right-index"))
        _ = try await vault.enroll(.fingerprint, conversation: person())
        await vault.lock(reason: "test")
        log.clear()
        return vault
    }
}

extension Vault {
    /// The fingerprint's soft unlock lives: a scan can reopen the vault.
    var fingerprintSoftUnlock: Bool { softBoxes[.fingerprint] != nil }
    var fingerprintRecord: Bool { keyslots[FactorID.fingerprint.rawValue] != nil }
    var fingerprintStale: Bool { isStale(.fingerprint) }
}

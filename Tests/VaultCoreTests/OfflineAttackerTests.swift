import Foundation
import PINFactor
import VaultFactor
import VaultProtocol
import VaultStore
import XCTest
@testable import VaultCore
import VaultTestSupport

/// The at-rest rule (docs/key-hierarchy.md), played by the offline attacker:
/// a copy of the data directory and the device key (the `--keyring=file` case,
/// a home backup with a cracked keyring password). With a PIN enrolled, every
/// slot row tried with everything stored on disk opens no session.
final class OfflineAttackerTests: XCTestCase {
    var fx: VaultFixture!
    let pin = PINFactor(throttle: ThrottlePolicy(freeAttempts: 5, firstDelay: 30, maxDelay: 120))
    let thePIN = "482915"

    override func setUpWithError() throws { fx = try VaultFixture() }
    override func tearDown() { fx.cleanup() }

    /// Copies the store's files (the WAL too) as a backup would, and plays the
    /// attacker on the copy. Returns every access token it could read.
    func attack() throws -> [String] {
        let copy = fx.dir + "-stolen"
        defer { try? FileManager.default.removeItem(atPath: copy) }
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: fx.dir) where name.hasPrefix("vault.sqlite") {
            try FileManager.default.copyItem(atPath: fx.dir + "/" + name, toPath: copy + "/" + name)
        }
        let stolen = try VaultStore(path: copy + "/vault.sqlite")
        defer { try? stolen.close() }
        let dk = fx.deviceKey
        var keys: [SecureBytes] = [dk]
        // Every slot row, with everything stored beside it: an empty secret
        // contribution, the stored binding, the stored digest, the stored salt.
        for row in try stolen.keyslots() {
            let binding = Keyslot.binding(fromJSON: row.binding)
            let digests: [[UInt8]] = [[], Keyslot.digest(in: binding) ?? []]
            for digest in digests {
                for bindingText in [row.binding, "{}", Keyslot.bindingJSON(binding.filter { $0.key != Keyslot.digestKey })] {
                    guard let kek = try? Keyslot.kek(deviceKey: dk, id: row.id, factor: row.factor, salt: row.salt, stretched: nil,
                                                     enrollmentState: digest, binding: bindingText) else { continue }
                    keys.append(kek)
                    if let box = try? SealedBox(bytes: row.sealedKey),
                       let vk = try? SecretBox.open(box, key: kek, associatedData: Keyslot.associatedData(id: row.id, factor: row.factor)) {
                        keys.append(vk)
                    }
                }
            }
            // An empty secret where the slot wants a PIN.
            if let vk = try? Keyslot.openWrap(row, deviceKey: dk, secret: try SecureBytes.utf8(""), chip: nil) { keys.append(vk) }
        }
        for label in ["sessionvault/session-meta-key/v1", SessionSealing.vaultKeyPairLabel] {
            keys.append(try KeyDerivation.derive(key: dk, parts: [.label(label)]))
        }
        // The vault's public key is stored: a secret key derived from any key at hand.
        var recordKeys: [SecureBytes] = []
        let publicKey = try stolen.meta(SessionSealing.publicKeyMeta) ?? []
        for key in keys {
            guard let seed = try? KeyDerivation.derive(key: key, parts: [.label(SessionSealing.vaultKeyPairLabel)]),
                  let pair = try? PublicKeyBox.keyPair(seed: seed) else { continue }
            for row in try stolen.sessions() where row.sealedSecret.count > SessionSealing.wrappedRecordKeySize {
                if let rk = try? PublicKeyBox.open(Array(row.sealedSecret.prefix(SessionSealing.wrappedRecordKeySize)),
                                                   publicKey: publicKey, secretKey: pair.secretKey) {
                    recordKeys.append(rk)
                }
            }
        }
        var tokens: [String] = []
        for row in try stolen.sessions() {
            let ad = SessionSealing.secretAD(id: row.id, version: row.recordVersion)
            let bodies = [row.sealedSecret, Array(row.sealedSecret.dropFirst(SessionSealing.wrappedRecordKeySize))]
            for key in keys + recordKeys where key.count == SealedBox.keySize {
                for body in bodies {
                    guard let box = try? SealedBox(bytes: body), let plain = try? SecretBox.openToArray(box, key: key, associatedData: ad),
                          let token = plain.withUnsafeBytes({ SessionSecret(bytes: $0)?.accessToken }) else { continue }
                    tokens.append(token)
                }
            }
        }
        return Array(Set(tokens)).sorted()
    }

    /// The attack works: without a PIN, the device key is all there is, and the
    /// same procedure reads the session. This is what makes the tests below able to fail.
    func testWithoutAPINTheDeviceKeyOpensTheSessionsAsDocumented() async throws {
        let vault = try fx.vault([pin, FakePresenceFactor()])
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        XCTAssertEqual(try attack(), ["at-T1"])
    }

    func testPINOnly() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: [thePIN, thePIN]))
        XCTAssertEqual(try attack(), [])
        XCTAssertEqual(try fx.store.keyslots().map(\.id), ["pin"])
    }

    func testPINAndFingerprint() async throws {
        let fake = FakePresenceFactor()
        let vault = try fx.vault([fake, pin])
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: [thePIN, thePIN]))
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        await vault.lock(reason: "test")
        try await vault.unlock(factor: nil, conversation: ScriptedClient())   // the soft unlock works meanwhile
        XCTAssertEqual(try attack(), [])
        XCTAssertEqual(Set(try fx.store.keyslots().map(\.id)), ["pin", "fake"])
    }

    func testPINAndFingerprintAfterAFallbackLogin() async throws {
        let fake = FakePresenceFactor()
        let bankid = FakeIdentityProvider()
        let dir = FakeDirectory(providers: [bankid])
        let vault = try fx.vault([fake, pin], providers: dir)
        _ = try await vault.login(provider: "bankid", conversation: ScriptedClient())
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: [thePIN, thePIN]))
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        await vault.lock(reason: "test")
        // Three failed scans, then BankID (chosen over the PIN beside it): the fallback login.
        fake.outcome = .fail(.tooManyAttempts)
        let client = ScriptedClient(secrets: [], choices: ["bankid"])
        let released = try await vault.release(account: "bankid", conversation: client)
        XCTAssertEqual(released.accessToken, "AT-bankid-2", "the fallback login gives a working session at once")
        let locked = vault.isLocked
        XCTAssertTrue(locked)
        XCTAssertEqual(try attack(), [], "neither the old sessions nor the one from the fallback login")
        XCTAssertEqual(Set(try fx.store.keyslots().map(\.id)), ["pin", "fake", "login:bankid"])

        // And the PIN opens all of them, the new one included.
        let reopened = try fx.reopened([fake, pin], providers: dir)
        try await reopened.unlock(factor: .pin, conversation: ScriptedClient(secrets: [thePIN]))
        let a = try await reopened.release(account: "a", conversation: SilentConversation())
        let b = try await reopened.release(account: "bankid", conversation: SilentConversation())
        XCTAssertEqual([a.accessToken, b.accessToken], ["at-T1", "AT-bankid-2"])
    }

    /// A v1 store (login slot wrapping VK under DK and its identity) is moved to
    /// the v2 layout at start: after that the attack opens nothing.
    func testALegacyLoginSlotIsMigratedAtStart() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: [thePIN, thePIN]))
        // Write a v1 login slot the way the old code did: VK under DK + the identity.
        let open = await vault.vaultKey
        let vk = try XCTUnwrap(open)
        let binding = Keyslot.bindingJSON(["issuer": "https://login.example.org", "subject": "kari"])
        let salt = Random.bytes(Keyslot.saltSize)
        let kek = try Keyslot.kek(deviceKey: fx.deviceKey, id: "login:bankid", factor: "login", salt: salt, stretched: nil,
                                  binding: binding)
        let sealed = try SecretBox.seal(vk, key: kek, associatedData: Keyslot.associatedData(id: "login:bankid", factor: "login"))
        try fx.store.updateKeyslots(put: [KeyslotRow(id: "login:bankid", factor: "login", version: 1, salt: salt, kdf: "{}",
                                                     binding: binding, sealedKey: sealed.bytes, createdAt: 1)], delete: [])
        XCTAssertEqual(try attack(), ["at-T1"], "the v1 slot is the hole")
        _ = try fx.reopened([pin])
        XCTAssertEqual(try attack(), [])
        let record = try XCTUnwrap(try fx.store.keyslots().first { $0.id == "login:bankid" })
        XCTAssertEqual(record.version, Keyslot.version)
        XCTAssertEqual(Keyslot.check(record, deviceKey: fx.deviceKey), .intact(["issuer": "https://login.example.org", "subject": "kari"]))
    }
}

/// No dead ends, no silent loss: every state the attacker tests leave has a way
/// out for the owner, and nothing stored is dropped without a word.
final class NoDeadEndTests: XCTestCase {
    var fx: VaultFixture!
    let pin = PINFactor(throttle: ThrottlePolicy(freeAttempts: 2, firstDelay: 30, maxDelay: 120))

    override func setUpWithError() throws { fx = try VaultFixture() }
    override func tearDown() { fx.cleanup() }

    /// A store whose only wrap is gone: vaultd must not make a new vault key
    /// over the sealed sessions. It stays locked, says what to do, and
    /// `reset` (asked, then confirmed) is the way out.
    func testNoNewVaultKeyOverSealedSessionsResetIsTheWayOut() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        try fx.store.updateKeyslots(put: [], delete: ["pin"])   // a damaged disk, an over-eager cleanup
        let sealedBefore = try fx.store.sessions().map(\.sealedSecret)

        let reopened = try fx.reopened([pin])
        let locked = reopened.isLocked
        XCTAssertTrue(locked)
        XCTAssertEqual(try fx.store.keyslots().count, 0, "no device slot was made up")
        XCTAssertEqual(try fx.store.sessions().map(\.sealedSecret), sealedBefore, "the sealed sessions are kept as they were")
        let answer = await failure { _ = try await reopened.release(account: "a", conversation: SilentConversation()) }
        XCTAssertEqual(answer?.code, .locked)
        XCTAssertEqual(answer?.message, Messages.vaultUnopenable, "the next step names what works: a login, or reset")

        let declined = ScriptedClient(confirms: [false])
        let c = try? await reopened.reset(confirmed: false, conversation: declined)
        XCTAssertNil(c)
        XCTAssertTrue(declined.confirmQuestions.first?.contains("deletes 1 saved session") ?? false, "\(declined.confirmQuestions)")
        XCTAssertEqual(try fx.store.sessions().count, 1, "declined: nothing lost")
        let silent = await failureCode { _ = try await reopened.reset(confirmed: false, conversation: SilentConversation()) }
        XCTAssertEqual(silent, .badRequest, "a client that cannot ask must confirm explicitly")

        let r = try await reopened.reset(confirmed: false, conversation: ScriptedClient(confirms: [true]))
        XCTAssertEqual(r.sessionsRemoved, 1)
        XCTAssertEqual(try fx.store.keyslots().map(\.id), ["device"])
        let open = reopened.isLocked
        XCTAssertFalse(open)
        XCTAssertTrue(try reopened.audit.entries().contains { $0.event == "reset" })
        // And it is a working vault again.
        _ = try await reopened.importSession(importRequest(account: "b", token: "T2"), conversation: ScriptedClient())
        let again = try fx.reopened([pin])
        let b = try await again.release(account: "b", conversation: SilentConversation())
        XCTAssertEqual(b.accessToken, "at-T2")
    }

    /// Disabling the PIN puts the device slot back in the same transaction:
    /// never a moment without a slot that opens the vault key.
    func testDisablingThePINWithAFingerprintSetUpKeepsAWayIn() async throws {
        let fake = FakePresenceFactor()
        let vault = try fx.vault([fake, pin])
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        _ = try await vault.enroll(.pin, conversation: ScriptedClient(secrets: ["482915", "482915"]))
        _ = try await vault.enroll("fake", conversation: ScriptedClient())
        _ = try await vault.disable(.pin, confirmed: true, conversation: ScriptedClient(secrets: ["482915"]))
        XCTAssertEqual(Set(try fx.store.keyslots().map(\.id)), ["device", "fake"])
        let warning = await vault.atRestWarning()
        XCTAssertEqual(warning, Messages.fingerprintWithoutPIN, "status says the device key alone guards it")
        let restarted = try fx.reopened([fake, pin])
        let s = try await restarted.release(account: "a", conversation: ScriptedClient())
        XCTAssertEqual(s.accessToken, "at-T1")
    }

    /// The failure count and the lockout a failure brings are on disk before
    /// the PIN is checked: a check that never finishes (vaultd killed) leaves both.
    func testTheLockoutIsDurableBeforeThePINIsChecked() throws {
        let throttle = ThrottlePolicy(freeAttempts: 1, firstDelay: 30, maxDelay: 120)
        _ = try fx.store.recordAttempt(factor: "pin") { n in throttle.delay(afterFailures: n) > 0 ? 1_000 + Int64(throttle.delay(afterFailures: n)) : 0 }
        XCTAssertEqual(try fx.store.failureCounter(factor: "pin"), FailureCounter(factor: "pin", failures: 1, lockedUntil: 1_030))
        _ = try fx.store.recordAttempt(factor: "pin") { n in throttle.delay(afterFailures: n) > 0 ? 1_000 + Int64(throttle.delay(afterFailures: n)) : 0 }
        XCTAssertEqual(try fx.store.failureCounter(factor: "pin").lockedUntil, 1_060, "the lockout grows in the same write")
        _ = try fx.store.recordAttempt(factor: "pin") { _ in 0 }
        XCTAssertEqual(try fx.store.failureCounter(factor: "pin").lockedUntil, 1_060, "never shortened by a later write")
    }

    /// The version of a session row is in its secret's associated data and in
    /// its metadata: an older blob put back (with its old version) is refused.
    func testAnOlderSecretBlobPutBackIsRefused() async throws {
        let vault = try fx.vault([pin])
        _ = try await vault.importSession(importRequest(account: "a", token: "T1"), conversation: ScriptedClient())
        let old = try XCTUnwrap(try fx.store.sessions().first)
        _ = try await vault.importSession(importRequest(account: "a", token: "T2"), conversation: ScriptedClient())
        var current = try XCTUnwrap(try fx.store.sessions().first)
        XCTAssertEqual(current.recordVersion, old.recordVersion + 1)
        for version in [current.recordVersion, old.recordVersion] {
            current.sealedSecret = old.sealedSecret
            current.recordVersion = version
            try fx.store.putSession(current)
            let reopened = try fx.reopened([pin])
            let c = await failureCode { _ = try await reopened.release(account: "a", conversation: SilentConversation()) }
            XCTAssertEqual(c, .internal, "version \(version): the old token is never served")
        }
    }

    func failureCode(_ body: () async throws -> Void) async -> ErrorCode? {
        do { try await body(); return nil } catch let f as VaultFailure { return f.code } catch { return .internal }
    }
}

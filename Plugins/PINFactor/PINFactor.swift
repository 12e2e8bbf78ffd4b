import VaultFactor

/// The PIN factor: a knowledge factor for when the fingerprint can't be used.
///
/// Its whole story, in one place:
/// - Enrollment asks twice and refuses PINs that are short or trivially guessable
///   (one digit repeated, an ascending or descending run).
/// - Unlock asks once per attempt. The PIN itself is the factor's contribution;
///   the vault stretches it with Argon2id (≥ 64 MiB) together with the device key,
///   so neither the disk alone nor the keyring alone can test a guess.
/// - Guessing is throttled by the vault using `throttle`: the failure counter is
///   written *before* an attempt is checked, free tries first, then 30 s doubling
///   up to a day (Android Gatekeeper's shape), surviving restarts.
public struct PINFactor: UnlockFactor {
    public let minimumLength: Int
    public let maximumLength = 64
    public let descriptor: FactorDescriptor

    public init(minimumLength: Int = 6, throttle: ThrottlePolicy = ThrottlePolicy()) {
        self.minimumLength = max(4, minimumLength)
        self.descriptor = FactorDescriptor(
            id: .pin,
            displayName: LocalizedText(en: "PIN", nb: "PIN-kode"),
            rank: 20,
            contribution: .lowEntropySecret,
            throttle: throttle)
    }

    /// A PIN needs no hardware: always available.
    public func probe() async -> FactorPresence { .available }

    static let again = LocalizedText(en: "Type the same PIN again:", nb: "Skriv den samme PIN-koden en gang til:")
    static let mismatch = LocalizedText(en: "The two PINs were not the same. Let's start again.",
                                        nb: "De to PIN-kodene var ikke like. Vi begynner på nytt.")

    public func enroll(_ conversation: any FactorConversation) async throws(FactorError) -> FactorProof {
        // A person who mistypes gets a few chances inside one enrollment before it ends.
        for _ in 0..<3 {
            let choose = LocalizedText(en: "Choose a PIN of at least \(minimumLength) digits:",
                                       nb: "Velg en PIN-kode på minst \(minimumLength) sifre:")
            // A dialog that asks twice itself (pinentry's SETREPEAT) checks the match there.
            if let repeating = conversation as? any RepeatingSecretConversation {
                guard let pin = try await repeating.askNewSecret(choose, again: Self.again, mismatch: Self.mismatch) else { continue }
                if let problem = weakness(of: pin) {
                    await conversation.show(problem)
                    continue
                }
                return FactorProof(contribution: pin)
            }
            let first = try await conversation.askSecret(choose)
            if let problem = weakness(of: first) {
                await conversation.show(problem)
                continue
            }
            let second = try await conversation.askSecret(Self.again)
            guard first.constantTimeEquals(second) else {
                await conversation.show(Self.mismatch)
                continue
            }
            return FactorProof(contribution: first)
        }
        throw .rejected(LocalizedText(
            en: "The PIN was not set up. Please try again.",
            nb: "PIN-koden ble ikke satt opp. Prøv igjen."))
    }

    public func verify(_ conversation: any FactorConversation, slot: EnrolledSlot) async throws(FactorError) -> FactorProof {
        let pin = try await conversation.askSecret(LocalizedText(en: "Enter your PIN:", nb: "Skriv inn PIN-koden:"))
        return FactorProof(contribution: pin)
    }

    /// Why a PIN is not acceptable, or nil. Reads the digits in place: the PIN is
    /// never copied out of secure memory.
    public func weakness(of pin: SecureBytes) -> LocalizedText? {
        pin.withUnsafeBytes { bytes -> LocalizedText? in
            if bytes.count < minimumLength || bytes.count > maximumLength {
                return LocalizedText(
                    en: "A PIN must have \(minimumLength) to \(maximumLength) digits. Please choose another.",
                    nb: "En PIN-kode må ha \(minimumLength) til \(maximumLength) sifre. Velg en annen.")
            }
            for b in bytes where b < 0x30 || b > 0x39 {
                return LocalizedText(en: "A PIN may contain digits only. Please choose another.",
                                     nb: "En PIN-kode kan bare inneholde sifre. Velg en annen.")
            }
            let first = bytes[0]
            if bytes.allSatisfy({ $0 == first }) {
                return LocalizedText(en: "That PIN repeats one digit and is easy to guess. Please choose another.",
                                     nb: "Den PIN-koden gjentar ett siffer og er lett å gjette. Velg en annen.")
            }
            if isRun(bytes, step: 1) || isRun(bytes, step: -1) {
                return LocalizedText(en: "That PIN is a run of digits (like 123456) and is easy to guess. Please choose another.",
                                     nb: "Den PIN-koden er en tallrekke (som 123456) og er lett å gjette. Velg en annen.")
            }
            return nil
        }
    }

    /// 123456, 345678, 987654, and runs that wrap (890123, 109876).
    private func isRun(_ bytes: UnsafeRawBufferPointer, step: Int) -> Bool {
        for i in 1..<bytes.count {
            let previous = Int(bytes[i - 1]) - 0x30
            let current = Int(bytes[i]) - 0x30
            if (previous + step + 10) % 10 != current { return false }
        }
        return true
    }
}

import FoundationEssentials
import SecurityChip
import VaultFactor
import VaultStore

/// Checking a secret factor's answer (the PIN) against its wrap of the vault
/// key, throttled: the attempt is counted durably *before* it is checked,
/// together with the lockout a failure brings, in one transaction, so killing
/// vaultd between the two gives no free guess and no escape from the lockout;
/// a right answer resets both. The `Vault` actor audits and asks again as
/// the outcome says (`attempt`, Unlocking.swift).
struct SecretCheck {
    let factor: FactorID
    let throttle: ThrottlePolicy
    let store: VaultStore
    /// Opens the wrap with this vault's device key and chip.
    let keyslots: Keyslots

    enum Outcome {
        case opened(SecureBytes)
        /// The attempt could not be counted, so it was not checked.
        case notCounted(StoreError)
        /// The chip the wrap is bound to refused before the PIN could be
        /// checked (its lockout, cleared or replaced, unreachable). The attempt stays counted.
        case chipRefused(ChipError)
        /// `lockout`: seconds until the next try (0: free tries remain, `attemptsLeft` of them).
        case wrong(failures: Int, lockout: Int, attemptsLeft: Int)
    }

    func check(_ secret: SecureBytes?, against slot: KeyslotRow, now: Int64) -> Outcome {
        let counter: FailureCounter
        do {
            counter = try store.recordAttempt(factor: factor.rawValue) { failures in
                let delay = throttle.delay(afterFailures: failures)
                return delay > 0 ? now + Int64(delay) : 0
            }
        } catch {
            return .notCounted(error)
        }
        TestPause.at("AFTER_COUNTER")
        do {
            let vk = try keyslots.openWrap(slot, secret: secret)
            try? store.resetFailures(factor: factor.rawValue)
            return .opened(vk)
        } catch .chip(let refusal) {
            return .chipRefused(refusal)
        } catch {
            // Wrong (the chip counted it too, when the wrap is bound), or an edited row.
        }
        return .wrong(failures: counter.failures, lockout: throttle.delay(afterFailures: counter.failures),
                      attemptsLeft: throttle.attemptsLeft(afterFailures: counter.failures))
    }

}

import VaultFactor
import VaultProtocol

/// One unlock's way through the policy, as a value: which factor to ask next,
/// where a button pressed in a dialog jumps to, when the login with BankID or
/// Vipps comes (last, or at once when the fingerprint fails: seed 003), and
/// what the unlock fails with when nothing is left. The
/// `Vault` actor asks the factor it is told to, reports how it went, and asks
/// again; this type never awaits and reads neither the store nor the clock, so
/// the order of the ways in is tested on its own (UnlockRunTests).
/// model/unlock.pml checks the same order.
struct UnlockRun {
    /// What the actor does next.
    enum Step: Equatable {
        /// Ask this factor, the `index`th candidate: its dialog offers the ways after it.
        case ask(FactorID, index: Int)
        /// A fresh login; `after` is the failure the person met last. Usually
        /// the last way in; after a presence factor's failure it comes at
        /// once: its dialog `saying` what happened, with the factors not yet
        /// asked `beside` the providers (“Use PIN instead”).
        case login(after: VaultFailure?, saying: LocalizedText? = nil, beside: [FactorID] = [])
        /// No way in is left: the unlock fails with this (nil: the policy's `locked` answer).
        case fail(VaultFailure?)
    }

    /// How asking a factor went, when it did not open the vault or stop the unlock.
    enum Outcome {
        /// The factor is not registered or has no slot: it was not asked.
        case notSetUp
        /// Its probe said it cannot be used now (a reader unplugged).
        case unavailable(VaultFailure)
        /// It was asked and failed; the next way in is tried.
        case failed(VaultFailure)
        /// A presence factor (the fingerprint) failed: three misses, a reader
        /// error, a changed enrollment. With a login, that comes next (seed
        /// 003), its dialog saying what happened, the other factors beside it.
        case presenceFailed(VaultFailure)
        /// The person pressed another way in: a factor's id, or `UnlockAttempt.loginChoice`.
        case chose(String)
    }

    let candidates: [FactorID]
    /// Whether a login comes after the factors (some provider is configured,
    /// and the unlock did not name one factor).
    let loginFallback: Bool
    private var position = 0
    private var jumpTo: FactorID?
    private var loginChosen = false
    /// A presence factor failed: the login comes next, before the other factors.
    private var loginAtOnce = false
    /// What the person met last: the unlock's answer if nothing opens the vault.
    private(set) var last: VaultFailure?

    init(candidates: [FactorID], loginFallback: Bool) {
        self.candidates = candidates
        self.loginFallback = loginFallback
    }

    mutating func next() -> Step {
        if loginAtOnce {
            loginAtOnce = false
            return .login(after: last, saying: last?.message, beside: Array(candidates.dropFirst(position)))
        }
        while !loginChosen, position < candidates.count {
            let id = candidates[position]
            if let target = jumpTo {
                // A button named a later factor: the ones before it are passed over.
                guard id == target else {
                    position += 1
                    continue
                }
                jumpTo = nil
            }
            return .ask(id, index: position)
        }
        return loginFallback ? .login(after: last) : .fail(last)
    }

    /// Records how the factor `next()` named went. Returns true when the
    /// person should be told why before the next way in is offered (a
    /// failure with another way after it).
    mutating func record(_ outcome: Outcome) -> Bool {
        position += 1
        switch outcome {
        case .notSetUp:
            return false
        case .unavailable(let failure):
            last = failure
            return false
        case .chose(let choice):
            last = VaultFailure(.cancelled)
            if choice == UnlockAttempt.loginChoice {
                loginChosen = true
            } else {
                jumpTo = FactorID(rawValue: choice)
            }
            return false
        case .presenceFailed(let failure) where loginFallback:
            last = failure
            // Said in the login's own dialog, not in one before it.
            loginAtOnce = true
            return false
        case .failed(let failure), .presenceFailed(let failure):
            last = failure
            return position < candidates.count || loginFallback
        }
    }

    /// At a login that came at once, the person chose a factor offered beside
    /// the providers: it is asked next (the ones before it are passed over),
    /// and the login comes again only as the last way in.
    mutating func choseBesideLogin(_ id: FactorID) {
        jumpTo = id
    }
}

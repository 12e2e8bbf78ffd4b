import VaultFactor

/// The fingerprint factor: proves that the person is present with a finger on
/// the reader. It has no secret to give; its proof is a digest of the reader's
/// enrollment (the enrolled fingers and their template ids), and the vault binds
/// the keyslot to that digest.
///
/// Its whole story, in one place:
/// - `probe`: no reader, or no fingers enrolled at the reader → unavailable, with
///   a sentence saying what to do; the vault then skips the factor silently.
/// - `enroll`: asks for a touch; a match proves presence and the slot is bound to
///   the current enrollment.
/// - `verify`: asks for a touch, up to `attempts` scans. A match returns the
///   digest of the enrollment *as it is right after the match*: if a finger was
///   added, removed or enrolled again since the slot was made, the digest differs,
///   the slot fails to open, and the vault deletes it (`enrollment_changed`).
///   `attempts` failed scans → `tooManyAttempts`, counted across unlocks: the
///   vault keeps the count (`EnrolledSlot.failures`) from the last PIN, login or
///   match, so Cancel or a timeout between misses gives no fresh tries; each
///   miss is recorded the moment it happens. Hardware error or a vanished
///   reader → `unavailable` at once, so the vault falls back quickly.
public struct FingerprintFactor: UnlockFactor {
    public let reader: any FingerprintReader
    /// How long one scan waits for a finger.
    public let scanTimeout: Duration
    /// Scans per `enroll` / `verify` before giving up.
    public let attempts: Int
    /// Unclear scans (retry, too short, not centred) are asked again without
    /// counting as failures, up to this many, so a dirty or broken sensor that
    /// never reads a finger cannot keep the prompt open for ever.
    public static let maxUnclearScans = 10
    public let descriptor: FactorDescriptor
    /// `probe`'s answers, reused for the reader's `probeCacheTime`.
    let probeCache: ProbeCache

    /// `device`: the reader's name for status lines; with `sameFingerInvisible`
    /// (fprintd) the status also says that re-enrolling a finger is not seen.
    public init(reader: any FingerprintReader, scanTimeout: Duration = .seconds(30), attempts: Int = 3,
                device: String? = nil, sameFingerInvisible: Bool = false) {
        self.reader = reader
        self.probeCache = ProbeCache(lifetime: reader.probeCacheTime)
        self.scanTimeout = scanTimeout
        self.attempts = max(1, attempts)
        self.descriptor = FactorDescriptor(
            id: .fingerprint,
            displayName: LocalizedText(en: "Fingerprint", nb: "Fingeravtrykk"),
            rank: 10,
            contribution: .presenceOnly,
            throttle: nil,
            offerAfterLogin: true,
            offerText: LocalizedText(
                en: "Turn on fingerprint login? Next time you can open your apps with your fingerprint instead of logging in with BankID or Vipps.",
                nb: "Slå på innlogging med fingeravtrykk? Neste gang kan du åpne appene dine med fingeravtrykket i stedet for å logge inn med BankID eller Vipps."),
            enabledDetail: FingerprintFactor.detail(device: device, sameFingerInvisible: sameFingerInvisible),
            changed: Messages.standard(.enrollmentChanged),
            changedReason: LocalizedText(en: "fingerprints changed", nb: "fingeravtrykkene er endret"))
    }

    static func detail(device: String?, sameFingerInvisible: Bool) -> LocalizedText? {
        let caveat = sameFingerInvisible ? FingerprintMessages.sameFingerCaveat : nil
        switch (device, caveat) {
        case (nil, nil): return nil
        case (let device?, nil): return LocalizedText(en: device, nb: device)
        case (nil, let caveat?): return caveat
        case (let device?, let caveat?): return LocalizedText(en: "\(device) — \(caveat.en)", nb: "\(device) — \(caveat.nb)")
        }
    }

    /// The enrollment digest: SHA-256 over the (name, template id) pairs sorted by
    /// name, each length-prefixed, under a version label. Order-independent;
    /// changes whenever a finger is added, removed or enrolled again.
    public static func enrollmentDigest(_ fingers: [EnrolledFinger]) -> [UInt8] {
        var bytes = Array("sessionvault.fingerprint.enrollment.v1".utf8)
        func field(_ s: String) {
            let utf8 = Array(s.utf8)
            let n = UInt32(utf8.count)
            bytes += [UInt8(n >> 24), UInt8((n >> 16) & 0xff), UInt8((n >> 8) & 0xff), UInt8(n & 0xff)]
            bytes += utf8
        }
        let sorted = fingers.sorted { ($0.name, $0.templateID) < ($1.name, $1.templateID) }
        field(String(sorted.count))
        for finger in sorted {
            field(finger.name)
            field(finger.templateID)
        }
        return Digest.sha256(bytes)
    }

    // MARK: - UnlockFactor

    public func probe() async -> FactorPresence {
        await probeCache.presence { [reader] in await Self.probe(reader) }
    }

    static func probe(_ reader: any FingerprintReader) async -> FactorPresence {
        guard await reader.presence() == .present else { return .unavailable(Text.readerNotFound) }
        do {
            // A reader with no fingers is still "available": `verify` must run so
            // that a slot made for fingers that are now all gone is found stale.
            _ = try await reader.enrolledFingers()
            return .available
        } catch {
            return .unavailable(Text.explain(error, absent: Text.readerNotFound))
        }
    }

    public func enroll(_ conversation: any FactorConversation) async throws(FactorError) -> FactorProof {
        guard await reader.presence() == .present else { throw .unavailable(Text.readerNotFound) }
        // Nothing can match without an enrolled finger: say how to add one instead of waiting for a touch.
        if try await currentFingers().isEmpty { throw .unavailable(Text.noFingers) }
        // Each scan has its own dialog (vaultd's closes when the scan ends), saying why it asks again.
        var message = Text.touchToEnroll
        var failures = 0
        var unclear = 0
        while failures < attempts {
            let outcome = try await scan(showing: message, conversation)
            switch outcome {
            case .match:
                return try await proof()
            case .noMatch:
                failures += 1
                message = Text.enrollNoMatch
            case .retry, .unclear:
                unclear += 1
                if unclear >= FingerprintFactor.maxUnclearScans { throw .unavailable(Text.readerBroken) }
                message = Text.askAgain(after: outcome, left: nil)
            case .refused, .hardwareError, .disconnected, .cancelled, .timeout:
                throw Self.turnEnded(by: outcome, readerGone: Text.readerGoneDuringEnroll)
            }
        }
        throw .rejected(Text.enrollGaveUp(attempts))
    }

    public func verify(_ conversation: any FactorConversation, slot: EnrolledSlot) async throws(FactorError) -> FactorProof {
        // Every finger was removed at the reader: nothing can match, and the slot
        // (bound to the fingers that were there) is stale. The digest of the empty
        // set proves nothing and opens nothing (enroll refuses an empty reader),
        // but lets the vault see the change and clear the slot at once.
        if try await currentFingers().isEmpty { return try await proof() }
        // Failed scans count across unlocks (the vault keeps them in `slot.failures`):
        // two misses, then Cancel, leave one try, not three.
        let tally = slot.failures
        var failures = tally.failures
        if failures >= attempts {
            // The vault drops the soft unlock at the limit, so this is only a guard.
            await conversation.show(Text.lastFailure)
            throw .tooManyAttempts
        }
        var message = failures == 0 ? Text.touchToUnlock : Text.touchToUnlock(left: attempts - failures)
        var unclear = 0
        while true {
            let outcome = try await scan(showing: message, conversation)
            switch outcome {
            case .match:
                return try await proof()
            case .noMatch:
                // Recorded at once, so that a Cancel or a timeout after it cannot undo it.
                failures = tally.record()
                if failures >= attempts { await conversation.show(Text.lastFailure) }
                message = Text.notRecognised(left: attempts - failures)
            case .retry, .unclear:
                // The sensor could not read the finger: ask again, not a failed match.
                unclear += 1
                if unclear >= FingerprintFactor.maxUnclearScans {
                    await conversation.show(Text.lastFailure)
                    throw .tooManyAttempts
                }
                message = Text.askAgain(after: outcome, left: attempts - failures)
            case .refused, .hardwareError, .disconnected, .cancelled, .timeout:
                throw Self.turnEnded(by: outcome, readerGone: Text.readerGone)
            }
            if failures >= attempts { throw .tooManyAttempts }
        }
    }

    // MARK: - Helpers

    /// One scan with `message` on screen: a conversation with its own dialog
    /// closes it when the scan ends, and a button pressed there (another way
    /// in) cancels the scan and throws `.cancelled`.
    /// A scan that ends the factor's turn, enrolling or unlocking alike: the
    /// reader refused or failed, went away (`readerGone`: the words for it,
    /// which differ while enrolling), the person cancelled, no finger in time.
    static func turnEnded(by outcome: ScanOutcome, readerGone: LocalizedText) -> FactorError {
        switch outcome {
        case .refused(let why): .unavailable(Text.refused(why))
        case .disconnected: .unavailable(readerGone)
        case .cancelled: .cancelled
        case .timeout: .timeout
        // (A match, a miss or an unclear scan never ends a turn; were one passed here it reads as a failed reader.)
        case .hardwareError, .match, .noMatch, .retry, .unclear: .unavailable(Text.readerBroken)
        }
    }

    private func scan(showing message: LocalizedText, _ conversation: any FactorConversation) async throws(FactorError) -> ScanOutcome {
        let reader = self.reader
        let timeout = scanTimeout
        return try await conversation.showWhile(message) { await reader.scan(timeout: timeout) }
    }

    /// The proof for a match: the enrollment as the reader reports it now.
    private func proof() async throws(FactorError) -> FactorProof {
        FactorProof(contribution: nil, enrollmentState: FingerprintFactor.enrollmentDigest(try await currentFingers()))
    }

    private func currentFingers() async throws(FactorError) -> [EnrolledFinger] {
        do {
            return try await reader.enrolledFingers()
        } catch {
            throw .unavailable(Text.explain(error, absent: Text.readerGone))
        }
    }
}

/// Everything the factor says to a person, in English and Norwegian bokmål.
/// Plain sentences, each with a next step.
enum Text {
    static let readerNotFound = LocalizedText(
        en: "Fingerprint reader not found. Plug it in, or unlock with your PIN or with BankID or Vipps.",
        nb: "Fant ingen fingeravtrykkleser. Koble den til, eller lås opp med PIN-koden eller med BankID eller Vipps.")
    static let noFingers = LocalizedText(
        en: "No fingerprints are saved on this computer yet. Add a finger in your computer's settings (Users → Fingerprint Login), then try again.",
        nb: "Ingen fingeravtrykk er lagret på denne datamaskinen ennå. Legg til en finger i innstillingene på datamaskinen (Brukere → Fingeravtrykkpålogging), og prøv igjen.")
    static let readerBroken = LocalizedText(
        en: "The fingerprint reader is not working right now. Use your PIN or log in with BankID or Vipps, and try the reader again later.",
        nb: "Fingeravtrykkleseren virker ikke akkurat nå. Bruk PIN-koden eller logg inn med BankID eller Vipps, og prøv leseren igjen senere.")
    static let readerGone = LocalizedText(
        en: "The fingerprint reader was disconnected. Plug it back in, or use your PIN or log in with BankID or Vipps.",
        nb: "Fingeravtrykkleseren ble koblet fra. Koble den til igjen, eller bruk PIN-koden eller logg inn med BankID eller Vipps.")
    static let readerGoneDuringEnroll = LocalizedText(
        en: "The fingerprint reader was disconnected. Plug it back in and turn on fingerprint login again.",
        nb: "Fingeravtrykkleseren ble koblet fra. Koble den til igjen og slå på fingeravtrykkpålogging på nytt.")

    static let touchToEnroll = FingerprintMessages.touchToEnroll
    static let touchToUnlock = FingerprintMessages.touchToUnlock

    static let enrollNoMatch = LocalizedText(
        en: "That finger is not known to the reader. Touch it with a finger you have added to this computer.",
        nb: "Den fingeren kjenner ikke leseren. Berør den med en finger du har lagt til på denne datamaskinen.")

    static func enrollGaveUp(_ attempts: Int) -> LocalizedText {
        LocalizedText(
            en: "Fingerprint login was not turned on: the reader did not recognise your finger \(attempts) times. Check that the finger is added in your computer's settings, then try again.",
            nb: "Fingeravtrykkpålogging ble ikke slått på: leseren kjente ikke igjen fingeren \(attempts) ganger. Sjekk at fingeren er lagt til i innstillingene på datamaskinen, og prøv igjen.")
    }

    /// The first prompt of an unlock after earlier failed scans: how many are left.
    static func touchToUnlock(left: Int) -> LocalizedText {
        func sentence(_ s: String) -> String { s.hasSuffix(".") ? String(s.dropLast()) : s }
        return LocalizedText(en: "\(sentence(touchToUnlock.en)) (\(triesLeft(left, .en))).",
                             nb: "\(sentence(touchToUnlock.nb)) (\(triesLeft(left, .nb))).")
    }

    static func notRecognised(left: Int) -> LocalizedText {
        LocalizedText(en: "Not recognised — try again (\(triesLeft(left, .en))).",
                      nb: "Ikke gjenkjent — prøv igjen (\(triesLeft(left, .nb))).")
    }

    /// `left` nil: no count (enrollment).
    static func unclearScan(left: Int?) -> LocalizedText {
        let en = "The scan was not clear — lift your finger and touch the reader again"
        let nb = "Skanningen var utydelig — løft fingeren og berør leseren igjen"
        guard let left else { return LocalizedText(en: en + ".", nb: nb + ".") }
        return LocalizedText(en: "\(en) (\(triesLeft(left, .en))).", nb: "\(nb) (\(triesLeft(left, .nb))).")
    }

    static let lastFailure = LocalizedText(
        en: "Not recognised, and that was the last try. Use your PIN or log in with BankID or Vipps instead.",
        nb: "Ikke gjenkjent, og det var siste forsøk. Bruk PIN-koden eller logg inn med BankID eller Vipps i stedet.")

    /// After an unclear scan: what to do differently, and (when verifying) the tries left.
    static func askAgain(after outcome: ScanOutcome, left: Int?) -> LocalizedText {
        let hint: LocalizedText
        switch outcome {
        case .unclear(.tooShort): hint = FingerprintMessages.swipeTooShort
        case .unclear(.notCentered): hint = FingerprintMessages.fingerNotCentered
        case .unclear(.removeAndRetry): hint = FingerprintMessages.removeAndRetry
        default: return unclearScan(left: left)
        }
        guard let left else { return hint }
        func sentence(_ s: String) -> String { s.hasSuffix(".") ? String(s.dropLast()) : s }
        return LocalizedText(en: "\(sentence(hint.en)) (\(triesLeft(left, .en))).", nb: "\(sentence(hint.nb)) (\(triesLeft(left, .nb))).")
    }

    /// The sentence for a backend's refusal.
    static func refused(_ why: ReaderRefusal) -> LocalizedText {
        switch why {
        case .inUse: return FingerprintMessages.readerInUse
        case .noDevice: return FingerprintMessages.noDevice
        case .permissionDenied: return FingerprintMessages.permissionDenied
        case .noEnrolledPrints: return FingerprintMessages.noEnrolledPrints
        case .serviceStopped: return FingerprintMessages.serviceStopped
        }
    }

    /// The sentence for a failed look at the enrolled fingers.
    static func explain(_ error: ReaderError, absent: LocalizedText) -> LocalizedText {
        switch error {
        case .absent: return absent
        case .failed: return readerBroken
        case .refused(let why): return refused(why)
        }
    }

    static func triesLeft(_ n: Int, _ language: Language) -> String {
        switch language {
        case .en: return n == 1 ? "1 try left" : "\(n) tries left"
        case .nb: return n == 1 ? "1 forsøk igjen" : "\(n) forsøk igjen"
        }
    }
}
